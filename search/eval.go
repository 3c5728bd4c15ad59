package search

import (
	"math"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// global is a global shape: hidden size, query heads, the
// uniform MLP width (uniform spaces; 0 when per layer) and Mamba heads.
type global struct {
	hidden, heads, mlp, mamba int
}

// option is one choice for one parent layer under a global shape.
type option struct {
	shape LayerShape
	value float64 // w_l · retained share (before the hidden factor)
	cost  float64 // scalar cost for the Lagrangian (byte-equivalents per step)
	sum   estimate.LayerSum
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
	// refused counts global shapes the serve-on engine does not load.
	refused int

	sum  estimate.Summary
	ptrs []*estimate.LayerSum
	base architecture.Model

	// best reachable value of every budget over everything priced, for the
	// infeasibility report (throughput: the largest).
	reach    [7]float64
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
	for i := range e.reach {
		e.reach[i] = math.Inf(1)
	}
	e.reach[4] = 0
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
	var out []global
	for _, h := range sp.Hidden {
		for _, q := range hpgs {
			for _, m := range mlps {
				for _, mb := range mambas {
					g := global{h, q, m, mb}
					if e.allowed(g) {
						out = append(out, g)
					} else {
						e.refused++
					}
				}
			}
		}
	}
	return out
}

// allowed asks the serve-on engine's load predicate (the one export's
// validators apply) whether it loads the children of global shape g: the
// uniform child, and in a per-layer space a per-layer one (its format,
// DeciLM, has rules of its own, e.g. llama.cpp's head_dim = hidden/heads).
func (e *evaluator) allowed(g global) bool {
	sp := e.sp
	m := sp.Parent.Clone()
	m.Hidden = g.hidden
	for l := range m.Layers {
		pl := &sp.Parent.Layers[l]
		s := LayerShape{MambaHeads: g.mamba}
		if a := pl.Attention; a != nil {
			s.KVGroups = a.KVHeads
		}
		if x := pl.MLP; x != nil {
			s.MLP = x.Width
			if g.mlp > 0 && x.Width == sp.MLP[0] {
				s.MLP = g.mlp
			}
		}
		m.Layers[l] = e.layer(pl, g, s)
	}
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
	w := e.w
	isl, osl := w.Input.MeanValue(), w.Output.MeanValue()
	conc := float64(max(w.Concurrency, 1))
	kvTok := (isl + osl/2) * conc
	flopW := 0.0
	if osl > 0 {
		if pk := e.hw.PeakFLOPS(e.prec[si].Compute); pk > 0 {
			flopW = isl / osl * e.hw.BandwidthBps / pk
		}
	}
	bpw := e.prec[si].LinearBPW / 8
	kvb := e.kvB[si]
	hf := e.proxy.Hidden(g.hidden)
	_ = hf
	out := make([][]option, len(sp.Parent.Layers))
	for l := range sp.Parent.Layers {
		pl := &sp.Parent.Layers[l]
		var shapes []LayerShape
		kvs := []int{0}
		if a := pl.Attention; a != nil {
			kvs = []int{a.KVHeads}
			if sp.PerLayer {
				// k groups keep heads/k queries each: at most the parent's.
				kvs = kvs[:0]
				for _, k := range sp.KVGroups {
					if g.heads%k == 0 && g.heads/k <= a.Heads/a.KVHeads {
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
		mb := 0
		if pl.Mamba != nil {
			mb = g.mamba
		}
		for _, kv := range kvs {
			for _, wd := range ws {
				shapes = append(shapes, LayerShape{KVGroups: kv, MLP: wd, MambaHeads: mb})
			}
		}
		if sp.PerLayer && sp.RemoveSubBlocks && sp.Removable[l] && pl.Attention != nil && pl.MLP != nil {
			for _, wd := range ws {
				shapes = append(shapes, LayerShape{MLP: wd})
			}
			for _, kv := range kvs {
				shapes = append(shapes, LayerShape{KVGroups: kv})
			}
		}
		if sp.Removable[l] && sp.MaxRemoved > 0 {
			shapes = append(shapes, LayerShape{Removed: true})
		}
		opts := make([]option, len(shapes))
		for i, s := range shapes {
			o := &opts[i]
			o.shape = s
			if s.Removed {
				continue
			}
			layer := e.layer(pl, g, s)
			o.sum = c.LayerSum(&layer, g.hidden)
			o.value = e.value(l, g, s)
			o.cost = layerCost(&layer, g.hidden, bpw, kvb, kvTok, flopW)
		}
		out[l] = opts
	}
	return out
}

// layer returns parent layer pl reshaped to s under g.
func (e *evaluator) layer(pl *architecture.Layer, g global, s LayerShape) architecture.Layer {
	l := pl.Clone()
	if l.Attention != nil {
		if s.KVGroups == 0 {
			l.Attention = nil
		} else {
			l.Attention.KVHeads = s.KVGroups
			l.Attention.Heads = g.heads
		}
	}
	if l.MLP != nil {
		if s.MLP == 0 {
			l.MLP = nil
		} else {
			l.MLP.Width = s.MLP
		}
	}
	if l.Mamba != nil && s.MambaHeads > 0 {
		l.Mamba.Heads = s.MambaHeads
	}
	return l
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
			v = p.Mamba(l, s.MambaHeads)
		}
	} else if pl.MoE != nil {
		v += 1 - a
	}
	return p.LayerWeight(l) * v
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

// merge adds another evaluator's counts and reach into e.
func (e *evaluator) merge(x *evaluator) {
	e.evals += x.evals
	if !x.reachSet {
		return
	}
	e.reachSet = true
	for i := range e.reach {
		if i == 4 {
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
	for i, n := range budgetNames {
		v, _ := e.b.value(n, c)
		if i == 4 {
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
