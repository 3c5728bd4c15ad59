package search

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/workload"
)

// reprice prices c's child model from scratch (estimate.Compile and
// Compiled.Price on the architecture, not the search's assembled menus) and
// checks that it agrees with the costs the search reported and meets the
// budgets.
func reprice(t *testing.T, s setup, sp *Space, c *Candidate) {
	t.Helper()
	o := estimate.Options{Precision: c.Settings.Precision, KVDType: c.Settings.KVDType, TP: sp.TP,
		MaxNumSeqs: c.Settings.MaxNumSeqs, MemFraction: c.Settings.MemFraction}
	comp, err := estimate.Compile(gpu(t, s.gpu), sp.Engine, o, s.work, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := sp.Model(c)
	if err := child.Validate(); err != nil {
		t.Fatalf("child does not validate: %v", err)
	}
	p := comp.Price(child)
	var sum estimate.Summary
	comp.Summarize(&sum, child)
	got := costsOf(&p, &sum)
	for _, x := range [][2]float64{{got.MemoryBytes, c.Costs.MemoryBytes}, {got.E2E, c.Costs.E2E}, {got.TTFT, c.Costs.TTFT},
		{got.TPOT, c.Costs.TPOT}, {got.Params, c.Costs.Params}, {got.OutputTokS, c.Costs.OutputTokS}} {
		if math.Abs(x[0]-x[1]) > 1e-6*math.Abs(x[1]) {
			t.Errorf("re-priced child differs from the search's costs: %v vs %v (%+v vs %+v)", x[0], x[1], got, c.Costs)
		}
	}
	if !s.b.Meets(&got) {
		t.Errorf("chosen candidate breaks a budget: %+v, budgets %+v", got, s.b)
	}
	if !sp.ServeOn.Loads(child, sp.TP) {
		t.Errorf("%s does not load the chosen child: %v", sp.ServeOn.Name, sp.ServeOn.Check(child, sp.TP).Violations)
	}
	// The plan goes through prune's validator and resolves to the same shape.
	plan, err := sp.Plan(c, nil)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	lay, err := prune.Resolve(sp.Parent, plan)
	if err != nil {
		t.Fatalf("prune refuses the plan: %v", err)
	}
	if len(lay.Child.Layers) != len(child.Layers) || lay.Child.Hidden != child.Hidden {
		t.Fatalf("prune's child has %d layers hidden %d, the search's %d layers hidden %d", len(lay.Child.Layers), lay.Child.Hidden, len(child.Layers), child.Hidden)
	}
	var ps estimate.Summary
	comp.Summarize(&ps, lay.Child)
	if math.Abs(ps.TotalParams-sum.TotalParams) > 0.5 || math.Abs(ps.KVBytes-sum.KVBytes) > 1e-6 {
		t.Errorf("prune's child has %v params, the search's %v", ps.TotalParams, sum.TotalParams)
	}
}

func llama8B(t *testing.T) *architecture.Model { return preset(t, "meta-llama/Meta-Llama-3.1-8B") }

// TestParentAlreadyMeets: budgets the parent meets return the parent.
func TestParentAlreadyMeets(t *testing.T) {
	m := llama8B(t)
	w := wl(t, "chat")
	s := setup{parent: m, gpu: "h100-sxm", engine: estimate.VLLM, work: w, b: Budgets{MaxE2E: 60, MaxMemory: 80 << 30}}
	for _, st := range Strategies() {
		sp, res, err := s.run(t, st)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if !res.ParentMeets || !sp.IsParent(&res.Best) || math.Abs(res.Best.Quality-1) > 1e-12 {
			t.Errorf("%s: the parent meets the budgets but the search chose %s (quality %.3f)", st, sp.Describe(&res.Best), res.Best.Quality)
		}
		reprice(t, s, sp, &res.Best)
	}
}

// TestEveryBudgetKind: each budget alone binds and is met by the chosen
// candidate, as re-priced from scratch.
func TestEveryBudgetKind(t *testing.T) {
	m := llama8B(t)
	w := wl(t, "chat")
	pc := parentCosts(t, m, "rtx-5090", estimate.VLLM, w)
	if !pc.Fits {
		t.Fatalf("parent does not fit: %+v", pc)
	}
	cases := []struct {
		name string
		b    Budgets
	}{
		{"memory", Budgets{MaxMemory: 12 << 30}},
		{"ttft", Budgets{MaxTTFT: 0.6 * pc.TTFT}},
		{"tpot", Budgets{MaxTPOT: 0.7 * pc.TPOT}},
		{"e2e", Budgets{MaxE2E: 0.7 * pc.E2E}},
		{"e2e p90", Budgets{MaxE2E: 0.7 * pc.E2EP90, P90: true}},
		{"throughput tok/s", Budgets{MinThroughput: Throughput{TokensPerS: 1.3 * pc.OutputTokS}}},
		{"throughput req/s", Budgets{MinThroughput: Throughput{RequestsPerS: 1.3 * pc.RequestsPerS}}},
		{"params", Budgets{MaxParams: 5e9}},
		{"active params", Budgets{MaxActiveParams: 6e9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := setup{parent: m, gpu: "rtx-5090", engine: estimate.VLLM, work: w, b: c.b}
			for _, st := range Strategies() {
				sp, res, err := s.run(t, st)
				if err != nil {
					t.Fatalf("%s: %v", st, err)
				}
				if res.ParentMeets {
					t.Fatalf("%s: the parent meets a budget meant to bind", st)
				}
				if res.Binding == "" || res.BindingUsage > 1 || res.BindingUsage < 0.5 {
					t.Errorf("%s: binding %q at %.2f", st, res.Binding, res.BindingUsage)
				}
				reprice(t, s, sp, &res.Best)
				for _, k := range res.TopK {
					if !k.Meets || !s.b.Meets(&k.Costs) {
						t.Errorf("%s: a top-k candidate breaks the budgets", st)
					}
				}
			}
		})
	}
}

// TestKeepLayers: protected layers stay; an index out of range is a
// *KeepLayersError.
func TestKeepLayers(t *testing.T) {
	m := llama8B(t)
	w := wl(t, "chat")
	keep := []int{0, 1, 2, 29, 30, 31}
	s := setup{parent: m, gpu: "rtx-5090", engine: estimate.VLLM, work: w, b: Budgets{MaxParams: 4.5e9}, space: SpaceOptions{KeepLayers: keep}}
	sp, res, err := s.run(t, AutoCompress)
	if err != nil {
		t.Fatal(err)
	}
	removedAny := false
	for l, ls := range res.Best.Layers {
		if ls.Removed || ls.KVGroups == 0 || ls.MLP == 0 {
			removedAny = true
		}
		for _, k := range keep {
			if l == k && (ls.Removed || ls.KVGroups == 0 || ls.MLP == 0) {
				t.Errorf("layer %d is protected but lost a block: %+v", l, ls)
			}
		}
	}
	if !removedAny {
		t.Log("no block removed; the test only shows that protected layers stay")
	}
	reprice(t, s, sp, &res.Best)
	_, err = NewSpace(m, SpaceOptions{Engine: estimate.VLLM, KeepLayers: []int{32}})
	var ke *KeepLayersError
	if !errors.As(err, &ke) || ke.Index != 32 {
		t.Errorf("--keep-layers 32 of 32 layers: %v", err)
	}
}

// TestInfeasible names the binding budget and the smallest value reached.
func TestInfeasible(t *testing.T) {
	m := llama8B(t)
	w := wl(t, "chat")
	s := setup{parent: m, gpu: "rtx-5070", engine: estimate.VLLM, work: w, b: Budgets{MaxTPOT: 0.0005}}
	for _, st := range Strategies() {
		_, _, err := s.run(t, st)
		var ie *InfeasibleError
		if !errors.As(err, &ie) || ie.Budget != BudgetTPOT || ie.Smallest == "" || len(ie.Hints) == 0 {
			t.Errorf("%s: %v", st, err)
		}
	}
	s.b = Budgets{MaxMemory: 1 << 30}
	_, _, err := s.run(t, AutoCompress)
	var ie *InfeasibleError
	if !errors.As(err, &ie) {
		t.Errorf("1 GiB on vLLM: %v", err)
	}
}

// TestEngineRules: per-layer shapes only where the serve-on engine loads
// them, widths aligned, KV groups divisible by TP.
func TestEngineRules(t *testing.T) {
	w := wl(t, "chat")
	qwen := preset(t, "Qwen/Qwen3-8B")
	s := setup{parent: qwen, gpu: "rtx-5090", engine: estimate.VLLM, work: w, b: Budgets{MaxParams: 5.5e9}}
	sp, res, err := s.run(t, AutoCompress)
	if err != nil {
		t.Fatal(err)
	}
	if sp.PerLayer {
		t.Error("Qwen3 (qk-norm) has no per-layer format, but the space is per layer")
	}
	child := sp.Model(&res.Best)
	if !child.Uniform() {
		t.Errorf("Qwen3 child is not uniform: %s", sp.Describe(&res.Best))
	}
	reprice(t, s, sp, &res.Best)
	// Llama at TP 2 on vLLM: per layer, KV groups divisible by 2.
	m := llama8B(t)
	s = setup{parent: m, gpu: "h100-sxm", engine: estimate.VLLM, work: w, b: Budgets{MaxParams: 5e9}, space: SpaceOptions{TP: 2}}
	sp, res, err = s.run(t, AutoCompress)
	if err != nil {
		t.Fatal(err)
	}
	if !sp.PerLayer {
		t.Error("Llama on vLLM is not per layer")
	}
	for _, k := range sp.KVGroups {
		if k%2 != 0 && 2%k != 0 {
			t.Errorf("KV groups %d at TP 2", k)
		}
	}
	for _, ls := range res.Best.Layers {
		if ls.MLP%256 != 0 || ls.KVGroups%2 != 0 && ls.KVGroups != 1 {
			t.Errorf("layer shape %+v breaks the DeciLM/TP alignment", ls)
		}
	}
	reprice(t, s, sp, &res.Best)
	caps, _ := export.Lookup("vllm")
	if !caps.Loads(sp.Model(&res.Best), 2) {
		t.Error("vLLM TP 2 does not load the child")
	}
}

// smallSpace is a space small enough to enumerate: a 4-layer Llama with
// three hidden sizes, two head counts, four MLP widths and two KV counts
// per layer, sub-block and layer removal.
func smallSpace(t *testing.T) (setup, *Space) {
	m := &architecture.Model{Arch: architecture.Llama, ModelType: "llama", Vocab: 4096, Hidden: 1024, Norm: architecture.RMSNorm,
		NormEps: 1e-5, MaxPositions: 4096, Rope: architecture.Rope{Theta: 1e4, PartialFactor: 1}, DType: "bfloat16", BOS: -1}
	for range 4 {
		m.Layers = append(m.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 16, KVHeads: 4, HeadDim: 64},
			MLP:       &architecture.MLP{Width: 2048, Gated: true, Activation: "silu"}})
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	w := wl(t, "chat")
	pc := parentCosts(t, m, "rtx-5070", estimate.VLLM, w)
	s := setup{parent: m, gpu: "rtx-5070", engine: estimate.VLLM, work: w,
		b: Budgets{MaxParams: 0.75 * pc.Params, MaxTPOT: 0.93 * pc.TPOT}}
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.VLLM})
	if err != nil {
		t.Fatal(err)
	}
	sp.Hidden = []int{1024, 768, 512}
	sp.Heads = []int{16, 8}
	sp.MLP = []int{2048, 1536, 1024, 512}
	sp.KVGroups = []int{4, 2}
	sp.MaxRemoved = 2
	return s, sp
}

// exhaustive enumerates every candidate of sp and returns the best quality
// that meets the budgets, and how many it priced.
func exhaustive(t *testing.T, e *evaluator) (float64, int64) {
	best := -1.0
	start := e.evals
	for _, g := range e.globals() {
		for si := range e.sp.Settings {
			menus := e.menus(g, si)
			idx := make([]int, len(menus))
			for {
				if !e.overCap(menus, idx) {
					c := e.price(si, g, menus, idx)
					if e.b.Meets(&c) {
						best = max(best, e.quality(g, menus, idx))
					}
				}
				l := 0
				for ; l < len(idx); l++ {
					idx[l]++
					if idx[l] < len(menus[l]) {
						break
					}
					idx[l] = 0
				}
				if l == len(idx) {
					break
				}
			}
		}
	}
	return best, e.evals - start
}

// TestAtLeastAsGoodAsExhaustive: on a space small enough to enumerate,
// autocompress finds a candidate as good as the best of all of them.
func TestAtLeastAsGoodAsExhaustive(t *testing.T) {
	s, sp := smallSpace(t)
	px, _ := NewProxy(s.parent, nil)
	for _, b := range []Budgets{s.b, {MaxParams: s.b.MaxParams * 0.8}, {MaxTPOT: s.b.MaxTPOT * 0.97, MaxParams: s.b.MaxParams * 0.9}} {
		o := Options{GPU: gpu(t, s.gpu), Workload: s.work, Budgets: b}
		res, err := Run(context.Background(), sp, px, o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := newEvaluator(sp, &b, px, o.GPU, o.Workload, o.Estimate)
		if err != nil {
			t.Fatal(err)
		}
		best, n := exhaustive(t, e)
		t.Logf("budgets %s: exhaustive %.5f over %d candidates; autocompress %.5f with %d evaluations", b.String(), best, n, res.Best.Quality, res.Evaluations)
		if best < 0 {
			t.Fatal("nothing feasible: the test budgets are wrong")
		}
		if res.Best.Quality < best-1e-9 {
			t.Errorf("autocompress %.5f < exhaustive %.5f", res.Best.Quality, best)
		}
	}
}

// TestBeatsRandomSearch: on the Llama-3.1-8B per-layer space, autocompress
// beats random search given ten times its evaluations.
func TestBeatsRandomSearch(t *testing.T) {
	if testing.Short() {
		t.Skip("random search with 10× the evaluations takes a few seconds; run without -short")
	}
	m := llama8B(t)
	w := wl(t, "long-context-coding")
	s := setup{parent: m, gpu: "rtx-5080", engine: estimate.VLLM, work: w, b: Budgets{MaxMemory: 13.96 * (1 << 30), MaxE2E: 11.5}}
	sp, res, err := s.run(t, AutoCompress)
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(m, nil)
	e, err := newEvaluator(sp, &s.b, px, gpu(t, s.gpu), w, estimate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gs := e.globals()
	menus := map[[2]int][][]option{}
	r := rand.New(rand.NewPCG(1, 2))
	best := -1.0
	idx := make([]int, len(m.Layers))
	for n := int64(0); n < 10*res.Evaluations; n++ {
		gi, si := r.IntN(len(gs)), r.IntN(len(sp.Settings))
		key := [2]int{gi, e.menuOf[si]}
		mn, ok := menus[key]
		if !ok {
			mn = e.menus(gs[gi], si)
			menus[key] = mn
		}
		for l := range idx {
			idx[l] = r.IntN(len(mn[l]))
		}
		if e.overCap(mn, idx) {
			continue
		}
		c := e.price(si, gs[gi], mn, idx)
		if e.b.Meets(&c) {
			best = max(best, e.quality(gs[gi], mn, idx))
		}
	}
	t.Logf("autocompress %.4f with %d evaluations; random search %.4f with %d", res.Best.Quality, res.Evaluations, best, 10*res.Evaluations)
	if res.Best.Quality <= best {
		t.Errorf("random search (%.4f) beats autocompress (%.4f)", best, res.Best.Quality)
	}
}

// TestSearchRefusesContextBeyondPositions (issue 17, class 4): Execute
// applies the one context rule before any work: a workload or an explicit
// context past the parent's max_position_embeddings is a
// *workload.ContextError, and AllowLongContext lets it through; a preset's
// limit past the positions is capped at them, as estimate prices it.
func TestSearchRefusesContextBeyondPositions(t *testing.T) {
	m := llama8B(t) // 131,072 positions
	long := workload.FixedClosed(200000, 64, 1)
	for _, tc := range []struct {
		name   string
		w      workload.Workload
		maxLen int
		allow  bool
		refuse bool
		want   int // the context searched
	}{
		{"requests past the positions", long, 0, false, true, 0},
		{"an explicit context past them", workload.FixedClosed(1000, 64, 4), 200000, false, true, 0},
		{"allowed", long, 0, true, false, 200064},
		{"within", workload.FixedClosed(1000, 64, 4), 0, false, false, 1064},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			req := Request{Parent: m, GPU: gpu(t, "h100-sxm"), Engine: estimate.VLLM, Workload: &w, MaxModelLen: tc.maxLen,
				AllowLongContext: tc.allow, Budgets: Budgets{MaxParams: 1e12}, Strategy: AutoCompress, TopK: 1}
			rep, err := Execute(context.Background(), req)
			var ce *workload.ContextError
			if tc.refuse {
				if !errors.As(err, &ce) || ce.MaxPositions != 131072 || !strings.Contains(err.Error(), "max_position_embeddings") {
					t.Fatalf("Execute: %v; want a *workload.ContextError naming the 131072 positions", err)
				}
				// No flag names in the library's message: run has no
				// --allow-long-context; the search command adds its own.
				if strings.Contains(err.Error(), "--") {
					t.Errorf("Execute's error names a flag: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Workload.MaxContext(); got != tc.want {
				t.Errorf("searched at context %d, want %d", got, tc.want)
			}
			if w != tc.w {
				t.Errorf("the caller's workload changed: %+v", w)
			}
		})
	}
	// A preset's limit past the positions is capped at them (requests fit).
	small := *m
	small.MaxPositions = 4096
	w := workload.Workload{Name: "capped", Input: workload.FixedLength(1000), Output: workload.FixedLength(64), Concurrency: 4, ContextLimit: 16384}
	r := Request{Parent: &small, Workload: &w}
	got, err := r.fitContext()
	if err != nil || got.ContextLimit != 4096 {
		t.Errorf("preset limit on 4096 positions: %v, context %d; want 4096", err, got.ContextLimit)
	}
}
