package servebench

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestAcrossValues: the conservative figure is the worst invocation in the
// metric's direction; median, range and spread are worked out by hand.
func TestAcrossValues(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		xs                         []float64
		higher                     bool
		median, worst, lo, hi, spr float64
	}{
		{"latency, bimodal", []float64{0.85e-3, 3.08e-3, 2.22e-3}, false, 2.22e-3, 3.08e-3, 0.85e-3, 3.08e-3, (3.08 - 0.85) / 2.22},
		{"throughput, bimodal", []float64{2029, 1361, 1683}, true, 1683, 1361, 1361, 2029, (2029.0 - 1361) / 1683},
		{"two invocations", []float64{10, 12}, false, 11, 12, 10, 12, 2.0 / 11},
		{"two invocations, rate", []float64{10, 12}, true, 11, 10, 10, 12, 2.0 / 11},
		{"one invocation", []float64{7}, true, 7, 7, 7, 7, 0},
		{"agreeing", []float64{5, 5, 5}, false, 5, 5, 5, 5, 0},
	} {
		a := AcrossValues(tc.xs, tc.higher)
		got := []float64{a.Median, a.Worst, a.Min, a.Max, a.Spread}
		want := []float64{tc.median, tc.worst, tc.lo, tc.hi, tc.spr}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, math.Abs(want[i])) {
				t.Errorf("%s: median, worst, min, max, spread = %v, want %v", tc.name, got, want)
				break
			}
		}
		if !reflect.DeepEqual(a.Invocations, tc.xs) {
			t.Errorf("%s: invocations %v, want %v in order", tc.name, a.Invocations, tc.xs)
		}
	}
	if a := AcrossValues(nil, false); a.Invocations != nil || a.Worst != 0 {
		t.Errorf("empty: %+v", a)
	}
}

func fakeReport(tpot, tps float64, rss int64) *Report {
	r := &Report{Model: "m", Workload: "w", Requests: 8, MaxNumSeqs: 1, MaxBatchedTokens: 512, PeakRSSBytes: rss}
	for _, f := range []float64{0.98, 1, 1.02} {
		r.Runs = append(r.Runs, RunStats{TPOT: Stat{Mean: f * tpot, P90: 1.1 * f * tpot}, TTFT: Stat{Mean: 0.01, P90: 0.012},
			E2E: Stat{Mean: 0.1, P90: 0.11}, OutputTPS: f * tps, TotalTPS: 2 * f * tps, RequestsPS: f * tps / 64, OutputPerCPU: tps})
	}
	r.aggregate()
	return r
}

// TestCombine: per metric, each invocation's median over its runs, the
// worst in the metric's direction, and the unstable metrics; memory only
// where every invocation measured it; different measurements refused.
func TestCombine(t *testing.T) {
	reps := []*Report{fakeReport(1e-3, 900, 40<<20), fakeReport(3e-3, 300, 48<<20), fakeReport(2e-3, 450, 44<<20)}
	inv, err := Combine(reps)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for _, tc := range []struct {
		key   string
		worst float64
	}{
		{"tpot_mean_s", 3e-3}, {"tpot_p90_s", 3.3e-3}, {"output_tokens_per_s", 300}, {"total_tokens_per_s", 600},
		{"requests_per_s", 300.0 / 64}, {PeakRSSKey, 48 << 20}, {"ttft_mean_s", 0.01},
	} {
		w, ok := inv.Conservative(tc.key)
		if !ok || !near(w, tc.worst) {
			t.Errorf("%s: conservative %v (%v), want %v", tc.key, w, ok, tc.worst)
		}
	}
	if a := inv.Summary["tpot_mean_s"]; !near(a.Median, 2e-3) || len(a.Invocations) != 3 || !near(a.Invocations[1], 3e-3) {
		t.Errorf("tpot across invocations %+v", a)
	}
	got := inv.Unstable(0.10)
	for _, k := range []string{"tpot_mean_s", "output_tokens_per_s", PeakRSSKey} {
		if !strings.Contains(strings.Join(got, ","), k) {
			t.Errorf("unstable %v lacks %s", got, k)
		}
	}
	for _, k := range got {
		if strings.HasPrefix(k, "ttft") || strings.HasPrefix(k, "e2e") {
			t.Errorf("unstable %v lists %s, whose invocations agree", got, k)
		}
	}
	if inv.First() != reps[0] {
		t.Error("First is not the first invocation")
	}

	reps[1].PeakRSSBytes = 0
	if inv, _ = Combine(reps); func() bool { _, ok := inv.Conservative(PeakRSSKey); return ok }() {
		t.Error("memory combined although an invocation did not measure it")
	}
	if _, err := Combine(nil); !errors.Is(err, ErrNoInvocations) {
		t.Errorf("no invocations: %v", err)
	}
	other := fakeReport(1e-3, 900, 1)
	other.MaxNumSeqs = 4
	if _, err := Combine([]*Report{reps[0], other}); err == nil || !strings.Contains(err.Error(), "invocation 2") {
		t.Errorf("different settings combined: %v", err)
	}
}
