package prune

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// TensorMap says how one child tensor is made from one parent tensor.
type TensorMap struct {
	Src   string // parent tensor name
	Dst   string // child tensor name
	Sel   Selection
	Zero  bool  // write zeros of the child shape (a removed sub-block kept as padding)
	Shape []int // child shape
}

var layerName = regexp.MustCompile(`^((?:model|backbone)\.layers\.)(\d+)\.(.+)$`)

// ErrUnknownTensor is wrapped by errors about parent tensors the pruner does
// not know how to slice.
var ErrUnknownTensor = fmt.Errorf("tensor not understood by the pruner")

// Map computes, for every parent tensor (name → shape), the child tensor it
// becomes, or none when its layer or sub-block is removed. The result follows
// the order of names.
func (l *Layout) Map(names []string, shapes map[string][]int) ([]TensorMap, error) {
	childOf := map[int][]int{} // parent layer → child layers (one)
	for ci, ll := range l.Layers {
		childOf[ll.Parent] = append(childOf[ll.Parent], ci)
	}
	hid := l.Hidden
	var out []TensorMap
	for _, name := range names {
		shape := shapes[name]
		m := layerName.FindStringSubmatch(name)
		if m == nil {
			sel, err := l.globalSel(name, shape, hid)
			if err != nil {
				return nil, err
			}
			out = append(out, TensorMap{Src: name, Dst: name, Sel: sel, Shape: sel.Shape(shape)})
			continue
		}
		pl, err := strconv.Atoi(m[2])
		if err != nil || pl < 0 || pl >= len(l.Parent.Layers) {
			return nil, fmt.Errorf("tensor %s: layer index %s out of range (the config has %d layers)", name, m[2], len(l.Parent.Layers))
		}
		cis := childOf[pl]
		if len(cis) == 0 {
			continue // layer removed
		}
		ci := cis[0]
		sel, keep, zero, err := l.layerSel(ci, m[3], hid)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		if !keep {
			continue
		}
		if err := checkSel(sel, shape); err != nil {
			return nil, fmt.Errorf("tensor %s: shape %v does not match the config: %w", name, shape, err)
		}
		out = append(out, TensorMap{Src: name, Dst: m[1] + strconv.Itoa(ci) + "." + m[3], Sel: sel, Zero: zero, Shape: sel.Shape(shape)})
	}
	return out, nil
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
	return nil
}

// globalSel handles tensors outside the decoder layers.
func (l *Layout) globalSel(name string, shape []int, hid []int) (Selection, error) {
	switch name {
	case "model.embed_tokens.weight", "backbone.embeddings.weight", "backbone.embed_tokens.weight", "lm_head.weight":
		return Selection{Cols: hid}, checkSel(Selection{Cols: hid}, shape)
	case "model.norm.weight", "backbone.norm_f.weight", "backbone.norm.weight", "model.norm.bias", "backbone.norm_f.bias":
		return Selection{Rows: hid}, checkSel(Selection{Rows: hid}, shape)
	}
	if hid == nil {
		return Selection{}, nil // carried through unchanged
	}
	return Selection{}, fmt.Errorf("tensor %s: %w (it lies outside the decoder layers and may depend on the hidden size); remove \"hidden\" from the plan or report this model", name, ErrUnknownTensor)
}

// layerSel returns the selection for the layer-local tensor name rest of
// child layer ci; keep is false when the tensor belongs to a removed
// sub-block.
func (l *Layout) layerSel(ci int, rest string, hid []int) (sel Selection, keep, zero bool, err error) {
	ll := &l.Layers[ci]
	child := l.Child.Layers[ci]
	parent := l.Parent.Layers[ll.Parent]
	hasAttn := child.Attention != nil
	hasMLP := child.MLP != nil

	// Normalise Nemotron-H "mixer." names onto the Llama ones.
	sub := rest
	switch {
	case strings.HasPrefix(rest, "self_attn."):
		sub = "attn." + strings.TrimPrefix(rest, "self_attn.")
	case strings.HasPrefix(rest, "mlp.") && parent.MoE != nil:
		sub = "moe." + strings.TrimPrefix(rest, "mlp.")
	case strings.HasPrefix(rest, "mixer."):
		t := strings.TrimPrefix(rest, "mixer.")
		switch {
		case parent.Mamba != nil:
			sub = "mamba." + t
		case parent.Attention != nil:
			sub = "attn." + t
		case parent.MLP != nil:
			sub = "mlp." + t
		case parent.MoE != nil:
			sub = "moe." + t
		default:
			return sel, false, false, fmt.Errorf("%w: mixer of a layer with no Mamba, attention or MLP block", ErrUnknownTensor)
		}
	}
	leaf := sub[strings.LastIndex(sub, ".")+1:]
	switch sub {
	case "input_layernorm.weight", "input_layernorm.bias":
		if parent.Attention != nil && !hasAttn {
			return sel, false, false, nil // DeciLM no_op drops the norm too
		}
		return Selection{Rows: hid}, true, false, nil
	case "post_attention_layernorm.weight", "post_attention_layernorm.bias":
		if parent.MLP != nil && !hasMLP {
			return sel, false, false, nil
		}
		return Selection{Rows: hid}, true, false, nil
	case "norm.weight", "norm.bias": // Nemotron-H pre-mixer norm
		return Selection{Rows: hid}, true, false, nil
	}
	switch {
	case strings.HasPrefix(sub, "attn."):
		if !hasAttn {
			return sel, false, false, nil
		}
		a := child.Attention
		hd := a.HeadDim
		q := expand(ll.Heads, hd, 0)
		kv := expand(ll.KVHeads, hd, 0)
		zero = ll.ZeroAttention
		switch strings.TrimPrefix(sub, "attn.") {
		case "q_proj.weight":
			return Selection{Rows: q, Cols: hid}, true, zero, nil
		case "q_proj.bias":
			return Selection{Rows: q}, true, zero, nil
		case "k_proj.weight", "v_proj.weight":
			return Selection{Rows: kv, Cols: hid}, true, zero, nil
		case "k_proj.bias", "v_proj.bias":
			return Selection{Rows: kv}, true, zero, nil
		case "o_proj.weight":
			return Selection{Rows: hid, Cols: q}, true, zero, nil
		case "o_proj.bias":
			return Selection{Rows: hid}, true, zero, nil
		case "q_norm.weight", "k_norm.weight", "rotary_emb.inv_freq":
			return Selection{}, true, false, nil
		case "sinks": // one learned sink logit per query head (gpt-oss)
			return Selection{Rows: ll.Heads}, true, zero, nil
		}
	case strings.HasPrefix(sub, "mlp."):
		if !hasMLP {
			return sel, false, false, nil
		}
		n := ll.Neurons
		zero = ll.ZeroMLP
		switch strings.TrimPrefix(sub, "mlp.") {
		case "gate_proj.weight", "up_proj.weight":
			return Selection{Rows: n, Cols: hid}, true, zero, nil
		case "gate_proj.bias", "up_proj.bias":
			return Selection{Rows: n}, true, zero, nil
		case "down_proj.weight":
			return Selection{Rows: hid, Cols: n}, true, zero, nil
		case "down_proj.bias":
			return Selection{Rows: hid}, true, zero, nil
		}
	case strings.HasPrefix(sub, "mamba."):
		mb := parent.Mamba
		hd := mb.HeadDim
		dIn := mb.DInner()
		gs := mb.Groups * mb.StateSize
		h := ll.MambaHeads
		x := expand(h, hd, 0)
		switch strings.TrimPrefix(sub, "mamba.") {
		case "in_proj.weight", "in_proj.bias":
			// rows: [z (d_inner) | x (d_inner) | B (groups·state) | C (groups·state) | dt (heads)]
			rows := make([]int, 0, 2*len(x)+2*gs+len(h))
			rows = append(rows, x...)
			rows = append(rows, expand(h, hd, dIn)...)
			rows = append(rows, span(2*dIn, 2*gs)...)
			rows = append(rows, expand(h, 1, 2*dIn+2*gs)...)
			if leaf == "bias" {
				return Selection{Rows: rows}, true, false, nil
			}
			return Selection{Rows: rows, Cols: hid}, true, false, nil
		case "conv1d.weight", "conv1d.bias":
			// channels: [x (d_inner) | B | C]
			rows := append(append([]int(nil), x...), span(dIn, 2*gs)...)
			return Selection{Rows: rows}, true, false, nil
		case "A_log", "D", "dt_bias":
			return Selection{Rows: h}, true, false, nil
		case "norm.weight":
			return Selection{Rows: x}, true, false, nil
		case "out_proj.weight":
			return Selection{Rows: hid, Cols: x}, true, false, nil
		case "out_proj.bias":
			return Selection{Rows: hid}, true, false, nil
		}
	}
	if hid == nil && !strings.HasPrefix(sub, "attn.") && !strings.HasPrefix(sub, "mlp.") && !strings.HasPrefix(sub, "mamba.") {
		// A block the plan cannot prune (e.g. MoE experts) whose shapes do
		// not depend on anything the plan changes: carried through. The
		// child's tensors are checked against its config afterwards.
		return Selection{}, true, false, nil
	}
	return sel, false, false, fmt.Errorf("%w: layer-local name %q", ErrUnknownTensor, rest)
}
