package search

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestParseBudgets: every budget with its units lands in its field, and
// each error names the budget it is about.
func TestParseBudgets(t *testing.T) {
	got, err := ParseBudgets(BudgetText{MaxMemory: "13.96GiB", MaxTTFT: "500ms", MaxTPOT: "40ms", MaxE2E: "11.5s",
		MinThroughput: "2000tok/s", MaxParams: "3B", MaxActiveParams: "500M", P90: true})
	if err != nil {
		t.Fatal(err)
	}
	want := Budgets{MaxMemory: 13.96 * (1 << 30), MaxTTFT: 0.5, MaxTPOT: 0.04, MaxE2E: 11.5, P90: true,
		MinThroughput: Throughput{TokensPerS: 2000}, MaxParams: 3e9, MaxActiveParams: 500e6}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	if !near(got.MaxMemory, want.MaxMemory) || !near(got.MaxTTFT, want.MaxTTFT) || !near(got.MaxTPOT, want.MaxTPOT) ||
		!near(got.MaxE2E, want.MaxE2E) || got.MinThroughput != want.MinThroughput || !near(got.MaxParams, want.MaxParams) ||
		!near(got.MaxActiveParams, want.MaxActiveParams) || !got.P90 {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, tc := range []struct {
		in   BudgetText
		want Budgets
	}{
		{BudgetText{MaxMemory: "900 MiB"}, Budgets{MaxMemory: 900 << 20}},
		{BudgetText{MaxMemory: "16GB"}, Budgets{MaxMemory: 16e9}},
		{BudgetText{MaxTTFT: "250us"}, Budgets{MaxTTFT: 250e-6}},
		{BudgetText{MaxE2E: "2min"}, Budgets{MaxE2E: 120}},
		{BudgetText{MinThroughput: "120req/min"}, Budgets{MinThroughput: Throughput{RequestsPerS: 2}}},
		{BudgetText{MaxParams: "7.5K"}, Budgets{MaxParams: 7500}},
		{BudgetText{MaxParams: "123456"}, Budgets{MaxParams: 123456}},
	} {
		got, err := ParseBudgets(tc.in)
		if err != nil || !near(got.MaxMemory, tc.want.MaxMemory) || !near(got.MaxTTFT, tc.want.MaxTTFT) || !near(got.MaxE2E, tc.want.MaxE2E) ||
			got.MinThroughput != tc.want.MinThroughput || !near(got.MaxParams, tc.want.MaxParams) {
			t.Errorf("%+v: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseBudgetsErrors(t *testing.T) {
	flags := func(name string) string { return "--" + name }
	for _, tc := range []struct {
		in     BudgetText
		budget string
		msg    string
	}{
		{BudgetText{MaxMemory: "12 parsecs"}, BudgetMemory, `--max-memory "12 parsecs": want a positive number with a unit`},
		{BudgetText{MaxMemory: "13.96"}, BudgetMemory, "GiB"},
		{BudgetText{MaxTTFT: "fast"}, BudgetTTFT, "--max-ttft"},
		{BudgetText{MaxTPOT: "40"}, BudgetTPOT, "us, ms, s, min"},
		{BudgetText{MaxE2E: "-1s"}, BudgetE2E, "--max-e2e"},
		{BudgetText{MinThroughput: "2000"}, BudgetThroughput, "tok/s, req/s"},
		{BudgetText{MaxParams: "3Q"}, BudgetParams, "--max-params"},
		{BudgetText{MaxActiveParams: "0B"}, BudgetActiveParams, "--max-active-params"},
		{BudgetText{MaxMemory: "1GiB", MaxTPOT: "bad"}, BudgetTPOT, "--max-tpot"},
		{BudgetText{MaxTTFT: "2s", MaxE2E: "1s"}, BudgetTTFT, "--max-ttft 2s exceeds --max-e2e 1s"},
		{BudgetText{MaxMemory: "1GiB", P90: true}, "p90", "--p90 needs a latency budget"},
	} {
		_, err := ParseBudgets(tc.in)
		var be *BudgetError
		// The library names the budgets; a command spells them as flags.
		if !errors.As(err, &be) || be.Budget != tc.budget || !strings.Contains(be.Spell(flags), tc.msg) {
			t.Errorf("%+v: %v; want a BudgetError for %s saying %q when spelled as flags", tc.in, err, tc.budget, tc.msg)
		} else if strings.Contains(err.Error(), "--") || !strings.Contains(err.Error(), strings.ReplaceAll(tc.msg, "--", "")) {
			t.Errorf("%+v: %q, want the message in the library's names: %q", tc.in, err, strings.ReplaceAll(tc.msg, "--", ""))
		}
	}
	if _, err := ParseBudgets(BudgetText{P90: true}); !errors.Is(err, ErrNoBudget) {
		t.Errorf("no budget: %v, want ErrNoBudget", err)
	}
	var ue *UnitError
	if _, err := ParseBudgets(BudgetText{MaxMemory: "x"}); !errors.As(err, &ue) || ue.Name != BudgetMemory {
		t.Errorf("a bad value wraps the UnitError: %v", err)
	}
}
