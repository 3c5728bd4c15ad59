package search

import (
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/importance"
)

// PriorGamma is the exponent of the structural prior: keeping a fraction f
// of a component's units (channels, heads, neurons) keeps f^PriorGamma of
// its importance. Activation importance is concentrated (a minority of
// channels and neurons carry most of it), so γ < 1: a uniform spread
// would give γ = 1. The value is an assumption, not a fit; scores replace it.
const PriorGamma = 0.5

// priorEdgeWeight is the prior's extra weight of the first and last layers
// over the others: layer-removal studies (block influence, ShortGPT) find
// them the least removable.
const priorEdgeWeight = 3

// Proxy is the quality proxy: the share of the parent's importance a
// candidate keeps, in [0, 1] (1 for the parent). It is
//
//	Q = H(hidden) · Σ_l w_l · (a_l · A_l(kv, heads) + (1 − a_l) · M_l(width))
//
// with w_l the layer weights (sum 1; removed layers keep nothing), a_l the
// attention share of layer l, and H, A_l, M_l the retained shares of the
// hidden channels, the attention heads and the MLP neurons: from importance
// scores (the sum of the kept units' scores over the sum of all, the
// highest-scoring units kept, as prune.PlanFromScores keeps them) or, without
// scores, the structural prior f^PriorGamma. Shares normalise every width to
// [0, 1], so shapes of different widths compare.
type Proxy struct {
	// Prior is true when no importance scores were given.
	Prior bool
	// Source says where each term comes from, for the output.
	Source []string

	layerW, attnShare []float64
	hiddenCum         []float64   // [k] = share kept by the top k channels; nil: prior
	neuronCum         [][]float64 // per layer, like hiddenCum
	heads             [][]float64 // per layer, per head score; nil: prior
	expertCum         [][]float64 // per layer, like hiddenCum over routed experts; nil: prior
	mamba             [][]float64 // per Mamba layer, per head score; nil: prior
	mambaChanCum      [][]float64 // per Mamba layer, cumShare of its head_dim channel scores; nil: prior
	kvHeads           []int
	parent            *architecture.Model
}

// NewProxy builds the proxy for parent from scores (nil: the structural prior).
func NewProxy(parent *architecture.Model, s *importance.Scores) (*Proxy, error) {
	n := len(parent.Layers)
	p := &Proxy{Prior: s == nil, parent: parent, layerW: make([]float64, n), attnShare: make([]float64, n),
		neuronCum: make([][]float64, n), heads: make([][]float64, n), kvHeads: make([]int, n), mamba: make([][]float64, n), mambaChanCum: make([][]float64, n)}
	for i, l := range parent.Layers {
		var ap, mp float64
		if a := l.Attention; a != nil {
			ap = float64(parent.Hidden) * float64(2*a.Heads+2*a.KVHeads) * float64(a.HeadDim)
			p.kvHeads[i] = a.KVHeads
		}
		if m := l.MLP; m != nil {
			mp = 3 * float64(parent.Hidden) * float64(m.Width)
		}
		if x := l.MoE; x != nil {
			// The feed-forward parameters a token uses: top-k experts and
			// the shared ones.
			mp += 3 * float64(parent.Hidden) * float64(x.TopK*x.ExpertWidth+x.SharedWidth)
		}
		if ap+mp > 0 {
			p.attnShare[i] = ap / (ap + mp)
		}
	}
	if s == nil {
		for i := range p.layerW {
			p.layerW[i] = 1
			if i == 0 || i == n-1 {
				p.layerW[i] = priorEdgeWeight
			}
		}
		normalise(p.layerW)
		p.Source = []string{fmt.Sprintf("structural prior (no importance scores): a kept fraction f of any component keeps f^%.1f of it; layer weights equal, the first and last ×%d; attention and MLP weighed by their parameters", PriorGamma, priorEdgeWeight)}
		return p, nil
	}
	if err := checkScores(parent, s); err != nil {
		return nil, err
	}
	// Layer weights: the loss increase when the layer alone is skipped where
	// measured, else block influence.
	skip := len(s.LayerSkipLoss) == n
	for _, v := range s.LayerSkipLoss {
		if math.IsNaN(v) {
			skip = false
		}
	}
	src := "block influence (1 − cos)"
	for i := range p.layerW {
		v := 0.0
		if skip {
			v = s.LayerSkipLoss[i]
		} else if len(s.LayerBI) == n {
			v = s.LayerBI[i]
		}
		p.layerW[i] = max(v, 1e-6)
	}
	if skip {
		src = "the loss increase when the layer is skipped"
	}
	if len(s.LayerBI) != n && !skip {
		for i := range p.layerW {
			p.layerW[i] = 1
		}
		src = "equal (the scores have no layer scores)"
	}
	normalise(p.layerW)
	if len(s.Hidden) == parent.Hidden {
		p.hiddenCum = cumShare(s.Hidden)
	}
	for i := range parent.Layers {
		if i < len(s.Neurons) && s.Neurons[i] != nil {
			p.neuronCum[i] = cumShare(s.Neurons[i])
		}
		if i < len(s.Heads) && s.Heads[i] != nil {
			p.heads[i] = s.Heads[i]
		}
		if x := parent.Layers[i].Mamba; x != nil && i < len(s.MambaHeads) && len(s.MambaHeads[i]) == x.Heads {
			p.mamba[i] = s.MambaHeads[i]
			if c := s.MambaChannelScores(i, x.Heads); len(c) == x.HeadDim {
				p.mambaChanCum[i] = cumShare(c)
			}
		}
	}
	sub := "weighed by their parameters (the scores have no sub-block scores)"
	if subShares(p.attnShare, s.AttnSkipLoss, s.MLPSkipLoss) {
		sub = "weighed by the loss increase when each alone is skipped"
	} else if subShares(p.attnShare, s.AttnBI, s.MLPBI) {
		sub = "weighed by each sub-block's influence (1 − cos across it)"
	}
	p.Source = []string{"importance scores (model " + short(s.ModelHash) + "): retained share of the hidden-channel, head and neuron scores; layer weights from " + src +
		"; attention and MLP of a layer " + sub}
	return p, nil
}

// subShares sets share[l] = a/(a+m) from per-layer sub-block scores when
// every layer with both sub-blocks has both scores finite; it reports
// whether it did. Older score files lack them (NaN or absent).
func subShares(share, a, m []float64) bool {
	if len(a) != len(share) || len(m) != len(share) {
		return false
	}
	seen := false
	for l := range share {
		if math.IsNaN(a[l]) != math.IsNaN(m[l]) {
			return false
		}
		if !math.IsNaN(a[l]) {
			seen = true
		}
	}
	if !seen {
		return false
	}
	for l := range share {
		if x, y := max(a[l], 0), max(m[l], 0); !math.IsNaN(a[l]) && x+y > 0 {
			share[l] = x / (x + y)
		}
	}
	return true
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// ScoresError is an importance file that does not belong to the parent.
type ScoresError struct{ Msg string }

func (e *ScoresError) Error() string { return "importance scores: " + e.Msg }

func checkScores(m *architecture.Model, s *importance.Scores) error {
	n := len(m.Layers)
	if len(s.Hidden) != 0 && len(s.Hidden) != m.Hidden {
		return &ScoresError{fmt.Sprintf("%d hidden scores, the model has hidden_size %d (scores of another model?)", len(s.Hidden), m.Hidden)}
	}
	if len(s.Heads) > n || len(s.Neurons) > n || len(s.LayerBI) != 0 && len(s.LayerBI) != n {
		return &ScoresError{fmt.Sprintf("scores for %d layers, the model has %d (scores of another model?)", max(len(s.Heads), len(s.LayerBI)), n)}
	}
	for i, l := range m.Layers {
		if i < len(s.Neurons) && s.Neurons[i] != nil && (l.MLP == nil || len(s.Neurons[i]) != l.MLP.Width) {
			return &ScoresError{fmt.Sprintf("layer %d: %d neuron scores do not match the model's MLP", i, len(s.Neurons[i]))}
		}
		if i < len(s.Heads) && s.Heads[i] != nil && (l.Attention == nil || len(s.Heads[i]) != l.Attention.Heads) {
			return &ScoresError{fmt.Sprintf("layer %d: %d head scores do not match the model's attention", i, len(s.Heads[i]))}
		}
	}
	return nil
}

func normalise(v []float64) {
	t := 0.0
	for _, x := range v {
		t += x
	}
	if t > 0 {
		for i := range v {
			v[i] /= t
		}
	}
}

// cumShare returns c with c[k] the share of the total kept by the k
// highest scores.
func cumShare(s []float64) []float64 {
	v := append([]float64(nil), s...)
	sort.Sort(sort.Reverse(sort.Float64Slice(v)))
	c := make([]float64, len(v)+1)
	for i, x := range v {
		c[i+1] = c[i] + max(x, 0)
	}
	if t := c[len(v)]; t > 0 {
		for i := range c {
			c[i] /= t
		}
	} else {
		for i := range c {
			c[i] = float64(i) / float64(len(v))
		}
	}
	return c
}

func prior(kept, total int) float64 {
	if total <= 0 || kept >= total {
		return 1
	}
	if kept <= 0 {
		return 0
	}
	return math.Pow(float64(kept)/float64(total), PriorGamma)
}

// Hidden is the share of the hidden channels' importance kept by h channels.
func (p *Proxy) Hidden(h int) float64 {
	if p.hiddenCum != nil && h < len(p.hiddenCum) {
		return p.hiddenCum[h]
	}
	return prior(h, p.parent.Hidden)
}

// MLP is the share of layer l's MLP importance kept by width neurons.
func (p *Proxy) MLP(l, width int) float64 {
	if c := p.neuronCum[l]; c != nil && width < len(c) {
		return c[width]
	}
	if m := p.parent.Layers[l].MLP; m != nil {
		return prior(width, m.Width)
	}
	return 1
}

// Attn is the share of layer l's attention importance kept with kv groups
// of hpg query heads each: the best kv groups by their heads' scores, the
// best hpg heads in each.
func (p *Proxy) Attn(l, kv, hpg int) float64 {
	a := p.parent.Layers[l].Attention
	if a == nil {
		return 1
	}
	if kv <= 0 || hpg <= 0 {
		return 0
	}
	s := p.heads[l]
	if s == nil {
		return prior(kv*hpg, a.Heads)
	}
	_, _, share := headChoice(s, a.KVHeads, kv, hpg)
	return share
}

// headChoice picks kv of groups KV groups and hpg heads in each from head
// scores s (heads h·groups/len(s) belong to group h/(len(s)/groups)):
// groups by the sum of their best hpg heads. It returns the kept groups
// and heads (ascending) and their share of the total score.
func headChoice(s []float64, groups, kv, hpg int) (keptGroups, keptHeads []int, share float64) {
	per := len(s) / groups
	type grp struct {
		g     int
		heads []int
		score float64
	}
	gs := make([]grp, groups)
	total := 0.0
	for g := range gs {
		idx := make([]int, per)
		for j := range idx {
			idx[j] = g*per + j
		}
		sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] > s[idx[b]] })
		idx = idx[:min(hpg, per)]
		sc := 0.0
		for _, h := range idx {
			sc += max(s[h], 0)
		}
		for j := range per {
			total += max(s[g*per+j], 0)
		}
		sort.Ints(idx)
		gs[g] = grp{g, idx, sc}
	}
	sort.SliceStable(gs, func(a, b int) bool { return gs[a].score > gs[b].score })
	gs = gs[:min(kv, groups)]
	sort.Slice(gs, func(a, b int) bool { return gs[a].g < gs[b].g })
	kept := 0.0
	for _, g := range gs {
		keptGroups = append(keptGroups, g.g)
		keptHeads = append(keptHeads, g.heads...)
		kept += g.score
	}
	if total <= 0 {
		return keptGroups, keptHeads, float64(kv*hpg) / float64(len(s))
	}
	return keptGroups, keptHeads, kept / total
}

// Mamba is the share of a Mamba layer's importance kept by heads heads of
// headDim channels each (0: the parent's): with Mamba head scores, the
// share of the best heads/n_groups heads of every group (as Plan keeps
// them, group-aware), times the share of the channel scores the best
// headDim channel positions hold (MambaChannelScores, as Plan keeps them),
// so that a cut of heads and a cut of head_dim are priced in the same
// units (the structural prior of the kept head_dim only for scores without
// channels); without head scores, the structural prior of the kept share
// of d_inner. The product treats the head and channel scores as separable.
func (p *Proxy) Mamba(l, heads, headDim int) float64 {
	m := p.parent.Layers[l].Mamba
	if m == nil {
		return 1
	}
	if headDim <= 0 {
		headDim = m.HeadDim
	}
	if s := p.mamba[l]; s != nil && heads > 0 && m.Groups > 0 && heads%m.Groups == 0 {
		_, _, share := headChoice(s, m.Groups, m.Groups, heads/m.Groups)
		if c := p.mambaChanCum[l]; c != nil && headDim < len(c) {
			return share * c[headDim]
		}
		return share * prior(headDim, m.HeadDim)
	}
	return prior(heads*headDim, m.Heads*m.HeadDim)
}

// MoE is the share of an MoE block's importance kept with experts routed
// experts (0: all): the shared experts' share s of the parameters a token
// uses is always kept, and of the routed experts' share 1 − s the
// fraction the kept experts hold, by the expert scores when the proxy has
// them (the highest-scoring kept, as Plan keeps them), else the
// structural prior f^PriorGamma of the kept fraction f.
func (p *Proxy) MoE(l, experts int) float64 {
	x := p.parent.Layers[l].MoE
	if x == nil || experts <= 0 || experts >= x.Experts {
		return 1
	}
	shared := float64(x.SharedWidth) / float64(x.SharedWidth+x.TopK*x.ExpertWidth)
	routed := prior(experts, x.Experts)
	if p.expertCum != nil && l < len(p.expertCum) && p.expertCum[l] != nil {
		routed = p.expertCum[l][experts]
	}
	return shared + (1-shared)*routed
}

// SetExpertScores makes the proxy rank experts by s (checked against the
// parent) instead of the structural prior.
func (p *Proxy) SetExpertScores(s *importance.ExpertScores) error {
	if err := s.Check(p.parent); err != nil {
		return err
	}
	p.expertCum = make([][]float64, len(s.Layers))
	for l, v := range s.Layers {
		if v != nil {
			p.expertCum[l] = cumShare(v)
		}
	}
	p.Source = append(p.Source, "experts: "+s.Describe())
	return nil
}

// LayerWeight is w_l; AttnShare is a_l.
func (p *Proxy) LayerWeight(l int) float64 { return p.layerW[l] }

// AttnShare is the attention share a_l of layer l.
func (p *Proxy) AttnShare(l int) float64 { return p.attnShare[l] }
