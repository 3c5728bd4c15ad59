package pipeline

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// TestTighten: a budget missed when measured is scaled by
// estimated/measured (a ceiling down, a floor up); a met budget and one the
// measurement does not give (memory measured in-process) are left alone.
func TestTighten(t *testing.T) {
	b := search.Budgets{MaxMemory: 50 << 20, MaxTPOT: 0.003, MaxTTFT: 0.1, MinThroughput: search.Throughput{TokensPerS: 1000}}
	est := search.Costs{Fits: true, MemoryBytes: 48 << 20, TPOT: 0.0028, TTFT: 0.05, OutputTokS: 1100}
	meas := &servebench.Report{Summary: map[string]servebench.Spread{
		"tpot_mean_s": {Median: 0.0035}, "ttft_mean_s": {Median: 0.06}, "output_tokens_per_s": {Median: 880}}}
	nb, r := tighten(b, b, &est, meas)
	if want := []string{"tpot", "throughput"}; !reflect.DeepEqual(r.Missed, want) {
		t.Fatalf("missed %v, want %v (round %+v)", r.Missed, want, r)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }
	if !near(nb.MaxTPOT, 0.003*0.0028/0.0035) || !near(nb.MinThroughput.TokensPerS, 1000*1100.0/880) {
		t.Errorf("tightened TPOT %g s, throughput %g tok/s", nb.MaxTPOT, nb.MinThroughput.TokensPerS)
	}
	if nb.MaxTTFT != b.MaxTTFT || nb.MaxMemory != b.MaxMemory {
		t.Errorf("met or unmeasured budgets changed: TTFT %g, memory %g", nb.MaxTTFT, nb.MaxMemory)
	}
	if _, ok := r.Measured["memory"]; ok || r.Limits["memory"] != b.MaxMemory || r.Estimated["tpot"] != est.TPOT {
		t.Errorf("round record %+v", r)
	}
	meas.PeakRSSBytes = 60 << 20 // measured in a process of its own
	nb, r = tighten(b, b, &est, meas)
	if len(r.Missed) != 3 || !near(nb.MaxMemory, float64(50<<20)*48/60) {
		t.Errorf("with the peak RSS: missed %v, memory budget %g", r.Missed, nb.MaxMemory)
	}
	if _, r = tighten(b, b, &est, &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: 0.0029}}}); len(r.Missed) != 0 {
		t.Errorf("all met: missed %v", r.Missed)
	}
	if n := roundNote(r); n == "" {
		t.Error("empty note")
	}
}

// TestCheckRoundsRechooses: when the measured TPOT is 1.3× the estimate,
// each round re-runs the search with the TPOT budget tightened by
// 1/1.3, until the measured child meets the user's budget or the rounds
// run out; every round is recorded with the limits it was checked against.
func TestCheckRoundsRechooses(t *testing.T) {
	c := DemoConfig()
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	zero := search.Margins{}
	req := search.Request{Parent: tg.arch, GPU: tg.gpu, Engine: tg.engine, ServeOn: tg.serveOn, Workload: tg.workload,
		Budgets: search.Budgets{MaxTPOT: tg.budgets.MaxTPOT}, TP: 1, Strategy: c.Search.Strategy, TopK: 2, Margin: &zero}
	rep, err := search.Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 1.3
	fake := func(rep *search.Report, _ int) (*servebench.Report, error) {
		return &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: slow * rep.Result.Best.Costs.TPOT}}}, nil
	}
	last, rounds, err := checkRounds(context.Background(), &Env{}, req, rep, 3, fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) < 2 {
		t.Fatalf("%d rounds: the first choice's measured TPOT %.4g ms misses %.4g ms, so the search must re-choose", len(rounds), 1e3*slow*rep.Result.Best.Costs.TPOT, 1e3*req.Budgets.MaxTPOT)
	}
	for i, r := range rounds {
		if r.Round != i+1 || r.Measured["tpot"] != slow*r.Estimated["tpot"] {
			t.Errorf("round %+v", r)
		}
		prev := math.Inf(1)
		if i > 0 {
			prev = rounds[i-1].Searched["tpot"]
		}
		if r.Limits["tpot"] != req.Budgets.MaxTPOT || !(r.Searched["tpot"] < prev) && i > 0 {
			t.Errorf("round %d: user limit %g s, searched under %g s (previous round %g s): want the user's, and tighter each round", r.Round, r.Limits["tpot"], r.Searched["tpot"], prev)
		}
	}
	final := rounds[len(rounds)-1]
	if len(final.Missed) == 0 && slow*last.Result.Best.Costs.TPOT > req.Budgets.MaxTPOT {
		t.Errorf("the last round met the budget, but its child's measured TPOT %.4g ms exceeds %.4g ms", 1e3*slow*last.Result.Best.Costs.TPOT, 1e3*req.Budgets.MaxTPOT)
	}
	t.Logf("%d rounds; TPOT estimated %.4g → %.4g ms against %.4g ms", len(rounds), 1e3*rep.Result.Best.Costs.TPOT, 1e3*last.Result.Best.Costs.TPOT, 1e3*req.Budgets.MaxTPOT)
}
