package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// TensorSpec names one parameter tensor in HuggingFace layout.
type TensorSpec struct {
	Name  string
	Shape []int
	// layer, block and kind are the architecture's description of the
	// tensor (architecture.TensorSpec), by which it is bound: the engine
	// knows no family's tensor names.
	layer       int
	block, kind string
	expert      int // routed expert of a per-expert tensor, else -1
}

// isNorm reports whether the tensor is a norm weight (initialised to 1).
func (s TensorSpec) isNorm() bool {
	return s.kind == "norm" || s.kind == "attn_q_norm" || s.kind == "attn_k_norm" || s.kind == "mamba_norm"
}

// Size returns the number of elements.
func (s TensorSpec) Size() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// layerParams holds the views of one decoder layer into a slab (parameters or
// gradients). Absent tensors are nil.
type layerParams struct {
	inNorm, q, qb, k, kb, v, vb, o, ob, qNorm, kNorm []float32
	postNorm, gate, gateB, up, upB, down, downB      []float32
	// sinks are gpt-oss's per-head attention-sink logits (heads).
	sinks []float32
	// router and experts are an MoE layer's (moe.go); routerB is the
	// router's bias (gpt-oss).
	router, routerB []float32
	experts         []expertParams
	// stacked are gpt-oss's fused experts (moe.go, gptOssExperts).
	stacked stackedExperts
	// mamba is a Mamba2 mixer's (mamba.go); its norm is inNorm.
	mamba mambaWeights
}

// dims are the derived widths of one layer.
type layerDims struct {
	attn       bool
	heads, kvH int
	hd         int
	qd, kd     int // heads·hd, kvHeads·hd
	qkNorm     bool
	qkvBias    bool
	outBias    bool
	window     int
	sinks      bool // a learned sink logit per query head (gpt-oss)
	mlp        bool
	ffn        int
	gated      bool
	mlpBias    bool
	act        activation
	// moe is set for a mixture-of-experts feed-forward block (moe.go).
	moe *moeDims
	// mamba is set for a Mamba2 mixer, the layer's sequence mixer in
	// place of attention (mamba.go).
	mamba *mambaDims
}

type activation int

const (
	actSiLU activation = iota
	actGELUTanh
	actReLU2
	actReLU
)

func parseActivation(s string) (activation, bool) {
	switch strings.ToLower(s) {
	case "", "silu", "swish":
		return actSiLU, true
	case "gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu":
		// Exact erf GELU and the tanh approximation differ by < 1e-3; the
		// engine uses the tanh form for all of them.
		return actGELUTanh, true
	case "relu2":
		return actReLU2, true
	case "relu":
		return actReLU, true
	}
	return 0, false
}

// UnsupportedError reports an architecture feature the engine cannot run.
type UnsupportedError struct {
	Layer   int // -1 when global
	Feature string
}

func (e *UnsupportedError) Error() string {
	if e.Layer < 0 {
		return "engine: unsupported: " + e.Feature
	}
	return fmt.Sprintf("engine: layer %d: unsupported: %s", e.Layer, e.Feature)
}

// checkArch validates a and derives the per-layer widths.
func checkArch(a *architecture.Model) ([]layerDims, error) {
	if a == nil {
		return nil, &UnsupportedError{Layer: -1, Feature: "nil architecture"}
	}
	if a.Vocab <= 0 || a.Hidden <= 0 {
		return nil, &UnsupportedError{Layer: -1, Feature: fmt.Sprintf("vocab %d and hidden %d must be positive", a.Vocab, a.Hidden)}
	}
	if a.Norm != "" && a.Norm != architecture.RMSNorm {
		return nil, &UnsupportedError{Layer: -1, Feature: fmt.Sprintf("norm %q (only rmsnorm)", a.Norm)}
	}
	if s := a.Rope.Scaling; s != nil {
		switch strings.ToLower(s.Type) {
		case "", "default", "linear", "llama3":
		case "yarn":
			// YaRN is run for gpt-oss only, as the reference trainer runs
			// it (torchref/trainer/acmodel.py, _rope): other families'
			// YaRN configs (DeepSeek's mscale, Qwen's long-context ones)
			// are read differently by different transformers versions
			// (factor as given, or max_position_embeddings / original).
			if !a.Family().YaRN.Runs {
				return nil, &UnsupportedError{Layer: -1, Feature: fmt.Sprintf("rope_scaling type \"yarn\" for %s (the engine runs YaRN where the reference trainer does: gpt-oss)", a.Arch)}
			}
		default:
			return nil, &UnsupportedError{Layer: -1, Feature: fmt.Sprintf("rope_scaling type %q (supported: linear, llama3; yarn for gpt-oss)", s.Type)}
		}
	}
	if _, err := yarnOf(a); err != nil {
		return nil, &UnsupportedError{Layer: -1, Feature: err.Error()}
	}
	if f := a.Family(); !f.Engine.Runs {
		return nil, &UnsupportedError{Layer: -1, Feature: fmt.Sprintf("%s models (%s)", f.Arch, f.Engine.Reason)}
	}
	dims := make([]layerDims, len(a.Layers))
	for i, l := range a.Layers {
		d := &dims[i]
		if l.Mamba != nil {
			if l.Attention != nil {
				return nil, &UnsupportedError{Layer: i, Feature: "attention beside a Mamba2 mixer in one layer"}
			}
			eps := float32(a.NormEps)
			if eps <= 0 {
				eps = 1e-6
			}
			md, err := checkMamba(l.Mamba, eps)
			if err != nil {
				return nil, &UnsupportedError{Layer: i, Feature: err.Error()}
			}
			d.mamba = md
		}
		if l.MoE != nil {
			if l.MLP != nil {
				return nil, &UnsupportedError{Layer: i, Feature: "a dense MLP beside mixture-of-experts in one layer"}
			}
			md, err := checkMoE(a, l.MoE)
			if err != nil {
				return nil, &UnsupportedError{Layer: i, Feature: err.Error()}
			}
			d.moe = md
		}
		if at := l.Attention; at != nil {
			if at.Heads <= 0 || at.KVHeads <= 0 || at.HeadDim <= 0 || at.Heads%at.KVHeads != 0 {
				return nil, &UnsupportedError{Layer: i, Feature: fmt.Sprintf("attention with %d heads, %d kv heads, head_dim %d (heads must be a positive multiple of kv heads)", at.Heads, at.KVHeads, at.HeadDim)}
			}
			if rotDim(a, at.HeadDim)%2 != 0 {
				return nil, &UnsupportedError{Layer: i, Feature: fmt.Sprintf("odd rotary dimension %d", rotDim(a, at.HeadDim))}
			}
			d.attn = true
			d.sinks = at.Sinks
			d.heads, d.kvH, d.hd = at.Heads, at.KVHeads, at.HeadDim
			d.qd, d.kd = at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
			d.qkNorm, d.qkvBias, d.outBias = at.QKNorm, at.QKVBias, at.OutBias
			d.window = at.SlidingWindow
		}
		if ml := l.MLP; ml != nil {
			act, ok := parseActivation(ml.Activation)
			if !ok {
				return nil, &UnsupportedError{Layer: i, Feature: fmt.Sprintf("MLP activation %q (supported: silu, gelu, relu, relu2)", ml.Activation)}
			}
			if ml.Width <= 0 {
				return nil, &UnsupportedError{Layer: i, Feature: fmt.Sprintf("MLP width %d", ml.Width)}
			}
			d.mlp, d.ffn, d.gated, d.mlpBias, d.act = true, ml.Width, ml.Gated, ml.Bias, act
		}
	}
	return dims, nil
}

// Check reports whether the engine can run a, from its description alone
// (no weights are read): a *UnsupportedError naming the family or the layer
// and feature it cannot run, or nil. Commands that run a model call it
// before any other work.
func Check(a *architecture.Model) error {
	_, err := checkArch(a)
	return err
}

// rotDim is the number of rotated dimensions of a head (partial rotary).
func rotDim(a *architecture.Model, hd int) int {
	f := a.Rope.PartialFactor
	if f <= 0 || f > 1 {
		f = 1
	}
	return int(math.Round(float64(hd) * f))
}

// TensorSpecs lists the parameter tensors of an architecture the engine runs,
// with HuggingFace names and [out, in] shapes, in slab order. A layer without
// attention has no input_layernorm; one without MLP has no
// post_attention_layernorm (the DeciLM "no_op" convention).
func TensorSpecs(a *architecture.Model) ([]TensorSpec, error) {
	if _, err := checkArch(a); err != nil {
		return nil, err
	}
	return tensorSpecs(a), nil
}

// tensorSpecs converts the architecture's tensor layout (architecture.Tensors,
// the one list of HF names and shapes that the pruner and validators use too)
// into the engine's slab order. checkArch must have accepted a first, so every
// tensor listed is one the engine binds.
func tensorSpecs(a *architecture.Model) []TensorSpec {
	ts := a.Tensors()
	specs := make([]TensorSpec, len(ts))
	for i, t := range ts {
		shape := make([]int, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int(d)
		}
		specs[i] = TensorSpec{Name: t.Name, Shape: shape, layer: t.Layer, block: t.Block, kind: t.Kind, expert: t.Expert}
	}
	return specs
}

// views binds named views of slab for the given specs.
type views struct {
	embed, norm, head []float32
	layers            []layerParams
}

func bindViews(slab []float32, specs []TensorSpec, offsets []int, nLayers int, tied bool) views {
	v := views{layers: make([]layerParams, nLayers)}
	for i, s := range specs {
		if offsets[i] < 0 {
			continue // read in place (LoadOptions.Mapped)
		}
		t := slab[offsets[i] : offsets[i]+s.Size() : offsets[i]+s.Size()]
		if s.layer < 0 {
			switch s.kind {
			case "embedding":
				v.embed = t
			case "norm":
				v.norm = t
			case "lm_head":
				v.head = t
			}
			continue
		}
		lp := &v.layers[s.layer]
		switch s.kind {
		case "norm":
			if s.block == architecture.BlockAttention || s.block == architecture.BlockMamba {
				lp.inNorm = t
			} else {
				lp.postNorm = t
			}
		case "attn_q":
			lp.q = t
		case "attn_q_bias":
			lp.qb = t
		case "attn_k":
			lp.k = t
		case "attn_k_bias":
			lp.kb = t
		case "attn_v":
			lp.v = t
		case "attn_v_bias":
			lp.vb = t
		case "attn_o":
			lp.o = t
		case "attn_o_bias":
			lp.ob = t
		case "attn_q_norm":
			lp.qNorm = t
		case "attn_k_norm":
			lp.kNorm = t
		case "attn_sinks":
			lp.sinks = t
		case "mlp_gate":
			lp.gate = t
		case "mlp_gate_bias":
			lp.gateB = t
		case "mlp_up":
			lp.up = t
		case "mlp_up_bias":
			lp.upB = t
		case "mlp_down":
			lp.down = t
		case "mlp_down_bias":
			lp.downB = t
		case "moe_router":
			lp.router = t
		case "moe_router_bias":
			lp.routerB = t
		case "expert_gate_up", "expert_gate_up_bias", "expert_down_bias":
			bindStacked(lp, s, t)
		case "expert_gate", "expert_up", "expert_down":
			if s.expert < 0 { // gpt-oss's stacked down_proj [E, width, hidden]
				bindStacked(lp, s, t)
			} else {
				bindExpert(lp, s, t)
			}
		default:
			bindMamba(lp, s.kind, t)
		}
	}
	if tied {
		v.head = v.embed
	}
	return v
}
