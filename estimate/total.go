package estimate

import "github.com/autocompress/autocompress/architecture"

// Total is the running sum of one candidate's LayerSums, one per slot (a
// parent layer; nil where the candidate removes it). A local search that
// changes one or two layers at a time prices each change with
// AssembleChange in time independent of the layer count, where Assemble
// passes over every layer.
//
// Reset sums in slot order exactly as Assemble does, so AssembleTotal gives
// Assemble's Summary bit for bit. AssembleChange is the committed sum minus
// the replaced layers plus their replacements: equal to Assemble on the
// changed layers up to floating-point rounding (about 1e-16 relative), and
// exact in every count and maximum. A search that must decide on the exact
// figure re-prices the change it accepts with AssembleTotal after Reset.
//
// Candidates with MoE layers are assembled by Assemble (their expert
// groups merge in layer order), so every method stays correct for them,
// without the speed-up.
type Total struct {
	at  []*LayerSum
	sum LayerSum
	n   int32
	// top holds, per maximum (maxQ, maxKV, window, maxFFN), the three
	// largest values with their slots: the maximum without any two slots.
	top  [4][3]slotMax
	moe  bool
	ptrs []*LayerSum
}

type slotMax struct{ v, slot int32 }

// maxes returns x's four maximum fields in Total.top's order.
func (x *LayerSum) maxes() [4]int32 { return [4]int32{x.maxQ, x.maxKV, x.window, x.maxFFN} }

// Reset makes layers (one LayerSum per slot, nil for a removed slot) the
// committed candidate. It keeps its own copy of the slice, not of the
// LayerSums, which must not change while t uses them.
func (t *Total) Reset(layers []*LayerSum) {
	t.at = append(t.at[:0], layers...)
	t.sum, t.n, t.moe = LayerSum{}, 0, false
	t.top = [4][3]slotMax{}
	s := &t.sum
	for i, x := range layers {
		if x == nil {
			continue
		}
		t.n++
		// The same additions in the same order as Assemble.
		s.add(x)
		if x.moeE > 0 {
			t.moe = true
		}
		for f, v := range x.maxes() {
			t.insertTop(f, v, int32(i))
		}
	}
}

func (t *Total) insertTop(f int, v, slot int32) {
	top := &t.top[f]
	for k := range top {
		if v > top[k].v {
			copy(top[k+1:], top[k:len(top)-1])
			top[k] = slotMax{v, slot}
			return
		}
	}
}

// maxWithout is maximum f over the committed slots other than a and b.
func (t *Total) maxWithout(f int, a, b int32) int32 {
	for _, e := range t.top[f] {
		if e.v > 0 && e.slot != a && e.slot != b {
			return e.v
		}
	}
	return 0
}

// AssembleTotal fills s for t's committed candidate: Assemble(s, base,
// the present layers in slot order), bit for bit.
func (c *Compiled) AssembleTotal(s *Summary, base *architecture.Model, t *Total) {
	if t.moe {
		c.assemblePtrs(s, base, t, -1, nil, -1, nil)
		return
	}
	*s = Summary{TP: c.r.tp}
	sum := t.sum
	for f := range t.top {
		setMax(&sum, f, t.top[f][0].v)
	}
	c.fill(s, base, &sum, int(t.n))
}

// AssembleChange fills s for t's committed candidate with slot a replaced
// by xa and, when b ≥ 0 (b ≠ a), slot b by xb; nil removes the slot. It
// does not change t and does not allocate.
func (c *Compiled) AssembleChange(s *Summary, base *architecture.Model, t *Total, a int, xa *LayerSum, b int, xb *LayerSum) {
	if t.moe || xa != nil && xa.moeE > 0 || xb != nil && xb.moeE > 0 {
		c.assemblePtrs(s, base, t, a, xa, b, xb)
		return
	}
	*s = Summary{TP: c.r.tp}
	sum := t.sum
	n := t.n
	n += sum.swap(t.at[a], xa)
	sb := int32(-1)
	if b >= 0 {
		n += sum.swap(t.at[b], xb)
		sb = int32(b)
	}
	for f := range t.top {
		m := t.maxWithout(f, int32(a), sb)
		if xa != nil {
			m = max(m, xa.maxes()[f])
		}
		if xb != nil && b >= 0 {
			m = max(m, xb.maxes()[f])
		}
		setMax(&sum, f, m)
	}
	c.fill(s, base, &sum, int(n))
}

// assemblePtrs is AssembleChange by Assemble over every slot.
func (c *Compiled) assemblePtrs(s *Summary, base *architecture.Model, t *Total, a int, xa *LayerSum, b int, xb *LayerSum) {
	t.ptrs = t.ptrs[:0]
	for i, x := range t.at {
		switch i {
		case a:
			x = xa
		case b:
			x = xb
		}
		if x != nil {
			t.ptrs = append(t.ptrs, x)
		}
	}
	c.Assemble(s, base, t.ptrs)
}

// swap replaces old's additive contribution to s by x's (either may be
// nil) and returns the change in the layer count.
func (s *LayerSum) swap(old, x *LayerSum) int32 {
	var n int32
	if old != nil {
		s.heads -= old.heads
		s.elem -= old.elem
		s.mlp -= old.mlp
		s.total -= old.total
		s.active -= old.active
		s.dense -= old.dense
		s.linF -= old.linF
		s.attnF -= old.attnF
		s.swaF -= old.swaF
		s.scan -= old.scan
		s.kv -= old.kv
		s.swaKV -= old.swaKV
		s.state -= old.state
		s.attn -= old.attn
		s.moe -= old.moe
		s.mamba -= old.mamba
		s.ars -= old.ars
		n--
	}
	if x != nil {
		s.add(x)
		n++
	}
	return n
}

func setMax(s *LayerSum, f int, v int32) {
	switch f {
	case 0:
		s.maxQ = v
	case 1:
		s.maxKV = v
	case 2:
		s.window = v
	default:
		s.maxFFN = v
	}
}

// add adds x's additive fields to s, in Assemble's order (so that Reset's
// sum is Assemble's bit for bit). A new additive LayerSum field goes here
// and in swap's subtraction.
func (s *LayerSum) add(x *LayerSum) {
	s.heads += x.heads
	s.elem += x.elem
	s.mlp += x.mlp
	s.total += x.total
	s.active += x.active
	s.dense += x.dense
	s.linF += x.linF
	s.attnF += x.attnF
	s.swaF += x.swaF
	s.scan += x.scan
	s.kv += x.kv
	s.swaKV += x.swaKV
	s.state += x.state
	s.attn += x.attn
	s.moe += x.moe
	s.mamba += x.mamba
	s.ars += x.ars
}
