package hardware

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

var required = []string{
	"rtx-5070", "rtx-5080", "rtx-5090", "rtx-4090", "rtx-3090", "l4", "l40s", "a100-40gb", "a100-80gb",
	"h100-sxm", "h100-pcie", "h200", "gh200", "b200", "b300", "gb200", "gb300", "rtx-pro-6000",
	"jetson-agx-orin-64gb", "apple-m3-max", "apple-m4-max",
}

func TestCatalogComplete(t *testing.T) {
	for _, n := range required {
		g, err := Lookup(n)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", n, err)
		}
		if err := g.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
		if g.Source == "" || g.Description == "" {
			t.Errorf("%s: missing source or description", n)
		}
		// Physical sanity: bytes per FLOP between 1e-4 and 0.1 for every accelerator here.
		if r := g.BandwidthBps / g.BF16FLOPS; r < 1e-4 || r > 0.1 {
			t.Errorf("%s: bandwidth/FLOPS ratio %g outside any real device", n, r)
		}
		if g.FP8FLOPS != 0 && g.FP8FLOPS < g.BF16FLOPS {
			t.Errorf("%s: FP8 rate below BF16", n)
		}
		if g.FP4FLOPS != 0 && g.FP4FLOPS < g.FP8FLOPS {
			t.Errorf("%s: FP4 rate below FP8", n)
		}
	}
}

func TestGeForceAccumulateRule(t *testing.T) {
	for _, n := range []string{"rtx-5070", "rtx-5080", "rtx-5090", "rtx-4090", "rtx-4080", "rtx-4070-ti", "rtx-3090", "rtx-3080-ti", "rtx-3080", "rtx-3070"} {
		g, _ := Lookup(n)
		if ratio := g.FP16AccFLOPS / g.BF16FLOPS; ratio < 1.99 || ratio > 2.01 {
			t.Errorf("%s: FP16-acc / FP32-acc = %.3f, want 2 (GeForce half-rate FP32 accumulate)", n, ratio)
		}
	}
}

func TestLookupAliasesAndUnknown(t *testing.T) {
	for in, want := range map[string]string{"H100": "h100-sxm", "h200_sxm": "h200", "B200_SXM": "b200", "rtx_pro_6000_server": "rtx-pro-6000", "RTX 4090": "rtx-4090"} {
		g, err := Lookup(in)
		if err != nil || g.Name != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", in, g, err, want)
		}
	}
	_, err := Lookup("h900")
	var ue *UnknownError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnknown) {
		t.Fatalf("want *UnknownError, got %v", err)
	}
	if !strings.Contains(err.Error(), "h100-sxm") || !strings.Contains(err.Error(), "apple-m4-max") {
		t.Errorf("error does not list valid names: %v", err)
	}
}

func TestPeakFLOPSFallback(t *testing.T) {
	h100, _ := Lookup("h100-sxm")
	if h100.PeakFLOPS("fp4") != h100.BF16FLOPS {
		t.Errorf("H100 has no FP4: want the BF16 rate (W4A16), got %g", h100.PeakFLOPS("fp4"))
	}
	a100, _ := Lookup("a100-80gb")
	if a100.PeakFLOPS("fp8") != a100.BF16FLOPS {
		t.Errorf("A100 has no FP8: want BF16 rate")
	}
	b200, _ := Lookup("b200")
	if b200.PeakFLOPS("fp4") != 9000e12 {
		t.Errorf("B200 FP4 = %g", b200.PeakFLOPS("fp4"))
	}
}

// TestAIConfiguratorSystems reads the 14 systems/*.yaml files written by
// another project and checks the subset parser against the catalog.
func TestAIConfiguratorSystems(t *testing.T) {
	dir := sdtest.Require(t, "groundtruth/systems")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) < 14 {
		t.Fatalf("found %d system files, want 14", len(files))
	}
	match := map[string]string{"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300",
		"gb200": "gb200", "gb300": "gb300", "l4": "l4", "l40s": "l40s", "a100_sxm": "a100-80gb", "h100_pcie": "h100-pcie",
		"rtx_pro_6000_server": "rtx-pro-6000"}
	for _, f := range files {
		gs, err := ParseFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(gs) != 1 {
			t.Fatalf("%s: %d devices", f, len(gs))
		}
		g := gs[0]
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if g.Name != base {
			t.Errorf("name %q, want %q", g.Name, base)
		}
		want, ok := match[base]
		if !ok {
			continue
		}
		b, _ := Lookup(want)
		if g.BandwidthBps != b.BandwidthBps || g.BF16FLOPS != b.BF16FLOPS || g.FP8FLOPS != b.FP8FLOPS || g.FP4FLOPS != b.FP4FLOPS {
			t.Errorf("%s vs catalog %s:\n file    %+v\n catalog %+v", base, want, g, *b)
		}
		// AIConfigurator gives marketing GiB or nvidia-smi totals; the catalog
		// keeps CUDA's smaller total where one is known (TestCUDAReportedMemory).
		if _, cuda := cudaTotalByName()[want]; !cuda && g.MemoryBytes != b.MemoryBytes {
			t.Errorf("%s: memory %d vs catalog %d", base, g.MemoryBytes, b.MemoryBytes)
		} else if cuda && (b.MemoryBytes > g.MemoryBytes || float64(b.MemoryBytes) < 0.9*float64(g.MemoryBytes)) {
			t.Errorf("%s: catalog CUDA total %d not within 10%% below the file's %d", base, b.MemoryBytes, g.MemoryBytes)
		}
		if g.LinkBps != b.LinkBps {
			t.Errorf("%s: link %g vs catalog %g", base, g.LinkBps, b.LinkBps)
		}
	}
}

func TestParseOwnFormat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     GPU
		err      string
	}{
		{name: "yaml", in: "# my card\nname: my-card\nmemory_gib: 48\nbandwidth_gbs: 960 # GB/s\nbf16_tflops: 200\nfp8_tflops: 400\nlink: pcie\nlink_gbs: 64\n",
			want: GPU{Name: "my-card", MemoryBytes: 48 << 30, BandwidthBps: 960e9, BF16FLOPS: 200e12, FP8FLOPS: 400e12, LinkBps: 64e9, Link: PCIe}},
		{name: "json", in: `{"name":"j","memory_gb":24,"bandwidth_bps":3e11,"bf16_tflops":100,"usable_fraction":0.75,"backend":"metal"}`,
			want: GPU{Name: "j", MemoryBytes: 24e9, BandwidthBps: 3e11, BF16FLOPS: 100e12, UsableFraction: 0.75, Backend: Metal}},
		{name: "missing bandwidth", in: "name: x\nmemory_gib: 8\nbf16_tflops: 10\n", err: "bandwidth"},
		{name: "bad number", in: "name: x\nmemory_gib: lots\n", err: `"lots" is not a number`},
		{name: "list without memory", in: "devices:\n  - name: a\n", err: `device "a": memory must be > 0`},
		{name: "quoted numbers", in: "name: q\nmemory_gib: '8'\nbandwidth_gbs: \"100\"\nbf16_tflops: 10\n",
			want: GPU{Name: "q", MemoryBytes: 8 << 30, BandwidthBps: 100e9, BF16FLOPS: 10e12}},
		// Issue 17, class 7: unknown keys are refused naming the line and the closest known key.
		{name: "misspelled key", in: "name: x\nmemory_gib: 8\nbandwith_gbs: 100\nbf16_tflops: 10\n", err: `device file:3: unknown key "bandwith_gbs" (did you mean "bandwidth_gbs"?)`},
		{name: "unknown key", in: "name: x\nmemory_gib: 8\nbandwidth_gbs: 100\nbf16_tflops: 10\ncolour: red\n", err: `device file:5: unknown key "colour" (known: name, description`},
		{name: "misspelled AIConfigurator key", in: "gpu:\n  mem_bw: 1e12\n  mem_capasity: 8e9\n  bfloat16_tc_flops: 1e14\n", err: `device file:3: unknown key "mem_capasity" (did you mean "mem_capacity"?)`},
		{name: "unknown in a list", in: `[{"name":"a","memory_gib":8,"bandwidth_gbs":1,"bf16_tflops":1,"fp8_tflop":2}]`, err: `device file:1: unknown key "fp8_tflop" (did you mean "fp8_tflops"?)`},
		{name: "number as a mapping", in: "name: x\nmemory_gib:\n  a: 1\n", err: "line 3: memory_gib: expected a number"},
		{name: "duplicate", in: "name: x\nname: y\n", err: `device file:2: mapping key "name" already defined at line 1`},
		{name: "devices beside a device", in: "name: x\ndevices:\n  - name: a\n", err: `lists "devices" has no other keys`},
		{name: "a scalar", in: "42\n", err: "want a device"},
		{name: "empty", in: "# nothing\n", err: "no device found"},
		{name: "bad backend", in: "name: x\nbackend: rocm\nmemory_gib: 8\nbandwidth_gbs: 1\nbf16_tflops: 1\n", err: "backend"},
		{name: "bad fraction", in: "name: x\nusable_fraction: 2\nmemory_gib: 8\nbandwidth_gbs: 1\nbf16_tflops: 1\n", err: "usable fraction"},
		{name: "indent", in: "gpu:\n    mem_bw: 1\n  mem_capacity: 2\n", err: "device file:2: did not find expected key (check the indentation"},
		{name: "tab", in: "name: a\n\tmemory_gib: 3\n", err: "device file:2: found a tab character"},
		{name: "node count", in: "name: x\ngpus_per_node: 4\nmemory_gib: 8\nbandwidth_gbs: 1\nbf16_tflops: 1\n",
			want: GPU{Name: "x", MemoryBytes: 8 << 30, BandwidthBps: 1e9, BF16FLOPS: 1e12, GPUsPerNode: 4}},
		{name: "bad node count", in: "name: x\ngpus_per_node: 2.5\nmemory_gib: 8\nbandwidth_gbs: 1\nbf16_tflops: 1\n", err: "gpus_per_node: 2.5"},
		{name: "zero node count", in: "name: x\ngpus_per_node: 0\nmemory_gib: 8\nbandwidth_gbs: 1\nbf16_tflops: 1\n", err: "gpus_per_node: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs, err := Parse([]byte(tc.in), "dflt")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := gs[0]
			w := tc.want
			if g.Name != w.Name || g.MemoryBytes != w.MemoryBytes || g.BandwidthBps != w.BandwidthBps || g.BF16FLOPS != w.BF16FLOPS ||
				g.FP8FLOPS != w.FP8FLOPS || g.LinkBps != w.LinkBps || (w.UsableFraction != 0 && g.UsableFraction != w.UsableFraction) || (w.Backend != "" && g.Backend != w.Backend) ||
				(w.GPUsPerNode != 0 && g.GPUsPerNode != w.GPUsPerNode) {
				t.Errorf("got %+v\nwant %+v", g, w)
			}
		})
	}
}

// TestParseLists: a YAML or JSON list of devices, "devices:" holding one,
// and documents separated by "---" (an empty one skipped) give the same
// devices.
func TestParseLists(t *testing.T) {
	for _, in := range []string{
		"- name: a\n  memory_gib: 8\n  bandwidth_gbs: 100\n  bf16_tflops: 10\n- name: b\n  memory_gib: 16\n  bandwidth_gbs: 200\n  bf16_tflops: 20\n",
		"devices:\n  - name: a\n    memory_gib: 8\n    bandwidth_gbs: 100\n    bf16_tflops: 10\n  - name: b\n    memory_gib: 16\n    bandwidth_gbs: 200\n    bf16_tflops: 20\n",
		`{"devices": [{"name":"a","memory_gib":8,"bandwidth_gbs":100,"bf16_tflops":10}, {"name":"b","memory_gib":16,"bandwidth_gbs":200,"bf16_tflops":20}]}`,
		"name: a\nmemory_gib: 8\nbandwidth_gbs: 100\nbf16_tflops: 10\n---\n---\nname: b\nmemory_gib: 16\nbandwidth_gbs: 200\nbf16_tflops: 20\n---\n",
	} {
		gs, err := Parse([]byte(in), "x")
		if err != nil || len(gs) != 2 || gs[0].Name != "a" || gs[1].Name != "b" || gs[1].MemoryBytes != 16<<30 || gs[0].BF16FLOPS != 10e12 {
			t.Errorf("%q: %+v, %v", in, gs, err)
		}
	}
}

func TestParseMultiDocument(t *testing.T) {
	gs, err := Parse([]byte("name: a\nmemory_gib: 8\nbandwidth_gbs: 100\nbf16_tflops: 10\n---\nname: b\nmemory_gib: 16\nbandwidth_gbs: 200\nbf16_tflops: 20\n"), "x")
	if err != nil || len(gs) != 2 || gs[1].Name != "b" || gs[1].MemoryBytes != 16<<30 {
		t.Fatalf("got %+v, %v", gs, err)
	}
	c := Default()
	if err := c.Add(gs...); err != nil {
		t.Fatal(err)
	}
	if g, err := c.Lookup("B"); err != nil || g.BF16FLOPS != 20e12 {
		t.Fatalf("added device not found: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("name: a\nmemory_gib: 8\nbandwidth_gbs: 100\nbf16_tflops: 10\n"))
	f.Add([]byte(`[{"name":"x","memory_gib":1,"bandwidth_gbs":1,"bf16_tflops":1}]`))
	f.Add([]byte("gpu:\n  mem_bw: 1 # c\n  'q': \"v#x\"\nnode:\n  x:\n    y: 1\n---\n"))
	if dir, ok := shareddata.Path("groundtruth/systems"); ok {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("name: a\nmemory_gib: 8\nbandwith_gbs: 100\nbf16_tflops: 10\n"))
	f.Add([]byte("- name: a\n  memory_gib: 8\n  bandwidth_gbs: 100\n  bf16_tflops: 10\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gs, err := Parse(data, "fz")
		if err != nil {
			return
		}
		for _, g := range gs {
			if err := g.Validate(); err != nil {
				t.Fatalf("Parse returned an invalid device: %v", err)
			}
		}
		// Nothing accepted holds a key Parse does not know (misc, AIConfigurator's
		// engine settings, excepted).
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				break
			}
			if k := unknownKey(&n); k != "" {
				t.Fatalf("accepted the unknown key %q", k)
			}
		}
	})
}

// unknownKey returns a mapping key under n that no device file knows
// ("" when none), skipping misc's value.
func unknownKey(n *yaml.Node) string {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if k == "misc" || k == "<<" { // merged keys are checked where they are decoded
				continue
			}
			if !slices.Contains(knownKeys, k) {
				return k
			}
			if u := unknownKey(n.Content[i+1]); u != "" {
				return u
			}
		}
		return ""
	}
	for _, c := range n.Content {
		if u := unknownKey(c); u != "" {
			return u
		}
	}
	return ""
}

func ExampleLookup() {
	g, err := Lookup("h100-sxm")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %.2f GiB, %.2f TB/s, %.0f TFLOPS BF16\n", g.Description, float64(g.MemoryBytes)/(1<<30), g.BandwidthBps/1e12, g.BF16FLOPS/1e12)
	// Output: NVIDIA H100 SXM5 80GB: 79.19 GiB, 3.35 TB/s, 989 TFLOPS BF16
}

// memoryRow pins one catalog memory size to the public evidence recorded in
// MEMORY.md.
type memoryRow struct {
	name       string
	nominalGiB float64 // the marketing "GB" figure, read as GiB of physical memory
	wantMiB    int64   // the catalog value
	kind       string  // "cuda-total" or "nvidia-smi"
	smiMiB     int64   // nvidia-smi total seen for the same model; 0 if not recorded
	ecc        bool    // GDDR with ECC carved out of the nominal size (L4, L40S)
}

var memoryRows = []memoryRow{
	{name: "rtx-5070", nominalGiB: 12, wantMiB: 12227, kind: "nvidia-smi"},
	{name: "rtx-5080", nominalGiB: 16, wantMiB: 16303, kind: "nvidia-smi"},
	{name: "rtx-5090", nominalGiB: 32, wantMiB: 32113, kind: "cuda-total", smiMiB: 32607},
	{name: "rtx-4090", nominalGiB: 24, wantMiB: 24218, kind: "cuda-total", smiMiB: 24564},
	{name: "rtx-3090", nominalGiB: 24, wantMiB: 24259, kind: "cuda-total"},
	{name: "l4", nominalGiB: 24, wantMiB: 22487, kind: "cuda-total", smiMiB: 23034, ecc: true},
	{name: "l40s", nominalGiB: 48, wantMiB: 45589, kind: "cuda-total", smiMiB: 46068, ecc: true},
	{name: "a100-40gb", nominalGiB: 40, wantMiB: 40509, kind: "cuda-total"},
	{name: "a100-80gb", nominalGiB: 80, wantMiB: 81050, kind: "cuda-total", smiMiB: 81920},
	{name: "h100-sxm", nominalGiB: 80, wantMiB: 81090, kind: "cuda-total", smiMiB: 81559},
	{name: "h100-pcie", nominalGiB: 80, wantMiB: 81090, kind: "cuda-total", smiMiB: 81559},
	{name: "h200", nominalGiB: 141, wantMiB: 143165, kind: "cuda-total", smiMiB: 143771},
	{name: "gh200", nominalGiB: 96, wantMiB: 96768, kind: "cuda-total", smiMiB: 97871},
	{name: "b200", nominalGiB: 180, wantMiB: 182631, kind: "cuda-total"},
	{name: "rtx-pro-6000", nominalGiB: 96, wantMiB: 97250, kind: "cuda-total", smiMiB: 97887},
}

// noCUDAEvidence lists the CUDA devices whose memory was left as it was
// (nvidia-smi totals from AIConfigurator, or unified memory) because no
// CUDA-reported total was found; see MEMORY.md.
var noCUDAEvidence = []string{"b300", "gb200", "gb300", "jetson-agx-orin-64gb",
	"rtx-4080", "rtx-4070-ti", "rtx-3080-ti", "rtx-3080", "rtx-3070"}

func cudaTotalByName() map[string]memoryRow {
	m := map[string]memoryRow{}
	for _, r := range memoryRows {
		if r.kind == "cuda-total" {
			m[r.name] = r
		}
	}
	return m
}

// TestCUDAReportedMemory pins each memory size taken from public CUDA or
// nvidia-smi readings and checks it against the marketing size, so that a
// typo (a digit dropped, GB for GiB, nvidia-smi for CUDA) fails.
func TestCUDAReportedMemory(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range memoryRows {
		seen[r.name] = true
		g, err := Lookup(r.name)
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
			continue
		}
		if g.MemoryBytes != r.wantMiB*mib {
			t.Errorf("%s: MemoryBytes = %d (%.2f MiB), want %d MiB", r.name, g.MemoryBytes, float64(g.MemoryBytes)/mib, r.wantMiB)
		}
		// How far below the nominal size, read as GiB, the figure lies.
		below := 1 - float64(g.MemoryBytes)/(r.nominalGiB*gib)
		lo, hi := 0.005, 0.03 // CUDA: driver-reserved memory, 0.5–3 %
		switch {
		case r.kind == "nvidia-smi":
			lo, hi = 0.001, 0.01 // nvidia-smi shows all but a few tens of MiB
		case r.ecc:
			lo, hi = 0.06, 0.09 // ECC on GDDR6 takes ~6 % before the driver's share
		}
		if below < lo || below > hi {
			t.Errorf("%s (%s): %.2f GiB is %.2f %% below the nominal %g GiB, want %.1f–%.1f %%",
				r.name, r.kind, float64(g.MemoryBytes)/gib, 100*below, r.nominalGiB, 100*lo, 100*hi)
		}
		if !strings.Contains(g.Source, "memory ") {
			t.Errorf("%s: Source does not say where the memory figure comes from: %q", r.name, g.Source)
		}
		if r.smiMiB == 0 {
			continue
		}
		// CUDA's total is nvidia-smi's less the driver's reservation,
		// which is a few hundred MiB up to about 1.1 GiB on these parts.
		if res := r.smiMiB - r.wantMiB; r.kind != "cuda-total" || res < 100 || res > 1200 {
			t.Errorf("%s: nvidia-smi %d MiB − CUDA %d MiB = %d MiB reserved, want 100–1200 MiB", r.name, r.smiMiB, r.wantMiB, res)
		}
	}
	for _, n := range noCUDAEvidence {
		seen[n] = true
	}
	// Every CUDA device must have been looked at: a new one needs a row here.
	c := Default()
	for _, n := range c.Names() {
		g, _ := c.Lookup(n)
		if g.Backend == CUDA && !seen[n] {
			t.Errorf("%s: CUDA device with no memory provenance row (add it to memoryRows or noCUDAEvidence)", n)
		}
	}
}

func TestLookupNode(t *testing.T) {
	c := Default()
	for _, tc := range []struct {
		name  string
		count int
		gpu   string
		want  int
		err   string
	}{
		{"rtx-4090", 0, "rtx-4090", 0, ""},
		{"rtx-4090x2", 0, "rtx-4090", 2, ""},
		{"RTX_4090X4", 0, "rtx-4090", 4, ""},
		{"h100*8", 0, "h100-sxm", 8, ""},
		{"rtx-4090", 2, "rtx-4090", 2, ""},
		{"rtx-4090x2", 2, "rtx-4090", 2, ""},
		{"apple-m3-max", 0, "apple-m3-max", 0, ""}, // "max" is not a count
		{"rtx-4090x2", 4, "", 0, "says 2 GPUs but the count given is 4"},
		{"rtx-4090x9", 0, "", 0, "holds 1 to 8"},
		{"h100-sxmx16", 0, "", 0, "holds 1 to 8"},
		{"apple-m3-maxx2", 0, "", 0, "holds 1 to 1"},
		{"rtx-4090x0", 0, "", 0, "at least 1"},
		{"rtx-9999x2", 0, "", 0, "unknown GPU"},
		{"rtx-4090", -1, "", 0, "at least 1"},
	} {
		n, err := c.LookupNode(tc.name, tc.count)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s, %d: %v; want an error containing %q", tc.name, tc.count, err, tc.err)
			}
			continue
		}
		if err != nil || n.GPU.Name != tc.gpu || n.Count != tc.want {
			t.Errorf("%s, %d: %+v, %v; want %s × %d", tc.name, tc.count, n, err, tc.gpu, tc.want)
		}
	}
	if s := (Node{GPU: &GPU{Name: "rtx-4090"}, Count: 2}).String(); s != "rtx-4090x2" {
		t.Errorf("String: %q", s)
	}
}

// TestLoadCatalog: the built-in devices plus a device file's, which can
// replace a built-in one; a bad file names itself.
func TestLoadCatalog(t *testing.T) {
	c, err := LoadCatalog("")
	if err != nil || len(c.Names()) != len(Default().Names()) {
		t.Fatalf("no file: %v, %d devices", err, len(c.Names()))
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(p, []byte("name: lab-card\nmemory_gib: 48\nbandwidth_gbs: 1000\nbf16_tflops: 300\nfp8_tflops: 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadCatalog(p)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.Lookup("lab-card")
	if err != nil || g.MemoryBytes != 48<<30 {
		t.Fatalf("lab-card: %v %+v", err, g)
	}
	if _, err := c.Lookup("h100-sxm"); err != nil {
		t.Errorf("built-in device lost: %v", err)
	}
	if _, err := Default().Lookup("lab-card"); err == nil {
		t.Error("LoadCatalog changed the default catalog")
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: broken\nmemory_gib: -1\n"), 0o644)
	if _, err := LoadCatalog(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("bad file: %v, want an error naming it", err)
	}
	if _, err := LoadCatalog(filepath.Join(dir, "none.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}
