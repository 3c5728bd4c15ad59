package nativecal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// fakeProbe stands in for QuickProbe: it counts its calls and returns the
// committed coefficients with the sgemm rate tripled.
type fakeProbe struct {
	calls int
	err   error
}

func (f *fakeProbe) probe(context.Context) (estimate.NativeCoeffs, error) {
	f.calls++
	co := estimate.DefaultNativeCoeffs().Machines[Machine]
	co.SgemmFLOPS *= 3
	co.Host, co.Measured = nil, ""
	return co, f.err
}

// fileRecording returns a file lookup whose coefficients record host rec
// (nil: none), named src.
func fileRecording(rec *hardware.Host, src string) func() (*estimate.NativeCoeffFile, string, error) {
	f := *estimate.DefaultNativeCoeffs()
	co := f.Machines[Machine]
	co.Host = rec
	f.Machines = map[string]estimate.NativeCoeffs{Machine: co}
	return func() (*estimate.NativeCoeffFile, string, error) { return &f, src, nil }
}

// TestResolve: the committed coefficients on the host they record; a host
// without a calibration probed once, the probe cached (atomically, under
// the cache directory, recording this host and when) and read back the
// next time without probing; a corrupt cache probed again; offline, no
// probe and a plain warning that the estimate is another host's; a
// failed probe an error that says how to skip it; a local calibration
// used as it is, with a warning when it records another host.
func TestResolve(t *testing.T) {
	here := hardware.Host{CPU: "Test CPU", CPUs: 2, LLCBytes: 480 << 20, L2Bytes: 1 << 20, Backend: "go"}
	fitted := hardware.Host{CPUs: 2, LLCBytes: 32 << 20}
	now := func() time.Time { return time.Date(2026, 12, 1, 23, 5, 0, 0, time.UTC) }
	ctx := context.Background()

	t.Run("committed host", func(t *testing.T) {
		p := &fakeProbe{}
		c, err := Resolve(ctx, ResolveOptions{Host: here, Probe: p.probe, CacheDir: t.TempDir(), File: fileRecording(&here, "embedded")})
		if err != nil || c.Kind != KindCommitted || p.calls != 0 || c.Warning != "" {
			t.Fatalf("%+v, %v, %d probes", c, err, p.calls)
		}
		if !strings.Contains(c.String(), "committed coefficients, fitted on this host") {
			t.Errorf("String: %q", c)
		}
	})

	t.Run("probe, cache, reuse", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "hosts") // created by the first probe
		p := &fakeProbe{}
		o := ResolveOptions{Host: here, Probe: p.probe, CacheDir: dir, Now: now, File: fileRecording(&fitted, "embedded")}
		c, err := Resolve(ctx, o)
		if err != nil || c.Kind != KindProbed || p.calls != 1 {
			t.Fatalf("%+v, %v, %d probes", c, err, p.calls)
		}
		path := filepath.Join(dir, here.Key()+".json")
		if c.Source != path || c.Measured != "2026-12-01 23:05 UTC" || c.MeasuredOn == nil || *c.MeasuredOn != here {
			t.Errorf("probed: source %s, measured %q on %v", c.Source, c.Measured, c.MeasuredOn)
		}
		if got := c.File.Machines[Machine].SgemmFLOPS; got != 3*estimate.DefaultNativeCoeffs().Machines[Machine].SgemmFLOPS {
			t.Errorf("probed sgemm %g", got)
		}
		if s := c.String(); !strings.Contains(s, "quick probe") || !strings.Contains(s, path) || !strings.Contains(s, "2026-12-01 23:05 UTC") {
			t.Errorf("String: %q", s)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("cache directory holds %d entries, want the one file (no temporary left)", len(entries))
		}
		c2, err := Resolve(ctx, o)
		if err != nil || c2.Kind != KindCached || p.calls != 1 || c2.Source != path || c2.Measured != c.Measured {
			t.Fatalf("second resolve: %+v, %v, %d probes", c2, err, p.calls)
		}
		other := here
		other.Backend = "openblas"
		if c3, err := Resolve(ctx, ResolveOptions{Host: other, Probe: p.probe, CacheDir: dir, Now: now, File: o.File}); err != nil || c3.Kind != KindProbed || p.calls != 2 {
			t.Errorf("another fingerprint used this host's cache: %+v, %v", c3, err)
		}
		// A probe cached for an earlier native rule (its weights priced
		// at float32 with a fitted multiplier) is measured again.
		cached, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(cached), fmt.Sprintf(`"rule": %d`, estimate.NativeRule)) {
			t.Errorf("the cached probe does not record the rule it was fitted for:\n%s", cached)
		}
		old := strings.Replace(string(cached), fmt.Sprintf(`"rule": %d`, estimate.NativeRule), `"rule": 1`, 1)
		if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		if c5, err := Resolve(ctx, o); err != nil || c5.Kind != KindProbed || p.calls != 3 {
			t.Errorf("a probe cached for rule 1: %+v, %v, %d probes (want it probed again)", c5, err, p.calls)
		}
		if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
		if c4, err := Resolve(ctx, o); err != nil || c4.Kind != KindProbed || p.calls != 4 {
			t.Errorf("corrupt cache: %+v, %v, %d probes", c4, err, p.calls)
		}
		restore := c.Use()
		f, src, err := estimate.ActiveNativeCoeffs()
		if err != nil || f != c.File || src != path {
			t.Errorf("in use: %s, %v", src, err)
		}
		restore()
		if _, src, _ := estimate.ActiveNativeCoeffs(); src == path {
			t.Error("restore left the probe in use")
		}
	})

	t.Run("offline", func(t *testing.T) {
		dir := t.TempDir()
		p := &fakeProbe{}
		c, err := Resolve(ctx, ResolveOptions{Host: here, Probe: p.probe, Offline: true, CacheDir: dir, File: fileRecording(&fitted, "embedded")})
		if err != nil || c.Kind != KindOtherHost || p.calls != 0 {
			t.Fatalf("%+v, %v, %d probes", c, err, p.calls)
		}
		if !strings.Contains(c.Warning, "comes from another host") || !strings.Contains(c.String(), "warning: ") || !strings.Contains(c.Warning, OfflineEnv) {
			t.Errorf("warning %q", c.Warning)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("offline wrote %d files", len(entries))
		}
		if c, _ := Resolve(ctx, ResolveOptions{Host: here, CacheDir: dir, File: fileRecording(&fitted, "embedded")}); c.Kind != KindOtherHost || !strings.Contains(c.Warning, "no probe can run") {
			t.Errorf("no probe: %+v", c)
		}
	})

	t.Run("probe fails", func(t *testing.T) {
		p := &fakeProbe{err: errors.New("bench-serve failed")}
		_, err := Resolve(ctx, ResolveOptions{Host: here, Probe: p.probe, CacheDir: t.TempDir(), File: fileRecording(&fitted, "embedded")})
		if err == nil || !strings.Contains(err.Error(), "bench-serve failed") || !strings.Contains(err.Error(), OfflineEnv) {
			t.Errorf("error %v", err)
		}
	})

	t.Run("local calibration", func(t *testing.T) {
		p := &fakeProbe{}
		c, err := Resolve(ctx, ResolveOptions{Host: here, Probe: p.probe, CacheDir: t.TempDir(), File: fileRecording(&here, "/home/u/.config/autocompress/native_coefficients.json")})
		if err != nil || c.Kind != KindLocal || c.Warning != "" || p.calls != 0 {
			t.Errorf("%+v, %v", c, err)
		}
		c, _ = Resolve(ctx, ResolveOptions{Host: here, Probe: p.probe, CacheDir: t.TempDir(), File: fileRecording(&fitted, "/x.json")})
		if c.Kind != KindLocal || !strings.Contains(c.Warning, "another host") || p.calls != 0 {
			t.Errorf("local from another host: %+v", c)
		}
	})
}

// TestCacheCliff: the cliff is the last working set above the geometric
// mean of the cache's and memory's bandwidths; a flat sweep has none.
func TestCacheCliff(t *testing.T) {
	var steep, flat []GEMVPoint
	for _, b := range gemvSizes() {
		bw := 100e9
		if b > 4<<20 {
			bw = 8e9
		}
		steep = append(steep, GEMVPoint{b, bw})
		flat = append(flat, GEMVPoint{b, 20e9 * (1 - 1e-3*math.Log2(b))})
	}
	want := 0.0
	for _, b := range gemvSizes() {
		if b <= 4<<20 {
			want = b
		}
	}
	if got := CacheCliff(steep); got != want {
		t.Errorf("cliff %g, want %g", got, want)
	}
	if got := CacheCliff(flat); got != 0 {
		t.Errorf("flat sweep: cliff %g", got)
	}
	if got := CacheCliff(nil); got != 0 {
		t.Errorf("empty sweep: cliff %g", got)
	}
}

// TestFitTransferRecovers: rows priced by the committed coefficients with
// each group scaled by a known factor (and a 3× sgemm rate) are fitted
// back to those factors (without the shrinkage, which pulls them towards
// one common factor: with it they lie between); the memory rule's fixed
// cost, multipliers and workload term (bytes per prompt token in flight)
// follow the rows' peak RSS, the garbage capped at the live buffers.
func TestFitTransferRecovers(t *testing.T) {
	a := parentArch(t)
	m, err := newModel(a)
	if err != nil {
		t.Fatal(err)
	}
	prior := estimate.DefaultNativeCoeffs().Machines[Machine]
	want := [NumProbeGroups]float64{0.5, 2, 1.5, 0.3}
	truth := prior
	truth.SgemmFLOPS *= 3
	truth.CacheBytes = 3 << 20
	v := prior.TimeVector()
	for k := range v {
		v[k] *= want[probeGroups[k]]
	}
	truth = truth.WithTimeVector(v)
	truth.MemFixed += 7 << 20
	truth.MemHeap, truth.MemBuffers = 1, 1.2 // the weights count byte for byte (the fit holds MemHeap at 1)
	truth.MemWork = 8 << 10
	truth.MemGarbageCap = 1
	var rows []Row
	for _, p := range ProbeSweep() {
		r := Row{Point: p, SgemmFLOPS: truth.SgemmFLOPS}
		pr, err := m.predict(&r, truth)
		if err != nil {
			t.Fatal(err)
		}
		r.TTFT, r.TPOT, r.OutputTPS, r.PeakRSSBytes = pr.TTFT, pr.TPOT, pr.OutputTPS, int64(pr.PeakBytes)
		rows = append(rows, r)
	}
	defer func(w int) { probeShrink = w }(probeShrink)
	probeShrink = 0
	co, err := FitTransfer(a, rows, prior, prior.Threads, truth.CacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	got := TransferScales(co, prior)
	for g := range want {
		if math.Abs(got[g]/want[g]-1) > 0.02 {
			t.Errorf("%s factor %.4g, want %.4g", probeGroupNames[g], got[g], want[g])
		}
	}
	if co.SgemmFLOPS != truth.SgemmFLOPS || co.CacheBytes != truth.CacheBytes {
		t.Errorf("sgemm %g, cache %g", co.SgemmFLOPS, co.CacheBytes)
	}
	near := func(got, want float64) bool { return math.Abs(got/want-1) < 0.01 }
	if !near(co.MemFixed, truth.MemFixed) || !near(co.MemHeap, truth.MemHeap) || !near(co.MemBuffers, truth.MemBuffers) || !near(co.MemWork, truth.MemWork) || co.MemGarbageCap != 1 {
		t.Errorf("memory: fixed %g, weights × %g, buffers × %g, %g B per prompt token in flight, cap %g; want %g, %g, %g, %g, 1",
			co.MemFixed, co.MemHeap, co.MemBuffers, co.MemWork, co.MemGarbageCap, truth.MemFixed, truth.MemHeap, truth.MemBuffers, truth.MemWork)
	}
	// With the shrinkage every factor moves towards the others: each lies
	// between its own value and the spread of the rest.
	probeShrink = 3
	shrunk, err := FitTransfer(a, rows, prior, prior.Threads, truth.CacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	sg := TransferScales(shrunk, prior)
	spread := func(s [NumProbeGroups]float64) float64 {
		lo, hi := math.Inf(1), 0.0
		for _, x := range s {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		return hi / lo
	}
	if !(spread(sg) < spread(got)) {
		t.Errorf("shrunk factors %v spread no less than the free ones %v", sg, got)
	}
	// Without a row of long prompts × many clients the workload term
	// cannot be told from the fixed cost: it is not fitted.
	var short []Row
	for _, r := range rows {
		if r.ISL*r.Conc < workloadTokens {
			short = append(short, r)
		}
	}
	if co2, err := FitTransfer(a, short, prior, prior.Threads, truth.CacheBytes); err != nil || co2.MemWork != 0 {
		t.Errorf("short rows: workload term %g, %v", co2.MemWork, err)
	}
	if co.Host != nil || co.ErrTPOT != 0 {
		t.Errorf("the fitting host's record kept: %+v", co)
	}
	if _, err := FitTransfer(a, rows[:1], prior, 2, 0); err == nil {
		t.Error("one row fitted")
	}
}

// TestQuickProbeRuns is the one test that runs the real probe: the GEMV
// sweep, the sgemm rate and two small points in this process, under a
// deadline (a loaded machine that cannot finish in it skips; nothing
// here depends on how fast the machine is). The fitted coefficients must
// be valid ones.
func TestQuickProbeRuns(t *testing.T) {
	a := parentArch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sw := ProbeSweep()
	pts := []Point{sw[0], sw[1]}
	for i := range pts {
		pts[i].Requests = pts[i].Conc
	}
	prior := estimate.DefaultNativeCoeffs().Machines[Machine]
	co, p, err := QuickProbe(ctx, a, InProcess, prior, pts, nil)
	if ctx.Err() != nil {
		t.Skipf("the probe did not finish in 3 minutes on this machine (%v)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(p.GEMV) != len(gemvSizes()) || len(p.Rows) != len(pts) || !(p.SgemmFLOPS > 0) {
		t.Fatalf("probe %d GEMV points, %d rows, sgemm %g", len(p.GEMV), len(p.Rows), p.SgemmFLOPS)
	}
	for _, g := range p.GEMV {
		if !(g.Bps > 0) || math.IsInf(g.Bps, 0) {
			t.Errorf("GEMV %+v", g)
		}
	}
	f := estimate.NativeCoeffFile{Machines: map[string]estimate.NativeCoeffs{Machine: co}}
	if _, err := estimate.ParseNativeCoeffs(mustJSON(t, f)); err != nil {
		t.Errorf("probed coefficients invalid: %v", err)
	}
	for g, s := range TransferScales(co, prior) {
		if !(s >= 1/maxTransfer && s <= maxTransfer) {
			t.Errorf("%s factor %g", probeGroupNames[g], s)
		}
	}
	t.Logf("sgemm %.3g FLOP/s, cache cliff %.1f MiB, factors %v, %v (not a timing figure: the machine is shared)", p.SgemmFLOPS, p.CacheBytes/(1<<20), TransferScales(co, prior), p.Took)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProbeSplit: the probed coefficients split the weights at the
// measured cliff only when it is below the committed split.
func TestProbeSplit(t *testing.T) {
	for _, c := range []struct{ cliff, committed, want float64 }{
		{8 << 20, 5.5 * (1 << 20), 5.5 * (1 << 20)},
		{4 << 20, 5.5 * (1 << 20), 4 << 20},
		{0, 5.5 * (1 << 20), 5.5 * (1 << 20)},
		{4 << 20, 0, 4 << 20},
	} {
		if got := probeSplit(c.cliff, c.committed); got != c.want {
			t.Errorf("probeSplit(%g, %g) = %g, want %g", c.cliff, c.committed, got, c.want)
		}
	}
}
