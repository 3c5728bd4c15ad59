// Package search chooses a pruned child's shape for one deployment: a GPU
// (or this CPU), a serving engine, a precision and a workload. Every
// candidate is priced by the estimator's real cost (estimate.Compiled:
// LayerSum menus assembled per candidate, a local-search move as a change
// of a running estimate.Total, and priced with PriceSummary; none of it
// allocates), must meet every budget (Budgets) and is ranked
// by a quality proxy (Proxy: retained importance, or a structural prior
// when there are no scores), optionally re-ranked by a measured proxy
// (Measurer: the KL divergence to the parent of the candidate pruned in
// memory).
//
// # The space
//
// NewSpace builds it from the parent and the serve-on engine's load rules
// (export.Capabilities, the same predicate export's validators use):
// global hidden size, query heads per KV group, Mamba heads and their
// head dimension (Minitron-SSM), and routed
// experts (the same count in every MoE layer: no engine loads per-layer
// counts, ranked by expert scores or the structural prior); per layer
// the MLP width, the KV groups, the attention or MLP sub-block removed
// (only where the engine loads per-layer shapes: DeciLM block_configs for
// Llama-family parents) and whole layers removed (never --keep-layers);
// and the engine settings left free (precisions and KV types listed, the
// pool engines' memory fraction when memory is budgeted, llama.cpp's
// slots). Widths are aligned to the target's kernels; head_dim never
// changes.
//
// # Strategies
//
// AutoCompress enumerates the global shapes and settings and, for each,
// solves the per-layer multiple-choice problem by a Lagrangian relaxation
// (each layer takes the option maximising value − λ·cost, λ bisected on
// the estimator's true verdict, since costs do not add across layers under
// batching: KV capacity and concurrency couple them), then improves the
// solution by local search (single-layer upgrades and pair exchanges),
// every move priced by the estimator. Global shapes whose upper bound
// cannot beat the best found are skipped. Global shapes × settings are
// solved on every core, sharing each shape's menus and hulls; a move
// re-prices only the layers it changes (BenchmarkSearch70B: over a million
// evaluations on a Llama-3.1-70B-sized space).
//
// Minitron is the Minitron++ baseline (method.md §3, §7): the same widths
// in every layer, every layer kept, a grid with Minitron's granularity and
// limits, filtered by the same budgets and estimator, the top-k by the same
// proxy, then the best of the top-k by measured loss: after a brief
// distillation of each candidate from the parent (the paper's protocol:
// search/trained's Measurer, which the caller injects as
// Request.TopKMeasurer) or, without it, of each candidate pruned without
// training (KLMeasurer; the notes say which).
//
// # Budgets
//
// The kinds of budget are data (BudgetKinds: name, cost, unit, ceiling or
// floor, margin, format, hints); meeting, the binding budget, the reach
// and the infeasible error read them from there. The package names budgets
// and settings by its own names (BudgetMemory, SettingPrecision, …); its
// errors that name them have a Spell method with which a command says them
// as its flags or fields.
package search

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/workload"
)

// Strategy names.
const (
	AutoCompress = "autocompress"
	Minitron     = "minitron"
)

// Strategies lists the strategy names.
func Strategies() []string { return []string{AutoCompress, Minitron} }

// Measurement is a measured proxy of one candidate pruned in memory.
type Measurement struct {
	// KL is the mean KL(parent ‖ child) per token; Loss the child's mean
	// cross-entropy (nats per token).
	KL   float64 `json:"kl"`
	Loss float64 `json:"loss"`
	// Tokens are the tokens the measurement ran through a model
	// (calibration, and for a trained measurement the teacher's and the
	// student's training tokens).
	Tokens int64 `json:"tokens"`
	// UntrainedLoss is the loss before the brief training and TrainTokens
	// the student's training tokens (a trained measurement only: search/trained;
	// 0 otherwise).
	UntrainedLoss float64 `json:"untrained_loss,omitempty"`
	TrainTokens   int64   `json:"train_tokens,omitempty"`
}

// Measurer measures a candidate given as a pruning plan of the parent.
type Measurer interface {
	Measure(ctx context.Context, plan *prune.Plan) (Measurement, error)
}

// A Ranker is a Measurer that says in words what its measurements rank by
// (the notes quote it); a Measurer without it is taken to measure the
// candidates untrained.
type Ranker interface {
	Ranking() string
}

// Options configure a search.
type Options struct {
	Strategy string
	GPU      *hardware.GPU
	Workload *workload.Workload
	// Estimate holds deployment options the search does not choose
	// (context, batched tokens); precision, KV type, TP, sequences and
	// memory fraction come from the space's settings.
	Estimate estimate.Options
	Budgets  Budgets
	// TopK is how many candidates are kept and, with a Measurer, measured
	// (Minitron: always; AutoCompress: only those whose proxy is within
	// CloseFraction of the best). 0: the default, 10.
	TopK int
	// CloseFraction is AutoCompress's "too close to call" margin (nil:
	// 0.03; a pointer to 0 measures only ties with the best).
	CloseFraction *float64
	// Measurer, when set, measures candidates (see TopK).
	Measurer Measurer
	// Plan turns a candidate into a pruning plan for the Measurer.
	Plan func(c *Candidate) (*prune.Plan, error)
	// MaxEvaluations bounds the estimator calls of local search per
	// global shape and setting (default 4000).
	MaxEvaluations int
	// Progress receives the strategy's phases from time to time (stage
	// "search"); nil = none.
	Progress progress.Func
}

// Result is the outcome of a search.
type Result struct {
	Strategy string
	// Best is the chosen candidate; TopK the best distinct candidates
	// (Best first); Pareto the quality-vs-cost front over everything the
	// strategy kept.
	Best   Candidate
	TopK   []Candidate
	Pareto []Candidate
	// Parent is the parent under the chosen settings.
	Parent Candidate
	// ParentMeets is true when the parent already meets every budget (Best
	// is then the parent).
	ParentMeets bool
	// Binding is the budget closest to its limit for Best, and its usage.
	Binding      string
	BindingUsage float64
	// Evaluations counts estimator calls; GlobalShapes the global shapes
	// and settings solved; Skipped those skipped by the bound.
	Evaluations           int64
	GlobalShapes, Skipped int
	// Tokens are the calibration tokens spent choosing (measured proxy).
	Tokens int64
	// Notes say what the space held, what the proxy rests on and what the
	// strategy did, in words.
	Notes []string
}

// Settings of a request that an error's hints name (the library's names;
// a command spells them as its flags or fields through a Speller).
const (
	SettingPrecision  = estimate.SettingPrecision
	SettingContext    = estimate.SettingContext
	SettingTP         = estimate.SettingTP
	SettingKVDType    = estimate.SettingKVDType
	SettingMaxNumSeqs = estimate.SettingMaxNumSeqs
	SettingMargin     = "margin"
	SettingP90        = "p90"
	SettingKeepLayers = "keep-layers"
)

// A Speller spells a budget name (BudgetMemory, …) or a setting
// (SettingPrecision, …) as a caller's user writes it, e.g. as a flag
// "--max-memory"; nil spells them by their names. Every error of the
// package that names a budget or a setting has a Spell method taking one
// (a command rewrites the message in its own terms with it).
type Speller func(name string) string

func (s Speller) spell(name string) string {
	if s == nil {
		return name
	}
	return s(name)
}

// A Hint is one change that would make a search feasible (estimate.Hint:
// the engine's hints, from its entry in estimate's table, and the
// search's own).
type Hint = estimate.Hint

// InfeasibleError says that no candidate meets the budgets: which budget
// cannot be met, the best value of it the space reaches, and what would
// make the search feasible.
type InfeasibleError struct {
	// Budget names the budget out of reach; Budgets, when more than one,
	// those reachable alone but not together.
	Budget          string
	Budgets         []string
	Limit, Smallest string
	Hints           []Hint
	// Unfit is set when no candidate fits in the GPU's memory at all.
	Unfit string
}

func (e *InfeasibleError) Error() string { return e.Spell(nil) }

// Spell returns the message with the budgets and settings spelled by spell.
func (e *InfeasibleError) Spell(spell func(name string) string) string {
	var b strings.Builder
	switch {
	case e.Unfit != "":
		fmt.Fprintf(&b, "no candidate fits: %s", e.Unfit)
	case len(e.Budgets) > 1:
		names := make([]string, len(e.Budgets))
		for i, n := range e.Budgets {
			names[i] = Speller(spell).spell(n)
		}
		fmt.Fprintf(&b, "no candidate meets the budgets: %s together are out of reach; %s", strings.Join(names, " + "), e.Smallest)
	default:
		verb := "smallest"
		if k, ok := Kind(e.Budget); ok && k.Floor {
			verb = "largest"
		}
		name := "budget " + e.Budget
		if spell != nil {
			name = spell(e.Budget)
		}
		fmt.Fprintf(&b, "no candidate meets the budgets: %s %s is out of reach; the %s value the space reaches is %s", name, e.Limit, verb, e.Smallest)
	}
	if len(e.Hints) > 0 {
		hs := make([]string, len(e.Hints))
		for i, h := range e.Hints {
			hs[i] = h.Spell(spell)
		}
		b.WriteString("; to make it feasible: " + strings.Join(hs, "; "))
	}
	return b.String()
}

// Run searches sp for the best candidate under o.
func Run(ctx context.Context, sp *Space, proxy *Proxy, o Options) (*Result, error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	e, err := newEvaluator(sp, &o.Budgets, proxy, o.GPU, o.Workload, o.Estimate)
	if err != nil {
		return nil, err
	}
	var res *Result
	switch o.Strategy {
	case "", AutoCompress:
		res, err = runAutoCompress(ctx, e, &o)
	case Minitron:
		res, err = runMinitron(ctx, e, &o)
	default:
		return nil, fmt.Errorf("search: unknown strategy %q (want %s)", o.Strategy, strings.Join(Strategies(), " or "))
	}
	if res != nil {
		res.Evaluations = e.evals
		if e.refused > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d global shapes left out: %s does not load them (its load rules, shared with export's validators)", e.refused, sp.ServeOn.Name))
		}
		res.Notes = append(append(append([]string(nil), sp.Notes...), proxy.Source...), res.Notes...)
	}
	if err != nil {
		return res, err
	}
	if err := finish(ctx, e, res, &o); err != nil {
		return res, err
	}
	return res, nil
}

// parentOf prices the parent under setting si.
func (e *evaluator) parentOf(si int) Candidate {
	g := global{hidden: e.sp.Parent.Hidden}
	if len(e.sp.Heads) > 0 {
		g.heads = e.sp.Heads[0]
	}
	if len(e.sp.MLP) > 0 {
		g.mlp = e.sp.MLP[0]
	}
	if len(e.sp.Mamba) > 0 {
		g.mamba = e.sp.Mamba[0]
	}
	if len(e.sp.Experts) > 0 {
		g.experts = e.sp.Experts[0]
	}
	if len(e.sp.MambaHeadDim) > 0 {
		g.mambaDim = e.sp.MambaHeadDim[0]
	}
	if e.sp.UniformKV {
		g.kv = e.sp.KVGroups[0]
	}
	menus := e.menus(g, si)
	idx := make([]int, len(menus)) // option 0 of every layer is the parent's
	c := e.price(si, g, menus, idx)
	return e.candidate(si, g, menus, idx, c)
}

// finish measures the top-k where the strategy asks for it, picks Best,
// the parent comparison, the binding budget and the Pareto front.
func finish(ctx context.Context, e *evaluator, res *Result, o *Options) error {
	if len(res.TopK) == 0 {
		return e.infeasible()
	}
	best := res.TopK[0]
	if o.Measurer != nil && o.Plan != nil {
		var measure []int
		for i, c := range res.TopK {
			switch {
			case res.Strategy == Minitron:
				measure = append(measure, i)
			case best.Quality-c.Quality <= *o.CloseFraction*best.Quality:
				measure = append(measure, i)
			}
		}
		if len(measure) > 1 || res.Strategy == Minitron {
			task := progress.Start(o.Progress, progress.Event{Stage: "search", Phase: "measuring the top-k", Total: int64(len(measure)), Unit: "cand"})
			for n, i := range measure {
				if err := ctx.Err(); err != nil {
					return err
				}
				task.Set(int64(n), "")
				p, err := o.Plan(&res.TopK[i])
				if err != nil {
					return fmt.Errorf("search: plan of candidate %d: %w", i+1, err)
				}
				m, err := o.Measurer.Measure(ctx, p)
				if err != nil {
					return fmt.Errorf("search: measuring candidate %d: %w", i+1, err)
				}
				res.TopK[i].Measured = &m
				res.Tokens += m.Tokens
			}
			task.Set(int64(len(measure)), "")
			key := func(m *Measurement) float64 {
				if res.Strategy == Minitron {
					return m.Loss
				}
				return m.KL
			}
			sort.SliceStable(res.TopK, func(a, b int) bool {
				ma, mb := res.TopK[a].Measured, res.TopK[b].Measured
				switch {
				case ma != nil && mb != nil:
					return key(ma) < key(mb)
				case ma != nil:
					return true
				}
				return false
			})
			what := "the measured KL divergence to the parent"
			if res.Strategy == Minitron {
				what = "the measured loss of each pruned candidate without training (no brief training)"
				if r, ok := o.Measurer.(Ranker); ok {
					what = r.Ranking()
				}
			}
			res.Notes = append(res.Notes, fmt.Sprintf("the %d top candidates were re-ranked by %s; tokens spent choosing the architecture: %d", len(measure), what, res.Tokens))
			if n := untrainedChoice(res.TopK); n >= 0 {
				res.Notes = append(res.Notes, fmt.Sprintf("the brief training changed the choice: by the loss untrained, %s (ranked %d after training) would have been chosen", uniformShape(&res.TopK[n]), n+1))
			}
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("no other candidate within %.0f %% of the best proxy: chosen without measuring (0 tokens)", 100**o.CloseFraction))
		}
		best = res.TopK[0]
	}
	res.Best = best
	si := settingIndex(e.sp, best.Settings)
	res.Parent = e.parentOf(si)
	res.ParentMeets = e.sp.IsParent(&best)
	res.Binding, res.BindingUsage = o.Budgets.Binding(&best.Costs)
	if c := &best.Costs; o.Budgets.P90 && c.TTFTP90 == c.TTFT && c.TPOTP90 == c.TPOT && c.E2EP90 == c.E2E {
		res.Notes = append(res.Notes, "latency budgets on the p90: the estimator's analytic path reports the p90 equal to the mean for this deployment, so the latency budgets bind on the mean")
	}
	res.Pareto = pareto(res.Pareto, &o.Budgets)
	return nil
}

// untrainedChoice returns the index in top (sorted by trained loss) of the
// candidate the untrained loss would have chosen, or -1 when the choice is
// the same or the measurements were not trained.
func untrainedChoice(top []Candidate) int {
	best := -1
	for i, c := range top {
		if m := c.Measured; m != nil && m.TrainTokens > 0 && (best < 0 || m.UntrainedLoss < top[best].Measured.UntrainedLoss) {
			best = i
		}
	}
	if best <= 0 {
		return -1
	}
	return best
}

// uniformShape names a candidate by its hidden size, heads and first
// layer's MLP width (Minitron's candidates are uniform).
func uniformShape(c *Candidate) string {
	s := fmt.Sprintf("hidden %d, heads %d", c.Hidden, c.Heads)
	if len(c.Layers) > 0 {
		s += fmt.Sprintf(", MLP %d", c.Layers[0].MLP)
	}
	return s
}

func settingIndex(sp *Space, s Settings) int {
	for i, x := range sp.Settings {
		if x == s {
			return i
		}
	}
	return 0
}

// infeasible builds the error for a search that found nothing.
func (e *evaluator) infeasible() error {
	b := e.b
	// What to try is the engine's (estimate.EngineSpec.Hints): the native
	// engine has no precision, KV type or TP to trade. Copies, as hints
	// are appended to below.
	var hints estimate.Hints
	if spec, ok := e.sp.Engine.Spec(); ok {
		hints = spec.Hints
	}
	clone := func(h []Hint) []Hint { return append([]Hint(nil), h...) }
	hints.Unfit, hints.Memory, hints.Latency = clone(hints.Unfit), clone(hints.Memory), clone(hints.Latency)
	hints.Throughput, hints.Together = clone(hints.Throughput), clone(hints.Together)
	if !e.reachSet && e.loadable == 0 && e.refused > 0 {
		// Nothing was priced: the engine's load rules refused every
		// shape, which is not a matter of memory.
		why := ""
		if r := e.sp.ServeOn.Check(e.sp.Parent, e.sp.TP); len(r.Violations) > 0 {
			why = "; the parent itself: " + r.Violations[0].String()
		}
		return &InfeasibleError{Unfit: fmt.Sprintf("%s loads none of the space's %d shapes (its load rules, shared with export's validators)%s", e.sp.ServeOn.Name, e.refused, why)}
	}
	if !e.reachSet {
		// Price the smallest candidate to say what does not fit.
		return &InfeasibleError{Unfit: "even the smallest shape of the space does not fit in " + e.hw.Name + "'s memory with " + string(e.sp.Engine),
			Hints: hints.Unfit}
	}
	worst, wu := -1, 0.0
	for i := range BudgetKinds {
		k := &BudgetKinds[i]
		lim := k.Limit(b)
		if lim <= 0 {
			continue
		}
		r := e.reach[i]
		u := r / lim
		if k.Floor {
			u = lim / math.Max(r, 1e-300)
		}
		if k.Margin != nil && b.Margin != nil {
			u *= 1 + k.Margin(b.Margin)
		}
		if u > wu {
			worst, wu = i, u
		}
	}
	if worst < 0 || wu <= 1 {
		// Every budget is reachable alone but not together.
		return &InfeasibleError{Budget: strings.Join(b.Set(), " + "), Budgets: b.Set(), Limit: "together", Smallest: "each budget is reachable alone but no candidate meets them all",
			Hints: hints.Together}
	}
	k := &BudgetKinds[worst]
	lim := k.Limit(b)
	err := &InfeasibleError{Budget: k.Name, Limit: k.Format(b, lim), Smallest: k.Format(b, e.reach[worst])}
	m := b.Margin.Of(k.Name)
	if m > 0 {
		err.Limit += fmt.Sprintf(" (less the %.1f %% margin for the estimator's error)", 100*m)
	}
	if k.Hints != nil {
		err.Hints = k.Hints(b, &hints)
	}
	if m > 0 {
		err.Hints = append(err.Hints, Hint{Text: "a smaller margin", Setting: SettingMargin, Note: "0 disables it, at the risk of missing the budget when measured"})
	}
	return err
}

// pareto keeps the candidates no other dominates on quality (higher) and
// every budgeted cost (lower; throughput higher), sorted by quality.
func pareto(cs []Candidate, b *Budgets) []Candidate {
	names := b.Set()
	if len(names) == 0 {
		names = []string{BudgetMemory, BudgetE2E}
	}
	vals := func(c *Candidate) []float64 {
		out := make([]float64, len(names))
		for i, n := range names {
			k, _ := Kind(n)
			v := k.Value(b, &c.Costs)
			if k.Floor {
				v = -v
			}
			out[i] = v
		}
		return out
	}
	var out []Candidate
	vs := make([][]float64, len(cs))
	for i := range cs {
		vs[i] = vals(&cs[i])
	}
	for i := range cs {
		if !cs[i].Costs.Fits {
			continue
		}
		dominated := false
		for j := range cs {
			if i == j || !cs[j].Costs.Fits || cs[j].Quality < cs[i].Quality {
				continue
			}
			le, lt := true, cs[j].Quality > cs[i].Quality
			for k := range names {
				if vs[j][k] > vs[i][k] {
					le = false
					break
				}
				if vs[j][k] < vs[i][k] {
					lt = true
				}
			}
			if le && (lt || j < i) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, cs[i])
		}
	}
	sort.SliceStable(out, func(a, c int) bool { return out[a].Quality > out[c].Quality })
	return out
}
