package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/autocompress/autocompress/internal/progress"
)

// boundLag is how many jobs before job j the bound that may skip it
// ignores: the jobs still running while j starts (more than the cores).
const boundLag = 8

// job is one global shape under one setting.
type job struct {
	g  global
	si int
	ub float64
}

// upperBound is the proxy of g with every layer at its most valuable
// option (values need no menu: no LayerSum is computed).
func (e *evaluator) upperBound(g global) float64 {
	v := 0.0
	var shapes []LayerShape
	for l := range e.sp.Parent.Layers {
		shapes = e.shapes(shapes[:0], l, g)
		b := 0.0
		for _, s := range shapes {
			b = max(b, e.value(l, g, s))
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

// menuCache builds the menus of a global shape and their hulls once per
// distinct (precision, KV type), for every worker that asks (it is safe
// for concurrent use); it keeps those of the two global shapes asked for
// last (jobs come grouped by shape).
type menuCache struct {
	mu         sync.Mutex
	entries    map[menuKey]*menuEntry
	last, prev global
}

type menuKey struct {
	g global
	k int
}

type menuEntry struct {
	once  sync.Once
	menus [][]option
	hulls *hullSet
}

// hullSet holds per layer the hull of all options and the hull of the
// options that cut no block (for restoring layers beyond the caps).
type hullSet struct{ all, whole [][]int }

func (mc *menuCache) get(e *evaluator, g global, si int) ([][]option, *hullSet) {
	key := menuKey{g, e.menuOf[si]}
	mc.mu.Lock()
	if mc.entries == nil {
		mc.entries = map[menuKey]*menuEntry{}
	}
	en, ok := mc.entries[key]
	if !ok {
		if g != mc.last {
			mc.prev, mc.last = mc.last, g
			for k := range mc.entries {
				if k.g != mc.last && k.g != mc.prev {
					delete(mc.entries, k)
				}
			}
		}
		en = &menuEntry{}
		mc.entries[key] = en
	}
	mc.mu.Unlock()
	en.once.Do(func() {
		en.menus = e.menus(g, si)
		en.hulls = &hullSet{all: make([][]int, len(en.menus)), whole: make([][]int, len(en.menus))}
		var order []int
		for l, opts := range en.menus {
			order = byCost(order[:0], opts)
			en.hulls.all[l] = hull(opts, order, nil)
			en.hulls.whole[l] = hull(opts, order, func(o *option) bool { return !o.cuts.any() })
		}
	})
	return en.menus, en.hulls
}

// byCost sets dst to the indices of opts by increasing cost and, at equal
// cost, decreasing value (ties in input order).
func byCost(dst []int, opts []option) []int {
	for i := range opts {
		dst = append(dst, i)
	}
	slices.SortStableFunc(dst, func(a, b int) int {
		oa, ob := &opts[a], &opts[b]
		if oa.cost != ob.cost {
			return cmp.Compare(oa.cost, ob.cost)
		}
		return cmp.Compare(ob.value, oa.value)
	})
	return dst
}

// hull returns the options on the upper convex hull of value against the
// scalar cost, by increasing cost (and value): the only options a
// Lagrangian choice can take, and the steps local search walks. order is
// byCost's; keep, when set, leaves out the options it refuses.
func hull(opts []option, order []int, keep func(o *option) bool) []int {
	var h []int
	for _, i := range order {
		o := &opts[i]
		if keep != nil && !keep(o) {
			continue
		}
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
	return h
}

func runAutoCompress(ctx context.Context, e *evaluator, o *Options) (*Result, error) {
	res := &Result{Strategy: AutoCompress}
	gs := e.globals()
	// Upper bounds do not depend on the setting: compute them once per g
	// with the first setting's menus, and visit the shapes best-first.
	var jobs []job
	for _, g := range gs {
		ub := e.upperBound(g)
		for si := range e.sp.Settings {
			jobs = append(jobs, job{g, si, ub})
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].ub > jobs[j].ub })
	// Jobs run on every core, each core with its own evaluator (a Compiled
	// is not safe for concurrent use), taking the next job as it is free.
	// Whether job j is skipped by the bound is decided from jobs[:j-boundLag]
	// only (a worker waits until those are done), and results are taken in
	// job order: the outcome depends neither on timing nor on the number of
	// cores.
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
	evs := []*evaluator{e}
	for len(evs) < workers {
		ev, err := newEvaluator(e.sp, e.b, e.proxy, e.hw, e.w, e.opt)
		if err != nil {
			return res, err
		}
		evs = append(evs, ev)
	}
	var mc menuCache
	type outcome struct {
		solved, ok bool
		cd         Candidate
		sweep      []Candidate
	}
	outs := make([]outcome, len(jobs))
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		next   int                            // the next job to take
		prefix int                            // jobs[:prefix] are done
		done   = make([]bool, len(jobs))      //
		bestAt = make([]float64, len(jobs)+1) // [k]: the best quality of jobs[:k]
	)
	bestAt[0] = -1
	var wg sync.WaitGroup
	for _, ev := range evs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				for next < len(jobs) && prefix < next-boundLag {
					cond.Wait()
				}
				if next >= len(jobs) {
					mu.Unlock()
					return
				}
				k := next
				next++
				bound := bestAt[max(k-boundLag, 0)]
				mu.Unlock()
				if j := jobs[k]; j.ub > bound*(1-1e-12) && ctx.Err() == nil {
					out := &outs[k]
					out.solved = true
					menus, hull := mc.get(ev, j.g, j.si)
					idx, c, ok, sweep := ev.lagrange(j.si, j.g, menus, hull)
					out.sweep = sweep
					if ok {
						idx, c = ev.improve(ctx, j.si, j.g, menus, hull, idx, c, o.MaxEvaluations)
						out.cd, out.ok = ev.candidate(j.si, j.g, menus, idx, c), true
					}
				}
				mu.Lock()
				done[k] = true
				for prefix < len(jobs) && done[prefix] {
					q := bestAt[prefix]
					if outs[prefix].ok {
						q = max(q, outs[prefix].cd.Quality)
					}
					bestAt[prefix+1] = q
					prefix++
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	mu.Lock()
	task := progress.Start(o.Progress, progress.Event{Stage: "search", Phase: "searching global shapes", Total: int64(len(jobs)), Unit: "shape"})
	for reported := -1; prefix < len(jobs); {
		if task != nil && prefix != reported {
			reported = prefix
			mu.Unlock()
			task.Set(int64(reported), "")
			mu.Lock()
			continue // prefix may have moved: look again before waiting
		}
		cond.Wait()
	}
	mu.Unlock()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return res, err
	}
	task.Set(int64(len(jobs)), "")
	var finals []Candidate
	for k := range outs {
		out := &outs[k]
		if !out.solved {
			res.Skipped++
			continue
		}
		res.GlobalShapes++
		res.Pareto = append(res.Pareto, out.sweep...)
		if out.ok {
			finals = append(finals, out.cd)
			res.Pareto = append(res.Pareto, out.cd)
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
	inf := math.IsInf(lambda, 1)
	for l, opts := range menus {
		var best int
		if inf {
			bs := math.Inf(-1)
			for _, i := range hs.all[l] {
				if s := -opts[i].cost + 1e-9*opts[i].value*opts[0].cost; s > bs {
					best, bs = i, s
				}
			}
		} else {
			best = hullArgmax(opts, hs.all[l], lambda)
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
			h := hs.whole[l]
			if len(h) == 0 {
				continue
			}
			// The hull's costs rise strictly: with λ = +Inf its first
			// point is the cheapest.
			bi, bs := h[0], -opts[h[0]].cost
			if !inf {
				bi = hullArgmax(opts, h, lambda)
				bs = opts[bi].value - lambda*opts[bi].cost
			}
			rs = append(rs, restore{l, bi, bs})
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

// hullArgmax returns the first option of hull h maximising value −
// λ·cost. Along the hull the slopes decrease, so the score rises, then
// falls: a bisection for the first point its successor does not beat
// finds it in O(log len(h)).
func hullArgmax(opts []option, h []int, lambda float64) int {
	score := func(i int) float64 { return opts[i].value - lambda*opts[i].cost }
	lo, hi := 0, len(h)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if score(h[mid+1]) > score(h[mid]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return h[lo]
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

// move sets layer l to option i: value and cost change by dv and dc, and
// r is dv/dc (+Inf for a gain that costs nothing).
type move struct {
	l, i      int
	dv, dc, r float64
}

func newMove(l, i int, dv, dc float64) move {
	r := math.Inf(1)
	if dc > 0 || dv < 0 {
		r = dv / dc
	}
	return move{l, i, dv, dc, r}
}

// scan holds local search's per-layer neighbourhoods between rounds: a
// round changes one or two layers, so only theirs are looked at again.
type scan struct {
	up, down                    []move // per layer, the neighbouring hull points (l < 0: none)
	dirty                       []bool
	singles, bigUps, cheapDowns best
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
		sc.up[l] = newMove(l, up, opts[up].value-c.value, opts[up].cost-c.cost)
	}
	if down >= 0 {
		sc.down[l] = newMove(l, down, opts[down].value-c.value, opts[down].cost-c.cost)
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
	singles, bigUps, cheapDowns := &sc.singles, &sc.bigUps, &sc.cheapDowns
	for e.evals-start < int64(budget) {
		if ctx.Err() != nil {
			break
		}
		// The moves are offered in layer order, then option order, so
		// that ties keep that order.
		singles.reset(48, byGainPerCost)
		ups := 0
		if full {
			// Every option once: streamed into all three selections.
			bigUps.reset(24, byGain)
			cheapDowns.reset(24, byLossPerSaving)
			for l, opts := range menus {
				cur := &opts[idx[l]]
				for i := range opts {
					o := &opts[i]
					dv, dc := o.value-cur.value, o.cost-cur.cost
					switch {
					case dv > 1e-15:
						m := newMove(l, i, dv, dc)
						ups++
						singles.offer(&m)
						bigUps.offer(&m)
					case dv < 0 && dc < 0:
						m := newMove(l, i, dv, dc)
						cheapDowns.offer(&m)
					}
				}
			}
		} else {
			for l, opts := range menus {
				if sc.dirty[l] {
					sc.neighbours(l, opts, hs.all[l], idx[l])
					sc.dirty[l] = false
				}
				if sc.up[l].l >= 0 {
					ups++
					singles.offer(&sc.up[l])
				}
			}
		}
		if ups == 0 {
			if full {
				break
			}
			full = true
			continue
		}
		accepted := false
		for _, m := range singles.ms {
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
		if !full {
			bigUps.reset(24, byGain)
			cheapDowns.reset(24, byLossPerSaving)
			for l := range menus {
				if sc.up[l].l >= 0 {
					bigUps.offer(&sc.up[l])
				}
				if sc.down[l].l >= 0 {
					cheapDowns.offer(&sc.down[l])
				}
			}
		}
	pairs:
		for _, u := range bigUps.ms {
			for _, d := range cheapDowns.ms {
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

// The orders a best selection keeps.
const (
	byGainPerCost   = iota // dv/dc, largest first (a free gain first)
	byGain                 // dv, largest first
	byLossPerSaving        // dv/dc, smallest first (downs: dv, dc < 0)
)

func (m *move) key(by int) float64 {
	switch by {
	case byGain:
		return m.dv
	case byLossPerSaving:
		return -m.r
	}
	return m.r
}

// best keeps the k ≤ 48 best moves offered, in order by, best first,
// ties in the order offered: O(k) per offer at worst and O(1) for the
// most, which fall short of the k-th (a full sort of every option's move
// dominated the search's time).
type best struct {
	by, k int
	ms    []move
	keys  [48]float64
}

func (b *best) reset(k, by int) { b.k, b.by, b.ms = k, by, b.ms[:0] }

func (b *best) offer(m *move) {
	x := m.key(b.by)
	n := len(b.ms)
	if n == b.k && !(x > b.keys[n-1]) {
		return
	}
	if n < b.k {
		b.ms = append(b.ms, *m)
		n++
	}
	j := n - 1
	for ; j > 0 && x > b.keys[j-1]; j-- {
		b.ms[j], b.keys[j] = b.ms[j-1], b.keys[j-1]
	}
	b.ms[j], b.keys[j] = *m, x
}

func runMinitron(ctx context.Context, e *evaluator, o *Options) (*Result, error) {
	if e.sp.PerLayer || e.sp.MaxRemoved > 0 { // Uniform spaces remove nothing
		return nil, errors.New("search: the minitron strategy needs a uniform space (SpaceOptions.Uniform)")
	}
	res := &Result{Strategy: Minitron}
	var feasible []Candidate
	gs := e.globals()
	var mc menuCache
	task := progress.Start(o.Progress, progress.Event{Stage: "search", Phase: "Minitron grid", Total: int64(len(gs)), Unit: "shape"})
	for n, g := range gs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if n%16 == 0 {
			task.Set(int64(n), "")
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
	task.Set(int64(len(gs)), "")
	res.TopK = topK(e.sp, &o.Budgets, feasible, o.TopK)
	res.Notes = append(res.Notes, fmt.Sprintf("minitron: %d grid points × settings priced, %d meet the budgets; top %d by the proxy", res.GlobalShapes, len(feasible), len(res.TopK)))
	return res, nil
}
