// Package architecture describes a decoder-only language model as autocompress
// sees it: global quantities and one record per layer. Every stage shares it:
// the estimator prices it, the search varies it, the pruner cuts a checkpoint
// to it and the engine runs it.
//
// # Per-layer first
//
// Every per-layer quantity lives in Model.Layers, one Layer per decoder layer.
// A uniform model simply repeats the same Layer; a pruned child may differ in
// every layer; a hybrid mixes Mamba2, attention, MLP and MoE layers. A nil
// sub-block means the layer does not have it (a removed block is a Layer with
// every sub-block nil).
//
// # Reading and writing
//
// FromConfig reads a HuggingFace config.json for the supported architectures
// (see Supported) and Config writes one back in the most faithful format that
// can express the shape. Load accepts a config.json, a checkpoint directory
// or a built-in preset named by its HuggingFace id (see Presets). Configs
// written by Python may hold bare Infinity, -Infinity and NaN: they are
// accepted, kept in Raw as NonFinite and written back bare.
//
// Uniform models are written in their native format (LlamaForCausalLM,
// Qwen3ForCausalLM, NemotronHForCausalLM with its hybrid_override_pattern
// sliced to the layers kept, ...). Per-layer Llama-family shapes are written
// as DeciLM block_configs, which vLLM, SGLang, TensorRT-LLM and llama.cpp
// load; FFN widths must then be multiples of 256. Shapes no format can
// express are refused with a *FormatError that says why.
//
// # Families
//
// Everything that differs between architecture classes lives in one file
// per family (family_llama.go, family_mistral.go, family_qwen.go,
// family_mixtral.go, family_gptoss.go, family_nemotronh.go,
// family_deci.go), each registering a Family: its class and model_type,
// configuration defaults, how its config.json is read (Read) and written
// (Write), how its tensors are named (Tensors, LayerPrefix), and the facts
// other packages read instead of testing class names: the attention and
// sliding-window rules of its config, whether its layers are Llama blocks
// that DeciLM can hold (DeciLMBlocks), whether its native config is
// per-layer (PerLayer), whether it is a one-mixer hybrid (Hybrid), and
// whether the native engine runs it (Engine). Adding a family is adding one
// such file (or one Register call); a lint test keeps every other file of
// the module from switching on a class or model_type.
//
// # Tensors and parameters
//
// Tensors lists every tensor a checkpoint of the model holds, with its
// HuggingFace name, shape, kind and sub-block; CheckShapes compares a checkpoint's
// tensors against it. Params counts parameters exactly (total, active per
// token for MoE, embedding, LM head, per layer); the counts match what the
// publishers state for every supported real model.
//
// # Errors
//
// Problems a user can fix are typed: *ConfigError and *MissingFieldError
// name the config.json field, *UnsupportedArchError lists the supported
// architectures, *ValidationError names the layer, *FormatError says why a
// shape cannot be written, *ShapeError lists the tensors that do not match.
package architecture

import "fmt"

// NormKind names the normalisation used by the model.
type NormKind string

// Norm kinds.
const (
	RMSNorm   NormKind = "rmsnorm"
	LayerNorm NormKind = "layernorm"
)

// Model is the full description of one architecture.
type Model struct {
	// Arch is the HuggingFace architecture class, e.g. "LlamaForCausalLM".
	Arch string
	// ModelType is config.json's model_type, e.g. "llama".
	ModelType string
	// Name is a human name, e.g. the HuggingFace id of a preset; may be empty.
	Name string

	Vocab  int // vocabulary size (rows of the embedding)
	Hidden int // model width (residual stream)
	// TiedEmbeddings is true when the LM head shares the embedding matrix.
	TiedEmbeddings bool
	Norm           NormKind
	NormEps        float64
	// MaxPositions is max_position_embeddings (the trained context).
	MaxPositions int
	Rope         Rope
	// DType is the stored weight dtype from config.json (torch_dtype or
	// dtype): "bfloat16", "float16", "float32", ...
	DType string
	// BOS, EOS: token ids from config.json (-1 when absent). EOS may list
	// several ids.
	BOS int
	EOS []int

	// Layers holds one record per decoder layer.
	Layers []Layer

	// Raw is the config.json object this model was read from, if any. Config
	// keeps the keys it does not own (quantization_config, auto_map, ...) so
	// that writing back loses nothing.
	Raw map[string]any
}

// Rope describes rotary position embeddings.
type Rope struct {
	Theta float64 // rope_theta (base)
	// PartialFactor is the fraction of head_dim that is rotated (1 = all).
	PartialFactor float64
	// Scaling is nil for plain RoPE.
	Scaling *RopeScaling
}

// RopeScaling is config.json's rope_scaling.
type RopeScaling struct {
	Type                 string  // "llama3", "linear", "dynamic", "yarn", ...
	Factor               float64 // scaling factor
	LowFreqFactor        float64 // llama3
	HighFreqFactor       float64 // llama3
	OriginalMaxPositions int     // original_max_position_embeddings
	// Extra keeps fields not modelled above, written back unchanged.
	Extra map[string]any
}

// Layer is one decoder layer. Any sub-block may be nil. A standard Llama layer
// has Attention and MLP; a Nemotron-H layer has exactly one of Mamba,
// Attention, MLP or MoE; a Mixtral layer has Attention and MoE.
type Layer struct {
	Attention *Attention
	MLP       *MLP
	Mamba     *Mamba
	MoE       *MoE
}

// Attention is a (grouped-query) self-attention block.
type Attention struct {
	Heads   int // query heads
	KVHeads int // key/value heads; Heads % KVHeads == 0
	HeadDim int
	// QKNorm: per-head RMSNorm on queries and keys (Qwen3), weights of HeadDim.
	QKNorm bool
	// QKVBias: biases on q, k and v projections (Qwen2). OutBias: on o_proj.
	QKVBias bool
	OutBias bool
	// SlidingWindow is the attention window in tokens, 0 for full attention.
	SlidingWindow int
	// Sinks: one learned attention-sink logit per query head (gpt-oss).
	Sinks bool
}

// MLP is a feed-forward block.
type MLP struct {
	Width int // intermediate size
	// Gated is true for SwiGLU-style gate/up/down; false for up/down only.
	Gated bool
	// Activation is the HF name: "silu", "relu2", "gelu", ...
	Activation string
	Bias       bool
}

// Mamba is a Mamba2 mixer (as in Nemotron-H).
type Mamba struct {
	Heads      int // mamba_num_heads
	HeadDim    int // mamba_head_dim; d_inner = Heads*HeadDim
	StateSize  int // ssm_state_size (d_state)
	Groups     int // n_groups
	ConvKernel int // conv_kernel (d_conv)
	ConvBias   bool
	// Bias is true when in_proj/out_proj have biases (use_bias).
	Bias bool
	// ChunkSize is the SSD chunk size, kept for round trips.
	ChunkSize int
}

// MoE is a mixture-of-experts feed-forward block.
type MoE struct {
	Experts     int // routed experts
	TopK        int // experts per token
	ExpertWidth int // intermediate size of one routed expert
	// SharedWidth is the total intermediate size of the shared expert(s), 0 if none.
	SharedWidth int
	Gated       bool
	Activation  string
	// RouterBias: the router (gate) has a bias. ExpertBias: experts have biases.
	RouterBias bool
	ExpertBias bool
	// RouterCorrection: the router has an e_score_correction_bias vector of
	// Experts entries (sigmoid routing as in DeepSeek-V3 and Nemotron-3).
	RouterCorrection bool
	// LatentSize is the LatentMoE width (Nemotron-3 Super moe_latent_size):
	// routed experts run at this width between fc1_latent_proj (hidden →
	// latent) and fc2_latent_proj (latent → hidden); 0 when experts run at
	// the model width. The shared expert always runs at the model width.
	LatentSize int
	// SwiGLUAlpha and SwiGLULimit are gpt-oss's clamped SwiGLU
	// (config.json swiglu_alpha, swiglu_limit; transformers' GptOssExperts:
	// gate ≤ limit, |up| ≤ limit, (up + 1)·gate·σ(alpha·gate)); both 0 for
	// the plain activation of every other family.
	SwiGLUAlpha, SwiGLULimit float64
}

// DInner returns Heads*HeadDim.
func (m *Mamba) DInner() int { return m.Heads * m.HeadDim }

// HasMoE reports whether any layer of m has a mixture-of-experts block.
func (m *Model) HasMoE() bool {
	for _, l := range m.Layers {
		if l.MoE != nil {
			return true
		}
	}
	return false
}

// NumLayers returns len(m.Layers).
func (m *Model) NumLayers() int { return len(m.Layers) }

// Clone returns a deep copy of m (Raw is shared, since it is read-only).
func (m *Model) Clone() *Model {
	c := *m
	c.EOS = append([]int(nil), m.EOS...)
	if m.Rope.Scaling != nil {
		s := *m.Rope.Scaling
		c.Rope.Scaling = &s
	}
	c.Layers = make([]Layer, len(m.Layers))
	for i, l := range m.Layers {
		c.Layers[i] = l.Clone()
	}
	return &c
}

// StandIn returns a small model of m's shape for benchmarks and tests that
// must finish anywhere: its first layers layers (or all of them, when
// fewer), with the hidden size, vocabulary, attention and KV heads, MLP,
// expert and shared-expert widths and Mamba heads divided by div (head
// dimensions, expert counts and top-k kept; a KV head count that would reach
// zero stays 1). It is an error when the result does not validate (a width
// not divisible into a valid shape). It stands in for the shape's cost, never
// for its weights.
func (m *Model) StandIn(layers, div int) (*Model, error) {
	if layers < 1 || div < 1 {
		return nil, fmt.Errorf("architecture: a stand-in needs at least one layer and a divisor of at least 1, not %d and %d", layers, div)
	}
	c := m.Clone()
	c.Hidden /= div
	c.Vocab /= div
	c.Layers = c.Layers[:min(layers, len(c.Layers))]
	for i := range c.Layers {
		l := &c.Layers[i]
		if a := l.Attention; a != nil {
			a.Heads, a.KVHeads = max(a.Heads/div, 1), max(a.KVHeads/div, 1)
		}
		if x := l.MLP; x != nil {
			x.Width /= div
		}
		if x := l.MoE; x != nil {
			x.ExpertWidth /= div
			x.SharedWidth /= div
		}
		if x := l.Mamba; x != nil {
			x.Heads = max(x.Heads/div, x.Groups)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("architecture: %s divided by %d: %w", m.Arch, div, err)
	}
	return c, nil
}

// Clone returns a deep copy of the layer.
func (l Layer) Clone() Layer {
	var c Layer
	if l.Attention != nil {
		a := *l.Attention
		c.Attention = &a
	}
	if l.MLP != nil {
		x := *l.MLP
		c.MLP = &x
	}
	if l.Mamba != nil {
		x := *l.Mamba
		c.Mamba = &x
	}
	if l.MoE != nil {
		x := *l.MoE
		c.MoE = &x
	}
	return c
}
