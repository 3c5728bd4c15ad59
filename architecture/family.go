package architecture

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
)

// Family is everything autocompress knows about one HuggingFace architecture
// class, in one place: how its config.json is read and written, how its
// tensors are named, and the facts the pruner, the exporters and the native
// engine read about it. Each built-in family lives in its own file
// (family_llama.go, family_qwen.go, family_nemotronh.go, ...) and registers
// itself there; adding a family is adding one such file (or one Register
// call), and nothing else switches on the class name.
type Family struct {
	// Arch is the architecture class, config.json's architectures[0]
	// (e.g. "LlamaForCausalLM").
	Arch string
	// ModelType is config.json's model_type ("llama"), which also selects
	// the family when architectures is absent.
	ModelType string
	// Defaults are the transformers configuration-class defaults of the
	// fields that differ between families.
	Defaults Defaults

	// Read fills m.Layers from the config; the model-wide fields (hidden
	// size, vocabulary, norm, RoPE, token ids) are read before it. Problems
	// are reported through c (ConfigReader.Fail), not returned.
	Read func(c *ConfigReader, m *Model)
	// Write writes the family's own keys of its native config. For a family
	// with a uniform native format (PerLayer false) it is called after the
	// keys every family shares (architectures, model_type, the attention
	// shape and its sliding windows) are written, with the one shape of each
	// sub-block kind in w.Blocks(); for a PerLayer family it writes the
	// whole per-layer description itself.
	Write func(w *ConfigWriter) error
	// Tensors lists every tensor of a checkpoint of m in forward order with
	// the family's names (see Model.Tensors), each with its kind and
	// sub-block (TensorList.Add, Norm): the kinds are all the pruner slices
	// by and the engine binds by.
	Tensors func(m *Model, t *TensorList)
	// LayerPrefix is the name prefix of the decoder layers' tensors before
	// the layer index ("model.layers."): the pruner renumbers tensors that
	// Tensors does not list (rotary inv_freq buffers) by it.
	LayerPrefix string

	// EpsKey is the config key of the norm epsilon ("rms_norm_eps").
	EpsKey string
	// Attention is what the class fixes of its attention blocks.
	Attention AttentionRule
	// Windows is how the native config states sliding windows.
	Windows WindowRule
	// Hybrid is true when a native layer may lack attention or a
	// feed-forward block (Nemotron-H's one-mixer layers).
	Hybrid bool
	// NoRoPE is true when the class's attention has no rotary embedding
	// (Nemotron-H): rope_theta is then written only where the config read
	// had it, never added.
	NoRoPE bool
	// DeciLMBlocks is true when the layers are Llama blocks that DeciLM
	// block_configs can hold: a child with per-layer shapes is then written
	// as DeciLM.
	DeciLMBlocks bool
	// PerLayer is true when the native config itself is per-layer (DeciLM
	// block_configs): children are written in it whatever their shape.
	PerLayer bool
	// Engine says whether package engine, the native float32 engine, can run
	// models of the family.
	Engine EngineSupport
	// Router is how the family's MoE router turns router logits into the
	// weights of the experts it picks (zero for families without MoE).
	Router RouterRule
	// YaRN is how the class runs rope_scaling type "yarn" (zero: engines
	// here do not run it for the family).
	YaRN YaRNRule
}

// YaRNRule is how a class runs YaRN RoPE (rope_scaling type "yarn",
// transformers' modeling_rope_utils._compute_yarn_parameters).
type YaRNRule struct {
	// Runs is true when the native engine and the reference trainer run
	// YaRN for the class (torchref/trainer/acmodel.py, _rope: gpt-oss
	// only, since transformers versions read other classes' YaRN configs
	// differently).
	Runs bool
	// Default is the scaling the config class fills in when config.json
	// has none (GptOssConfig's YaRN), nil if none.
	Default *RopeScaling
}

// RouterRule is how an MoE router picks the k experts of a token and
// weights their outputs.
type RouterRule struct {
	// TopKFirst: take the k largest router logits, then softmax over those
	// k (gpt-oss, transformers GptOssTopKRouter.forward). Otherwise softmax
	// over every expert, then the k largest probabilities (Mixtral,
	// Qwen3-MoE).
	TopKFirst bool
	// Renormalize: after softmax and top-k, divide the k weights by their
	// sum (transformers MixtralSparseMoeBlock.forward always does).
	Renormalize bool
	// RenormalizeKey is the config.json boolean that sets Renormalize
	// when present (Qwen3-MoE's norm_topk_prob, read in
	// Qwen3MoeSparseMoeBlock.forward; absent is false, Qwen3MoeConfig's
	// default).
	RenormalizeKey string
}

// MoERouter returns the router rule of m's family with RenormalizeKey
// resolved from the config m was read from.
func (m *Model) MoERouter() RouterRule {
	r := familyOf(m.Arch).Router
	if r.RenormalizeKey != "" {
		if v, ok := m.Raw[r.RenormalizeKey].(bool); ok {
			r.Renormalize = v
		}
	}
	return r
}

// Defaults are configuration-class defaults that differ between families.
type Defaults struct {
	RopeTheta float64
	NormEps   float64
	// KVHeads applies when num_key_value_heads is absent; -1 means "as many
	// as query heads" (LlamaConfig's None). A null always means that.
	KVHeads int
	// HeadDim applies when head_dim is absent; 0 means hidden/heads.
	HeadDim      int
	MaxPositions int
}

// AttentionRule is what an architecture class fixes of its attention
// blocks, whatever its config says.
type AttentionRule struct {
	// QKNorm: per-head RMSNorm on queries and keys (Qwen3).
	QKNorm bool
	// Sinks: learned attention-sink logits (gpt-oss).
	Sinks bool
	// Bias says which projections have biases.
	Bias BiasRule
}

// BiasRule says which attention projections of a class have biases.
type BiasRule int

// Bias rules.
const (
	// NoBias: no attention biases (Mistral, Mixtral).
	NoBias BiasRule = iota
	// QKVBias: q, k and v always have biases, o never (Qwen2).
	QKVBias
	// AttentionBias: config.json's attention_bias switches the biases of q,
	// k, v and o together (Llama, Qwen3, gpt-oss, Nemotron-H).
	AttentionBias
)

// WindowRule is how a native config states sliding-window attention.
type WindowRule int

// Window rules.
const (
	// NoWindows: the class has no sliding-window attention (Llama).
	NoWindows WindowRule = iota
	// OneWindow: sliding_window applies to every attention layer, null
	// disables it (Mistral, Mixtral, Nemotron-H).
	OneWindow
	// QwenWindows: use_sliding_window with max_window_layers, or explicit
	// layer_types when the config has them (Qwen2, Qwen3, Qwen3-MoE).
	QwenWindows
	// LayerTypeWindows: layer_types names each layer full or sliding
	// (gpt-oss).
	LayerTypeWindows
)

// EngineSupport says whether the native engine runs a family.
type EngineSupport struct {
	// Runs is true when the engine can run the family's layers (a model
	// may still have a layer it cannot run: see engine.Check).
	Runs bool
	// Reason says why not when Runs is false ("Mamba2 mixers").
	Reason string
}

// registry maps class → family. Register replaces the map (copy on
// write), so that lookups, which pricing and validation make per model,
// take no lock.
var (
	registry   atomic.Pointer[map[string]*Family]
	registerMu sync.Mutex
)

// Register adds a family. It fails when the class or its model_type is
// already registered or a required part (Arch, ModelType, Read, Write,
// Tensors, LayerPrefix, EpsKey, and Engine.Reason when the engine does not
// run it) is missing.
func Register(f Family) error {
	switch {
	case f.Arch == "" || f.ModelType == "":
		return errors.New("architecture: Register: a family needs Arch and ModelType")
	case f.Read == nil || f.Write == nil || f.Tensors == nil:
		return fmt.Errorf("architecture: Register %s: a family needs Read, Write and Tensors", f.Arch)
	case f.LayerPrefix == "" || f.EpsKey == "":
		return fmt.Errorf("architecture: Register %s: a family needs LayerPrefix and EpsKey", f.Arch)
	case !f.Engine.Runs && f.Engine.Reason == "":
		return fmt.Errorf("architecture: Register %s: say why the native engine cannot run the family (Engine.Reason)", f.Arch)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	old := families()
	for _, g := range old {
		if g.Arch == f.Arch || g.ModelType == f.ModelType {
			return fmt.Errorf("architecture: Register %s (model_type %q): already registered as %s (%q)", f.Arch, f.ModelType, g.Arch, g.ModelType)
		}
	}
	next := make(map[string]*Family, len(old)+1)
	for k, g := range old {
		next[k] = g
	}
	next[f.Arch] = &f
	registry.Store(&next)
	return nil
}

// families returns the current registry (read-only).
func families() map[string]*Family {
	if p := registry.Load(); p != nil {
		return *p
	}
	return nil
}

// mustRegister registers a built-in family.
func mustRegister(f Family) {
	if err := Register(f); err != nil {
		panic(err) // a built-in family is malformed: a programming error
	}
}

// Families returns every registered family, sorted by class.
func Families() []Family {
	reg := families()
	out := make([]Family, 0, len(reg))
	for _, f := range reg {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Arch < out[j].Arch })
	return out
}

// Supported returns the architecture classes FromConfig reads, sorted.
func Supported() []string {
	fs := Families()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Arch
	}
	return out
}

// Lookup returns the family of an architecture class.
func Lookup(arch string) (Family, bool) {
	f := lookup(arch)
	if f == nil {
		return Family{}, false
	}
	return *f, true
}

// LookupModelType returns the family whose config.json model_type is mt.
func LookupModelType(mt string) (Family, bool) {
	f := lookupModelType(mt)
	if f == nil {
		return Family{}, false
	}
	return *f, true
}

// Family returns the family of m: the registered family of m.Arch, or for
// a model built in memory under no registered class (Arch ""), the Llama
// family, whose names and rules such models follow.
func (m *Model) Family() Family { return *familyOf(m.Arch) }

func lookup(arch string) *Family { return families()[arch] }

func lookupModelType(mt string) *Family {
	for _, f := range families() {
		if f.ModelType == mt {
			return f
		}
	}
	return nil
}

// familyOf is lookup with the Llama family for unregistered classes.
func familyOf(arch string) *Family {
	if f := lookup(arch); f != nil {
		return f
	}
	return lookup(Llama)
}

// ConfigReader reads typed fields of a config.json for a family's Read. The
// first problem sticks: later reads return their defaults and FromConfig
// reports it.
type ConfigReader struct{ f *fields }

// Int returns the integer key, def when it is absent or null.
func (c *ConfigReader) Int(key string, def int) int { return c.f.intOr(key, def) }

// RequiredInt returns the integer key, failing when it is absent.
func (c *ConfigReader) RequiredInt(key string) int { return c.f.reqInt(key) }

// Float returns the number key, def when absent or null.
func (c *ConfigReader) Float(key string, def float64) float64 { return c.f.floatOr(key, def) }

// Bool returns the boolean key, def when absent or null.
func (c *ConfigReader) Bool(key string, def bool) bool { return c.f.boolOr(key, def) }

// String returns the string key, def when absent or null.
func (c *ConfigReader) String(key, def string) string { return c.f.strOr(key, def) }

// Has reports whether key is present and not null.
func (c *ConfigReader) Has(key string) bool { return c.f.has(key) }

// Fail records a problem with key (a *ConfigError).
func (c *ConfigReader) Fail(key, format string, a ...any) { c.f.bad(key, format, a...) }

// Err returns the first problem recorded, or nil.
func (c *ConfigReader) Err() error { return c.f.err }

// NumLayers reads num_hidden_layers (required, range-checked).
func (c *ConfigReader) NumLayers() int { return numLayers(c.f) }

// AttentionShape reads num_attention_heads, num_key_value_heads and
// head_dim with the family's defaults.
func (c *ConfigReader) AttentionShape(m *Model) (heads, kvHeads, headDim int) {
	return attentionShape(c.f, m)
}

// Blocks holds the one shape of each sub-block kind of a uniform model (nil
// for a kind no layer has); Attention has SlidingWindow zeroed.
type Blocks struct {
	Attention *Attention
	MLP       *MLP
	Mamba     *Mamba
	MoE       *MoE
}

// ConfigWriter is the config.json being written, as a family's Write sees
// it: a copy of the model's Raw with the shared keys already set.
type ConfigWriter struct {
	m   *Model
	out map[string]any
	raw map[string]any
	b   Blocks
}

// Model returns the model being written.
func (w *ConfigWriter) Model() *Model { return w.m }

// Blocks returns the one shape of each sub-block kind (native formats).
func (w *ConfigWriter) Blocks() Blocks { return w.b }

// Set sets a key of the config.
func (w *ConfigWriter) Set(key string, v any) { w.out[key] = v }

// Delete removes a key of the config.
func (w *ConfigWriter) Delete(key string) { delete(w.out, key) }

// RawHas reports whether the config the model was read from has key.
func (w *ConfigWriter) RawHas(key string) bool {
	_, ok := w.raw[key]
	return ok
}

// Sub-blocks a tensor belongs to (TensorSpec.Block).
const (
	BlockAttention = "attention"
	BlockMLP       = "mlp"
	BlockMamba     = "mamba"
	BlockMoE       = "moe"
)

// Add lists one tensor of layer (-1 for global tensors) with its kind (see
// TensorSpec.Kind); its sub-block follows from the kind.
func (t *TensorList) Add(name string, layer int, kind string, shape ...int64) {
	t.add(name, layer, kind, shape...)
}

// Norm lists a norm weight of layer that belongs to block (BlockAttention,
// BlockMLP, ...): the pruner drops it with its block.
func (t *TensorList) Norm(name string, layer int, block string, size int64) {
	t.norm(name, layer, block, size)
}
