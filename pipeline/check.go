package pipeline

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	// Next is the limit each measured budget gets in the next search and
	// Step how it was found: "tighten" (missed: scaled by
	// estimated/measured), "loosen" (met with room: scaled the same way,
	// so a pessimistic estimate gives back what it took), "bisect"
	// (between the loosest limit that measured met and the tightest that
	// missed) or "keep".
	Next map[string]float64 `json:"next,omitempty"`
	Step map[string]string  `json:"step,omitempty"`
	// Chosen marks the round whose child the search stage keeps: the last
	// that met every measured budget (the last round when none did).
	Chosen bool `json:"chosen,omitempty"`
	// ReusedFrom is the earlier round whose child this round's search chose
	// again: its measurement was used, not repeated (0: measured).
	ReusedFrom int `json:"reused_from,omitempty"`
}

// settleTolerance is how close (relative) the next limit must be to the
// one just searched, or the bracket's ends to each other, for a budget's
// re-choice to be settled.
const settleTolerance = 0.02

// bracket is what the rounds so far measured of one budget, as scales of
// the user's limit in the loosening direction (a ceiling's limit ÷ the
// user's, a floor's user limit ÷ its limit: larger is looser). met is the
// loosest searched scale whose child measured within the user's limit (0:
// none yet), missed the tightest scale of a child that did not (+Inf: none
// yet), taken at the child's estimate (tighter than, or at, the limit it
// was searched under); each end keeps its child's estimate and measurement.
type bracket struct {
	met, missed       float64
	metEst, metMeas   float64
	missEst, missMeas float64
}

// brackets are the rounds' brackets by budget view.
type brackets map[string]*bracket

// rechoose compares a measurement of the chosen child (its conservative
// figures: the worst of the invocations) with the user's budgets b and
// returns the round's record, the budgets for the next search and whether
// every measured budget is settled (no next search would change it by
// more than settleTolerance). cur are the budgets this round's search ran
// under. Each measured budget's scale s (its limit over the user's, looser
// above 1) is recorded in its bracket as met or missed, and its next scale
// is
//   - once one child measured met and another missed, a step between
//     them (bisection): where the two measurements interpolate to the
//     user's limit, kept in the middle half of the bracket so that each
//     round narrows it by at least a quarter; the loosest scale that met
//     when the interpolation lands there or the bracket is narrow (the
//     re-choice is settled on that round's child);
//   - otherwise estimated ÷ measured (a floor: measured ÷ estimated), the
//     scale at which a child the estimator rates as it rated this one
//     would sit at the user's limit measured: never looser than s after a
//     miss (tighten), never tighter after a meet (loosen, so that a
//     pessimistic estimate gives back what it took).
//
// Costs the measurement does not give (memory measured in this process)
// are not checked and keep their limits.
func (bs brackets) rechoose(b, cur search.Budgets, est *search.Costs, meas *servebench.Invocations) (search.Budgets, Round, bool) {
	r := Round{Limits: map[string]float64{}, Searched: map[string]float64{}, Estimated: map[string]float64{}, Measured: map[string]float64{},
		Invocations: map[string][]float64{}, Spread: map[string]float64{}, Next: map[string]float64{}, Step: map[string]string{}}
	next, settled := cur, true
	for _, v := range budgetViews(b) {
		lim, sl := v.limit(b), v.limit(cur)
		e := v.cost(est, b.P90)
		r.Limits[v.name], r.Searched[v.name], r.Estimated[v.name] = lim, sl, e
		m, across, ok := v.measured(meas, b.P90)
		if !ok || m <= 0 || e <= 0 || lim <= 0 || sl <= 0 {
			continue
		}
		r.Measured[v.name], r.Invocations[v.name], r.Spread[v.name] = m, across.Invocations, across.Spread
		// scale turns a limit into its scale; s is this round's, p the one
		// estimated ÷ measured calls for.
		scale := func(x float64) float64 { return x / lim }
		met := m <= lim
		if !v.max {
			scale, met = func(x float64) float64 { return lim / x }, m >= lim
		}
		s, p := scale(sl), scale(lim*e/m)
		br := bs[v.name]
		if br == nil {
			br = &bracket{missed: math.Inf(1)}
			bs[v.name] = br
		}
		if met && s > br.met {
			br.met, br.metEst, br.metMeas = s, e, m
		} else if se := math.Min(s, scale(e)); !met && se < br.missed {
			br.missed, br.missEst, br.missMeas = se, e, m
		}
		if !met {
			r.Missed = append(r.Missed, v.name)
		}
		var ns float64
		var step string
		switch {
		case br.met > 0 && !math.IsInf(br.missed, 1):
			w := br.missed - br.met
			ns, step = br.met+w/2, "bisect"
			if dm := br.missMeas - br.metMeas; dm != 0 {
				at := scale(br.metEst + (lim-br.metMeas)*(br.missEst-br.metEst)/dm)
				ns = math.Min(math.Max(at, br.met+w/4), br.met+3*w/4)
				if at <= br.met*(1+settleTolerance) {
					ns = br.met
				}
			}
			if w <= br.met*settleTolerance || ns == br.met {
				ns, step = br.met, "keep"
			}
		case met:
			ns, step = math.Max(p, s), "loosen"
		default:
			ns, step = math.Min(p, s), "tighten"
		}
		if step == "loosen" && ns <= s*(1+settleTolerance) {
			ns, step = s, "keep"
		}
		if step != "keep" {
			settled = false
		}
		nl := lim * ns
		if !v.max {
			nl = lim / ns
		}
		r.Next[v.name], r.Step[v.name] = nl, step
		setLimit(&next, v.name, nl)
	}
	return next, r, settled
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
// distillation) and re-runs the search with the measured budgets' limits
// re-chosen (brackets.rechoose: tightened after a miss, loosened after a
// meet with room, bisected once both are known) until every one is
// settled, at most maxRounds times. A child that an earlier round measured
// is not measured again. It returns the report of the last round that met
// every measured budget (the last round's when none did) and every round,
// that one marked Chosen. user are the budgets the measurements are judged
// by; req.Budgets are the limits the search ran under, which may differ
// (a budget relative to the parent: the search's on the parent's
// estimate, the judged one on its measurement).
func checkRounds(ctx context.Context, env *Env, req search.Request, user search.Budgets, rep *search.Report, maxRounds int,
	measure func(rep *search.Report, round int) (*servebench.Invocations, error)) (*search.Report, []Round, error) {
	type measured struct {
		child *search.Candidate
		inv   *servebench.Invocations
		round int
	}
	var (
		rounds []Round
		seen   []measured
	)
	bs := brackets{}
	chosen, chosenRep := -1, rep
	for i := 1; ; i++ {
		var meas *servebench.Invocations
		reused := 0
		for _, s := range seen {
			if sameChild(s.child, &rep.Result.Best) {
				meas, reused = s.inv, s.round
				break
			}
		}
		if meas == nil {
			var err error
			if meas, err = measure(rep, i); err != nil {
				return nil, nil, err
			}
			seen = append(seen, measured{&rep.Result.Best, meas, i})
		}
		nb, r, settled := bs.rechoose(user, req.Budgets, &rep.Result.Best.Costs, meas)
		r.Round, r.ReusedFrom = i, reused
		rounds = append(rounds, r)
		if len(r.Missed) == 0 {
			chosen, chosenRep = len(rounds)-1, rep
		}
		verdict := "meets every budget measured"
		if len(r.Missed) > 0 {
			verdict = fmt.Sprintf("misses %v measured", r.Missed)
		}
		if reused > 0 {
			verdict += fmt.Sprintf(" (the child of round %d, its measurement reused)", reused)
		}
		if settled {
			env.Note("round %d: the pruned child %s; the re-choice is settled", i, verdict)
			break
		}
		if i > maxRounds {
			env.Note("round %d: the pruned child %s; no re-choice left (measure.rounds %d)", i, verdict, maxRounds)
			break
		}
		env.Note("round %d: the pruned child %s; searching again with %s", i, verdict, stepsText(r))
		req.Budgets = nb
		next, err := search.Execute(ctx, req)
		if err != nil {
			if chosen >= 0 {
				env.Note("round %d: the search under %s found no child (%v); keeping round %d's", i+1, nb.String(), err, rounds[chosen].Round)
				break
			}
			return nil, nil, fmt.Errorf("search round %d (budgets re-chosen after measuring the pruned child: %s): %w", i+1, nb.String(), err)
		}
		rep = next
	}
	if chosen < 0 {
		chosen, chosenRep = len(rounds)-1, rep
	}
	rounds[chosen].Chosen = true
	judged := user
	chosenRep.Judged = &judged
	return chosenRep, rounds, nil
}

// stepsText says how each measured budget's limit moves for the next
// search, in the search's SI units.
func stepsText(r Round) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(r.Step)) {
		if r.Step[name] == "keep" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %sed from %.4g to %.4g", name, r.Step[name], r.Searched[name], r.Next[name]))
	}
	if len(parts) == 0 {
		return "the same limits"
	}
	return strings.Join(parts, ", ")
}

// sameChild reports whether a and b are the same child: the same shape
// under the same engine settings.
func sameChild(a, b *search.Candidate) bool {
	return a.Hidden == b.Hidden && a.Heads == b.Heads && a.Settings == b.Settings && slices.Equal(a.Layers, b.Layers)
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
