package job

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
)

// ShapeOf returns the contract shape of a model: its per-layer widths and
// removed sub-blocks, with format decilm for a per-layer config (DeciLM
// block_configs) and native otherwise. A hybrid's Mamba2 layers have their
// mixer's widths, an MoE block its kept experts, top-k, expert width and
// the family's router rule (moeShape).
func ShapeOf(m *architecture.Model) (Shape, error) {
	s := Shape{Arch: m.Arch, Format: FormatNative, Vocab: m.Vocab, Hidden: m.Hidden, Tied: m.TiedEmbeddings}
	if m.Family().PerLayer {
		s.Format = FormatDeciLM
	}
	for i, l := range m.Layers {
		var ls LayerShape
		if x := l.MoE; x != nil {
			if l.Mamba != nil || l.MLP != nil {
				return Shape{}, fmt.Errorf("job: %s layer %d has an MoE block beside an MLP or a Mamba2 mixer", m.Arch, i)
			}
			ls.MoE = moeShape(m, x)
		}
		if x := l.Mamba; x != nil {
			ls.Mamba = &MambaShape{Heads: x.Heads, HeadDim: x.HeadDim, State: x.StateSize, Groups: x.Groups, Conv: x.ConvKernel}
		}
		if a := l.Attention; a != nil {
			ls.Attention = &AttentionShape{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim}
		}
		if l.MLP != nil {
			ls.MLP = &MLPShape{Width: l.MLP.Width}
		}
		s.Layers = append(s.Layers, ls)
	}
	return s, nil
}

// moeShape is the contract shape of MoE block x of model m: the router
// rule is m's family's (architecture.Model.MoERouter, norm_topk_prob
// resolved from m's config), sigmoid routing where the block has
// e_score_correction_bias.
func moeShape(m *architecture.Model, x *architecture.MoE) *MoEShape {
	r := m.MoERouter()
	s := &MoEShape{Experts: x.Experts, TopK: x.TopK, Width: x.ExpertWidth, Router: RouterSoftmaxTopK, NormTopKProb: r.Renormalize, SharedWidth: x.SharedWidth}
	switch {
	case x.RouterCorrection:
		s.Router = RouterSigmoid
	case r.TopKFirst:
		s.Router = RouterTopKSoftmax
	}
	return s
}
