package nativecal

import (
	"bytes"
	"context"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/servebench"
)

func parentArch(t testing.TB) *architecture.Model {
	t.Helper()
	d, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := architecture.Load(d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestParentShape: the sweep's parent shape is the embedded parent's.
func TestParentShape(t *testing.T) {
	a := parentArch(t)
	got := parentShape().Arch(a)
	if len(got.Layers) != len(a.Layers) || got.Hidden != a.Hidden {
		t.Fatalf("parent shape %s does not match the parent", parentShape())
	}
	for i := range a.Layers {
		if *got.Layers[i].Attention != *a.Layers[i].Attention || *got.Layers[i].MLP != *a.Layers[i].MLP {
			t.Fatalf("layer %d: %+v vs %+v", i, got.Layers[i], a.Layers[i])
		}
	}
}

func TestShapeRoundTrip(t *testing.T) {
	for _, p := range DesignedSweep() {
		s, err := ParseShape(p.Shape.String())
		if err != nil || s.String() != p.Shape.String() {
			t.Fatalf("%s: %v, %s", p.Shape, err, s)
		}
	}
	for _, bad := range []string{"", "192/8/2/24", "192/8/2:A1", "192/8/3/24:A1", "192/8/2/24:", "192/8/2/24:B5", "192/8/2/24:A-1", "0/8/2/24:A1", "192/8/2/24:A+1"} {
		if _, err := ParseShape(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseShape(f *testing.F) {
	f.Add("192/8/2/24:A512 _512 A0")
	f.Add("1/1/1/1:_0")
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseShape(spec)
		if err != nil {
			return
		}
		back, err := ParseShape(s.String())
		if err != nil || back.String() != s.String() {
			t.Fatalf("%q → %q → %v", spec, s.String(), err)
		}
	})
}

func FuzzReadRows(f *testing.F) {
	var buf bytes.Buffer
	row := Row{Point: QuickSweep()[0], TTFT: 0.01, TPOT: 0.002, E2E: 0.05, OutputTPS: 500, PeakRSSBytes: 1 << 25, SgemmFLOPS: 4e10}
	if err := WriteRows(&buf, []Row{row}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.String())
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ReadRows(strings.NewReader(s))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteRows(&out, rows); err != nil {
			t.Fatal(err)
		}
		again, err := ReadRows(&out)
		if err != nil || len(again) != len(rows) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestReadRowsErrors(t *testing.T) {
	h := strings.Join(header, ",") + "\n"
	good := "parent,fit,192/8/2/24:A512,128,64,4,32,0.01,0.002,0.1,500,1000,0.1,0.1,0.5,4e10\n"
	if rows, err := ReadRows(strings.NewReader(h + good)); err != nil || len(rows) != 1 || rows[0].Conc != 4 {
		t.Fatalf("%v %+v", err, rows)
	}
	for _, tc := range []struct{ body, msg string }{
		{"x,y\n", "header"},
		{h + strings.Replace(good, ",fit,", ",train,", 1), "column set"},
		{h + strings.Replace(good, ",128,", ",0,", 1), "column isl"},
		{h + strings.Replace(good, ",0.002,", ",NaN,", 1), "column tpot_s"},
		{h + strings.Replace(good, "A512", "Q512", 1), "column shape"},
	} {
		if _, err := ReadRows(strings.NewReader(tc.body)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v (want %q)", tc.body, err, tc.msg)
		}
	}
}

// TestFitIsLinear: the fit treats TTFT, TPOT and time per output token
// as linear in the time coefficients; check that the price of a mix of
// coefficients is the mix of the unit prices.
func TestFitIsLinear(t *testing.T) {
	m, err := newModel(parentArch(t))
	if err != nil {
		t.Fatal(err)
	}
	base := estimate.DefaultNativeCoeffs().Machines[Machine]
	for _, p := range DesignedSweep()[:12] {
		r := Row{Point: p}
		var sumT, sumP, sumW float64
		v := base.TimeVector()
		for k := range estimate.NumNativeTime {
			var e [estimate.NumNativeTime]float64
			e[k] = v[k]
			pr, err := m.predict(&r, base.WithTimeVector(e))
			if err != nil {
				t.Fatal(err)
			}
			sumT += pr.TTFT
			sumP += pr.TPOT
			if pr.OutputTPS > 0 {
				sumW += 1 / pr.OutputTPS
			}
		}
		full, _ := m.predict(&r, base)
		for _, c := range [][2]float64{{sumT, full.TTFT}, {sumP, full.TPOT}, {sumW, 1 / full.OutputTPS}} {
			if math.Abs(c[0]-c[1]) > 1e-9*c[1] {
				t.Fatalf("%s %d/%d/%d: sum of parts %g, whole %g", p.Name, p.ISL, p.OSL, p.Conc, c[0], c[1])
			}
		}
	}
}

// exactRows returns the designed sweep's rows with the figures truth
// prices them at, as if measured without noise.
func exactRows(t *testing.T, a *architecture.Model, truth estimate.NativeCoeffs) []Row {
	t.Helper()
	m, err := newModel(a)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	for _, p := range DesignedSweep() {
		r := Row{Point: p, SgemmFLOPS: truth.SgemmFLOPS}
		pr, err := m.predict(&r, truth)
		if err != nil {
			t.Fatal(err)
		}
		r.TTFT, r.TPOT, r.OutputTPS = pr.TTFT, pr.TPOT, pr.OutputTPS
		rows = append(rows, r)
	}
	return rows
}

// TestNNLSRecoversCoefficients: rows priced with known coefficients are
// fitted back exactly.
func TestNNLSRecoversCoefficients(t *testing.T) {
	a := parentArch(t)
	truth := estimate.DefaultNativeCoeffs().Machines[Machine]
	v := truth.TimeVector()
	v[1], v[4] = 0, 0 // some coefficients at the bound
	truth = truth.WithTimeVector(v)
	rows := exactRows(t, a, truth)
	co, err := Fit(a, rows, truth.Threads)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Validate(a, rows, co)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HeldOut.TTFT > 1e-4 || rep.HeldOut.TPOT > 1e-4 || rep.HeldOut.Throughput > 1e-4 || !rep.RankingAgrees {
		t.Fatalf("refit of exact rows: %+v (coefficients %+v)", rep.HeldOut, co)
	}
}

// TestFitFindsCacheSize: rows priced with a planted effective cache (and
// different rates on its two sides) are fitted back to that size, and the
// held-out rows are then priced exactly.
func TestFitFindsCacheSize(t *testing.T) {
	a := parentArch(t)
	truth := estimate.DefaultNativeCoeffs().Machines[Machine]
	v := truth.TimeVector()
	v[4], v[13] = 0.4, 3 // weight (in cache), weight_dram (beyond it)
	truth = truth.WithTimeVector(v)
	truth.CacheBytes = 10.5 * (1 << 20)
	rows := exactRows(t, a, truth)
	co, err := Fit(a, rows, truth.Threads)
	if err != nil {
		t.Fatal(err)
	}
	if co.CacheBytes != truth.CacheBytes {
		t.Errorf("fitted cache %.1f MiB, planted %.1f MiB", co.CacheBytes/(1<<20), truth.CacheBytes/(1<<20))
	}
	rep, err := Validate(a, rows, co)
	if err != nil {
		t.Fatal(err)
	}
	if rep.HeldOut.TPOT > 1e-4 || rep.HeldOut.TTFT > 1e-4 {
		t.Fatalf("refit of exact rows with a cache: %+v", rep.HeldOut)
	}
}

// TestMeasureInProcess runs a two-point sweep of the machinery (random
// models built from the parent's shape, saved, loaded and served).
func TestMeasureInProcess(t *testing.T) {
	pts := QuickSweep()[:2]
	for i := range pts {
		pts[i].ISL, pts[i].OSL, pts[i].Requests = 8, 4, 2
	}
	var seen []int
	rows, err := Measure(context.Background(), parentArch(t), pts, InProcess, servebench.Options{Repeats: 1, MaxWarmup: 2},
		func(e progress.Event) {
			if e.State == progress.Running {
				seen = append(seen, int(e.Done))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || len(seen) != 2 || seen[1] != 2 {
		t.Fatalf("rows %d, progress %v", len(rows), seen)
	}
	for _, r := range rows {
		if r.TTFT <= 0 || r.TPOT <= 0 || r.OutputTPS <= 0 || r.SgemmFLOPS <= 0 || r.PeakRSSBytes != 0 {
			t.Fatalf("row %+v", r)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Measure(ctx, parentArch(t), pts, InProcess, servebench.Options{}, nil); err == nil {
		t.Fatal("cancelled sweep succeeded")
	}
}

// TestCommittedFitReproduces refits the committed sweep rows: the time
// and memory coefficients and the held-out errors stored in the embedded
// native_coefficients.json must come out again, so the file is what the
// rows and this code give.
func TestCommittedFitReproduces(t *testing.T) {
	rows, err := CommittedRows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Skip("no committed sweep rows (sweep.csv is empty)")
	}
	want := estimate.DefaultNativeCoeffs().Machines[Machine]
	a := parentArch(t)
	got, err := Fit(a, rows, want.Threads)
	if err != nil {
		t.Fatal(err)
	}
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Abs(y)+1e-15 }
	gv, wv := got.TimeVector(), want.TimeVector()
	for k := range gv {
		if !near(gv[k], wv[k]) {
			t.Errorf("%s: refitted %g, embedded %g", estimate.NativeTimeNames[k], gv[k], wv[k])
		}
	}
	if !near(got.SgemmFLOPS, want.SgemmFLOPS) || !near(got.MemFixed, want.MemFixed) || !near(got.MemHeap, want.MemHeap) || !near(got.MemBuffers, want.MemBuffers) || !near(got.MemGarbage, want.MemGarbage) {
		t.Errorf("refitted %+v, embedded %+v", got, want)
	}
	rep, err := Validate(a, rows, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]float64{{rep.HeldOut.TTFT, want.ErrTTFT}, {rep.HeldOut.TPOT, want.ErrTPOT}, {rep.HeldOut.Throughput, want.ErrThroughput}, {rep.HeldOut.Memory, want.ErrMemory}} {
		if !near(max(c[0], 0), c[1]) {
			t.Errorf("held-out error %g, embedded %g", c[0], c[1])
		}
	}
	if len(rep.Ranking) < 4 {
		t.Errorf("ranking of %d children, want the 5 held-out shapes", len(rep.Ranking))
	}
}

// TestOneFitPath: a sweep just measured (unrounded figures) and its CSV
// refitted later, as calibrate-native's measuring path and --from-rows do,
// give bit-identical coefficients and the same CSV, because both fit what
// Calibrate wrote and read back; fitting the unrounded rows directly does
// not (the defect this replaced: about 1e-6 apart).
func TestOneFitPath(t *testing.T) {
	prov, rows, err := CommittedSweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Skip("no committed sweep rows (sweep.csv is empty)")
	}
	// Unrounded, as Measure returns them.
	for i := range rows {
		f := 1 + 1e-4*math.Sin(float64(i)+0.5)
		r := &rows[i]
		r.TTFT, r.TPOT, r.E2E, r.OutputTPS = r.TTFT*f, r.TPOT*f, r.E2E*f, r.OutputTPS/f
		r.CPUShare, r.SgemmFLOPS = r.CPUShare*f, r.SgemmFLOPS*f
	}
	a := parentArch(t)
	measured, err := Calibrate(a, prov, rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	wprov, written, err := ReadSweep(bytes.NewReader(measured.CSV))
	if err != nil {
		t.Fatal(err)
	}
	refit, err := Calibrate(a, wprov, written, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(measured.Coeffs, refit.Coeffs) {
		t.Errorf("measuring path %+v\n--from-rows     %+v", measured.Coeffs, refit.Coeffs)
	}
	if !bytes.Equal(measured.CSV, refit.CSV) {
		t.Error("the CSV written from the rows read back differs from the one written first")
	}
	mf, err1 := measured.File()
	rf, err2 := refit.File()
	if err1 != nil || err2 != nil || !bytes.Equal(mf, rf) {
		t.Errorf("coefficient files differ (%v, %v)", err1, err2)
	}
	direct, err := Fit(a, rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	if direct.TimeVector() == measured.Coeffs.TimeVector() {
		t.Error("fitting the unrounded rows gave the same coefficients: the rows were not unrounded, the test proves nothing")
	}
}

// TestKendall: Kendall's τ-a of the estimated order against the measured
// one, worked by hand.
func TestKendall(t *testing.T) {
	rank := func(est ...float64) []Ranked {
		rs := make([]Ranked, len(est))
		for i, e := range est {
			rs[i] = Ranked{Measured: float64(i + 1), Estimate: e}
		}
		return rs
	}
	for _, c := range []struct {
		name string
		rs   []Ranked
		want float64
	}{
		{"same order", rank(1, 2, 3, 4, 5), 1},
		{"reversed", rank(5, 4, 3, 2, 1), -1},
		{"one adjacent swap of five", rank(1, 3, 2, 4, 5), 0.8},    // 9 − 1 of 10 pairs
		{"last child estimated fastest", rank(2, 3, 4, 5, 1), 0.2}, // 6 − 4
		{"a tie counts neither way", rank(1, 1, 3), 2.0 / 3},
		{"one child", rank(7), 1},
	} {
		if got := kendall(c.rs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: τ = %g, want %g", c.name, got, c.want)
		}
	}
}

// TestChildrenRankingMeasured measures the five held-out children
// (uniform FFN, depth, per-layer FFN, attention removed in three layers,
// all combined) with bench-serve in this process at isl 128, osl 64,
// concurrency 4, in three interleaved rounds (so that a change of load
// falls on every child alike), and checks the embedded estimate's TPOT
// order against the median of the rounds: removed attention in the
// ranking, τ logged, and the estimate must agree on more pairs than it
// gets wrong. When the rounds disagree by more than 25 % on some child
// the machine is too loaded for the measured order to mean anything, and
// the test skips, saying so. Long (about two minutes): not under -short.
func TestChildrenRankingMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("measures five models with bench-serve (about two minutes); run without -short")
	}
	var pts []Point
	for _, p := range DesignedSweep() {
		if p.HeldOut && p.ISL == 128 && p.OSL == 64 && p.Conc == 4 && p.Name != "large-child" {
			pts = append(pts, p)
		}
	}
	if len(pts) != 5 {
		t.Fatalf("%d held-out points at 128/64/4, want the 5 children", len(pts))
	}
	a := parentArch(t)
	tpots := make([][]float64, len(pts))
	var rows []Row
	for range 3 {
		round, err := Measure(context.Background(), a, pts, InProcess, servebench.Options{Repeats: 1, MaxWarmup: 3}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range round {
			tpots[i] = append(tpots[i], r.TPOT)
		}
		rows = round
	}
	for i := range rows {
		m := median(tpots[i])
		rows[i].TPOT = m
		if spread := (maxOf(tpots[i]) - minOf(tpots[i])) / m; spread > 0.25 {
			t.Skipf("%s: TPOT %.3f–%.3f ms over the rounds (%.0f %% apart): the machine is too loaded to rank the children (load %s)",
				rows[i].Name, 1e3*minOf(tpots[i]), 1e3*maxOf(tpots[i]), 100*spread, loadavg())
		}
	}
	rep, err := Validate(a, rows, estimate.DefaultNativeCoeffs().Machines[Machine])
	if err != nil {
		t.Fatal(err)
	}
	var noAttn bool
	for _, k := range rep.Ranking {
		t.Logf("%-13s measured %.3f ms (%.2f×), estimate %.3f ms (%.2f×)", k.Name, 1e3*k.Measured, k.MeasuredRatio, 1e3*k.Estimate, k.EstimateRatio)
		noAttn = noAttn || k.Name == "noattn3"
	}
	t.Logf("Kendall τ %.2f (same order: %v; load %s)", rep.Kendall, rep.RankingAgrees, loadavg())
	if len(rep.Ranking) != 5 || !noAttn {
		t.Fatalf("ranking %+v: want the five children, removed attention included", rep.Ranking)
	}
	if rep.Kendall <= 0 {
		t.Errorf("Kendall τ %.2f: the estimate orders the children no better than chance", rep.Kendall)
	}
}

// loadavg is the machine's load average for the test's messages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// TestInterleave: the held-out points are spread among the fitted ones,
// both in their own order, none lost.
func TestInterleave(t *testing.T) {
	pts := DesignedSweep()
	var fit, held, gaps []int
	last := -1
	for i, p := range pts {
		if p.HeldOut {
			held = append(held, i)
			gaps = append(gaps, i-last)
			last = i
		} else {
			fit = append(fit, i)
		}
	}
	if len(fit) != 48 || len(held) != 18 {
		t.Fatalf("%d fitted and %d held-out points, want 48 and 18", len(fit), len(held))
	}
	for _, g := range gaps[1:] {
		if g < 3 || g > 4 {
			t.Errorf("held-out points at %v: gaps %v, want them spread every 3 to 4 points", held, gaps)
			break
		}
	}
	a := []Point{{Name: "a0"}, {Name: "a1"}, {Name: "a2"}, {Name: "a3"}}
	b := []Point{{Name: "b0"}, {Name: "b1"}}
	var names []string
	for _, p := range interleave(a, b) {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "b0 a0 a1 b1 a2 a3" {
		t.Errorf("interleave: %s", got)
	}
}
