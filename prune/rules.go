package prune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// TensorMap says how one child tensor is made from one parent tensor.
type TensorMap struct {
	Src   string // parent tensor name
	Dst   string // child tensor name
	Sel   Selection
	Zero  bool  // write zeros of the child shape (a removed sub-block kept as padding)
	Shape []int // child shape
}

// ErrUnknownTensor is wrapped by errors about parent tensors the pruner does
// not know how to slice.
var ErrUnknownTensor = fmt.Errorf("tensor not understood by the pruner")

// tensorKey identifies a tensor independently of its family's names: the
// slicing rules below read only kinds and sub-blocks, and the child's name
// of a parent tensor is the child tensor with the same key.
type tensorKey struct {
	layer  int
	block  string
	kind   string
	expert int
}

func keyOf(t architecture.TensorSpec) tensorKey {
	return tensorKey{t.Layer, t.Block, t.Kind, t.Expert}
}

// Map computes, for every parent tensor (name → shape), the child tensor it
// becomes, or none when its layer or sub-block is removed. The result follows
// the order of names.
//
// Names are the family's (architecture.Family.Tensors): each parent tensor is
// sliced by its kind and sub-block, and named as the child's tensor of the
// same kind in the child layer; a sub-block the child lacks drops its
// tensors, norm included. Rotary inv_freq buffers, which the family does not
// list, are renumbered by its LayerPrefix and carried through.
func (l *Layout) Map(names []string, shapes map[string][]int) ([]TensorMap, error) {
	childOf := map[int][]int{} // parent layer → child layers (one)
	for ci, ll := range l.Layers {
		childOf[ll.Parent] = append(childOf[ll.Parent], ci)
	}
	hid := l.Hidden
	parentSpecs := map[string]architecture.TensorSpec{}
	for _, t := range l.Parent.Tensors() {
		parentSpecs[t.Name] = t
	}
	if l.Parent.TiedEmbeddings {
		// A tied checkpoint may still hold the LM head.
		head := l.Parent.LMHead()
		parentSpecs[head.Name] = head
	}
	childNames := map[tensorKey]string{}
	for _, t := range l.Child.Tensors() {
		childNames[keyOf(t)] = t.Name
	}
	prefix := l.Parent.Family().LayerPrefix
	childPrefix := l.Child.Family().LayerPrefix
	var out []TensorMap
	for _, name := range names {
		shape := shapes[name]
		t, known := parentSpecs[name]
		if !known {
			pl, rest, ok := splitLayer(name, prefix)
			if !ok {
				sel, err := l.globalSel(name, shape, hid)
				if err != nil {
					return nil, err
				}
				out = append(out, TensorMap{Src: name, Dst: name, Sel: sel, Shape: sel.Shape(shape)})
				continue
			}
			if pl < 0 || pl >= len(l.Parent.Layers) {
				return nil, fmt.Errorf("tensor %s: layer index %d out of range (the config has %d layers)", name, pl, len(l.Parent.Layers))
			}
			cis := childOf[pl]
			if len(cis) == 0 {
				continue // layer removed
			}
			if !strings.HasSuffix(rest, "rotary_emb.inv_freq") {
				return nil, fmt.Errorf("tensor %s: %w: layer-local name %q", name, ErrUnknownTensor, rest)
			}
			if l.Child.Layers[cis[0]].Attention == nil {
				continue // the buffer of a removed attention block
			}
			out = append(out, TensorMap{Src: name, Dst: childPrefix + strconv.Itoa(cis[0]) + "." + rest, Shape: shape})
			continue
		}
		if t.Layer < 0 {
			sel, err := globalKindSel(t, shape, hid)
			if err != nil {
				return nil, err
			}
			out = append(out, TensorMap{Src: name, Dst: name, Sel: sel, Shape: sel.Shape(shape)})
			continue
		}
		cis := childOf[t.Layer]
		if len(cis) == 0 {
			continue // layer removed
		}
		ci := cis[0]
		k := keyOf(t)
		k.layer = ci
		if t.Expert >= 0 {
			// A per-expert tensor: named by the expert's child index, or
			// dropped with its expert.
			k.expert = slices.Index(l.Layers[ci].Experts, t.Expert)
			if k.expert < 0 {
				continue
			}
		}
		dst, ok := childNames[k]
		if !ok && t.Kind == "norm" {
			// The norm of a layer left with no sub-block (a one-mixer
			// hybrid layer) is listed without one.
			k.block = ""
			dst, ok = childNames[k]
		}
		if !ok {
			continue // sub-block removed
		}
		sel, zero, err := l.layerSel(ci, t, hid)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		if err := checkSel(sel, shape); err != nil {
			return nil, fmt.Errorf("tensor %s: shape %v does not match the config: %w", name, shape, err)
		}
		out = append(out, TensorMap{Src: name, Dst: dst, Sel: sel, Zero: zero, Shape: sel.Shape(shape)})
	}
	return out, nil
}

// splitLayer splits prefix+"<layer>."+rest.
func splitLayer(name, prefix string) (layer int, rest string, ok bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(s, ".")
	if !ok || num == "" {
		return 0, "", false
	}
	layer, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return layer, rest, true
}

func checkSel(sel Selection, shape []int) error {
	if sel.Rows != nil {
		if len(shape) < 1 {
			return fmt.Errorf("expected at least one dimension")
		}
		if err := checkIndex(sel.Rows, shape[0], "row"); err != nil {
			return err
		}
	}
	if sel.Cols != nil {
		if len(shape) < 2 {
			return fmt.Errorf("expected at least two dimensions")
		}
		if err := checkIndex(sel.Cols, shape[1], "column"); err != nil {
			return err
		}
	}
	if sel.Inner != nil {
		if len(shape) != 3 {
			return fmt.Errorf("expected three dimensions")
		}
		if err := checkIndex(sel.Inner, shape[2], "dimension-2"); err != nil {
			return err
		}
	}
	return nil
}

// globalKindSel slices a tensor outside the decoder layers: the embedding
// and the LM head by hidden column, the final norm by hidden row.
func globalKindSel(t architecture.TensorSpec, shape []int, hid []int) (Selection, error) {
	var sel Selection
	switch t.Kind {
	case "embedding", "lm_head":
		sel = Selection{Cols: hid}
	case "norm":
		sel = Selection{Rows: hid}
	default:
		if hid != nil {
			return sel, fmt.Errorf("tensor %s: %w (kind %q outside the decoder layers)", t.Name, ErrUnknownTensor, t.Kind)
		}
	}
	if err := checkSel(sel, shape); err != nil {
		return sel, fmt.Errorf("tensor %s: shape %v does not match the config: %w", t.Name, shape, err)
	}
	return sel, nil
}

// globalSel handles tensors the family does not list outside the decoder
// layers: carried through unchanged unless the hidden size is pruned.
func (l *Layout) globalSel(name string, shape []int, hid []int) (Selection, error) {
	if hid == nil {
		return Selection{}, nil // carried through unchanged
	}
	return Selection{}, fmt.Errorf("tensor %s: %w (it lies outside the decoder layers and may depend on the hidden size); remove \"hidden\" from the plan or report this model", name, ErrUnknownTensor)
}

// layerSel returns the selection of parent tensor t in child layer ci, which
// has t's sub-block, and whether the tensor is written as zeros (a removed
// sub-block kept as padding).
func (l *Layout) layerSel(ci int, t architecture.TensorSpec, hid []int) (sel Selection, zero bool, err error) {
	ll := &l.Layers[ci]
	child := l.Child.Layers[ci]
	parent := l.Parent.Layers[ll.Parent]
	if t.Kind == "norm" {
		return Selection{Rows: hid}, false, nil
	}
	switch t.Block {
	case architecture.BlockAttention:
		a := child.Attention
		hd := a.HeadDim
		q := expand(ll.Heads, hd, 0)
		kv := expand(ll.KVHeads, hd, 0)
		zero = ll.ZeroAttention
		switch t.Kind {
		case "attn_q":
			return Selection{Rows: q, Cols: hid}, zero, nil
		case "attn_q_bias":
			return Selection{Rows: q}, zero, nil
		case "attn_k", "attn_v":
			return Selection{Rows: kv, Cols: hid}, zero, nil
		case "attn_k_bias", "attn_v_bias":
			return Selection{Rows: kv}, zero, nil
		case "attn_o":
			return Selection{Rows: hid, Cols: q}, zero, nil
		case "attn_o_bias":
			return Selection{Rows: hid}, zero, nil
		case "attn_q_norm", "attn_k_norm":
			return Selection{}, false, nil
		case "attn_sinks": // one learned sink logit per query head (gpt-oss)
			return Selection{Rows: ll.Heads}, zero, nil
		}
	case architecture.BlockMLP:
		n := ll.Neurons
		zero = ll.ZeroMLP
		switch t.Kind {
		case "mlp_gate", "mlp_up":
			return Selection{Rows: n, Cols: hid}, zero, nil
		case "mlp_gate_bias", "mlp_up_bias":
			return Selection{Rows: n}, zero, nil
		case "mlp_down":
			return Selection{Rows: hid, Cols: n}, zero, nil
		case "mlp_down_bias":
			return Selection{Rows: hid}, zero, nil
		}
	case architecture.BlockMamba:
		mb := parent.Mamba
		hd := mb.HeadDim
		dIn := mb.DInner()
		gs := mb.Groups * mb.StateSize
		h := ll.MambaHeads
		x := expandWithin(h, hd, ll.MambaChannels, 0)
		switch t.Kind {
		case "mamba_in", "mamba_in_bias":
			// rows: [z (d_inner) | x (d_inner) | B (groups·state) | C (groups·state) | dt (heads)]
			rows := make([]int, 0, 2*len(x)+2*gs+len(h))
			rows = append(rows, x...)
			rows = append(rows, expandWithin(h, hd, ll.MambaChannels, dIn)...)
			rows = append(rows, span(2*dIn, 2*gs)...)
			rows = append(rows, expand(h, 1, 2*dIn+2*gs)...)
			if t.Kind == "mamba_in_bias" {
				return Selection{Rows: rows}, false, nil
			}
			return Selection{Rows: rows, Cols: hid}, false, nil
		case "mamba_conv", "mamba_conv_bias":
			// channels: [x (d_inner) | B | C]
			rows := append(append([]int(nil), x...), span(dIn, 2*gs)...)
			return Selection{Rows: rows}, false, nil
		case "mamba_a_log", "mamba_d", "mamba_dt_bias":
			return Selection{Rows: h}, false, nil
		case "mamba_norm":
			return Selection{Rows: x}, false, nil
		case "mamba_out":
			return Selection{Rows: hid, Cols: x}, false, nil
		case "mamba_out_bias":
			return Selection{Rows: hid}, false, nil
		}
	case architecture.BlockMoE:
		return moeSel(t, ll.Experts, parent.MoE, hid)
	default:
		if hid == nil {
			// A block the plan cannot prune whose shapes do not depend on
			// anything the plan changes: carried through. The child's
			// tensors are checked against its config afterwards.
			return Selection{}, false, nil
		}
	}
	return sel, false, fmt.Errorf("%w: %s tensor of kind %q", ErrUnknownTensor, blockName(t.Block), t.Kind)
}

// moeSel is the selection of an MoE block's tensor t: router rows (and
// biases, score corrections, stacked expert rows) follow the kept experts
// ex, and where the hidden size is pruned (hid) every tensor that reads
// or writes the model width keeps its channels: the router's and the
// experts' inputs, the experts' outputs, the shared experts' and the
// LatentMoE projections' model side. LatentMoE's routed experts work in
// the latent width, which a hidden cut leaves alone.
func moeSel(t architecture.TensorSpec, ex []int, x *architecture.MoE, hid []int) (Selection, bool, error) {
	atModel := x == nil || x.LatentSize == 0 // the routed experts read and write the model width
	in, out := Selection{Cols: hid}, Selection{Rows: hid}
	switch {
	case t.Kind == "moe_router":
		return Selection{Rows: ex, Cols: hid}, false, nil
	case t.Kind == "moe_router_bias", t.Kind == "moe_router_correction":
		return Selection{Rows: ex}, false, nil
	case t.Expert >= 0:
		// One expert's own tensor (Map renames it).
		if !atModel {
			return Selection{}, false, nil
		}
		switch t.Kind {
		case "expert_gate", "expert_up":
			return in, false, nil
		case "expert_down", "expert_down_bias":
			return out, false, nil
		case "expert_gate_bias", "expert_up_bias":
			return Selection{}, false, nil
		}
	case t.Experts > 0:
		// Experts stacked along dimension 0 (gpt-oss): gate_up_proj
		// [experts, hidden, 2·width], down_proj [experts, width, hidden].
		switch t.Kind {
		case "expert_gate_up":
			return Selection{Rows: ex, Cols: hid}, false, nil
		case "expert_gate_up_bias":
			return Selection{Rows: ex}, false, nil
		case "expert_down":
			return Selection{Rows: ex, Inner: hid}, false, nil
		case "expert_down_bias":
			return Selection{Rows: ex, Cols: hid}, false, nil
		}
	default:
		// Shared experts and LatentMoE projections: every token uses them.
		switch t.Kind {
		case "shared_gate", "shared_up", "latent_in":
			return in, false, nil
		case "shared_down", "shared_down_bias", "latent_out", "latent_out_bias":
			return out, false, nil
		case "shared_gate_bias", "shared_up_bias", "latent_in_bias":
			return Selection{}, false, nil
		}
	}
	if hid == nil {
		// Not a tensor the hidden size shapes: carried through (the
		// child's tensors are checked against its config afterwards).
		return Selection{}, false, nil
	}
	return Selection{}, false, fmt.Errorf("%w: MoE tensor of kind %q", ErrUnknownTensor, t.Kind)
}

func blockName(b string) string {
	if b == "" {
		return "layer"
	}
	return b
}
