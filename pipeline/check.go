package pipeline

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// RoundsFile is where the search stage records its measured checks.
const RoundsFile = "rounds.json"

// Round is one check of the search's choice: the pruned child measured
// under the chosen settings before distillation (serving costs do not
// depend on the weights), against the budgets the search ran under.
type Round struct {
	Round int `json:"round"`
	// Limits (the user's), Searched (the limits this round's search ran
	// under), Estimated and Measured are per budget view (memory, ttft,
	// ...), in the search's SI units; Missed lists the user's budgets the
	// measurement missed.
	Limits    map[string]float64 `json:"limits"`
	Searched  map[string]float64 `json:"searched"`
	Estimated map[string]float64 `json:"estimated"`
	// Measured is the conservative figure over the invocations (the
	// worst), Invocations each invocation's own and Spread their relative
	// spread (max−min)/median.
	Measured    map[string]float64   `json:"measured"`
	Invocations map[string][]float64 `json:"invocations,omitempty"`
	Spread      map[string]float64   `json:"spread,omitempty"`
	Missed      []string             `json:"missed,omitempty"`
}

// tighten compares a measurement of the chosen child (its conservative
// figures: the worst of the invocations) with the user's budgets b and
// returns the round's record and the budgets for the next
// search: cur (the budgets this round's search ran under) with each
// budget the measurement missed set to the user's limit × estimated ÷
// measured (a ceiling lowered, a throughput floor raised) where that is
// tighter, so that a child the estimator rates as it rated this one would
// sit at the user's limit measured. Costs the measurement does not give
// (memory measured in this process) are not checked.
func tighten(b, cur search.Budgets, est *search.Costs, meas *servebench.Invocations) (search.Budgets, Round) {
	r := Round{Limits: map[string]float64{}, Searched: map[string]float64{}, Estimated: map[string]float64{}, Measured: map[string]float64{},
		Invocations: map[string][]float64{}, Spread: map[string]float64{}}
	for _, v := range budgetViews(b) {
		lim, sl := v.limit(b), v.limit(cur)
		e := v.cost(est, b.P90)
		r.Limits[v.name], r.Searched[v.name], r.Estimated[v.name] = lim, sl, e
		m, across, ok := v.measured(meas, b.P90)
		if !ok || m <= 0 || e <= 0 {
			continue
		}
		r.Measured[v.name], r.Invocations[v.name], r.Spread[v.name] = m, across.Invocations, across.Spread
		met := m <= lim
		if !v.max {
			met = m >= lim
		}
		if met {
			continue
		}
		r.Missed = append(r.Missed, v.name)
		next := lim * e / m
		if v.max {
			next = math.Min(next, sl)
		} else {
			next = math.Max(next, sl)
		}
		setLimit(&cur, v.name, next)
	}
	return cur, r
}

func setLimit(b *search.Budgets, view string, x float64) {
	switch view {
	case "memory":
		b.MaxMemory = x
	case "ttft":
		b.MaxTTFT = x
	case "tpot":
		b.MaxTPOT = x
	case "e2e":
		b.MaxE2E = x
	case "throughput":
		b.MinThroughput.TokensPerS = x
	case "request rate":
		b.MinThroughput.RequestsPerS = x
	}
}

// checkRounds measures the search's choice (measure: pruned, before
// distillation) and, while a budget is missed, re-runs the search with the
// missed budgets tightened, at most maxRounds times. It returns the last
// report and every round.
func checkRounds(ctx context.Context, env *Env, req search.Request, rep *search.Report, maxRounds int,
	measure func(rep *search.Report, round int) (*servebench.Invocations, error)) (*search.Report, []Round, error) {
	var rounds []Round
	user := req.Budgets
	for i := 1; ; i++ {
		meas, err := measure(rep, i)
		if err != nil {
			return nil, nil, err
		}
		nb, r := tighten(user, req.Budgets, &rep.Result.Best.Costs, meas)
		r.Round = i
		rounds = append(rounds, r)
		if len(r.Missed) == 0 {
			env.Note("round %d: the pruned child meets every budget measured", i)
			return rep, rounds, nil
		}
		if i > maxRounds {
			env.Note("round %d: the pruned child misses %v measured; no re-choice left (measure.rounds %d)", i, r.Missed, maxRounds)
			return rep, rounds, nil
		}
		env.Note("round %d: the pruned child misses %v measured; searching again with them scaled by estimated/measured (the worst invocation)", i, r.Missed)
		req.Budgets = nb
		if rep, err = search.Execute(ctx, req); err != nil {
			return nil, nil, fmt.Errorf("search round %d (budgets tightened after measuring the pruned child: %s): %w", i+1, nb.String(), err)
		}
	}
}

// measureChoice prunes rep's choice into the stage's state directory and
// measures it as the measure stage would (c.Measure.Invocations separate
// invocations).
func measureChoice(ctx context.Context, env *Env, t *target, c *Config, rep *search.Report, round int, self string) (*servebench.Invocations, error) {
	dir := filepath.Join(env.StateDir(), fmt.Sprintf("round%d", round))
	os.RemoveAll(dir)
	sdir := filepath.Join(dir, SearchDir)
	if err := rep.Write(ctx, sdir, false); err != nil {
		return nil, err
	}
	plan, err := prune.LoadPlan(filepath.Join(sdir, search.PlanFile))
	if err != nil {
		return nil, err
	}
	child := filepath.Join(dir, ChildDir)
	if _, err := prune.Prune(ctx, prune.Options{Model: t.parent, Plan: plan, Out: child, Engine: t.serveOn.Name, TP: c.Deployment.TP}); err != nil {
		return nil, err
	}
	meas, err := measureChild(ctx, env, t, c, child, sdir, self)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(dir)
	return meas, nil
}
