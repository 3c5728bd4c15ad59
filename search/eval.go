package search

import (
	"math"
	"reflect"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// global is a global shape: hidden size, query heads, the
// uniform MLP width (uniform spaces; 0 when per layer), Mamba heads and
// their head dimension, the KV-group count of every attention block
// (Space.UniformKV; 0: per layer) and routed experts (every MoE layer
// keeps the same number: no engine loads per-layer expert counts,
// export.Capabilities.PerLayerExperts).
type global struct {
	hidden, heads, mlp, mamba, kv, mambaDim, experts int
}

// option is one choice for one parent layer under a global shape.
type option struct {
	shape LayerShape
	value float64 // w_l · retained share (before the hidden factor)
	cost  float64 // scalar cost for the Lagrangian (byte-equivalents per step)
	sum   estimate.LayerSum
	// cuts is what the option removes of the parent layer, counted
	// against the space's caps (see overCap).
	cuts cuts
}

// cuts counts removed layers and removed attention and MLP blocks (a
// removed layer counts for each block the parent layer has).
type cuts struct{ layers, attn, mlp int32 }

func (c cuts) add(x cuts) cuts { return cuts{c.layers + x.layers, c.attn + x.attn, c.mlp + x.mlp} }
func (c cuts) sub(x cuts) cuts { return cuts{c.layers - x.layers, c.attn - x.attn, c.mlp - x.mlp} }

// any reports whether anything is cut.
func (c cuts) any() bool { return c != cuts{} }

// over reports whether c exceeds the cap of m of each kind.
func (c cuts) over(m int) bool {
	m32 := int32(m)
	return c.layers > m32 || c.attn > m32 || c.mlp > m32
}

// layerSum is the option's LayerSum, nil for a removed layer.
func (o *option) layerSum() *estimate.LayerSum {
	if o.shape.Removed {
		return nil
	}
	return &o.sum
}

// evaluator prices candidates with the estimator's real cost: every
// setting has its own Compiled, and a candidate is assembled from its
// layers' LayerSums and priced with PriceSummary (no allocation).
type evaluator struct {
	sp    *Space
	b     *Budgets
	proxy *Proxy
	hw    *hardware.GPU
	w     *workload.Workload
	comps []*estimate.Compiled
	// menuOf maps a setting to the first setting with the same precision
	// and KV type (whose Compiled computes the shared LayerSums).
	menuOf []int
	prec   []estimate.Precision
	kvB    []float64
	evals  int64
	opt    estimate.Options
	// refused counts global shapes the serve-on engine does not load,
	// loadable those it does.
	refused, loadable int
	// isl and osl are the workload's mean input and output lengths; same
	// maps a layer to the first parent layer equal to it.
	isl, osl float64
	same     []int

	sum  estimate.Summary
	ptrs []*estimate.LayerSum
	base architecture.Model
	// tot is local search's committed candidate (see priceChange).
	tot  estimate.Total
	scan scan

	// best reachable value of every budget over everything priced, for the
	// infeasibility report (throughput: the largest).
	reach    []float64 // by BudgetKinds
	reachSet bool
}

func newEvaluator(sp *Space, b *Budgets, proxy *Proxy, hw *hardware.GPU, w *workload.Workload, o estimate.Options) (*evaluator, error) {
	e := &evaluator{sp: sp, b: b, proxy: proxy, hw: hw, w: w, opt: o}
	for i, st := range sp.Settings {
		oo := o
		oo.Precision, oo.KVDType, oo.TP = st.Precision, st.KVDType, sp.TP
		if st.MaxNumSeqs > 0 {
			oo.MaxNumSeqs = st.MaxNumSeqs
		}
		if st.MemFraction > 0 {
			oo.MemFraction = st.MemFraction
		}
		c, err := estimate.Compile(hw, sp.Engine, oo, w, nil)
		if err != nil {
			return nil, err
		}
		e.comps = append(e.comps, c)
		m := i
		for j := 0; j < i; j++ {
			if sp.Settings[j].Precision == st.Precision && sp.Settings[j].KVDType == st.KVDType {
				m = e.menuOf[j]
				break
			}
		}
		e.menuOf = append(e.menuOf, m)
		pn := st.Precision
		if pn == "" {
			pn = "bf16"
			if !sp.Engine.Pool() {
				pn = "f16"
			}
		}
		p, err := estimate.LookupPrecision(pn)
		if err != nil {
			return nil, err
		}
		kv, err := estimate.LookupKVType(st.KVDType)
		if err != nil {
			return nil, err
		}
		e.prec = append(e.prec, p)
		e.kvB = append(e.kvB, kv.Bytes)
	}
	e.base = *sp.Parent
	e.base.Layers = nil
	e.isl, e.osl = w.Input.MeanValue(), w.Output.MeanValue()
	// Layers equal to an earlier one share its menu's costs.
	e.same = make([]int, len(sp.Parent.Layers))
	for l := range e.same {
		e.same[l] = l
		for p := range l {
			if e.same[p] == p && reflect.DeepEqual(sp.Parent.Layers[p], sp.Parent.Layers[l]) {
				e.same[l] = p
				break
			}
		}
	}
	e.reach = make([]float64, len(BudgetKinds))
	for i := range e.reach {
		e.reach[i] = math.Inf(1)
		if BudgetKinds[i].Floor {
			e.reach[i] = 0
		}
	}
	return e, nil
}

// globals lists the global shapes of the space.
func (e *evaluator) globals() []global {
	sp := e.sp
	hpgs := sp.Heads
	if len(hpgs) == 0 {
		hpgs = []int{0}
	}
	mlps := []int{0}
	if !sp.PerLayer && len(sp.MLP) > 0 {
		mlps = sp.MLP
	}
	mambas := sp.Mamba
	if len(mambas) == 0 {
		mambas = []int{0}
	}
	experts := sp.Experts
	if len(experts) == 0 {
		experts = []int{0}
	}
	mambaDims := sp.MambaHeadDim
	if len(mambaDims) == 0 {
		mambaDims = []int{0}
	}
	kvs := []int{0}
	if sp.UniformKV {
		kvs = sp.KVGroups
	}
	fits := func(q, kv int) bool {
		for i := range sp.Parent.Layers {
			if a := sp.Parent.Layers[i].Attention; a != nil && !kvFits(a, q, kv) {
				return false
			}
		}
		return true
	}
	var out []global
	for _, h := range sp.Hidden {
		for _, q := range hpgs {
			for _, kv := range kvs {
				if kv > 0 && !fits(q, kv) {
					continue // kv groups cannot hold q queries: not a shape
				}
				for _, m := range mlps {
					for _, mb := range mambas {
						for _, md := range mambaDims {
							for _, ex := range experts {
								g := global{h, q, m, mb, kv, md, ex}
								if e.allowed(g) {
									out = append(out, g)
									e.loadable++
								} else {
									e.refused++
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// kvFits reports whether k KV groups hold heads query heads under parent
// attention a: heads/k each, at most the parent's per group.
func kvFits(a *architecture.Attention, heads, k int) bool {
	return k > 0 && heads%k == 0 && heads/k <= a.Heads/a.KVHeads
}

// allowed asks the serve-on engine's load predicate (the one export's
// validators apply) whether it loads the children of global shape g: the
// uniform child, and in a per-layer space a per-layer one (its format,
// DeciLM, has rules of its own, e.g. llama.cpp's head_dim = hidden/heads).
func (e *evaluator) allowed(g global) bool {
	sp := e.sp
	c := Candidate{Hidden: g.hidden, Heads: g.heads, Layers: make([]LayerShape, len(sp.Parent.Layers))}
	for l := range sp.Parent.Layers {
		pl := &sp.Parent.Layers[l]
		s := LayerShape{MambaHeads: g.mamba, MambaHeadDim: g.mambaDim}
		if pl.MoE != nil {
			s.Experts = g.experts
		}
		if a := pl.Attention; a != nil {
			s.KVGroups = a.KVHeads
			if g.kv > 0 {
				s.KVGroups = g.kv // globals checked that it fits
			}
		}
		if x := pl.MLP; x != nil {
			s.MLP = x.Width
			if g.mlp > 0 && x.Width == sp.MLP[0] {
				s.MLP = g.mlp
			}
		}
		c.Layers[l] = s
	}
	m := sp.Model(&c)
	if !sp.ServeOn.Loads(m, sp.TP) {
		return false
	}
	if sp.PerLayer && len(sp.MLP) > 1 {
		for l := range m.Layers {
			if m.Layers[l].MLP != nil {
				m.Layers[l].MLP.Width = sp.MLP[len(sp.MLP)-1]
				break
			}
		}
		return sp.ServeOn.Loads(m, sp.TP)
	}
	return true
}

// menus builds every layer's options under global shape g for the
// LayerSums of setting si's menu Compiled.
func (e *evaluator) menus(g global, si int) [][]option {
	sp := e.sp
	c := e.comps[e.menuOf[si]]
	isl, osl := e.isl, e.osl
	kvTok := (isl + osl/2) * float64(max(e.w.Concurrency, 1))
	flopW := 0.0
	if osl > 0 {
		if pk := e.hw.PeakFLOPS(e.prec[si].Compute); pk > 0 {
			flopW = isl / osl * e.hw.BandwidthBps / pk
		}
	}
	bpw := e.prec[si].LinearBPW / 8
	kvb := e.kvB[si]
	out := make([][]option, len(sp.Parent.Layers))
	var r reshaped
	var shapes []LayerShape
	for l := range sp.Parent.Layers {
		pl := &sp.Parent.Layers[l]
		shapes = e.shapes(shapes[:0], l, g)
		opts := make([]option, len(shapes))
		if p := e.same[l]; p < l && sameShapes(out[p], shapes) {
			// An identical parent layer with the same options: the same
			// costs; only the value is the layer's own.
			copy(opts, out[p])
			for i, s := range shapes {
				opts[i].value = e.value(l, g, s)
			}
			out[l] = opts
			continue
		}
		for i, s := range shapes {
			o := &opts[i]
			o.shape = s
			o.cuts = shapeCuts(pl, s)
			if s.Removed {
				continue
			}
			layer := r.set(pl, g.heads, s)
			o.sum = c.LayerSum(layer, g.hidden)
			o.value = e.value(l, g, s)
			o.cost = layerCost(layer, g.hidden, bpw, kvb, kvTok, flopW)
		}
		out[l] = opts
	}
	return out
}

// sameShapes reports whether opts are options of exactly shapes, in order.
func sameShapes(opts []option, shapes []LayerShape) bool {
	if len(opts) != len(shapes) {
		return false
	}
	for i := range opts {
		if opts[i].shape != shapes[i] {
			return false
		}
	}
	return true
}

// shapeCuts is what shape s removes of parent layer pl.
func shapeCuts(pl *architecture.Layer, s LayerShape) cuts {
	var c cuts
	if s.Removed {
		c.layers = 1
	}
	if pl.Attention != nil && (s.Removed || s.KVGroups == 0) {
		c.attn = 1
	}
	if pl.MLP != nil && (s.Removed || s.MLP == 0) {
		c.mlp = 1
	}
	return c
}

// value is w_l · (a_l · A + (1 − a_l) · M) for layer l under g and s.
func (e *evaluator) value(l int, g global, s LayerShape) float64 {
	if s.Removed {
		return 0
	}
	p := e.proxy
	pl := &e.sp.Parent.Layers[l]
	a := p.AttnShare(l)
	v := 0.0
	if pl.Attention != nil {
		hpg := 0
		if s.KVGroups > 0 {
			hpg = g.heads / s.KVGroups
		}
		v += a * p.Attn(l, s.KVGroups, hpg)
	}
	if pl.MLP != nil {
		v += (1 - a) * p.MLP(l, s.MLP)
	} else if pl.Attention == nil {
		v = 1 // Mamba or MoE-only layer
		if pl.Mamba != nil {
			v = p.Mamba(l, s.MambaHeads, s.MambaHeadDim)
		}
		if pl.MoE != nil {
			v = p.MoE(l, s.Experts)
		}
	} else if pl.MoE != nil {
		v += (1 - a) * p.MoE(l, s.Experts)
	}
	return p.LayerWeight(l) * v
}

// shapes appends to dst every option's shape of layer l under g: KV
// groups × MLP widths (per layer in a per-layer space), the sub-block
// removals and the layer's removal where the space allows them.
func (e *evaluator) shapes(dst []LayerShape, l int, g global) []LayerShape {
	sp := e.sp
	pl := &sp.Parent.Layers[l]
	kvs := []int{0}
	if a := pl.Attention; a != nil {
		kvs = []int{a.KVHeads}
		switch {
		case g.kv > 0:
			kvs = []int{g.kv} // globals checked that it fits
		case sp.PerLayer:
			// k groups keep heads/k queries each: at most the parent's.
			kvs = kvs[:0]
			for _, k := range sp.KVGroups {
				if kvFits(a, g.heads, k) {
					kvs = append(kvs, k)
				}
			}
		}
	}
	ws := []int{0}
	if m := pl.MLP; m != nil {
		switch {
		case sp.PerLayer:
			ws = sp.MLP
		case g.mlp > 0 && len(sp.MLP) > 0 && m.Width == sp.MLP[0]:
			ws = []int{g.mlp}
		default:
			ws = []int{m.Width}
		}
	}
	mb, md, ex := 0, 0, 0
	if pl.Mamba != nil {
		mb, md = g.mamba, g.mambaDim
	}
	if pl.MoE != nil {
		ex = g.experts
	}
	for _, kv := range kvs {
		for _, wd := range ws {
			dst = append(dst, LayerShape{KVGroups: kv, MLP: wd, MambaHeads: mb, MambaHeadDim: md, Experts: ex})
		}
	}
	keepAttn := sp.KeepAttention != nil && sp.KeepAttention[l]
	if sp.PerLayer && sp.RemoveSubBlocks && sp.Removable[l] && pl.Attention != nil && pl.MLP != nil {
		if !keepAttn {
			for _, wd := range ws {
				dst = append(dst, LayerShape{MLP: wd})
			}
		}
		if !sp.AttentionNeedsMLP {
			for _, kv := range kvs {
				dst = append(dst, LayerShape{KVGroups: kv})
			}
		}
	}
	if sp.Removable[l] && sp.MaxRemoved > 0 && !keepAttn {
		dst = append(dst, LayerShape{Removed: true})
	}
	return dst
}

// layerCost is the scalar the Lagrangian trades value against: the bytes
// one decode step streams for the layer (weights at the precision, the KV
// of the workload's running requests) plus its prefill FLOPs per output
// token in byte-equivalents (FLOPs × bandwidth ÷ peak). It only steers the
// relaxation; every candidate is then priced by the estimator.
func layerCost(l *architecture.Layer, hidden int, bpw, kvb, kvTok, flopW float64) float64 {
	h := float64(hidden)
	var lin, kv float64
	if a := l.Attention; a != nil {
		lin += h * float64(2*a.Heads+2*a.KVHeads) * float64(a.HeadDim)
		kv += 2 * float64(a.KVHeads*a.HeadDim) * kvb
	}
	if m := l.MLP; m != nil {
		lin += 3 * h * float64(m.Width)
	}
	if mb := l.Mamba; mb != nil {
		di := float64(mb.DInner())
		lin += h*(2*di+2*float64(mb.Groups*mb.StateSize)+float64(mb.Heads)) + di*h
	}
	if x := l.MoE; x != nil {
		lin += float64(x.TopK)*3*h*float64(x.ExpertWidth) + 3*h*float64(x.SharedWidth)
	}
	return lin*bpw + kv*kvTok + 2*lin*flopW
}

// price assembles the candidate of choice idx (one option index per
// layer) from menus and prices it under setting si.
func (e *evaluator) price(si int, g global, menus [][]option, idx []int) Costs {
	e.ptrs = e.ptrs[:0]
	for l, i := range idx {
		o := &menus[l][i]
		if !o.shape.Removed {
			e.ptrs = append(e.ptrs, &o.sum)
		}
	}
	c := e.comps[si]
	e.base.Hidden = g.hidden
	c.Assemble(&e.sum, &e.base, e.ptrs)
	p := c.PriceSummary(&e.sum)
	e.evals++
	costs := costsOf(&p, &e.sum)
	e.observe(&costs)
	return costs
}

// commit makes choice idx the committed candidate of priceChange.
func (e *evaluator) commit(menus [][]option, idx []int) {
	e.ptrs = e.ptrs[:0]
	for l, i := range idx {
		e.ptrs = append(e.ptrs, menus[l][i].layerSum())
	}
	e.tot.Reset(e.ptrs)
}

// priceChange prices the committed candidate (see commit) with layer a
// set to option oa and, when b ≥ 0, layer b to ob, under setting si, in
// time independent of the layer count. Its figures equal price's on the
// changed choice up to floating-point rounding; confirm re-prices a change
// before it is accepted, so every accepted candidate's costs are price's.
func (e *evaluator) priceChange(si int, g global, a int, oa *option, b int, ob *option) Costs {
	c := e.comps[si]
	e.base.Hidden = g.hidden
	var xb *estimate.LayerSum
	if b >= 0 {
		xb = ob.layerSum()
	}
	c.AssembleChange(&e.sum, &e.base, &e.tot, a, oa.layerSum(), b, xb)
	p := c.PriceSummary(&e.sum)
	e.evals++
	costs := costsOf(&p, &e.sum)
	e.observe(&costs)
	return costs
}

// confirm commits choice idx and prices it exactly as price does, without
// counting an evaluation (priceChange counted it): the costs of an accepted
// move, and whether it really meets the budgets.
func (e *evaluator) confirm(si int, g global, menus [][]option, idx []int) (Costs, bool) {
	e.commit(menus, idx)
	c := e.comps[si]
	e.base.Hidden = g.hidden
	c.AssembleTotal(&e.sum, &e.base, &e.tot)
	p := c.PriceSummary(&e.sum)
	costs := costsOf(&p, &e.sum)
	return costs, e.b.Meets(&costs)
}

// merge adds another evaluator's counts and reach into e.
func (e *evaluator) merge(x *evaluator) {
	e.evals += x.evals
	if !x.reachSet {
		return
	}
	e.reachSet = true
	for i := range e.reach {
		if BudgetKinds[i].Floor {
			e.reach[i] = max(e.reach[i], x.reach[i])
		} else {
			e.reach[i] = min(e.reach[i], x.reach[i])
		}
	}
}

// observe keeps the best value of every budgeted cost seen.
func (e *evaluator) observe(c *Costs) {
	if !c.Fits {
		return
	}
	e.reachSet = true
	for i := range BudgetKinds {
		v := BudgetKinds[i].Value(e.b, c)
		if BudgetKinds[i].Floor {
			e.reach[i] = max(e.reach[i], v)
		} else {
			e.reach[i] = min(e.reach[i], v)
		}
	}
}

// quality is the proxy of choice idx under g.
func (e *evaluator) quality(g global, menus [][]option, idx []int) float64 {
	v := 0.0
	for l, i := range idx {
		v += menus[l][i].value
	}
	return e.proxy.Hidden(g.hidden) * v
}

// candidate materialises choice idx.
func (e *evaluator) candidate(si int, g global, menus [][]option, idx []int, c Costs) Candidate {
	cd := Candidate{Hidden: g.hidden, Heads: g.heads, Settings: e.sp.Settings[si], Costs: c,
		Quality: e.quality(g, menus, idx), Meets: e.b.Meets(&c)}
	cd.Layers = make([]LayerShape, len(idx))
	for l, i := range idx {
		cd.Layers[l] = menus[l][i].shape
	}
	return cd
}
