package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// BudgetsFile is where the search stage records the budgets it resolved
// when some are relative to the parent (budgets.max_tpot: 0.6x): the
// limits in the search's SI units, and what the parent's figures were.
const BudgetsFile = "budgets.json"

// relativeSuffix marks a budget given as a multiple of the parent's
// figure: "0.6x" is 0.6 × the parent's.
const relativeSuffix = "x"

// relative are the budgets given as multiples of the parent's figure, by
// budget view (memory, ttft, tpot, e2e, throughput).
type relative map[string]float64

// ResolvedBudgets is BudgetsFile: each relative budget's multiple, the
// parent's figure it multiplies and where that figure came from
// ("measured": bench-serve on this host, the worst invocation;
// "estimated": the estimator's), and the limit.
type ResolvedBudgets struct {
	Source   string             `json:"source"`
	Multiple map[string]float64 `json:"multiple"`
	Parent   map[string]float64 `json:"parent"`
	Limits   map[string]float64 `json:"limits"`
}

// splitRelative returns b with its relative budgets ("0.6x") blanked, and
// their multiples by view. Params and request rates cannot be relative.
func splitRelative(b Budgets) (Budgets, relative, error) {
	rel := relative{}
	for _, f := range []struct {
		view, field string
		s           *string
	}{{"memory", "max_memory", &b.MaxMemory}, {"ttft", "max_ttft", &b.MaxTTFT}, {"tpot", "max_tpot", &b.MaxTPOT},
		{"e2e", "max_e2e", &b.MaxE2E}, {"throughput", "min_throughput", &b.MinThroughput}} {
		s := strings.TrimSpace(*f.s)
		if !strings.HasSuffix(s, relativeSuffix) || strings.HasSuffix(s, "/s") {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, relativeSuffix)), 64)
		if err != nil || !(x > 0) || x > 1000 {
			return b, nil, &ConfigError{Path: "budgets." + f.field, Msg: fmt.Sprintf("%q: a budget relative to the parent is a positive multiple of its figure, e.g. 0.6x", s)}
		}
		rel[f.view] = x
		*f.s = ""
	}
	return b, rel, nil
}

// apply sets each relative budget of out to its multiple of the parent's
// figure by view; a figure missing is an error naming the budget.
func (r relative) apply(out *search.Budgets, parent map[string]float64, source string) (ResolvedBudgets, error) {
	res := ResolvedBudgets{Source: source, Multiple: map[string]float64{}, Parent: map[string]float64{}, Limits: map[string]float64{}}
	for _, view := range r.views() {
		p, ok := parent[view]
		if !(p > 0) || !ok {
			return res, fmt.Errorf("budget %s relative to the parent: the parent's %s was not %s", view, view, source)
		}
		lim := r[view] * p
		setLimit(out, view, lim)
		res.Multiple[view], res.Parent[view], res.Limits[view] = r[view], p, lim
	}
	return res, nil
}

// views are the resolved budgets' views, sorted.
func (r ResolvedBudgets) views() []string { return relative(r.Multiple).views() }

func (r relative) views() []string {
	out := make([]string, 0, len(r))
	for v := range r {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// allViews is a budget with every relative view set, for budgetViews.
func (r relative) allViews() search.Budgets {
	var b search.Budgets
	for v := range r {
		setLimit(&b, v, 1)
	}
	return b
}

// parentEstimated is the estimator's figures of the parent under the run's
// deployment, by view.
func parentEstimated(t *target) (map[string]float64, error) {
	r, err := estimate.Estimate(t.arch, t.gpu, t.engine, estimate.Options{}, t.workload)
	if err != nil {
		return nil, fmt.Errorf("estimating the parent for the budgets relative to it: %w", err)
	}
	a := r.Analytic
	return map[string]float64{"memory": r.Memory.TotalBytes(), "ttft": a.TTFT, "tpot": a.TPOT, "e2e": a.E2E, "throughput": a.OutputTokS}, nil
}

// parentMeasured is the parent's figures measured by bench-serve on this
// host (the worst invocation, as budgets are judged), by view.
func parentMeasured(r relative, inv *servebench.Invocations, p90 bool) map[string]float64 {
	out := map[string]float64{}
	for _, v := range budgetViews(r.allViews()) {
		if m, _, ok := v.measured(inv, p90); ok {
			out[v.name] = m
		}
	}
	return out
}

// measureParent measures the parent on this host as the measure stage
// measures a child, under the engine's default settings (a sequence per
// client, the workload's context).
func measureParent(ctx context.Context, env *Env, t *target, c *Config, self string) (*servebench.Invocations, error) {
	dir := filepath.Join(env.StateDir(), "parent")
	if err := os.MkdirAll(dir, 0o755); err != nil { //output:inside
		return nil, err
	}
	if err := writeJSONFile(filepath.Join(dir, search.ServingFile), search.Serving{}); err != nil {
		return nil, err
	}
	env.Note("measuring the parent on this host for the budgets relative to it")
	return measureChild(ctx, env, t, c, t.parent, dir, self)
}
