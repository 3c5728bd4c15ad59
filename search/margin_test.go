package search

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/workload"
)

func TestParseMargin(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *Margins // nil: auto
		err  string
	}{
		{"", nil, ""},
		{"auto", nil, ""},
		{"0", &Margins{}, ""},
		{"10%", &Margins{Memory: 0.1, TTFT: 0.1, TPOT: 0.1, E2E: 0.1, Throughput: 0.1}, ""},
		{"0.15", &Margins{Memory: 0.15, TTFT: 0.15, TPOT: 0.15, E2E: 0.15, Throughput: 0.15}, ""},
		{"tpot=15%, memory=0.05", &Margins{TPOT: 0.15, Memory: 0.05}, ""},
		{"throughput=20%,ttft=1%,e2e=2%", &Margins{Throughput: 0.2, TTFT: 0.01, E2E: 0.02}, ""},
		{"-5%", nil, "between 0 and 100"},
		{"150%", nil, "between 0 and 100"},
		{"ten", nil, "fraction"},
		{"params=5%", nil, "unknown cost"},
		{"tpot", nil, "fraction"},
		{"tpot=5%,memory", nil, "NAME=VALUE"},
		{"NaN", nil, "between 0 and 100"},
	} {
		got, err := ParseMargin(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if (got == nil) != (tc.want == nil) {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
			continue
		}
		if got == nil {
			continue
		}
		g, w := *got, *tc.want
		g.Source, w.Source = "", ""
		for _, d := range [][2]float64{{g.Memory, w.Memory}, {g.TTFT, w.TTFT}, {g.TPOT, w.TPOT}, {g.E2E, w.E2E}, {g.Throughput, w.Throughput}} {
			if math.Abs(d[0]-d[1]) > 1e-12 {
				t.Errorf("%q: got %+v, want %+v", tc.in, g, w)
				break
			}
		}
	}
}

func FuzzParseMargin(f *testing.F) {
	for _, s := range []string{"auto", "0", "10%", "tpot=15%,memory=5%", "e2e=", "=", "1e-3%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMargin(s)
		if err != nil || m == nil {
			return
		}
		for _, x := range []float64{m.Memory, m.TTFT, m.TPOT, m.E2E, m.Throughput} {
			if !(x >= 0 && x <= 1) {
				t.Fatalf("%q: margin %v out of [0, 1]", s, x)
			}
		}
	})
}

// TestMarginsInUsage: a margin multiplies each ceiling's usage by 1 +
// margin and divides the throughput estimate by it; parameters have none.
func TestMarginsInUsage(t *testing.T) {
	c := Costs{Fits: true, MemoryBytes: 95, TPOT: 0.0095, OutputTokS: 1050, Params: 90}
	b := Budgets{MaxMemory: 100, MaxTPOT: 0.01, MinThroughput: Throughput{TokensPerS: 1000}, MaxParams: 100}
	if !b.Meets(&c) {
		t.Fatal("without a margin the costs meet the budgets")
	}
	for _, tc := range []struct {
		m    Margins
		meet bool
		bind string
	}{
		{Margins{Memory: 0.05}, true, BudgetMemory},         // 95 × 1.05 = 99.75
		{Margins{Memory: 0.06}, false, BudgetMemory},        // 100.7
		{Margins{TPOT: 0.06}, false, BudgetTPOT},            // 10.07 ms
		{Margins{Throughput: 0.04}, true, BudgetThroughput}, // 1050 / 1.04 = 1009.6 tok/s
		{Margins{Throughput: 0.06}, false, BudgetThroughput},
	} {
		mb := b
		mb.Margin = &tc.m
		if got := mb.Meets(&c); got != tc.meet {
			t.Errorf("margins %+v: meets %v, want %v", tc.m, got, tc.meet)
		}
		if name, _ := mb.Binding(&c); name != tc.bind {
			t.Errorf("margins %+v: binding %s, want %s", tc.m, name, tc.bind)
		}
	}
}

// TestDefaultMargins: the native engine's margins are its calibration's
// held-out errors; a GPU engine's are the family's p90 error bands (the
// figures estimate --json reports), with no memory margin.
func TestDefaultMargins(t *testing.T) {
	w := workload.FixedClosed(128, 64, 4)
	m, err := DefaultMargins(gpu(t, "cpu-local"), estimate.Native, &w)
	if err != nil {
		t.Fatal(err)
	}
	c, err := estimate.Compile(gpu(t, "cpu-local"), estimate.Native, estimate.Options{}, &w, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := c.NativeCoeffs()
	if m.Memory != n.ErrMemory || m.TPOT != n.ErrTPOT || m.TTFT != n.ErrTTFT || m.Throughput != n.ErrThroughput || m.E2E != math.Max(n.ErrTTFT, n.ErrTPOT) {
		t.Errorf("native margins %+v, calibration %+v", m, n)
	}
	if m.TPOT <= 0 || m.Memory <= 0 {
		t.Errorf("native margins %+v: the committed calibration has held-out errors", m)
	}
	chat := wl(t, "chat")
	g, err := DefaultMargins(gpu(t, "h100-sxm"), estimate.VLLM, chat)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := estimate.Compile(gpu(t, "h100-sxm"), estimate.VLLM, estimate.Options{}, chat, nil)
	if err != nil {
		t.Fatal(err)
	}
	class := estimate.ErrorClass{Family: gc.Family(), GPUClass: "datacenter", Metric: "tpot", Regime: estimate.Regime(chat.Concurrency)}
	wantTPOT, _, ok := estimate.DefaultMarginFile().MarginFor(class, MarginQuantile)
	if !ok || g.Memory != 0 || g.TPOT != wantTPOT || g.TPOT <= 0 || !strings.Contains(g.Source, "q90") || !strings.Contains(g.Source, "datacenter") {
		t.Errorf("vLLM margins %+v: want the q90 of class %+v, %g", g, class, wantTPOT)
	}
}

// TestMarginsFitTheClass: the default margins of a GPU deployment are the
// held-out shortfall of its class — its own rows where it has enough,
// else pooled over GPU classes (a consumer card, with no held-out rows of
// its own, says so), larger at q90 than at q50; E2E follows the parent's
// TTFT share between the TTFT and TPOT margins; "q80" asks for another
// quantile; a family without held-out rows keeps its coefficients' band.
func TestMarginsFitTheClass(t *testing.T) {
	chat := wl(t, "chat")
	q90, err := DefaultMargins(gpu(t, "h100-sxm"), estimate.VLLM, chat)
	if err != nil {
		t.Fatal(err)
	}
	q50, err := DefaultMarginsFor(gpu(t, "h100-sxm"), estimate.VLLM, chat, nil, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if !(q50.TTFT < q90.TTFT) || !(q50.TPOT < q90.TPOT) || !strings.Contains(q50.Source, "q50") {
		t.Errorf("q50 %+v, q90 %+v", q50, q90)
	}
	rtx, err := DefaultMargins(gpu(t, "rtx-5080"), estimate.VLLM, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rtx.Source, "no consumer rows held out") || !(rtx.TPOT > 0) {
		t.Errorf("rtx-5080 margins %+v", rtx)
	}
	p := embedded(t)
	withParent, err := DefaultMarginsFor(gpu(t, "h100-sxm"), estimate.VLLM, chat, p, MarginQuantile)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := math.Min(withParent.TTFT, withParent.TPOT), math.Max(withParent.TTFT, withParent.TPOT)
	if withParent.E2E < lo || withParent.E2E > hi || !strings.Contains(withParent.Source, "TTFT share") {
		t.Errorf("E2E margin %g outside [%g, %g]: %s", withParent.E2E, lo, hi, withParent.Source)
	}
	m, err := ParseMargin("q80")
	if err != nil || m == nil || m.Quantile != 0.8 {
		t.Errorf("q80: %+v, %v", m, err)
	}
	ll, err := DefaultMargins(gpu(t, "rtx-4090"), estimate.LlamaCPP, chat)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ll.Source, "p90 held-out error") {
		t.Errorf("llama.cpp margins %+v: want the coefficients' band (no held-out class rows)", ll)
	}
}

// TestExecuteKeepsTheMargin: with the default margin the chosen child's
// binding estimate stays within the limit less the margin, where without
// one the search fills the limit closer; the summary says which margins.
func TestExecuteKeepsTheMargin(t *testing.T) {
	p := embedded(t)
	w := workload.FixedClosed(128, 64, 4)
	hw := gpu(t, "cpu-local")
	caps, _ := export.ForEngine(estimate.Native)
	par := parentCosts(t, p, "cpu-local", estimate.Native, &w)
	// Over a range of budgets, the margin must keep every child within the
	// limit less the margin, and must change the choice somewhere (where
	// the child chosen without it fills the budget past that).
	var with *Report
	changed := 0
	// (The engine settings alone, fewer native slots, take the parent
	// some way below its default TPOT: the range goes past that.)
	for _, frac := range []float64{0.95, 0.85, 0.75, 0.65, 0.55, 0.45, 0.4, 0.35} {
		b := Budgets{MaxTPOT: frac * par.TPOT}
		req := Request{Parent: p, GPU: hw, Engine: estimate.Native, ServeOn: caps, Workload: &w, Budgets: b, TP: 1, Strategy: AutoCompress, TopK: 2}
		r, err := Execute(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		req.Margin = &Margins{}
		without, err := Execute(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		m := r.Budgets.Margin
		if m == nil || m.TPOT <= 0 {
			t.Fatalf("default margin %+v", m)
		}
		tw, tn := r.Result.Best.Costs.TPOT, without.Result.Best.Costs.TPOT
		if tw*(1+m.TPOT) > b.MaxTPOT || tn > b.MaxTPOT {
			t.Errorf("budget %.0f %% of the parent: TPOT %.4g ms with a %.1f %% margin, %.4g ms without, budget %.4g ms", 100*frac, 1e3*tw, 100*m.TPOT, 1e3*tn, 1e3*b.MaxTPOT)
		}
		if tn*(1+m.TPOT) > b.MaxTPOT {
			changed++
		}
		with = r
	}
	if changed == 0 {
		t.Error("the margin changed no choice over eight budgets")
	}
	sum := with.Summarize()
	if sum.Margins == nil || sum.Margins.TPOT != with.Budgets.Margin.TPOT || !strings.Contains(strings.Join(sum.Notes, "\n"), "max-tpot +") {
		t.Errorf("summary margins %+v, notes %q", sum.Margins, sum.Notes)
	}
	if why := strings.Join(with.Why(), "\n"); !strings.Contains(why, "margin for the estimator's error") {
		t.Errorf("why %q does not mention the margin", why)
	}
}
