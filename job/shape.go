package job

import (
	"encoding/json"
	"fmt"
	"math"

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
// e_score_correction_bias, with its group limit and scaling from the
// config (a bad value is kept, for the contract's check to refuse).
func moeShape(m *architecture.Model, x *architecture.MoE) *MoEShape {
	r := m.MoERouter()
	s := &MoEShape{Experts: x.Experts, TopK: x.TopK, Width: x.ExpertWidth, Router: RouterSoftmaxTopK, NormTopKProb: r.Renormalize, SharedWidth: x.SharedWidth}
	switch {
	case x.RouterCorrection:
		// NemotronHConfig.__init__'s defaults: n_group 1, topk_group 1,
		// routed_scaling_factor 1.0.
		s.Router = RouterSigmoid
		s.Groups, s.TopKGroups, s.Scale = rawInt(m.Raw, "n_group", 1), rawInt(m.Raw, "topk_group", 1), rawNumber(m.Raw, "routed_scaling_factor", 1)
	case r.TopKFirst:
		s.Router = RouterTopKSoftmax
	}
	return s
}

// rawNumber is config value key as a float64: def when absent or null,
// NaN when not a number (which the contract's check refuses).
func rawNumber(raw map[string]any, key string, def float64) float64 {
	switch v := raw[key].(type) {
	case nil:
		return def
	case json.Number:
		if f, err := v.Float64(); err == nil {
			return f
		}
	case float64:
		return v
	case int:
		return float64(v)
	case architecture.NonFinite:
		return v.Float()
	}
	return math.NaN()
}

// rawInt is rawNumber as an int, -1 when not a whole number.
func rawInt(raw map[string]any, key string, def int) int {
	f := rawNumber(raw, key, float64(def))
	if f != math.Trunc(f) || math.Abs(f) > 1<<30 {
		return -1
	}
	return int(f)
}
