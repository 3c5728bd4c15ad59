package prune

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// Layout is a plan resolved against a parent model: for every child layer,
// which parent layer it comes from and which parent heads, KV groups,
// neurons and Mamba heads it keeps, in child order. An index of -1 stands for
// a zero-filled (padded) row or column.
type Layout struct {
	Parent *architecture.Model
	Child  *architecture.Model
	// Format is the resolved output format (native, decilm or padded).
	Format string
	// Hidden lists the kept hidden channels; nil keeps all in order.
	Hidden []int
	// Layers has one entry per child layer.
	Layers []LayerLayout
	// Notes say what the pruner changed beyond what the plan lists (a
	// router's top-k lowered to the experts kept).
	Notes []string
}

// LayerLayout maps one child layer onto its parent layer.
type LayerLayout struct {
	Parent int // parent layer index
	// Heads and KVHeads list parent query heads and KV groups in child order
	// (-1 = zero padding); nil when the child layer has no attention.
	Heads, KVHeads []int
	// Neurons lists parent MLP neurons (-1 = zero padding).
	Neurons []int
	// MambaHeads lists parent Mamba heads.
	MambaHeads []int
	// MambaChannels lists the channels kept within every Mamba head (nil:
	// all).
	MambaChannels []int
	// Experts lists the parent's routed experts kept, in child order (MoE
	// layers only).
	Experts []int
	// ZeroAttention and ZeroMLP mark sub-blocks removed by the plan but kept
	// as all-zero weights in the padded format.
	ZeroAttention, ZeroMLP bool
}

// identity reports whether the layout keeps every parameter of the parent
// unchanged and in place.
func (l *Layout) identity() bool {
	if l.Hidden != nil && !isRange(l.Hidden, l.Parent.Hidden) || len(l.Layers) != len(l.Parent.Layers) {
		return false
	}
	for i, ll := range l.Layers {
		p := l.Parent.Layers[i]
		if ll.Parent != i || ll.ZeroAttention || ll.ZeroMLP {
			return false
		}
		if p.Attention != nil && (!isRange(ll.Heads, p.Attention.Heads) || !isRange(ll.KVHeads, p.Attention.KVHeads)) {
			return false
		}
		if p.MLP != nil && !isRange(ll.Neurons, p.MLP.Width) {
			return false
		}
		if p.Mamba != nil && (!isRange(ll.MambaHeads, p.Mamba.Heads) || ll.MambaChannels != nil && !isRange(ll.MambaChannels, p.Mamba.HeadDim)) {
			return false
		}
		if p.MoE != nil && !isRange(ll.Experts, p.MoE.Experts) {
			return false
		}
	}
	return true
}

func isRange(idx []int, n int) bool {
	if len(idx) != n {
		return false
	}
	for i, v := range idx {
		if v != i {
			return false
		}
	}
	return true
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// llamaFamily reports whether the architecture has a Llama-type block that
// DeciLM block_configs can express.
func llamaFamily(m *architecture.Model) bool {
	if !m.Family().DeciLMBlocks {
		return false
	}
	for _, l := range m.Layers {
		if l.Mamba != nil || l.MoE != nil {
			return false
		}
		if l.Attention != nil && (l.Attention.QKNorm || l.Attention.OutBias) {
			return false
		}
		if l.MLP != nil && !l.MLP.Gated {
			return false
		}
	}
	return true
}

// isDeciLM reports whether m is stored as DeciLM block_configs (a family
// whose native config is per-layer, by class or by model_type).
func isDeciLM(m *architecture.Model) bool {
	if m.Family().PerLayer {
		return true
	}
	f, ok := architecture.LookupModelType(m.ModelType)
	return ok && f.PerLayer
}

// Resolve checks the plan against the parent and computes the child layout
// and model. Every problem is reported in one *PlanError naming the layer and
// the field.
func Resolve(parent *architecture.Model, p *Plan) (*Layout, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := &PlanError{}
	format := p.Format()
	if isDeciLM(parent) && format == FormatNative {
		format = FormatDeciLM
	}
	if format == FormatDeciLM && !llamaFamily(parent) {
		e.add(-1, "output_format", "decilm needs a Llama-family parent (RMSNorm, gated MLP, no qk-norm, no Mamba or MoE); %s cannot be expressed as DeciLM block_configs: use native or padded", parent.Arch)
	}
	for _, v := range p.Hidden {
		if v >= parent.Hidden {
			e.add(-1, "hidden", "index %d out of range (hidden_size %d)", v, parent.Hidden)
			break
		}
	}
	for _, lp := range p.Layers {
		if lp.Layer >= len(parent.Layers) {
			e.add(lp.Layer, "layer", "out of range (the parent has %d layers)", len(parent.Layers))
		}
	}
	if len(e.Issues) > 0 {
		return nil, e
	}

	lay := &Layout{Parent: parent, Format: format}
	if p.Hidden != nil {
		lay.Hidden = append([]int(nil), p.Hidden...)
	}
	type kept struct {
		parent     int
		attn       *architecture.Attention
		mlp        *architecture.MLP
		mamba      *architecture.Mamba
		moe        *architecture.MoE
		heads, kv  []int
		neurons    []int
		mambaHeads []int
		mambaChans []int
		experts    []int
		zeroAttn   bool
		zeroMLP    bool
	}
	var ks []kept
	for li, pl := range parent.Layers {
		lp := p.layerPlan(li)
		if lp == nil {
			lp = &LayerPlan{Layer: li}
		}
		if lp.Remove {
			continue
		}
		k := kept{parent: li, attn: pl.Attention, mlp: pl.MLP, mamba: pl.Mamba, moe: pl.MoE}
		blocks := 0
		for _, b := range []bool{pl.Attention != nil, pl.MLP != nil, pl.Mamba != nil, pl.MoE != nil} {
			if b {
				blocks++
			}
		}
		if lp.RemoveAttention {
			switch {
			case pl.Attention == nil:
				e.add(li, "remove_attention", "the layer has no attention block")
			case blocks == 1:
				e.add(li, "remove_attention", "attention is the layer's only block; use \"remove\": true")
			}
			k.attn = nil
			k.zeroAttn = format == FormatPadded
		}
		if lp.RemoveMLP {
			switch {
			case pl.MLP == nil:
				e.add(li, "remove_mlp", "the layer has no MLP block")
			case blocks == 1:
				e.add(li, "remove_mlp", "the MLP is the layer's only block; use \"remove\": true")
			}
			k.mlp = nil
			k.zeroMLP = format == FormatPadded
		}
		if (lp.RemoveAttention || lp.RemoveMLP) && format == FormatNative {
			e.add(li, "remove_attention/remove_mlp", "removing one sub-block of a layer is not expressible in the native %s format; use output_format decilm (Llama family) or padded", parent.Arch)
		}
		// Attention heads.
		if (lp.Heads != nil || lp.KVHeads != nil) && pl.Attention == nil {
			e.add(li, "heads", "the layer has no attention block")
		} else if k.attn != nil {
			a := pl.Attention
			k.heads, k.kv = resolveHeads(e, li, a, lp.Heads, lp.KVHeads)
		}
		if lp.Neurons != nil && pl.MLP == nil {
			if pl.MoE != nil {
				e.add(li, "neurons", "the layer has an MoE block and no dense MLP: list the routed experts it keeps in \"experts\" (expert widths are not pruned)")
			} else {
				e.add(li, "neurons", "the layer has no MLP block")
			}
		} else if k.mlp != nil {
			k.neurons = seq(pl.MLP.Width)
			if lp.Neurons != nil {
				if last := lp.Neurons[len(lp.Neurons)-1]; last >= pl.MLP.Width {
					e.add(li, "neurons", "index %d out of range (intermediate_size %d)", last, pl.MLP.Width)
				}
				k.neurons = lp.Neurons
			}
		}
		if lp.MambaHeadDim != nil && pl.Mamba == nil {
			e.add(li, "mamba_head_dim", "the layer has no Mamba block")
		} else if pl.Mamba != nil && lp.MambaHeadDim != nil {
			if last := lp.MambaHeadDim[len(lp.MambaHeadDim)-1]; last >= pl.Mamba.HeadDim {
				e.add(li, "mamba_head_dim", "index %d out of range (mamba_head_dim %d: channels 0 to %d within each head)", last, pl.Mamba.HeadDim, pl.Mamba.HeadDim-1)
			}
			k.mambaChans = lp.MambaHeadDim
		}
		if lp.MambaHeads != nil && pl.Mamba == nil {
			e.add(li, "mamba_heads", "the layer has no Mamba block")
		} else if pl.Mamba != nil {
			k.mambaHeads = seq(pl.Mamba.Heads)
			if lp.MambaHeads != nil {
				k.mambaHeads = resolveGrouped(e, li, "mamba_heads", lp.MambaHeads, pl.Mamba.Heads, pl.Mamba.Groups, "mamba_num_heads", "n_groups")
			}
		}
		if lp.Experts != nil && pl.MoE == nil {
			e.add(li, "experts", "the layer has no MoE block")
		} else if x := pl.MoE; x != nil {
			k.experts = resolveExperts(e, li, lp.Experts, x, p.LowerTopK, parent.Raw)
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		e.add(-1, "layers", "the plan removes every layer")
	}
	if len(e.Issues) > 0 {
		return nil, e
	}

	// Shape the child per format.
	child := parent.Clone()
	if lay.Hidden != nil {
		child.Hidden = len(lay.Hidden)
	}
	child.Layers = make([]architecture.Layer, len(ks))
	lay.Layers = make([]LayerLayout, len(ks))

	var maxKV, maxQPG, maxWidth int
	for _, k := range ks {
		if k.attn != nil {
			maxKV = max(maxKV, len(k.kv))
			maxQPG = max(maxQPG, len(k.heads)/len(k.kv))
		}
		if k.mlp != nil {
			maxWidth = max(maxWidth, len(k.neurons))
		}
	}
	for ci, k := range ks {
		ll := LayerLayout{Parent: k.parent, ZeroAttention: k.zeroAttn, ZeroMLP: k.zeroMLP}
		var cl architecture.Layer
		pl := parent.Layers[k.parent]
		switch {
		case k.attn != nil:
			a := *k.attn
			ll.Heads, ll.KVHeads = k.heads, k.kv
			if format == FormatPadded {
				ll.Heads, ll.KVHeads = padHeads(k.heads, k.kv, maxKV, maxQPG)
			}
			a.Heads, a.KVHeads = len(ll.Heads), len(ll.KVHeads)
			cl.Attention = &a
		case k.zeroAttn:
			a := *pl.Attention
			ll.Heads, ll.KVHeads = padHeads(nil, nil, maxKV, maxQPG)
			a.Heads, a.KVHeads = len(ll.Heads), len(ll.KVHeads)
			cl.Attention = &a
		}
		switch {
		case k.mlp != nil:
			m := *k.mlp
			ll.Neurons = k.neurons
			switch format {
			case FormatPadded:
				ll.Neurons = padTo(k.neurons, maxWidth)
			case FormatDeciLM:
				ll.Neurons = padTo(k.neurons, roundUp(len(k.neurons), DeciLMFFNMultiple))
			}
			m.Width = len(ll.Neurons)
			cl.MLP = &m
		case k.zeroMLP:
			m := *pl.MLP
			ll.Neurons = padTo(nil, maxWidth)
			m.Width = len(ll.Neurons)
			cl.MLP = &m
		}
		if k.mamba != nil {
			m := *k.mamba
			ll.MambaHeads = k.mambaHeads
			m.Heads = len(ll.MambaHeads)
			if k.mambaChans != nil {
				ll.MambaChannels = k.mambaChans
				m.HeadDim = len(k.mambaChans)
			}
			cl.Mamba = &m
		}
		if k.moe != nil {
			m := *k.moe
			ll.Experts = k.experts
			m.Experts = len(k.experts)
			if m.TopK > m.Experts {
				// resolveExperts refused this unless the plan allows it.
				lay.Notes = append(lay.Notes, fmt.Sprintf("layer %d: num_experts_per_tok lowered from %d to %d, the routed experts kept (lower_top_k)", k.parent, m.TopK, m.Experts))
				m.TopK = m.Experts
			}
			cl.MoE = &m
		}
		child.Layers[ci] = cl
		lay.Layers[ci] = ll
	}
	if err := checkFormatShape(e, child, lay, format); err != nil {
		return nil, err
	}
	if format == FormatDeciLM {
		deci, _ := architecture.Lookup(architecture.DeciLM)
		child.Arch, child.ModelType = deci.Arch, deci.ModelType
	}
	lay.Child = child
	return lay, nil
}

// DeciLMFFNMultiple is the granularity to which the engines that read DeciLM
// ffn_mult round every FFN width (serving-formats.md §2).
const DeciLMFFNMultiple = 256

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// padTo returns idx followed by -1 entries up to length n.
func padTo(idx []int, n int) []int {
	out := make([]int, n)
	copy(out, idx)
	for i := len(idx); i < n; i++ {
		out[i] = -1
	}
	return out
}

// padHeads lays kept heads out in maxKV groups of maxQPG query heads each,
// padding missing groups and heads with -1.
func padHeads(heads, kv []int, maxKV, maxQPG int) (q, k []int) {
	q = make([]int, 0, maxKV*maxQPG)
	k = padTo(kv, maxKV)
	qpg := 0
	if len(kv) > 0 {
		qpg = len(heads) / len(kv)
	}
	for g := range maxKV {
		for j := range maxQPG {
			if g < len(kv) && j < qpg {
				q = append(q, heads[g*qpg+j])
			} else {
				q = append(q, -1)
			}
		}
	}
	return q, k
}

// resolveHeads checks kept query heads and KV groups of one layer and returns
// them (all when unset). Query head h belongs to KV group h/(Heads/KVHeads).
func resolveHeads(e *PlanError, li int, a *architecture.Attention, heads, kv []int) ([]int, []int) {
	if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		e.add(li, "heads", "parent attention has %d query heads and %d KV heads, not a whole number of heads per group", a.Heads, a.KVHeads)
		return nil, nil
	}
	per := a.Heads / a.KVHeads
	if kv == nil {
		// KV groups are removed only explicitly (kv_heads).
		kv = seq(a.KVHeads)
	} else if last := kv[len(kv)-1]; last >= a.KVHeads {
		e.add(li, "kv_heads", "index %d out of range (num_key_value_heads %d)", last, a.KVHeads)
		return nil, nil
	}
	if heads == nil {
		heads = make([]int, 0, len(kv)*per)
		for _, g := range kv {
			for j := range per {
				heads = append(heads, g*per+j)
			}
		}
		return heads, kv
	}
	if last := heads[len(heads)-1]; last >= a.Heads {
		e.add(li, "heads", "index %d out of range (num_attention_heads %d)", last, a.Heads)
		return nil, nil
	}
	keptGroup := map[int]bool{}
	for _, g := range kv {
		keptGroup[g] = true
	}
	count := map[int]int{}
	for _, h := range heads {
		g := h / per
		if !keptGroup[g] {
			e.add(li, "heads", "query head %d belongs to KV group %d, which kv_heads removes", h, g)
			return nil, nil
		}
		count[g]++
	}
	want := count[kv[0]]
	var uneven []string
	for _, g := range kv {
		if count[g] != want {
			uneven = append(uneven, fmt.Sprintf("group %d keeps %d", g, count[g]))
		}
	}
	if len(uneven) > 0 {
		e.add(li, "heads", "grouped-query attention needs the same number of query heads kept in every KV group (%d heads per group of %d): group %d keeps %d but %s; remove a whole group with kv_heads instead",
			per, a.Heads/a.KVHeads, kv[0], want, strings.Join(uneven, ", "))
		return nil, nil
	}
	return heads, kv
}

// resolveGrouped checks that kept indices of a grouped quantity (n items in
// g contiguous groups) keep the same number in every group.
func resolveGrouped(e *PlanError, li int, field string, idx []int, n, groups int, nName, gName string) []int {
	if last := idx[len(idx)-1]; last >= n {
		e.add(li, field, "index %d out of range (%s %d)", last, nName, n)
		return nil
	}
	if groups <= 0 || n%groups != 0 {
		e.add(li, field, "%s %d is not a multiple of %s %d", nName, n, gName, groups)
		return nil
	}
	per := n / groups
	count := make([]int, groups)
	for _, v := range idx {
		count[v/per]++
	}
	for g, c := range count {
		if c != count[0] {
			e.add(li, field, "the same number must be kept in each of the %d groups (%s): group 0 keeps %d, group %d keeps %d", groups, gName, count[0], g, c)
			return nil
		}
	}
	return idx
}

// checkFormatShape verifies that the child can be written in the format.
func checkFormatShape(e *PlanError, child *architecture.Model, lay *Layout, format string) error {
	var first struct {
		attn, mlp, mamba, moe *int
	}
	var a0, m0, mb0, e0 int
	for ci, l := range child.Layers {
		pi := lay.Layers[ci].Parent
		if l.Attention != nil {
			if first.attn == nil {
				a0 = ci
				first.attn = &a0
			} else {
				f := child.Layers[*first.attn].Attention
				if f.Heads != l.Attention.Heads && (format == FormatNative || format == FormatDeciLM) {
					e.add(pi, "heads", "keeps %d query heads but layer %d keeps %d; %s needs the same number of query heads in every layer",
						l.Attention.Heads, lay.Layers[*first.attn].Parent, f.Heads, formatName(format, child))
				} else if f.KVHeads != l.Attention.KVHeads && format == FormatNative {
					e.add(pi, "kv_heads", "keeps %d KV groups but layer %d keeps %d; per-layer KV groups need output_format decilm (Llama family) or padded",
						l.Attention.KVHeads, lay.Layers[*first.attn].Parent, f.KVHeads)
				}
			}
		}
		if l.MLP != nil {
			if first.mlp == nil {
				m0 = ci
				first.mlp = &m0
			} else if f := child.Layers[*first.mlp].MLP; f.Width != l.MLP.Width && format == FormatNative {
				e.add(pi, "neurons", "keeps %d neurons but layer %d keeps %d; per-layer MLP widths need output_format decilm (Llama family) or padded",
					l.MLP.Width, lay.Layers[*first.mlp].Parent, f.Width)
			}
		}
		if l.MoE != nil {
			if first.moe == nil {
				e0 = ci
				first.moe = &e0
			} else if f := child.Layers[*first.moe].MoE; f.Experts != l.MoE.Experts {
				e.add(pi, "experts", "keeps %d routed experts but layer %d keeps %d; every MoE layer must keep the same number: the config has one num_experts, and no engine loads per-layer expert counts (export's capability table); zero-padded experts would still be routed to",
					l.MoE.Experts, lay.Layers[*first.moe].Parent, f.Experts)
			}
		}
		if l.Mamba != nil {
			if first.mamba == nil {
				mb0 = ci
				first.mamba = &mb0
			} else if f := child.Layers[*first.mamba].Mamba; f.Heads != l.Mamba.Heads {
				e.add(pi, "mamba_heads", "keeps %d Mamba heads but layer %d keeps %d; mamba_num_heads is global, and zero-padding Mamba heads would change the grouped RMSNorm, so every Mamba layer must keep the same number",
					l.Mamba.Heads, lay.Layers[*first.mamba].Parent, f.Heads)
			} else if f.HeadDim != l.Mamba.HeadDim {
				e.add(pi, "mamba_head_dim", "keeps %d channels per Mamba head but layer %d keeps %d; mamba_head_dim is global, so every Mamba layer must keep the same number",
					l.Mamba.HeadDim, lay.Layers[*first.mamba].Parent, f.HeadDim)
			}
		}
	}
	return e.errOrNil()
}

func formatName(format string, m *architecture.Model) string {
	if format == FormatDeciLM {
		return "DeciLM (global num_attention_heads)"
	}
	return "the native " + m.Arch + " format"
}

// resolveExperts checks the routed experts one MoE layer keeps and returns
// them (all when unset): indices in range, at least the router's top-k of
// them unless lowerTopK allows fewer, and, for a grouped router (n_group >
// 1 in the config: experts in n_group contiguous groups, topk_group of
// them chosen per token), the same number kept in every group.
func resolveExperts(e *PlanError, li int, kept []int, x *architecture.MoE, lowerTopK bool, raw map[string]any) []int {
	if kept == nil {
		return seq(x.Experts)
	}
	if last := kept[len(kept)-1]; last >= x.Experts {
		e.add(li, "experts", "index %d out of range: the layer has %d routed experts (valid indices 0 to %d)", last, x.Experts, x.Experts-1)
		return nil
	}
	if len(kept) < x.TopK && !lowerTopK {
		e.add(li, "experts", "keeps %d routed experts but the router sends every token to num_experts_per_tok = %d: keep at least %d, or set \"lower_top_k\": true to lower the top-k to the experts kept", len(kept), x.TopK, x.TopK)
		return nil
	}
	if g := rawInt(raw, "n_group"); g > 1 {
		return resolveGrouped(e, li, "experts", kept, x.Experts, g, "n_routed_experts", "n_group")
	}
	return kept
}

// rawInt reads an integer key of a parent's config.json (0 when absent or
// not a number).
func rawInt(raw map[string]any, key string) int {
	switch v := raw[key].(type) {
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}
