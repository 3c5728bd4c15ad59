package search

import (
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// LayerShape is what one parent layer keeps in a candidate.
type LayerShape struct {
	// Removed drops the whole layer.
	Removed bool `json:"removed,omitempty"`
	// KVGroups is the KV-group count kept (0: attention removed, or the
	// layer has none); each group keeps Candidate.Heads/KVGroups queries.
	KVGroups int `json:"kv_groups,omitempty"`
	// MLP is the MLP width kept (0: removed, or the layer has none).
	MLP int `json:"mlp,omitempty"`
	// MambaHeads is the Mamba2 heads kept (Mamba layers).
	MambaHeads int `json:"mamba_heads,omitempty"`
	// MambaHeadDim is the channels kept per Mamba2 head (Mamba layers;
	// 0: all).
	MambaHeadDim int `json:"mamba_head_dim,omitempty"`
	// Experts is the routed experts kept (MoE layers; 0: all).
	Experts int `json:"experts,omitempty"`
}

// Candidate is one point of the space: a global shape, one LayerShape per
// parent layer and the engine settings, with its proxy quality and costs.
type Candidate struct {
	Hidden int `json:"hidden"`
	// Heads is the query-head count of every attention layer.
	Heads    int          `json:"heads,omitempty"`
	Layers   []LayerShape `json:"layers"`
	Settings Settings     `json:"settings"`
	// Quality is the proxy (share of the parent's importance kept, 1 = parent).
	Quality float64 `json:"quality"`
	Costs   Costs   `json:"costs"`
	// Meets is true when the candidate meets every budget.
	Meets bool `json:"meets_budgets"`
	// Measured is the measured proxy, when it was measured.
	Measured *Measurement `json:"measured,omitempty"`
}

// Model returns the child architecture of c.
func (sp *Space) Model(c *Candidate) *architecture.Model {
	m := *sp.Parent
	m.Hidden = c.Hidden
	m.Layers = nil
	m = *m.Clone()
	var r reshaped
	for i := range sp.Parent.Layers {
		if ls := c.Layers[i]; !ls.Removed {
			m.Layers = append(m.Layers, r.set(&sp.Parent.Layers[i], c.Heads, ls).Clone())
		}
	}
	if m.Name != "" {
		m.Name += " (pruned)"
	}
	return &m
}

// reshaped is a parent layer reshaped to a LayerShape, its blocks held
// inline so that building one does not allocate (the search builds one per
// menu option). Space.Model, the engine-rule check of global shapes and the
// menus all reshape through it.
type reshaped struct {
	l     architecture.Layer
	attn  architecture.Attention
	mlp   architecture.MLP
	mamba architecture.Mamba
	moe   architecture.MoE
}

// set makes r parent layer pl reshaped to s with heads query heads per
// attention block, and returns it; it is valid until the next set (Clone
// it to keep it).
func (r *reshaped) set(pl *architecture.Layer, heads int, s LayerShape) *architecture.Layer {
	r.l = architecture.Layer{}
	if a := pl.Attention; a != nil && s.KVGroups > 0 {
		r.attn = *a
		r.attn.KVHeads, r.attn.Heads = s.KVGroups, heads
		r.l.Attention = &r.attn
	}
	if x := pl.MLP; x != nil && s.MLP > 0 {
		r.mlp = *x
		r.mlp.Width = s.MLP
		r.l.MLP = &r.mlp
	}
	if x := pl.Mamba; x != nil {
		r.mamba = *x
		if s.MambaHeads > 0 {
			r.mamba.Heads = s.MambaHeads
		}
		if s.MambaHeadDim > 0 {
			r.mamba.HeadDim = s.MambaHeadDim
		}
		r.l.Mamba = &r.mamba
	}
	if x := pl.MoE; x != nil {
		r.moe = *x
		if s.Experts > 0 {
			r.moe.Experts = s.Experts
		}
		r.l.MoE = &r.moe
	}
	return &r.l
}

// IsParent reports whether c keeps every unit of the parent.
func (sp *Space) IsParent(c *Candidate) bool {
	if c.Hidden != sp.Parent.Hidden {
		return false
	}
	for i, pl := range sp.Parent.Layers {
		ls := c.Layers[i]
		if ls.Removed {
			return false
		}
		if a := pl.Attention; a != nil && (ls.KVGroups != a.KVHeads || c.Heads != a.Heads) {
			return false
		}
		if m := pl.MLP; m != nil && ls.MLP != m.Width {
			return false
		}
		if m := pl.Mamba; m != nil && (ls.MambaHeads != m.Heads || ls.MambaHeadDim > 0 && ls.MambaHeadDim != m.HeadDim) {
			return false
		}
		if x := pl.MoE; x != nil && ls.Experts > 0 && ls.Experts != x.Experts {
			return false
		}
	}
	return true
}

// Describe says in a few words how c differs from the parent, e.g.
// "hidden 4096, 30/32 layers, MLP 8192–14336, 6 attention removed".
func (sp *Space) Describe(c *Candidate) string {
	if sp.IsParent(c) {
		return "the parent's shape"
	}
	var parts []string
	if c.Hidden != sp.Parent.Hidden {
		parts = append(parts, fmt.Sprintf("hidden %d→%d", sp.Parent.Hidden, c.Hidden))
	}
	kept, noAttn, noMLP := 0, 0, 0
	minW, maxW := 1<<62, 0
	minKV, maxKV := 1<<62, 0
	mamba, experts, parentExperts := 0, 0, 0
	mambaDim, parentMambaDim := 0, 0
	var parentHeads int
	for i, pl := range sp.Parent.Layers {
		ls := c.Layers[i]
		if ls.Removed {
			continue
		}
		kept++
		if a := pl.Attention; a != nil {
			parentHeads = a.Heads
			if ls.KVGroups == 0 {
				noAttn++
			} else {
				minKV, maxKV = min(minKV, ls.KVGroups), max(maxKV, ls.KVGroups)
			}
		}
		if pl.MLP != nil {
			if ls.MLP == 0 {
				noMLP++
			} else {
				minW, maxW = min(minW, ls.MLP), max(maxW, ls.MLP)
			}
		}
		if pl.Mamba != nil {
			mamba = ls.MambaHeads
			if ls.MambaHeadDim > 0 {
				mambaDim, parentMambaDim = ls.MambaHeadDim, pl.Mamba.HeadDim
			}
		}
		if pl.MoE != nil && ls.Experts > 0 {
			experts, parentExperts = ls.Experts, pl.MoE.Experts
		}
	}
	n := len(sp.Parent.Layers)
	if kept != n {
		parts = append(parts, fmt.Sprintf("%d/%d layers", kept, n))
	}
	if parentHeads > 0 && c.Heads != parentHeads {
		parts = append(parts, fmt.Sprintf("query heads %d→%d", parentHeads, c.Heads))
	}
	if maxKV > 0 && (minKV != maxKV || sp.firstKV() != maxKV) {
		parts = append(parts, fmt.Sprintf("KV groups %s", span(minKV, maxKV)))
	}
	if maxW > 0 {
		parts = append(parts, "MLP "+span(minW, maxW))
	}
	if noAttn > 0 {
		parts = append(parts, fmt.Sprintf("%d attention blocks removed", noAttn))
	}
	if noMLP > 0 {
		parts = append(parts, fmt.Sprintf("%d MLP blocks removed", noMLP))
	}
	if mamba > 0 {
		parts = append(parts, fmt.Sprintf("%d Mamba heads", mamba))
	}
	if mambaDim > 0 && mambaDim != parentMambaDim {
		parts = append(parts, fmt.Sprintf("Mamba head_dim %d→%d", parentMambaDim, mambaDim))
	}
	if experts > 0 && experts != parentExperts {
		parts = append(parts, fmt.Sprintf("experts %d→%d", parentExperts, experts))
	}
	return strings.Join(parts, ", ")
}

func (sp *Space) firstKV() int {
	for _, l := range sp.Parent.Layers {
		if l.Attention != nil {
			return l.Attention.KVHeads
		}
	}
	return 0
}

func span(a, b int) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d–%d", a, b)
}
