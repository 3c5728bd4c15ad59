package job

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
)

// ShapeOf returns the contract shape of a model: its per-layer widths and
// removed sub-blocks, with format decilm for a per-layer config (DeciLM
// block_configs) and native otherwise. A hybrid's Mamba2 layers have their
// mixer's widths; MoE layers have no contract shape yet.
func ShapeOf(m *architecture.Model) (Shape, error) {
	s := Shape{Arch: m.Arch, Format: FormatNative, Vocab: m.Vocab, Hidden: m.Hidden, Tied: m.TiedEmbeddings}
	if m.Family().PerLayer {
		s.Format = FormatDeciLM
	}
	for i, l := range m.Layers {
		if l.MoE != nil {
			return Shape{}, fmt.Errorf("job: %s layer %d has an MoE block: job contracts hold attention, dense MLP and Mamba2 layers only", m.Arch, i)
		}
		var ls LayerShape
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
