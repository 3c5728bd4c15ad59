package hardware

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostCompare(t *testing.T) {
	rec := Host{CPU: "AMD EPYC 7B13", CPUs: 2, LLCBytes: 32 << 20}
	for _, tc := range []struct {
		name     string
		rec, cur Host
		want     HostMatch
		why      string
	}{
		{"same", rec, rec, SameHost, "recorded CPU"},
		{"other CPU", rec, Host{CPU: "Intel Xeon", CPUs: 2, LLCBytes: 32 << 20}, OtherHost, "CPU Intel Xeon, recorded AMD EPYC 7B13"},
		{"other cache", rec, Host{CPU: "AMD EPYC 7B13", CPUs: 2, LLCBytes: 105 << 20}, OtherHost, "last-level cache 105 MiB, recorded 32 MiB"},
		{"other count", rec, Host{CPU: "AMD EPYC 7B13", CPUs: 4, LLCBytes: 32 << 20}, OtherHost, "4 CPUs, recorded 2"},
		{"CPU not recorded", Host{CPUs: 2, LLCBytes: 32 << 20}, rec, UncertainHost, "the CPU model cannot be compared"},
		{"nothing recorded", Host{}, rec, UncertainHost, "the CPU model, the CPU count, the cache size"},
		{"differs where recorded", Host{CPUs: 8}, rec, OtherHost, "2 CPUs, recorded 8"},
	} {
		got, why := tc.rec.Compare(tc.cur)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, got, why, tc.want, tc.why)
		}
	}
	if s := (Host{CPUs: 2, LLCBytes: 32 << 20}).String(); s != "CPU model not recorded, 2 CPUs, 32 MiB last-level cache" {
		t.Errorf("String: %q", s)
	}
}

// TestHostFingerprint: the level-1 and level-2 caches and the BLAS
// backend are compared where both sides record them (a record without
// them, as the committed coefficients', still matches on the rest), and
// Key names each fingerprint apart and stably.
func TestHostFingerprint(t *testing.T) {
	rec := Host{CPU: "AMD EPYC", CPUs: 2, LLCBytes: 32 << 20, L1DBytes: 32 << 10, L2Bytes: 512 << 10, Backend: "go"}
	for _, tc := range []struct {
		name string
		cur  Host
		want HostMatch
		why  string
	}{
		{"same", rec, SameHost, "recorded"},
		{"other L2", func() Host { h := rec; h.L2Bytes = 1 << 20; return h }(), OtherHost, "L2 cache 1 MiB, recorded 512 KiB"},
		{"other backend", func() Host { h := rec; h.Backend = "openblas"; return h }(), OtherHost, "BLAS backend openblas, recorded go"},
		{"not recorded there", Host{CPU: "AMD EPYC", CPUs: 2, LLCBytes: 32 << 20}, SameHost, "recorded"},
	} {
		if got, why := rec.Compare(tc.cur); got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %s (%s), want %s (%s)", tc.name, got, why, tc.want, tc.why)
		}
	}
	other := rec
	other.Backend = "openblas"
	if k := rec.Key(); len(k) != 16 || k != rec.Key() || k == other.Key() || k == (Host{}).Key() {
		t.Errorf("keys %q %q %q", rec.Key(), other.Key(), (Host{}).Key())
	}
	if s := rec.String(); !strings.Contains(s, "L1d 32 KiB, L2 512 KiB") || !strings.Contains(s, "BLAS go") {
		t.Errorf("String: %q", s)
	}
}

func TestThisHostSources(t *testing.T) {
	model, kb := parseCPUInfo([]byte("processor\t: 0\nmodel name\t: AMD EPYC\ncache size\t: 512 KB\n\nprocessor\t: 1\nmodel name\t: other\n"))
	if model != "AMD EPYC" || kb != 512 {
		t.Errorf("cpuinfo: %q, %d KB", model, kb)
	}
	dir := t.TempDir()
	for i, c := range [][2]string{{"1", "32K"}, {"2", "512K"}, {"3", "32768K"}, {"1", "32K"}} {
		d := filepath.Join(dir, "index"+string(rune('0'+i)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "level"), []byte(c[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "size"), []byte(c[1]+"\n"), 0o644)
	}
	if got := sysfsLLC(dir); got != 32<<20 {
		t.Errorf("sysfs last-level cache %d, want %d", got, 32<<20)
	}
	if l1, l2 := sysfsLevel(dir, 1), sysfsLevel(dir, 2); l1 != 32<<10 || l2 != 512<<10 {
		t.Errorf("sysfs L1 %d, L2 %d", l1, l2)
	}
	if got := sysfsLLC(filepath.Join(dir, "absent")); got != 0 {
		t.Errorf("no sysfs: %d", got)
	}
	if h := ThisHost(); h.CPUs < 1 {
		t.Errorf("ThisHost %+v: no CPUs", h)
	}
}
