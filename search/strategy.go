package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
)

// job is one global shape under one setting.
type job struct {
	g  global
	si int
	ub float64
}

// upperBound is the proxy of g with every layer at its most valuable option.
func (e *evaluator) upperBound(g global, menus [][]option) float64 {
	v := 0.0
	for _, opts := range menus {
		b := 0.0
		for i := range opts {
			b = max(b, opts[i].value)
		}
		v += b
	}
	return e.proxy.Hidden(g.hidden) * v
}

// shapeKey identifies a candidate's shape (not its settings).
func shapeKey(c *Candidate) string {
	return fmt.Sprint(c.Hidden, c.Heads, c.Layers)
}

// better orders feasible candidates: higher quality, then more slack.
func better(b *Budgets, x, y *Candidate) bool {
	if x.Quality != y.Quality {
		return x.Quality > y.Quality
	}
	_, ux := b.Binding(&x.Costs)
	_, uy := b.Binding(&y.Costs)
	return ux < uy
}

// topK keeps the best setting of each shape and the k best shapes.
// Every candidate kept is checked once more with the serve-on engine's load
// predicate (the space is built so that none fails it).
func topK(sp *Space, b *Budgets, cs []Candidate, k int) []Candidate {
	sort.SliceStable(cs, func(i, j int) bool { return better(b, &cs[i], &cs[j]) })
	seen := map[string]bool{}
	var out []Candidate
	for _, c := range cs {
		key := shapeKey(&c)
		if seen[key] {
			continue
		}
		seen[key] = true
		if !sp.ServeOn.Loads(sp.Model(&c), sp.TP) {
			continue
		}
		out = append(out, c)
		if len(out) == k {
			break
		}
	}
	return out
}

// menuCache builds the menus of one global shape once per distinct
// (precision, KV type).
type menuCache struct {
	g     global
	menus map[int][][]option
	hulls map[int]*hullSet
}

// hullSet holds per layer the hull of all options and the hull of the
// options that cut no block (for restoring layers beyond the caps).
type hullSet struct{ all, whole [][]int }

func (mc *menuCache) get(e *evaluator, g global, si int) ([][]option, *hullSet) {
	if mc.menus == nil || mc.g != g {
		mc.g, mc.menus, mc.hulls = g, map[int][][]option{}, map[int]*hullSet{}
	}
	k := e.menuOf[si]
	m, ok := mc.menus[k]
	if !ok {
		m = e.menus(g, si)
		mc.menus[k] = m
		mc.hulls[k] = &hullSet{all: hulls(m, nil), whole: hulls(m, func(l int, o *option) bool { return !o.cuts.any() })}
	}
	return m, mc.hulls[k]
}

// hulls returns, per layer, the options on the upper convex hull of value
// against the scalar cost, by increasing cost (and value): the only
// options a Lagrangian choice can take, and the steps local search walks.
func hulls(menus [][]option, keep func(l int, o *option) bool) [][]int {
	out := make([][]int, len(menus))
	for l, opts := range menus {
		idx := make([]int, 0, len(opts))
		for i := range opts {
			if keep == nil || keep(l, &opts[i]) {
				idx = append(idx, i)
			}
		}
		sort.SliceStable(idx, func(a, b int) bool {
			oa, ob := &opts[idx[a]], &opts[idx[b]]
			if oa.cost != ob.cost {
				return oa.cost < ob.cost
			}
			return oa.value > ob.value
		})
		var h []int
		for _, i := range idx {
			o := &opts[i]
			if len(h) > 0 && o.value <= opts[h[len(h)-1]].value {
				continue // dominated: costs more, worth no more
			}
			for len(h) >= 2 {
				a, b := &opts[h[len(h)-2]], &opts[h[len(h)-1]]
				// b lies on or below the segment a–o: not on the hull.
				if (b.value-a.value)*(o.cost-a.cost) <= (o.value-a.value)*(b.cost-a.cost) {
					h = h[:len(h)-1]
					continue
				}
				break
			}
			h = append(h, i)
		}
		out[l] = h
	}
	return out
}

func runAutoCompress(ctx context.Context, e *evaluator, o *Options) (*Result, error) {
	res := &Result{Strategy: AutoCompress}
	gs := e.globals()
	// Upper bounds do not depend on the setting: compute them once per g
	// with the first setting's menus, and visit the shapes best-first.
	var jobs []job
	for _, g := range gs {
		ub := e.upperBound(g, e.menus(g, 0))
		for si := range e.sp.Settings {
			jobs = append(jobs, job{g, si, ub})
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].ub > jobs[j].ub })
	// Jobs run in batches of one per core, each core with its own
	// evaluator (a Compiled is not safe for concurrent use). The bound
	// decides before a batch from the batches already finished, and results
	// are taken in job order, so the outcome does not depend on timing.
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
	evs := []*evaluator{e}
	for len(evs) < workers {
		ev, err := newEvaluator(e.sp, e.b, e.proxy, e.hw, e.w, e.opt)
		if err != nil {
			return res, err
		}
		evs = append(evs, ev)
	}
	mcs := make([]menuCache, workers)
	type outcome struct {
		solved, ok bool
		cd         Candidate
		sweep      []Candidate
	}
	var finals []Candidate
	bestQ := -1.0
	outs := make([]outcome, workers)
	for start := 0; start < len(jobs); start += workers {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if o.Progress != nil {
			o.Progress("searching global shapes", start, len(jobs))
		}
		batch := jobs[start:min(start+workers, len(jobs))]
		var wg sync.WaitGroup
		for k, j := range batch {
			outs[k] = outcome{}
			if j.ub <= bestQ*(1-1e-12) {
				res.Skipped++
				continue
			}
			wg.Add(1)
			go func(k int, j job) {
				defer wg.Done()
				ev, out := evs[k], &outs[k]
				out.solved = true
				menus, hull := mcs[k].get(ev, j.g, j.si)
				idx, c, ok, sweep := ev.lagrange(j.si, j.g, menus, hull)
				out.sweep = sweep
				if !ok {
					return
				}
				idx, c = ev.improve(ctx, j.si, j.g, menus, hull, idx, c, o.MaxEvaluations)
				out.cd, out.ok = ev.candidate(j.si, j.g, menus, idx, c), true
			}(k, j)
		}
		wg.Wait()
		for k := range batch {
			out := &outs[k]
			if !out.solved {
				continue
			}
			res.GlobalShapes++
			res.Pareto = append(res.Pareto, out.sweep...)
			if out.ok {
				finals = append(finals, out.cd)
				res.Pareto = append(res.Pareto, out.cd)
				bestQ = max(bestQ, out.cd.Quality)
			}
		}
	}
	for _, ev := range evs[1:] {
		e.merge(ev)
	}
	res.TopK = topK(e.sp, &o.Budgets, finals, o.TopK)
	if len(res.Pareto) > 4000 {
		// Keep the front tractable: the strongest points of each side.
		sort.SliceStable(res.Pareto, func(a, b int) bool { return res.Pareto[a].Quality > res.Pareto[b].Quality })
		res.Pareto = res.Pareto[:4000]
	}
	res.Notes = append(res.Notes, fmt.Sprintf("autocompress: %d global shapes × settings solved by Lagrangian relaxation over the per-layer menus and local search on the estimator's true cost, %d skipped by the bound", res.GlobalShapes, res.Skipped))
	return res, nil
}

// pick sets idx to each layer's option maximising value − λ·cost (λ = +Inf:
// the cheapest), then restores removed layers beyond the space's limit,
// the most valuable first.
func (e *evaluator) pick(menus [][]option, hs *hullSet, lambda float64, idx []int) {
	removed := 0
	for l, opts := range menus {
		best, bs := 0, math.Inf(-1)
		for _, i := range hs.all[l] {
			var s float64
			if math.IsInf(lambda, 1) {
				s = -opts[i].cost + 1e-9*opts[i].value*opts[0].cost
			} else {
				s = opts[i].value - lambda*opts[i].cost
			}
			if s > bs {
				best, bs = i, s
			}
		}
		idx[l] = best
		if opts[best].cuts.any() {
			removed++
		}
	}
	if removed > 0 && e.overCap(menus, idx) {
		// Restore cut layers, the best non-cut option of each, most valuable
		// first, until the caps hold.
		type restore struct {
			l, i int
			s    float64
		}
		var rs []restore
		for l, opts := range menus {
			if !opts[idx[l]].cuts.any() {
				continue
			}
			bi, bs := -1, math.Inf(-1)
			for _, i := range hs.whole[l] {
				s := opts[i].value - lambda*opts[i].cost
				if math.IsInf(lambda, 1) {
					s = -opts[i].cost
				}
				if s > bs {
					bi, bs = i, s
				}
			}
			if bi >= 0 {
				rs = append(rs, restore{l, bi, bs})
			}
		}
		sort.Slice(rs, func(a, b int) bool { return rs[a].s > rs[b].s })
		for _, r := range rs {
			if !e.overCap(menus, idx) {
				break
			}
			idx[r.l] = r.i
		}
	}
}

// overCap reports whether choice idx removes more layers, attention
// blocks or MLP blocks than the space allows (a removed layer counts for
// both of its blocks): the proxy is least trustworthy for deep cuts, and a
// stack without most of its attention is no longer the parent's kind of
// model.
func (e *evaluator) overCap(menus [][]option, idx []int) bool {
	return cutsOf(menus, idx).over(e.sp.MaxRemoved)
}

// cutsOf sums what choice idx cuts.
func cutsOf(menus [][]option, idx []int) cuts {
	var c cuts
	for l, i := range idx {
		c = c.add(menus[l][i].cuts)
	}
	return c
}

// lagrange finds the smallest λ whose relaxed choice meets the budgets by
// the estimator (bisection on a log scale). It returns the choice, its
// costs, whether any λ is feasible, and the points it priced.
func (e *evaluator) lagrange(si int, g global, menus [][]option, hull *hullSet) ([]int, Costs, bool, []Candidate) {
	n := len(menus)
	idx := make([]int, n)
	var sweep []Candidate
	try := func(lambda float64) (Costs, bool) {
		e.pick(menus, hull, lambda, idx)
		c := e.price(si, g, menus, idx)
		if len(sweep) < 48 {
			sweep = append(sweep, e.candidate(si, g, menus, idx, c))
		}
		return c, e.b.Meets(&c)
	}
	if c, ok := try(0); ok {
		return idx, c, true, sweep
	}
	if _, ok := try(math.Inf(1)); !ok {
		return nil, Costs{}, false, sweep
	}
	var vs, cs float64
	for _, opts := range menus {
		vs += opts[0].value
		cs += opts[0].cost
	}
	hi := 1e-6 * vs / math.Max(cs, 1)
	var hc Costs
	ok := false
	for k := 0; k < 80; k++ {
		if hc, ok = try(hi); ok {
			break
		}
		hi *= 4
	}
	if !ok {
		hc, _ = try(math.Inf(1))
		e.pick(menus, hull, math.Inf(1), idx)
		return append([]int(nil), idx...), hc, true, sweep
	}
	lo := hi / 4
	bestIdx := append([]int(nil), idx...)
	for k := 0; k < 24 && hi/lo > 1+1e-4; k++ {
		mid := math.Sqrt(lo * hi)
		if c, ok := try(mid); ok {
			hi, hc = mid, c
			copy(bestIdx, idx)
		} else {
			lo = mid
		}
	}
	return bestIdx, hc, true, sweep
}

type move struct {
	l, i   int
	dv, dc float64
}

// scan holds local search's per-layer neighbourhoods between rounds: a
// round changes one or two layers, so only theirs are looked at again.
type scan struct {
	up, down                    []move // per layer, the neighbouring hull points (l < 0: none)
	dirty                       []bool
	ups, downs                  []move
	singles, bigUps, cheapDowns []move
}

func (sc *scan) reset(n int) {
	sc.up, sc.down, sc.dirty = resize(sc.up, n), resize(sc.down, n), resize(sc.dirty, n)
	for l := range sc.dirty {
		sc.dirty[l] = true
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// neighbours sets layer l's moves to the neighbouring hull points of its
// current option: the cheapest one worth more, the dearest one costing less.
func (sc *scan) neighbours(l int, opts []option, hull []int, cur int) {
	c := &opts[cur]
	up, down := -1, -1
	for _, i := range hull {
		o := &opts[i]
		if o.value > c.value+1e-15 && up < 0 {
			up = i
		}
		if o.cost < c.cost && o.value < c.value {
			down = i
		}
	}
	sc.up[l], sc.down[l] = move{l: -1}, move{l: -1}
	if up >= 0 {
		sc.up[l] = move{l, up, opts[up].value - c.value, opts[up].cost - c.cost}
	}
	if down >= 0 {
		sc.down[l] = move{l, down, opts[down].value - c.value, opts[down].cost - c.cost}
	}
}

// improve runs local search from a feasible choice: single-layer upgrades
// by value gained per cost added, then pair exchanges (one layer down, one
// up) when no single upgrade fits; every move is priced by the estimator.
//
// A round changes one or two layers, so it is priced as a change of the
// committed candidate (priceChange) and only the changed layers' hull
// neighbours are looked up again; the moves a round considers, and their
// order, are those of a full scan.
func (e *evaluator) improve(ctx context.Context, si int, g global, menus [][]option, hs *hullSet, idx []int, c Costs, budget int) ([]int, Costs) {
	start := e.evals
	sc := &e.scan
	sc.reset(len(menus))
	e.commit(menus, idx)
	cut := cutsOf(menus, idx)
	capN := e.sp.MaxRemoved
	// accept tries the committed choice with the layers of ms changed and
	// keeps it when it meets the budgets (confirmed by an exact pricing).
	accept := func(ms ...move) bool {
		nc := cut
		for _, m := range ms {
			nc = nc.sub(menus[m.l][idx[m.l]].cuts).add(menus[m.l][m.i].cuts)
		}
		if nc.over(capN) {
			return false
		}
		var pc Costs
		if len(ms) == 1 {
			pc = e.priceChange(si, g, ms[0].l, &menus[ms[0].l][ms[0].i], -1, nil)
		} else {
			pc = e.priceChange(si, g, ms[0].l, &menus[ms[0].l][ms[0].i], ms[1].l, &menus[ms[1].l][ms[1].i])
		}
		if !e.b.Meets(&pc) {
			return false
		}
		var old [2]int
		for k, m := range ms {
			old[k], idx[m.l] = idx[m.l], m.i
		}
		fc, ok := e.confirm(si, g, menus, idx)
		if !ok { // a change at the limit, within rounding: rejected
			for k, m := range ms {
				idx[m.l] = old[k]
			}
			e.commit(menus, idx)
			return false
		}
		c, cut = fc, nc
		for _, m := range ms {
			sc.dirty[m.l] = true
		}
		return true
	}
	full := false // after a local optimum on the hull: every option once
	for e.evals-start < int64(budget) {
		if ctx.Err() != nil {
			break
		}
		ups, downs := sc.ups[:0], sc.downs[:0]
		for l, opts := range menus {
			if full {
				cur := &opts[idx[l]]
				for i := range opts {
					o := &opts[i]
					dv, dc := o.value-cur.value, o.cost-cur.cost
					switch {
					case dv > 1e-15:
						ups = append(ups, move{l, i, dv, dc})
					case dv < 0 && dc < 0:
						downs = append(downs, move{l, i, dv, dc})
					}
				}
				continue
			}
			if sc.dirty[l] {
				sc.neighbours(l, opts, hs.all[l], idx[l])
				sc.dirty[l] = false
			}
			if sc.up[l].l >= 0 {
				ups = append(ups, sc.up[l])
			}
			if sc.down[l].l >= 0 {
				downs = append(downs, sc.down[l])
			}
		}
		sc.ups, sc.downs = ups, downs
		if len(ups) == 0 {
			if full {
				break
			}
			full = true
			continue
		}
		ratio := func(m move) float64 {
			if m.dc <= 0 {
				return math.Inf(1)
			}
			return m.dv / m.dc
		}
		sc.singles = topMoves(sc.singles[:0], ups, 48, func(a, b move) bool { return ratio(a) > ratio(b) })
		accepted := false
		for _, m := range sc.singles {
			if e.evals-start >= int64(budget) {
				break
			}
			if accept(m) {
				accepted = true
				break
			}
		}
		if accepted {
			full = false
			continue
		}
		// Pair exchanges: the largest gains against the cheapest losses.
		sc.bigUps = topMoves(sc.bigUps[:0], ups, 24, func(a, b move) bool { return a.dv > b.dv })
		sc.cheapDowns = topMoves(sc.cheapDowns[:0], downs, 24, func(a, b move) bool { return a.dv/a.dc < b.dv/b.dc })
	pairs:
		for _, u := range sc.bigUps {
			for _, d := range sc.cheapDowns {
				if u.l == d.l || u.dv+d.dv <= 1e-15 {
					continue
				}
				if e.evals-start >= int64(budget) {
					break pairs
				}
				if accept(u, d) {
					accepted = true
					break pairs
				}
			}
		}
		switch {
		case accepted:
			full = false
		case full:
			return idx, c
		default:
			full = true
		}
	}
	return idx, c
}

// topMoves appends to dst the k best of ms by better, best first, in
// O(len(ms)·k) worst case and about O(len(ms)) in practice (a full sort of
// every option's move dominated the search's time).
func topMoves(dst, ms []move, k int, better func(a, b move) bool) []move {
	for _, m := range ms {
		if len(dst) == k && !better(m, dst[k-1]) {
			continue
		}
		if len(dst) < k {
			dst = append(dst, m)
		} else {
			dst[k-1] = m
		}
		for i := len(dst) - 1; i > 0 && better(dst[i], dst[i-1]); i-- {
			dst[i], dst[i-1] = dst[i-1], dst[i]
		}
	}
	return dst
}

func runMinitron(ctx context.Context, e *evaluator, o *Options) (*Result, error) {
	if e.sp.PerLayer || e.sp.MaxRemoved > 0 { // Uniform spaces remove nothing
		return nil, errors.New("search: the minitron strategy needs a uniform space (SpaceOptions.Uniform)")
	}
	res := &Result{Strategy: Minitron}
	var feasible []Candidate
	gs := e.globals()
	var mc menuCache
	for n, g := range gs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if o.Progress != nil && n%16 == 0 {
			o.Progress("Minitron grid", n, len(gs))
		}
		for si := range e.sp.Settings {
			menus, _ := mc.get(e, g, si)
			idx := make([]int, len(menus))
			c := e.price(si, g, menus, idx)
			cd := e.candidate(si, g, menus, idx, c)
			res.GlobalShapes++
			res.Pareto = append(res.Pareto, cd)
			if cd.Meets {
				feasible = append(feasible, cd)
			}
		}
	}
	res.TopK = topK(e.sp, &o.Budgets, feasible, o.TopK)
	res.Notes = append(res.Notes, fmt.Sprintf("minitron: %d grid points × settings priced, %d meet the budgets; top %d by the proxy", res.GlobalShapes, len(feasible), len(res.TopK)))
	return res, nil
}
