package nativecal

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/servebench"
)

var probeAccuracy = flag.Bool("nativecal.probe-accuracy", false,
	"TestProbeAccuracy: probe this host and score the probed fit against bench-serve on shapes it never saw (minutes; run on a quiet machine)")

var probeRowsDir = flag.String("nativecal.rows-dir", "",
	"TestProbeAccuracy: write the probe's rows and the held-out rows as CSV (probe.csv, heldout.csv) to this directory")

// probeHeldOut are the shapes and workloads the probe's accuracy is
// scored on: none is a probe point — the parent at other lengths and
// concurrencies (long prompts × many clients among them), pruned children
// and a 30-layer model of the parent's widths.
func probeHeldOut() []Point {
	byName := map[string]Shape{}
	for _, s := range append(fitShapes(), heldShapes()...) {
		byName[s.name] = s.shape
	}
	deep := parentShape()
	for len(deep.Layers) < 30 {
		deep.Layers = append(deep.Layers, deep.Layers[0])
	}
	byName["deep30"] = deep
	pt := func(name string, isl, osl, conc int) Point {
		return Point{Name: name, Shape: byName[name], ISL: isl, OSL: osl, Conc: conc, Requests: max(8*conc, 16), HeldOut: true}
	}
	return []Point{
		pt("parent", 128, 64, 1),
		pt("parent", 128, 64, 4),
		pt("parent", 384, 64, 8),
		pt("uniform384", 128, 64, 4),
		pt("depth6", 96, 48, 2),
		pt("ffn-perlayer", 128, 64, 4),
		pt("combo", 200, 100, 6),
		pt("deep30", 128, 64, 4),
	}
}

// Targets of the issue for the probed fit on shapes it never saw.
const (
	probeTargetTime   = 0.15 // TPOT and throughput, median APE
	probeTargetMemory = 0.10 // peak memory, median APE
)

// TestProbeAccuracy (-nativecal.probe-accuracy; minutes, on a quiet
// machine only) is the check of the per-host calibration: it builds the
// binary, probes this host as a first native estimate would (QuickProbe,
// bench-serve in child processes), measures the held-out shapes of
// probeHeldOut with bench-serve, and fails when the probed fit's median
// errors exceed 15 % (TPOT, throughput) or 10 % (peak memory). It logs
// the host's fingerprint, the probe, every row and the committed
// coefficients' errors on the same rows, for estimate/nativecal/ACCURACY.md.
func TestProbeAccuracy(t *testing.T) {
	if !*probeAccuracy {
		t.Skip("measures this host for minutes; run with -nativecal.probe-accuracy on a quiet machine")
	}
	a := parentArch(t)
	bin := filepath.Join(t.TempDir(), "autocompress")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(gobin, "build", "-o", bin, "github.com/autocompress/autocompress/cmd/autocompress").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx := context.Background()
	prior := estimate.DefaultNativeCoeffs().Machines[Machine]
	start := time.Now()
	co, p, err := QuickProbe(ctx, a, Exec(bin), prior, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := TransferScales(co, prior)
	t.Logf("host %s (key %s), %s", ThisHost(), ThisHost().Key(), start.UTC().Format("2006-01-02 15:04 UTC"))
	t.Logf("probe: %.1f s (%d points measured again, contended), sgemm %.1f GFLOP/s, cache cliff %.2f MiB (split at %.2f), factors compute %.3f, weights %.3f, packed path %.3f, overheads %.3f; memory: fixed %.1f MiB, weights × %.3f, buffers × %.3f, %.0f B per prompt token in flight; load %s",
		p.Took.Seconds(), p.Retried, p.SgemmFLOPS/1e9, p.CacheBytes/(1<<20), co.CacheBytes/(1<<20), s[0], s[1], s[2], s[3], co.MemFixed/(1<<20), co.MemHeap, co.MemBuffers, co.MemWork, loadavg())
	rows, err := Measure(ctx, a, probeHeldOut(), Exec(bin), servebench.Options{Repeats: 3, MaxWarmup: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	probed, err := Validate(a, rows, co)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := Validate(a, rows, prior)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| row | TPOT measured / probed / committed (ms) | throughput (tok/s) | peak memory (MiB) |\n|---|---|---|---|\n")
	for i, r := range probed.Rows {
		c := committed.Rows[i]
		fmt.Fprintf(&b, "| %s %d/%d/%d | %.3f / %.3f / %.3f | %.0f / %.0f / %.0f | %.1f / %.1f / %.1f |\n", r.Name, r.ISL, r.OSL, r.Conc,
			1e3*r.TPOT, 1e3*r.Pred.TPOT, 1e3*c.Pred.TPOT, r.OutputTPS, r.Pred.OutputTPS, c.Pred.OutputTPS,
			float64(r.PeakRSSBytes)/(1<<20), r.Pred.PeakBytes/(1<<20), c.Pred.PeakBytes/(1<<20))
	}
	h, ch := probed.HeldOut, committed.HeldOut
	fmt.Fprintf(&b, "median APE, probed: TTFT %.1f %%, TPOT %.1f %%, throughput %.1f %%, memory %.1f %%; committed: TTFT %.1f %%, TPOT %.1f %%, throughput %.1f %%, memory %.1f %%\n",
		100*h.TTFT, 100*h.TPOT, 100*h.Throughput, 100*h.Memory, 100*ch.TTFT, 100*ch.TPOT, 100*ch.Throughput, 100*ch.Memory)
	t.Log("\n" + b.String())
	t.Logf("load average at the end: %s", loadavg())
	// The rows last: a directory that cannot be written loses them, not
	// the table above.
	if *probeRowsDir != "" {
		if err := writeProbeRows(*probeRowsDir, Provenance{Host: ThisHost(), Start: start, End: time.Now(), Load: loadavg()}, p.Rows, rows); err != nil {
			t.Error(err)
		}
	}
	if h.TPOT > probeTargetTime || h.Throughput > probeTargetTime {
		t.Errorf("probed fit: TPOT %.1f %%, throughput %.1f %% median APE, target ≤ %.0f %%", 100*h.TPOT, 100*h.Throughput, 100*probeTargetTime)
	}
	if h.Memory > probeTargetMemory {
		t.Errorf("probed fit: peak memory %.1f %% median APE, target ≤ %.0f %%", 100*h.Memory, 100*probeTargetMemory)
	}
}

// writeProbeRows writes the probe's rows and the held-out rows as
// probe.csv and heldout.csv in dir (made if missing).
func writeProbeRows(dir string, prov Provenance, probe, held []Row) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, rs := range map[string][]Row{"probe.csv": probe, "heldout.csv": held} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := WriteSweep(f, prov, rs); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
