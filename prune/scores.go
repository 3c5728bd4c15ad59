package prune

import (
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/architecture"
)

// TopK returns the indices of the k highest scores, sorted ascending (the
// order a plan lists kept indices in). Ties keep the lower index; NaN ranks
// below every number.
func TopK(scores []float32, k int) ([]int, error) {
	if k <= 0 || k > len(scores) {
		return nil, fmt.Errorf("keep %d of %d: want 1..%d", k, len(scores), len(scores))
	}
	idx := make([]int, len(scores))
	for i := range idx {
		idx[i] = i
	}
	less := func(a, b float32) bool { // a ranks above b
		an, bn := math.IsNaN(float64(a)), math.IsNaN(float64(b))
		if an || bn {
			return !an && bn
		}
		return a > b
	}
	sort.SliceStable(idx, func(i, j int) bool { return less(scores[idx[i]], scores[idx[j]]) })
	out := append([]int(nil), idx[:k]...)
	sort.Ints(out)
	return out, nil
}

// TopKGrouped splits scores into groups contiguous groups of equal size and
// keeps the perGroup highest of each (grouped-query attention heads within
// their KV group, Mamba heads within their group), sorted ascending.
func TopKGrouped(scores []float32, groups, perGroup int) ([]int, error) {
	if groups <= 0 || len(scores)%groups != 0 {
		return nil, fmt.Errorf("%d scores do not split into %d equal groups", len(scores), groups)
	}
	size := len(scores) / groups
	var out []int
	for g := range groups {
		k, err := TopK(scores[g*size:(g+1)*size], perGroup)
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g, err)
		}
		for _, i := range k {
			out = append(out, g*size+i)
		}
	}
	return out, nil
}

// Scores are importance scores (higher = more important), e.g. read from the
// importance stage's scores.safetensors. Per-layer slices have one entry per
// parent layer; an entry may be nil for a layer without that block.
type Scores struct {
	Hidden     []float32   // per hidden channel
	Heads      [][]float32 // per layer, per query head
	Neurons    [][]float32 // per layer, per MLP neuron
	MambaHeads [][]float32 // per layer, per Mamba head
	Layers     []float32   // per layer (e.g. 1 − cos(in, out)); lowest dropped first
}

// Targets are the widths a child keeps. Zero keeps a dimension whole.
// Per-layer slices have one entry per parent layer (or are nil).
type Targets struct {
	Hidden int
	// Heads is the number of query heads kept per layer; it must be a
	// multiple of the layer's KV groups (heads are kept equally per group;
	// KV groups themselves are not pruned).
	Heads      []int
	Neurons    []int
	MambaHeads []int // a multiple of the layer's Mamba groups
	// DropLayers removes this many lowest-scoring layers (needs Scores.Layers).
	DropLayers int
	// OutputFormat and Engine are copied into the plan.
	OutputFormat, Engine string
}

// PlanFromScores turns importance scores and target widths into a plan: top-k
// hidden channels, neurons, and query and Mamba heads ranked within their
// groups; kept indices sorted ascending.
func PlanFromScores(m *architecture.Model, s Scores, t Targets) (*Plan, error) {
	n := len(m.Layers)
	p := &Plan{Version: PlanVersion, OutputFormat: t.OutputFormat, Engine: t.Engine}
	perLayer := func(name string, v []int) error {
		if v != nil && len(v) != n {
			return fmt.Errorf("targets.%s has %d entries, the model has %d layers", name, len(v), n)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		v    []int
	}{{"Heads", t.Heads}, {"Neurons", t.Neurons}, {"MambaHeads", t.MambaHeads}} {
		if err := perLayer(c.name, c.v); err != nil {
			return nil, err
		}
	}
	if t.Hidden > 0 && t.Hidden != m.Hidden {
		if len(s.Hidden) != m.Hidden {
			return nil, fmt.Errorf("hidden scores: %d entries, hidden_size is %d", len(s.Hidden), m.Hidden)
		}
		k, err := TopK(s.Hidden, t.Hidden)
		if err != nil {
			return nil, fmt.Errorf("hidden: %w", err)
		}
		p.Hidden = k
	}
	drop := map[int]bool{}
	if t.DropLayers > 0 {
		if len(s.Layers) != n {
			return nil, fmt.Errorf("layer scores: %d entries, the model has %d layers", len(s.Layers), n)
		}
		if t.DropLayers >= n {
			return nil, fmt.Errorf("cannot drop %d of %d layers", t.DropLayers, n)
		}
		keep, err := TopK(s.Layers, n-t.DropLayers)
		if err != nil {
			return nil, err
		}
		kept := map[int]bool{}
		for _, i := range keep {
			kept[i] = true
		}
		for i := range n {
			if !kept[i] {
				drop[i] = true
			}
		}
	}
	layerScores := func(name string, ss [][]float32, l, want int) ([]float32, error) {
		if l >= len(ss) || len(ss[l]) != want {
			got := 0
			if l < len(ss) {
				got = len(ss[l])
			}
			return nil, fmt.Errorf("layer %d: %s scores have %d entries, want %d", l, name, got, want)
		}
		return ss[l], nil
	}
	for l, layer := range m.Layers {
		if drop[l] {
			p.Layers = append(p.Layers, LayerPlan{Layer: l, Remove: true})
			continue
		}
		lp := LayerPlan{Layer: l}
		if a := layer.Attention; a != nil && t.Heads != nil && t.Heads[l] > 0 && t.Heads[l] != a.Heads {
			if t.Heads[l]%a.KVHeads != 0 {
				return nil, fmt.Errorf("layer %d: %d query heads do not split evenly over %d KV groups", l, t.Heads[l], a.KVHeads)
			}
			sc, err := layerScores("head", s.Heads, l, a.Heads)
			if err != nil {
				return nil, err
			}
			if lp.Heads, err = TopKGrouped(sc, a.KVHeads, t.Heads[l]/a.KVHeads); err != nil {
				return nil, fmt.Errorf("layer %d heads: %w", l, err)
			}
		}
		if x := layer.MLP; x != nil && t.Neurons != nil && t.Neurons[l] > 0 && t.Neurons[l] != x.Width {
			sc, err := layerScores("neuron", s.Neurons, l, x.Width)
			if err != nil {
				return nil, err
			}
			if lp.Neurons, err = TopK(sc, t.Neurons[l]); err != nil {
				return nil, fmt.Errorf("layer %d neurons: %w", l, err)
			}
		}
		if x := layer.Mamba; x != nil && t.MambaHeads != nil && t.MambaHeads[l] > 0 && t.MambaHeads[l] != x.Heads {
			if t.MambaHeads[l]%x.Groups != 0 {
				return nil, fmt.Errorf("layer %d: %d Mamba heads do not split evenly over %d groups", l, t.MambaHeads[l], x.Groups)
			}
			sc, err := layerScores("Mamba head", s.MambaHeads, l, x.Heads)
			if err != nil {
				return nil, err
			}
			if lp.MambaHeads, err = TopKGrouped(sc, x.Groups, t.MambaHeads[l]/x.Groups); err != nil {
				return nil, fmt.Errorf("layer %d Mamba heads: %w", l, err)
			}
		}
		if lp.Heads != nil || lp.Neurons != nil || lp.MambaHeads != nil {
			p.Layers = append(p.Layers, lp)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// KeepExperts adds to p the routed experts every MoE layer of m keeps:
// the keep highest by scores (one vector per layer, nil for a layer
// without MoE: importance.ExpertScores.Layers), sorted ascending. Layers
// p removes are left alone; keep equal to a layer's count adds nothing.
func KeepExperts(p *Plan, m *architecture.Model, keep int, scores [][]float64) error {
	if len(scores) != len(m.Layers) {
		return fmt.Errorf("expert scores for %d layers, the model has %d", len(scores), len(m.Layers))
	}
	any := false
	for l, layer := range m.Layers {
		x := layer.MoE
		if x == nil {
			continue
		}
		any = true
		if keep > x.Experts {
			return fmt.Errorf("layer %d: keep %d experts of %d: want 1..%d", l, keep, x.Experts, x.Experts)
		}
		if keep == x.Experts {
			continue
		}
		if len(scores[l]) != x.Experts {
			return fmt.Errorf("layer %d: %d expert scores, the layer has %d routed experts", l, len(scores[l]), x.Experts)
		}
		sc := make([]float32, len(scores[l]))
		for i, v := range scores[l] {
			sc[i] = float32(v)
		}
		k, err := TopK(sc, keep)
		if err != nil {
			return fmt.Errorf("layer %d experts: %w", l, err)
		}
		lp := p.layerPlan(l)
		if lp == nil {
			p.Layers = append(p.Layers, LayerPlan{Layer: l})
			lp = &p.Layers[len(p.Layers)-1]
		}
		if lp.Remove {
			continue
		}
		lp.Experts = k
	}
	if !any {
		return fmt.Errorf("%s has no MoE layer: there are no experts to keep", m.Arch)
	}
	p.sortLayers()
	return p.Validate()
}
