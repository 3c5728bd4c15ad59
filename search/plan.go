package search

import (
	"fmt"
	"sort"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/prune"
)

// Plan turns a candidate into the pruning plan "autocompress prune --plan"
// applies: with scores, the highest-scoring hidden channels, KV groups,
// query heads (within their groups) and neurons, as the proxy counted them;
// without scores (the structural prior), the lowest indices, which the
// prior cannot tell apart (score the parent before pruning weights).
// Routed experts are the highest by the space's ExpertScores, or without
// them the lowest indices (the space's notes say so). The
// output format is DeciLM for per-layer Llama-family shapes, native
// otherwise; the plan names the serve-on engine for prune to validate
// against, unless it is the native engine (estimate.EngineSpec.Local).
func (sp *Space) Plan(c *Candidate, s *importance.Scores) (*prune.Plan, error) {
	m := sp.Parent
	p := &prune.Plan{Version: prune.PlanVersion, OutputFormat: prune.FormatNative}
	if e, ok := sp.ServeOn.Engine(); !ok || !e.Local() {
		// The native engine is ours and reads the child through package
		// architecture: the plan names no engine for it.
		p.Engine = sp.ServeOn.Name
	}
	if architecture.FormatFor(sp.Model(c)) == architecture.DeciLMFormat {
		p.OutputFormat = prune.FormatDeciLM
	}
	if c.Hidden != m.Hidden {
		if s != nil && len(s.Hidden) == m.Hidden {
			k, err := prune.TopK(f32(s.Hidden), c.Hidden)
			if err != nil {
				return nil, fmt.Errorf("hidden: %w", err)
			}
			p.Hidden = k
		} else {
			p.Hidden = seq(c.Hidden)
		}
	}
	for l, pl := range m.Layers {
		ls := c.Layers[l]
		lp := prune.LayerPlan{Layer: l}
		if ls.Removed {
			lp.Remove = true
			p.Layers = append(p.Layers, lp)
			continue
		}
		if a := pl.Attention; a != nil {
			switch {
			case ls.KVGroups == 0:
				lp.RemoveAttention = true
			case ls.KVGroups != a.KVHeads || c.Heads != a.Heads:
				per, hpg := a.Heads/a.KVHeads, c.Heads/ls.KVGroups
				var groups, heads []int
				if s != nil && l < len(s.Heads) && len(s.Heads[l]) == a.Heads {
					groups, heads, _ = headChoice(s.Heads[l], a.KVHeads, ls.KVGroups, hpg)
				} else {
					groups = seq(ls.KVGroups)
					for _, g := range groups {
						for j := range hpg {
							heads = append(heads, g*per+j)
						}
					}
				}
				if ls.KVGroups != a.KVHeads {
					lp.KVHeads = groups
				}
				if len(heads) != a.Heads {
					lp.Heads = heads
				}
			}
		}
		if x := pl.MLP; x != nil {
			switch {
			case ls.MLP == 0:
				lp.RemoveMLP = true
			case ls.MLP != x.Width:
				if s != nil && l < len(s.Neurons) && len(s.Neurons[l]) == x.Width {
					k, err := prune.TopK(f32(s.Neurons[l]), ls.MLP)
					if err != nil {
						return nil, fmt.Errorf("layer %d neurons: %w", l, err)
					}
					lp.Neurons = k
				} else {
					lp.Neurons = seq(ls.MLP)
				}
			}
		}
		if x := pl.Mamba; x != nil && ls.MambaHeadDim > 0 && ls.MambaHeadDim != x.HeadDim {
			// The same channels in every head: the highest-scoring
			// channel positions over all heads (importance.Scores.
			// MambaChannelScores), else the lowest.
			lp.MambaHeadDim = seq(ls.MambaHeadDim)
			if s != nil {
				if c := s.MambaChannelScores(l, x.Heads); len(c) == x.HeadDim {
					k, err := prune.TopK(f32(c), ls.MambaHeadDim)
					if err != nil {
						return nil, fmt.Errorf("layer %d Mamba head_dim: %w", l, err)
					}
					lp.MambaHeadDim = k
				}
			}
		}
		if x := pl.Mamba; x != nil && ls.MambaHeads > 0 && ls.MambaHeads != x.Heads {
			// Group-aware (Minitron-SSM): the same number in every group,
			// the highest-scoring of each with Mamba head scores, else the
			// lowest indices.
			per, keep := x.Heads/x.Groups, ls.MambaHeads/x.Groups
			var order [][]int
			if s != nil && l < len(s.MambaHeads) && len(s.MambaHeads[l]) == x.Heads {
				order = s.MambaHeadOrder(l, x.Groups)
			}
			for g := range x.Groups {
				var kept []int
				for j := range keep {
					if order != nil {
						kept = append(kept, order[g][j])
					} else {
						kept = append(kept, g*per+j)
					}
				}
				sort.Ints(kept)
				lp.MambaHeads = append(lp.MambaHeads, kept...)
			}
		}
		if x := pl.MoE; x != nil && ls.Experts > 0 && ls.Experts != x.Experts {
			if es := sp.ExpertScores; es != nil && l < len(es.Layers) && len(es.Layers[l]) == x.Experts {
				k, err := prune.TopK(f32(es.Layers[l]), ls.Experts)
				if err != nil {
					return nil, fmt.Errorf("layer %d experts: %w", l, err)
				}
				lp.Experts = k
			} else {
				lp.Experts = seq(ls.Experts)
			}
		}
		if lp.RemoveAttention || lp.RemoveMLP || lp.Heads != nil || lp.KVHeads != nil || lp.Neurons != nil || lp.MambaHeads != nil || lp.MambaHeadDim != nil || lp.Experts != nil {
			p.Layers = append(p.Layers, lp)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
