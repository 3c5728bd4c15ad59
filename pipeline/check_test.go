package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/report"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// TestTighten: a budget missed when measured is scaled by
// estimated/measured (a ceiling down, a floor up); a met budget and one the
// measurement does not give (memory measured in-process) are left alone.
func TestTighten(t *testing.T) {
	b := search.Budgets{MaxMemory: 50 << 20, MaxTPOT: 0.003, MaxTTFT: 0.1, MinThroughput: search.Throughput{TokensPerS: 1000}}
	est := search.Costs{Fits: true, MemoryBytes: 48 << 20, TPOT: 0.0028, TTFT: 0.05, OutputTokS: 1100}
	rep := &servebench.Report{Summary: map[string]servebench.Spread{
		"tpot_mean_s": {Median: 0.0035}, "ttft_mean_s": {Median: 0.06}, "output_tokens_per_s": {Median: 880}}}
	meas := combine(t, rep)
	nb, r, _ := brackets{}.rechoose(b, b, &est, meas)
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
	rep.PeakRSSBytes = 60 << 20 // measured in a process of its own
	nb, r, _ = brackets{}.rechoose(b, b, &est, combine(t, rep))
	if len(r.Missed) != 3 || !near(nb.MaxMemory, float64(50<<20)*48/60) {
		t.Errorf("with the peak RSS: missed %v, memory budget %g", r.Missed, nb.MaxMemory)
	}
	if _, r, _ = (brackets{}).rechoose(b, b, &est, combine(t, &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: 0.0029}}})); len(r.Missed) != 0 {
		t.Errorf("all met: missed %v", r.Missed)
	}
	if n := roundNote(r, budgetViews(b)); n == "" {
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
		Budgets: search.Budgets{MaxTPOT: tg.budgets.MaxTPOT, MinThroughput: tg.budgets.MinThroughput}, TP: 1, Strategy: c.Search.Strategy, TopK: 2, Margin: &zero}
	rep, err := search.Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 1.3
	fake := func(rep *search.Report, _ int) (*servebench.Invocations, error) {
		return combine(t, &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: slow * rep.Result.Best.Costs.TPOT}}}), nil
	}
	last, rounds, err := checkRounds(context.Background(), &Env{}, req, req.Budgets, rep, 3, fake)
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

// demoTPOTRequest is the search request of the demo's deployment under
// its TPOT and throughput budgets (the throughput floor keeps the parent
// served one sequence at a time from meeting the TPOT budget by itself),
// without margins, and the search's first choice.
func demoTPOTRequest(t *testing.T) (search.Request, *search.Report) {
	t.Helper()
	c := DemoConfig()
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	zero := search.Margins{}
	req := search.Request{Parent: tg.arch, GPU: tg.gpu, Engine: tg.engine, ServeOn: tg.serveOn, Workload: tg.workload,
		Budgets: search.Budgets{MaxTPOT: tg.budgets.MaxTPOT, MinThroughput: tg.budgets.MinThroughput}, TP: 1, Strategy: c.Search.Strategy, TopK: 2, Margin: &zero}
	rep, err := search.Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return req, rep
}

// chosenRound is the one round marked Chosen, failing the test unless
// exactly one is.
func chosenRound(t *testing.T, rounds []Round) Round {
	t.Helper()
	var out []Round
	for _, r := range rounds {
		if r.Chosen {
			out = append(out, r)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d rounds marked chosen of %+v", len(out), rounds)
	}
	return out[0]
}

// TestCheckRoundsLoosens: when the first child measures far below its
// budget (TPOT 0.2 × the estimate, as on a host 5× faster than the
// coefficients' one), the re-choice loosens the limit by
// estimated/measured and keeps a larger child that still meets the
// user's budget measured, and stops once the limit no longer moves.
func TestCheckRoundsLoosens(t *testing.T) {
	req, rep := demoTPOTRequest(t)
	const fast = 0.2
	measured := 0
	fake := func(rep *search.Report, _ int) (*servebench.Invocations, error) {
		measured++
		return combine(t, &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: fast * rep.Result.Best.Costs.TPOT}}}), nil
	}
	const maxRounds = 4
	last, rounds, err := checkRounds(context.Background(), &Env{}, req, req.Budgets, rep, maxRounds, fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) < 2 || len(rounds) > maxRounds+1 {
		t.Fatalf("%d rounds, want 2 to %d: the first child measured %.3g of its budget and the re-choice must loosen", len(rounds), maxRounds+1, fast*rep.Result.Best.Costs.TPOT/req.Budgets.MaxTPOT)
	}
	if rounds[0].Step["tpot"] != "loosen" || !(rounds[0].Next["tpot"] > req.Budgets.MaxTPOT) {
		t.Errorf("round 1 step %q to %g s: want loosen past the user's %g s", rounds[0].Step["tpot"], rounds[0].Next["tpot"], req.Budgets.MaxTPOT)
	}
	if first, final := rep.Result.Best.Costs.Params, last.Result.Best.Costs.Params; !(final > first) {
		t.Errorf("final child %.0f parameters, first choice %.0f: want larger after loosening", final, first)
	}
	if ch := chosenRound(t, rounds); len(ch.Missed) != 0 || fast*last.Result.Best.Costs.TPOT > req.Budgets.MaxTPOT {
		t.Errorf("kept round %+v: want one that meets the user's budget", ch)
	}
	if measured > len(rounds) {
		t.Errorf("%d measurements for %d rounds", measured, len(rounds))
	}
	checkJudgedWhy(t, req, last)
	t.Logf("%d rounds, %d measured; params %.0f → %.0f", len(rounds), measured, rep.Result.Best.Costs.Params, last.Result.Best.Costs.Params)
}

// TestCheckRoundsBisects: a host where children up to an estimated TPOT
// run fast (0.3 × the estimate) and larger ones miss the budget (a cache
// cliff): the first loosening overshoots, and the re-choice bisects
// between the loosest limit that measured met and the tightest that
// missed, within the rounds allowed, keeping a child that met.
func TestCheckRoundsBisects(t *testing.T) {
	req, rep := demoTPOTRequest(t)
	lim, first := req.Budgets.MaxTPOT, rep.Result.Best.Costs.TPOT
	// The cliff lies between the first choice and the child a loosened
	// search (3.3×, as 0.3 × the estimate calls for) would choose.
	loose := req
	loose.Budgets.MaxTPOT = lim / 0.3
	big, err := search.Execute(context.Background(), loose)
	if err != nil {
		t.Fatal(err)
	}
	cliff := (first + big.Result.Best.Costs.TPOT) / 2
	if !(big.Result.Best.Costs.TPOT > first) {
		t.Fatalf("the loosened search chose TPOT %g, the first %g: no room to loosen", big.Result.Best.Costs.TPOT, first)
	}
	fake := func(rep *search.Report, _ int) (*servebench.Invocations, error) {
		m := 0.3 * rep.Result.Best.Costs.TPOT
		if rep.Result.Best.Costs.TPOT > cliff {
			m = 1.5 * lim
		}
		return combine(t, &servebench.Report{Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: m}}}), nil
	}
	const maxRounds = 6
	last, rounds, err := checkRounds(context.Background(), &Env{}, req, req.Budgets, rep, maxRounds, fake)
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) > maxRounds+1 {
		t.Fatalf("%d rounds, at most %d allowed", len(rounds), maxRounds+1)
	}
	var bisected, missed bool
	for i, r := range rounds {
		missed = missed || len(r.Missed) > 0
		if r.Step["tpot"] != "bisect" {
			continue
		}
		bisected = true
		lo, hi := 0.0, math.Inf(1)
		for _, q := range rounds[:i+1] {
			if len(q.Missed) == 0 {
				lo = math.Max(lo, q.Searched["tpot"])
			} else {
				hi = math.Min(hi, q.Searched["tpot"])
			}
		}
		if !(r.Next["tpot"] > lo && r.Next["tpot"] < hi) {
			t.Errorf("round %d bisected to %g s, outside (%g, %g)", r.Round, r.Next["tpot"], lo, hi)
		}
	}
	if !missed || !bisected {
		t.Fatalf("rounds %+v: want a loosened child past the cliff that missed, then bisection", rounds)
	}
	ch := chosenRound(t, rounds)
	if len(ch.Missed) != 0 || last.Result.Best.Costs.TPOT > cliff {
		t.Errorf("kept round %d (missed %v), its child estimated %.4g ms against the cliff at %.4g ms", ch.Round, ch.Missed, 1e3*last.Result.Best.Costs.TPOT, 1e3*cliff)
	}
	if !(last.Result.Best.Costs.Params >= rep.Result.Best.Costs.Params) {
		t.Errorf("kept %.0f parameters, fewer than the first choice's %.0f", last.Result.Best.Costs.Params, rep.Result.Best.Costs.Params)
	}
	checkJudgedWhy(t, req, last)
	for _, r := range rounds {
		t.Logf("round %d: searched %.4g ms, estimated %.4g, measured %.4g, %s to %.4g ms (reused %d, chosen %v)", r.Round,
			1e3*r.Searched["tpot"], 1e3*r.Estimated["tpot"], 1e3*r.Measured["tpot"], r.Step["tpot"], 1e3*r.Next["tpot"], r.ReusedFrom, r.Chosen)
	}
}

// combine is servebench.Combine of reports, failing the test on an error.
func combine(t *testing.T, reps ...*servebench.Report) *servebench.Invocations {
	t.Helper()
	inv, err := servebench.Combine(reps)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// invocationsOf is a fake measurer: invocation i reports TPOT tpot[i-1] and
// throughput tps[i-1] (each its median over runs that agree) and peak
// memory rss[i-1].
func invocationsOf(tpot, tps []float64, rss []int64) func(ctx context.Context, i int) (*servebench.Report, error) {
	return func(_ context.Context, i int) (*servebench.Report, error) {
		r := &servebench.Report{Model: "child", Workload: "w", PeakRSSBytes: rss[i-1], Summary: map[string]servebench.Spread{
			"tpot_mean_s": {Median: tpot[i-1]}, "output_tokens_per_s": {Median: tps[i-1]}}}
		return r, nil
	}
}

// TestMeasureRepeated: k separate invocations, each asked for once and in
// order; the combination keeps every invocation's figure and judges on the
// worst; cancellation during the pause between invocations stops at once.
func TestMeasureRepeated(t *testing.T) {
	var asked []int
	fake := invocationsOf([]float64{1e-3, 3e-3, 2e-3}, []float64{900, 300, 450}, []int64{40 << 20, 42 << 20, 41 << 20})
	inv, err := measureRepeated(context.Background(), &Env{}, 3, 0, func(ctx context.Context, i int) (*servebench.Report, error) {
		asked = append(asked, i)
		return fake(ctx, i)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(asked, []int{1, 2, 3}) || len(inv.Reports) != 3 {
		t.Fatalf("invocations asked %v, reports %d", asked, len(inv.Reports))
	}
	if w, _ := inv.Conservative("tpot_mean_s"); w != 3e-3 {
		t.Errorf("conservative TPOT %g, want the worst invocation's 3 ms", w)
	}
	if w, _ := inv.Conservative("output_tokens_per_s"); w != 300 {
		t.Errorf("conservative throughput %g, want the worst invocation's 300", w)
	}
	if u := inv.Unstable(UnstableTolerance); !reflect.DeepEqual(u, []string{"output_tokens_per_s", "tpot_mean_s"}) {
		t.Errorf("unstable %v", u)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err = measureRepeated(ctx, &Env{}, 3, time.Hour, func(ctx context.Context, i int) (*servebench.Report, error) {
		n++
		cancel()
		return fake(ctx, i)
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("cancelled during the pause: err %v after %d invocations", err, n)
	}
}

// TestDecisionsUseTheWorstInvocation: the measured re-choice and the final
// budget check act on the worst of the invocations, not on their median or
// on the first: invocations measuring TPOT 0.8, 1.4 and 0.9 × the limit
// miss a TPOT budget (the round tightens it by estimated/worst), and the
// report's row says missed with the range; a throughput floor is judged on
// the smallest invocation.
func TestDecisionsUseTheWorstInvocation(t *testing.T) {
	const lim = 0.002
	b := search.Budgets{MaxTPOT: lim, MinThroughput: search.Throughput{TokensPerS: 500}, MaxMemory: 50 << 20}
	est := search.Costs{Fits: true, TPOT: 0.9 * lim, OutputTokS: 600, MemoryBytes: 45 << 20}
	inv, err := measureRepeated(context.Background(), &Env{}, 3, 0,
		invocationsOf([]float64{0.8 * lim, 1.4 * lim, 0.9 * lim}, []float64{700, 480, 650}, []int64{44 << 20, 46 << 20, 45 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	nb, r, _ := brackets{}.rechoose(b, b, &est, inv)
	if !reflect.DeepEqual(r.Missed, []string{"tpot", "throughput"}) {
		t.Fatalf("missed %v: the worst invocation misses TPOT and throughput (their medians meet both)", r.Missed)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }
	if !near(nb.MaxTPOT, lim*0.9/1.4) || !near(nb.MinThroughput.TokensPerS, 500*600.0/480) || nb.MaxMemory != b.MaxMemory {
		t.Errorf("tightened TPOT %g (want %g), throughput %g (want %g), memory %g", nb.MaxTPOT, lim*0.9/1.4, nb.MinThroughput.TokensPerS, 500*600.0/480, nb.MaxMemory)
	}
	if r.Measured["tpot"] != 1.4*lim || !reflect.DeepEqual(r.Invocations["tpot"], []float64{0.8 * lim, 1.4 * lim, 0.9 * lim}) || !near(r.Spread["tpot"], 0.6/0.9) {
		t.Errorf("round record: measured %g, invocations %v, spread %g", r.Measured["tpot"], r.Invocations["tpot"], r.Spread["tpot"])
	}
	if n := roundNote(r, budgetViews(b)); !strings.Contains(n, "worst of 3 invocations") || !strings.Contains(n, "unstable on this machine") {
		t.Errorf("round note %q", n)
	}

	sum := &search.Summary{}
	sum.Chosen.Costs, sum.Parent.Costs = est, search.Costs{TPOT: 2 * lim, OutputTokS: 300, MemoryBytes: 80 << 20}
	rows := budgetRows(budgetViews(b), b, sum, inv)
	byName := map[string]report.Budget{}
	for _, row := range rows {
		byName[row.Name] = row
	}
	tp, th, mem := byName["tpot"], byName["throughput"], byName["memory"]
	if tp.Measured == nil || *tp.Measured != 1.4*lim*1e3 || tp.Met(*tp.Measured) || tp.Invocations != 3 || !tp.Unstable(report.Tolerance) {
		t.Errorf("TPOT row %+v: want the worst invocation (2.8 ms), missed, unstable", tp)
	}
	if *tp.MeasuredMin != 0.8*lim*1e3 || *tp.MeasuredMax != 1.4*lim*1e3 || *tp.MeasuredMedian != 0.9*lim*1e3 {
		t.Errorf("TPOT row range %g–%g, median %g", *tp.MeasuredMin, *tp.MeasuredMax, *tp.MeasuredMedian)
	}
	if th.Measured == nil || *th.Measured != 480 || th.Met(*th.Measured) {
		t.Errorf("throughput row %+v: want the smallest invocation (480), missed", th)
	}
	if mem.Measured == nil || *mem.Measured != 46 || !mem.Met(*mem.Measured) || mem.Unstable(report.Tolerance) {
		t.Errorf("memory row %+v: want the largest invocation (46 MiB), met, stable", mem)
	}
}

// TestRelativeBudgets: a budget given as a multiple of the parent's figure
// ("0.6x") is resolved on the parent's estimate when the config is read
// and on the parent measured on this host (the worst invocation) in the
// search stage; absolute budgets and throughput units are left alone, and
// a malformed multiple names its field.
func TestRelativeBudgets(t *testing.T) {
	abs, rel, err := splitRelative(Budgets{MaxMemory: "0.8x", MaxTPOT: " 0.6x ", MinThroughput: "2000tok/s", MaxParams: "3M"})
	if err != nil || !reflect.DeepEqual(rel, relative{"memory": 0.8, "tpot": 0.6}) || abs.MaxMemory != "" || abs.MaxTPOT != "" || abs.MinThroughput != "2000tok/s" {
		t.Fatalf("split: %+v, %v, %v", abs, rel, err)
	}
	for _, bad := range []string{"0x", "-1x", "abcx", "1e9x"} {
		var ce *ConfigError
		if _, _, err := splitRelative(Budgets{MaxTPOT: bad}); !errors.As(err, &ce) || ce.Path != "budgets.max_tpot" {
			t.Errorf("%q: %v", bad, err)
		}
	}

	c := DemoConfig()
	c.Budgets.MaxMemory, c.Budgets.MaxTPOT, c.Budgets.MinThroughput = "0.8x", "0.6x", "" // two relative budgets
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	fig, err := parentEstimated(tg)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	if !near(tg.budgets.MaxTPOT, 0.6*fig["tpot"]) || !near(tg.budgets.MaxMemory, 0.8*fig["memory"]) || len(tg.relative) != 2 {
		t.Errorf("resolved on the estimate: TPOT %g (parent %g), memory %g (parent %g)", tg.budgets.MaxTPOT, fig["tpot"], tg.budgets.MaxMemory, fig["memory"])
	}

	inv := combine(t,
		&servebench.Report{PeakRSSBytes: 60 << 20, Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: 0.004}}},
		&servebench.Report{PeakRSSBytes: 62 << 20, Summary: map[string]servebench.Spread{"tpot_mean_s": {Median: 0.005}}})
	meas := parentMeasured(tg.relative, inv, false)
	b := tg.budgets
	rb, err := tg.relative.apply(&b, meas, "measured")
	if err != nil {
		t.Fatal(err)
	}
	if !near(b.MaxTPOT, 0.6*0.005) || !near(b.MaxMemory, 0.8*float64(62<<20)) || rb.Source != "measured" || rb.Parent["tpot"] != 0.005 {
		t.Errorf("resolved on the measurement: TPOT %g, memory %g, record %+v", b.MaxTPOT, b.MaxMemory, rb)
	}
	if _, err := tg.relative.apply(&b, map[string]float64{"tpot": 0.005}, "measured"); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("a figure missing: %v", err)
	}
}

// TestSearchStageNamesTheCalibration: the search stage's inputs name the
// native calibration it prices with, so that a run directory searched
// under another host's coefficients is searched again under this host's
// (a quick probe made active by the run command).
func TestSearchStageNamesTheCalibration(t *testing.T) {
	params := func() string {
		st, err := Stages(DemoConfig(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Name == StageSearch {
				b, err := json.Marshal(s.Params)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
		}
		t.Fatal("no search stage")
		return ""
	}
	before := params()
	f, src, err := estimate.ActiveNativeCoeffs()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before, src) {
		t.Errorf("search stage params %s do not name the calibration %s", before, src)
	}
	restore := estimate.UseNativeCoeffs(f, "/probe/this-host.json")
	defer restore()
	if after := params(); after == before || !strings.Contains(after, "/probe/this-host.json") {
		t.Errorf("another calibration, the same search stage inputs: %s", after)
	}
}

// checkJudgedWhy: the report of a re-chosen round names the user's TPOT
// limit as the binding budget, and the limit it was searched under beside
// it when the rounds moved it.
func checkJudgedWhy(t *testing.T, req search.Request, last *search.Report) {
	t.Helper()
	why := strings.Join(last.Why(), "\n")
	user := req.Budgets.Format("max-tpot", req.Budgets.MaxTPOT)
	searched := last.Budgets.Format("max-tpot", last.Budgets.MaxTPOT)
	var want []string
	switch {
	case last.Result.ParentMeets:
		want = []string{"max-tpot " + user}
		if user != searched {
			want = append(want, "searched under max-tpot "+searched)
		}
	case last.Result.Binding != "max-tpot":
		// Another budget binds (the throughput floor): the why names it.
		want = []string{"binding budget: --" + last.Result.Binding + " "}
	case user == searched:
		want = []string{"binding budget: --max-tpot " + user + ";"}
	default:
		want = []string{"binding budget: --max-tpot " + user + " (searched under " + searched}
	}
	for _, w := range want {
		if !strings.Contains(why, w) {
			t.Errorf("why:\n%s\nwant it to contain %q", why, w)
		}
	}
}
