package nativecal

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// TestCommittedFileReproduces: the committed native_coefficients.json is,
// byte for byte, what Calibrate makes of the committed rows, on any
// machine: everything in it (the host and window included) comes from the
// rows, nothing from the machine the test runs on.
func TestCommittedFileReproduces(t *testing.T) {
	prov, rows, err := CommittedSweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Skip("no committed sweep rows (sweep.csv is empty)")
	}
	want, err := os.ReadFile(filepath.Join("..", "native_coefficients.json"))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := Calibrate(parentArch(t), prov, rows, estimate.DefaultNativeCoeffs().Machines[Machine].Threads)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cal.File()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("refit of sweep.csv differs from estimate/native_coefficients.json; regenerate with\n" +
			"  autocompress calibrate-native --from-rows estimate/nativecal/sweep.csv --out estimate/native_coefficients.json --force")
	}
	co := cal.Coeffs
	if co.Host == nil || co.Host.CPU != "AMD EPYC" || co.Host.CPUs != 2 || co.Host.LLCBytes != 32<<20 || !strings.HasPrefix(co.Measured, "2026-12-03 11:50") {
		t.Errorf("committed calibration's host %+v, measured %q: want the rows' record (AMD EPYC, 2 CPUs, 32 MiB, 2026-12-03 11:50–12:00)", co.Host, co.Measured)
	}
}

// TestSweepProvenanceRoundTrip: the provenance written above the rows
// reads back the same; rows without it (written before it existed) read
// as a zero provenance; a bad provenance line is an error naming it.
func TestSweepProvenanceRoundTrip(t *testing.T) {
	_, rows, err := CommittedSweep()
	if err != nil || len(rows) == 0 {
		t.Skip("no committed sweep rows")
	}
	p := Provenance{Hostname: "box", Host: hardware.Host{CPU: "Intel(R) Xeon(R) Platinum 8480+", CPUs: 2, LLCBytes: 105 << 20},
		Start: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC), End: time.Date(2027, 1, 2, 3, 20, 0, 0, time.UTC), Load: "1.0 → 1.2", Note: "quiet"}
	var buf bytes.Buffer
	if err := WriteSweep(&buf, p, rows[:3]); err != nil {
		t.Fatal(err)
	}
	got, back, err := ReadSweep(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got != p || len(back) != 3 {
		t.Errorf("read back %+v (%d rows), wrote %+v", got, len(back), p)
	}
	if w := got.Window(); w != "2027-01-02 03:04–03:20 UTC" {
		t.Errorf("window %q", w)
	}
	buf.Reset()
	if err := WriteRows(&buf, rows[:2]); err != nil {
		t.Fatal(err)
	}
	old, back, err := ReadSweep(bytes.NewReader(buf.Bytes()))
	if err != nil || old != (Provenance{}) || len(back) != 2 {
		t.Errorf("rows without provenance: %+v, %d rows, %v", old, len(back), err)
	}
	csv := buf.String()
	for _, tc := range []struct{ head, want string }{
		{"# cpus: two\n", "line 1, cpus"},
		{"# start: yesterday\n", "RFC 3339"},
		{"# colour: blue\n", "unknown key"},
		{"# hostname: a\n# no colon here\n", "line 2"},
	} {
		_, _, err := ReadSweep(strings.NewReader(tc.head + csv))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.head, err, tc.want)
		}
	}
	// A malformed row's line number counts the provenance lines.
	bad := "# hostname: a\n# cpus: 2\n" + strings.Replace(csv, ",heldout,", ",held,", 1) // the first row is held out
	if _, _, err := ReadSweep(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 4,") {
		t.Errorf("bad row after two provenance lines: %v, want line 4", err)
	}
}

// TestErrorBandNamesItsHost (issue 17, class 2): validate-native's report
// names the host and window its rows were measured on, and on another host
// says that the figures (and the "ok" of the targets) are that host's, not
// this one's, in the text and in the JSON.
func TestErrorBandNamesItsHost(t *testing.T) {
	prov, rows, err := CommittedSweep()
	if err != nil || len(rows) == 0 {
		t.Skip("no committed sweep rows")
	}
	rep, err := Validate(parentArch(t), rows, estimate.DefaultNativeCoeffs().Machines[Machine])
	if err != nil {
		t.Fatal(err)
	}
	rep.Provenance = prov
	other := hardware.Host{CPU: "Intel(R) Xeon(R) Platinum 8480+", CPUs: 2, LLCBytes: 105 << 20}
	same := prov.Host
	same.CPU = "the recorded CPU"
	rec := prov.Host
	rec.CPU = "the recorded CPU"
	unrecorded := prov.Host // rows written before they carried the CPU model
	unrecorded.CPU = ""
	for _, tc := range []struct {
		name    string
		rows    hardware.Host // the rows' host
		this    hardware.Host
		applies hardware.HostMatch
		want    []string
		not     []string
	}{
		{"other host", prov.Host, other, hardware.OtherHost,
			[]string{"Rows measured on vm (AMD EPYC, 2 CPUs, 32 MiB last-level cache), 2026-12-03 11:50–12:00 UTC",
				"last-level cache 105 MiB, recorded 32 MiB", "another host's rows", "that host's, not this one's"}, nil},
		{"unrecorded CPU", unrecorded, hardware.Host{CPU: "AMD EPYC", CPUs: 2, LLCBytes: 32 << 20}, hardware.UncertainHost,
			[]string{"the CPU model cannot be compared", "not known to hold on this host"}, []string{"another host's"}},
		{"same host", rec, same, hardware.SameHost, []string{"held-out targets on vm's rows: TTFT ok"}, []string{"another host's", "not known"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := *rep
			r.Provenance.Host = tc.rows
			r.CheckHost(tc.this)
			var buf bytes.Buffer
			r.Print(&buf)
			text := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("report lacks %q:\n%s", w, text[:min(len(text), 1200)])
				}
			}
			for _, w := range tc.not {
				if strings.Contains(text, w) {
					t.Errorf("report says %q:\n%s", w, text[:min(len(text), 1200)])
				}
			}
			b, err := json.Marshal(&r)
			if err != nil {
				t.Fatal(err)
			}
			var js struct {
				Provenance struct{ Hostname string }
				Here       struct{ Applies string }
			}
			if err := json.Unmarshal(b, &js); err != nil || js.Provenance.Hostname != "vm" || js.Here.Applies != string(tc.applies) {
				t.Errorf("JSON hostname %q, applies %q (want vm, %s): %v", js.Provenance.Hostname, js.Here.Applies, tc.applies, err)
			}
		})
	}
}
