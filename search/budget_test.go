package search

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/workload"
)

// withToyBudget adds a toy budget kind, "max-weights" (the weights' bytes,
// a ceiling with no margin), from one BudgetKinds entry whose limit is
// *limit, for the length of the test.
func withToyBudget(t *testing.T, limit *float64) {
	t.Helper()
	old := BudgetKinds
	BudgetKinds = append(BudgetKinds[:len(old):len(old)], BudgetKind{Name: "max-weights", Cost: "weight bytes", Unit: "bytes",
		Limit:  func(*Budgets) float64 { return *limit },
		Value:  func(_ *Budgets, c *Costs) float64 { return c.WeightsBytes },
		Format: func(_ *Budgets, v float64) string { return FormatBytes(v) },
		Hints: func(*Budgets, *estimate.Hints) []Hint {
			return []Hint{{Text: "a lower precision", Setting: SettingPrecision}}
		}})
	t.Cleanup(func() { BudgetKinds = old })
}

// TestToyBudget: a budget kind added as one table entry is set, met,
// binding, described, priced by a search and named when out of reach,
// with nothing else changed.
func TestToyBudget(t *testing.T) {
	limit := 0.0
	withToyBudget(t, &limit)
	var b Budgets
	if b.Any() {
		t.Fatal("no limit: the toy budget is set")
	}
	limit = 100
	c := Costs{Fits: true, WeightsBytes: 90}
	if got := b.Set(); len(got) != 1 || got[0] != "max-weights" {
		t.Fatalf("Set() = %q", got)
	}
	if !b.Meets(&c) {
		t.Error("90 bytes of weights do not meet a 100-byte budget")
	}
	if name, u := b.Binding(&c); name != "max-weights" || u != 0.9 {
		t.Errorf("binding %s %g, want max-weights 0.9", name, u)
	}
	if b.Margin.Of("max-weights") != 0 {
		t.Error("the toy budget has a margin")
	}
	if s := b.String(); s != "max-weights 0.0 MiB" {
		t.Errorf("String() = %q", s)
	}
	c.WeightsBytes = 110
	if b.Meets(&c) {
		t.Error("110 bytes of weights meet a 100-byte budget")
	}

	// A search under it: the parent's weights, then a tenth of them.
	m := embedded(t)
	w := &workload.Workload{Input: workload.FixedLength(128), Output: workload.FixedLength(32), Concurrency: 1, Seed: 1}
	pc := parentCosts(t, m, "cpu-local", estimate.Native, w)
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native})
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(m, nil)
	run := func() (*Result, error) {
		return Run(context.Background(), sp, px, Options{GPU: gpu(t, "cpu-local"), Workload: w, Budgets: Budgets{}})
	}
	limit = 0.8 * pc.WeightsBytes
	res, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if res.Best.Costs.WeightsBytes > limit || res.Binding != "max-weights" {
		t.Errorf("best has %g bytes of weights (limit %g), binding %q", res.Best.Costs.WeightsBytes, limit, res.Binding)
	}
	limit = 1
	_, err = run()
	var ie *InfeasibleError
	if !errors.As(err, &ie) || ie.Budget != "max-weights" || len(ie.Hints) != 1 {
		t.Fatalf("%v, want an InfeasibleError for max-weights with its hint", err)
	}
	flags := func(n string) string { return "--" + n }
	if got := ie.Spell(flags); !strings.Contains(got, "--max-weights 0.0 MiB is out of reach") || !strings.Contains(got, "a lower precision (--precision)") {
		t.Errorf("spelled as flags: %s", got)
	}
	if strings.Contains(ie.Error(), "--") {
		t.Errorf("the library's message names flags: %s", ie.Error())
	}
}

// TestHintSpell: spelled as flags, the hints read as the search command
// has always printed them; in the library's words they name no flag.
func TestHintSpell(t *testing.T) {
	flags := func(n string) string { return "--" + n }
	b := &Budgets{MaxMemory: 1, P90: true}
	mem, _ := Kind(BudgetMemory)
	tpot, _ := Kind(BudgetTPOT)
	vllm, ok := estimate.VLLM.Spec()
	if !ok {
		t.Fatal("no vllm entry")
	}
	hints := append(mem.Hints(b, &vllm.Hints), tpot.Hints(b, &vllm.Hints)...)
	hints = append(hints, Hint{Text: "a smaller margin", Setting: SettingMargin, Note: "0 disables it, at the risk of missing the budget when measured"})
	var spelled, words []string
	for _, h := range hints {
		spelled, words = append(spelled, h.Spell(flags)), append(words, h.Spell(nil))
	}
	want := "a lower precision (e.g. --precision q4_k_m on llamacpp, fp8 or nvfp4 on the pool engines); a shorter context (--context); " +
		"fewer concurrent requests or slots; a lower KV-cache type (--kv-dtype fp8 or q8_0); allow more layers removed; " +
		"a lower precision; lower concurrency; shorter prompts or outputs; a faster GPU or more tensor parallelism; " +
		"a budget on the mean instead of the p90 (drop --p90); a smaller margin (--margin; 0 disables it, at the risk of missing the budget when measured)"
	if got := strings.Join(spelled, "; "); got != want {
		t.Errorf("spelled:\n%s\nwant:\n%s", got, want)
	}
	if got := strings.Join(words, "; "); strings.Contains(got, "--") || !strings.Contains(got, "a lower precision (e.g. q4_k_m on llamacpp") {
		t.Errorf("in words: %s", got)
	}
}

// TestInfeasibleByLoadRules: when the serving engine's load rules refuse
// every shape of the space, the error says so and why (the parent's first
// violation), not that the smallest shape does not fit in memory.
func TestInfeasibleByLoadRules(t *testing.T) {
	// Sigmoid-routed experts with a shared expert: native runs none.
	m := preset(t, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
	w := &workload.Workload{Input: workload.FixedLength(128), Output: workload.FixedLength(32), Concurrency: 1, Seed: 1}
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native})
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(m, nil)
	_, err = Run(context.Background(), sp, px, Options{GPU: gpu(t, "cpu-local"), Workload: w, Budgets: Budgets{MaxParams: 1e9}})
	var ie *InfeasibleError
	if !errors.As(err, &ie) || !strings.Contains(ie.Unfit, "native loads none of the space's") || !strings.Contains(ie.Unfit, "the parent itself:") {
		t.Fatalf("%v, want an InfeasibleError naming the load rules", err)
	}
	if strings.Contains(err.Error(), "memory") {
		t.Errorf("blames memory: %v", err)
	}
}
