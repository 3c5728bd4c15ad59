package architecture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Architecture class names understood by FromConfig.
const (
	Llama     = "LlamaForCausalLM"
	Mistral   = "MistralForCausalLM"
	Qwen2     = "Qwen2ForCausalLM"
	Qwen3     = "Qwen3ForCausalLM"
	Qwen3MoE  = "Qwen3MoeForCausalLM"
	Mixtral   = "MixtralForCausalLM"
	NemotronH = "NemotronHForCausalLM"
	DeciLM    = "DeciLMForCausalLM"
	GptOss    = "GptOssForCausalLM"
)

// modelTypes maps each supported class to its config.json model_type.
var modelTypes = map[string]string{
	Llama:     "llama",
	Mistral:   "mistral",
	Qwen2:     "qwen2",
	Qwen3:     "qwen3",
	Qwen3MoE:  "qwen3_moe",
	Mixtral:   "mixtral",
	NemotronH: "nemotron_h",
	DeciLM:    "nemotron-nas",
	GptOss:    "gpt_oss",
}

// Supported returns the architecture classes FromConfig reads, sorted.
func Supported() []string {
	out := make([]string, 0, len(modelTypes))
	for a := range modelTypes {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Sanity limits: a config beyond these is rejected as implausible rather than
// allowed to make Tensors or Params allocate without bound.
const (
	maxLayers  = 1 << 12
	maxWidth   = 1 << 22
	maxVocab   = 1 << 24
	maxExperts = 1 << 14
	maxHeads   = 1 << 14
	// maxPositions caps max_position_embeddings, sliding windows and
	// rope_scaling's original_max_position_embeddings: 64Mi, six times
	// the longest context of a published model (Llama 4 Scout's 10M).
	maxPositions = 1 << 26
	// maxExpertBlocks caps routed experts summed over layers (Nemotron-3
	// Super has 20,480; Qwen3-235B 12,032).
	maxExpertBlocks = 1 << 18
	// maxParams caps the parameter count (10^15, far beyond any model) so
	// that counts stay well inside int64.
	maxParams = 1e15
)

// Load reads a model description from path, which is a config.json file, a
// checkpoint directory containing config.json, or a preset name (see
// Presets). Files win over presets when both exist.
func Load(path string) (*Model, error) {
	if path == "" {
		return nil, errors.New("architecture: empty model path: give a config.json, a checkpoint directory or a preset name")
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		file := filepath.Join(path, "config.json")
		data, err := os.ReadFile(file)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s: directory has no config.json (expected a HuggingFace checkpoint directory)", path)
			}
			return nil, err
		}
		m, err := FromConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		m.Name = filepath.Base(filepath.Clean(path))
		return m, nil
	case err == nil:
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := FromConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// A checkpoint's config.json is named after its directory; any other
		// file (e.g. meta-llama--Llama-3.1-8B.json) after itself.
		clean := filepath.Clean(path)
		if base := filepath.Base(clean); base == "config.json" {
			m.Name = filepath.Base(filepath.Dir(clean))
		} else {
			m.Name = strings.TrimSuffix(base, filepath.Ext(base))
		}
		return m, nil
	case errors.Is(err, fs.ErrNotExist):
		m, perr := Preset(path)
		if perr == nil {
			return m, nil
		}
		return nil, fmt.Errorf("%q is neither a file, a directory nor a preset; presets: %s", path, strings.Join(Presets(), ", "))
	default:
		return nil, err
	}
}

// FromConfig reads a HuggingFace config.json. Bare Infinity, -Infinity and
// NaN (as written by Python) are accepted. Defaults follow the transformers
// configuration class of the architecture. The result has passed Validate.
func FromConfig(data []byte) (*Model, error) {
	raw, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	f := &fields{m: raw}
	arch := ""
	if a, ok := f.array("architectures"); ok && len(a) > 0 {
		s, ok := a[0].(string)
		if !ok {
			return nil, &ConfigError{Key: "architectures[0]", Msg: fmt.Sprintf("want a string, got %s", jsonKind(a[0]))}
		}
		arch = s
	}
	if f.err != nil {
		return nil, f.err
	}
	mt := f.strOr("model_type", "")
	if arch == "" {
		for a, t := range modelTypes {
			if t == mt && mt != "" {
				arch = a
			}
		}
	}
	if _, ok := modelTypes[arch]; !ok {
		return nil, &UnsupportedArchError{Arch: arch}
	}
	if mt == "" {
		mt = modelTypes[arch]
	}
	m := &Model{Arch: arch, ModelType: mt, Raw: raw, BOS: -1}
	readGlobals(f, m)
	if f.err != nil {
		return nil, f.err
	}
	switch arch {
	case Llama, Mistral, Qwen2, Qwen3:
		readDense(f, m)
	case Qwen3MoE:
		readQwen3MoE(f, m)
	case Mixtral:
		readMixtral(f, m)
	case GptOss:
		readGptOss(f, m)
	case NemotronH:
		readNemotronH(f, m)
	case DeciLM:
		readDeciLM(f, m)
	}
	if f.err != nil {
		return nil, f.err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// classDefaults are the transformers configuration-class defaults that differ
// between the supported architectures.
type classDefaults struct {
	ropeTheta float64
	normEps   float64
	kvHeads   int // when num_key_value_heads is absent (null always means = heads)
	headDim   int // 0: hidden/heads
	maxPos    int
}

func defaultsFor(arch string) classDefaults {
	switch arch {
	case Mistral:
		return classDefaults{ropeTheta: 10000, normEps: 1e-6, kvHeads: 8, maxPos: 4096 * 32}
	case Mixtral:
		return classDefaults{ropeTheta: 1e6, normEps: 1e-5, kvHeads: 8, maxPos: 4096 * 32}
	case Qwen2:
		return classDefaults{ropeTheta: 10000, normEps: 1e-6, kvHeads: 32, maxPos: 32768}
	case Qwen3:
		return classDefaults{ropeTheta: 10000, normEps: 1e-6, kvHeads: 32, headDim: 128, maxPos: 32768}
	case Qwen3MoE:
		return classDefaults{ropeTheta: 10000, normEps: 1e-6, kvHeads: 4, headDim: 128, maxPos: 32768}
	case GptOss:
		return classDefaults{ropeTheta: 150000, normEps: 1e-5, kvHeads: 8, headDim: 64, maxPos: 131072}
	case NemotronH:
		return classDefaults{ropeTheta: 10000, normEps: 1e-5, kvHeads: 8, headDim: 128, maxPos: 4096}
	}
	// LlamaConfig (also the base of DeciLMConfig).
	return classDefaults{ropeTheta: 10000, normEps: 1e-6, kvHeads: -1, maxPos: 2048}
}

// readGlobals reads the model-wide fields shared by every architecture.
func readGlobals(f *fields, m *Model) {
	d := defaultsFor(m.Arch)
	m.Hidden = f.reqInt("hidden_size")
	m.Vocab = f.reqInt("vocab_size")
	f.check(m.Hidden > 0 && m.Hidden <= maxWidth, "hidden_size", "want 1..%d, got %d", maxWidth, m.Hidden)
	f.check(m.Vocab > 0 && m.Vocab <= maxVocab, "vocab_size", "want 1..%d, got %d", maxVocab, m.Vocab)
	// Every supported class defaults tie_word_embeddings to false.
	m.TiedEmbeddings = f.boolOr("tie_word_embeddings", false)
	m.Norm = RMSNorm
	m.NormEps = f.firstFloat(d.normEps, "rms_norm_eps", "layer_norm_epsilon", "norm_eps")
	m.MaxPositions = f.intOr("max_position_embeddings", d.maxPos)
	checkRange(f, "max_position_embeddings", m.MaxPositions, 0, maxPositions)
	m.DType = f.strOr("torch_dtype", "")
	if m.DType == "" {
		m.DType = f.strOr("dtype", "")
	}
	if f.has("bos_token_id") {
		m.BOS = f.intOr("bos_token_id", -1)
		checkRange(f, "bos_token_id", m.BOS, -1, maxVocab-1)
	}
	m.EOS = f.intList("eos_token_id")
	for _, id := range m.EOS {
		if !checkRange(f, "eos_token_id", id, 0, maxVocab-1) {
			break
		}
	}
	m.Rope = readRope(f, d.ropeTheta)
}

func readRope(f *fields, defTheta float64) Rope {
	r := Rope{Theta: f.floatOr("rope_theta", defTheta), PartialFactor: f.floatOr("partial_rotary_factor", 1)}
	scaling, ok := f.object("rope_scaling")
	if !ok {
		// transformers 5 keeps theta and scaling in rope_parameters.
		if p, ok := f.object("rope_parameters"); ok {
			r.Theta = p.floatOr("rope_theta", r.Theta)
			if t := p.strOr("rope_type", "default"); t != "default" {
				scaling = p
			}
			if p.err != nil {
				f.fail(p.err)
			}
		}
	}
	if scaling == nil {
		return r
	}
	s := &RopeScaling{Extra: map[string]any{}}
	s.Type = scaling.strOr("rope_type", scaling.strOr("type", ""))
	s.Factor = scaling.floatOr("factor", 0)
	s.LowFreqFactor = scaling.floatOr("low_freq_factor", 0)
	s.HighFreqFactor = scaling.floatOr("high_freq_factor", 0)
	s.OriginalMaxPositions = scaling.intOr("original_max_position_embeddings", 0)
	checkRange(scaling, "original_max_position_embeddings", s.OriginalMaxPositions, 0, maxPositions)
	for k, v := range scaling.m {
		switch k {
		case "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "rope_theta":
		default:
			s.Extra[k] = deepCopyJSON(v)
		}
	}
	if len(s.Extra) == 0 {
		s.Extra = nil
	}
	if scaling.err != nil {
		f.fail(scaling.err)
	}
	if s.Type == "default" && s.Factor == 0 {
		return r
	}
	r.Scaling = s
	return r
}

// attentionShape reads heads, KV heads and head_dim.
func attentionShape(f *fields, m *Model) (heads, kv, headDim int) {
	d := defaultsFor(m.Arch)
	heads = f.reqInt("num_attention_heads")
	f.check(heads > 0 && heads <= maxHeads, "num_attention_heads", "want 1..%d, got %d", maxHeads, heads)
	switch {
	case f.has("num_key_value_heads"):
		kv = f.intOr("num_key_value_heads", heads)
	case f.present("num_key_value_heads") || d.kvHeads < 0:
		kv = heads // null, or LlamaConfig's None default
	default:
		kv = d.kvHeads
	}
	headDim = f.firstInt(0, "head_dim", "attention_head_dim")
	if headDim == 0 {
		headDim = d.headDim
	}
	if headDim == 0 && heads > 0 {
		headDim = m.Hidden / heads
	}
	return heads, kv, headDim
}

// numLayers reads num_hidden_layers; out of range it records the error and
// returns 0, so that no reader sizes a slice by it.
func numLayers(f *fields) int {
	n := f.reqInt("num_hidden_layers")
	if !checkRange(f, "num_hidden_layers", n, 1, maxLayers) {
		return 0
	}
	return n
}

// qwenWindows returns the per-layer sliding window of Qwen2/Qwen3 configs:
// layer_types when given, else use_sliding_window with max_window_layers
// (layers at or above max_window_layers slide).
func qwenWindows(f *fields, n int) []int {
	w := make([]int, n)
	window := f.intOr("sliding_window", 4096)
	if types, ok := layerTypes(f, n); ok {
		for i, t := range types {
			if t == "sliding_attention" {
				w[i] = window
			}
		}
		return w
	}
	if !f.boolOr("use_sliding_window", false) || !f.has("sliding_window") {
		return w
	}
	mwl := f.intOr("max_window_layers", 28)
	for i := range w {
		if i >= mwl {
			w[i] = window
		}
	}
	return w
}

// layerTypes reads "layer_types" (full_attention / sliding_attention).
func layerTypes(f *fields, n int) ([]string, bool) {
	a, ok := f.array("layer_types")
	if !ok {
		return nil, false
	}
	if len(a) != n {
		f.bad("layer_types", "has %d entries for %d layers", len(a), n)
		return nil, false
	}
	out := make([]string, n)
	for i, e := range a {
		s, ok := e.(string)
		if !ok || (s != "full_attention" && s != "sliding_attention") {
			f.bad(fmt.Sprintf("layer_types[%d]", i), "want \"full_attention\" or \"sliding_attention\", got %v", e)
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// readDense reads Llama, Mistral, Qwen2 and Qwen3.
func readDense(f *fields, m *Model) {
	n := numLayers(f)
	heads, kv, hd := attentionShape(f, m)
	width := f.reqInt("intermediate_size")
	act := f.strOr("hidden_act", "silu")
	att := Attention{Heads: heads, KVHeads: kv, HeadDim: hd}
	mlp := MLP{Width: width, Gated: true, Activation: act}
	windows := make([]int, n)
	switch m.Arch {
	case Llama:
		att.QKVBias = f.boolOr("attention_bias", false)
		att.OutBias = att.QKVBias
		mlp.Bias = f.boolOr("mlp_bias", false)
	case Mistral:
		// MistralConfig defaults sliding_window to 4096; null disables it.
		w := 4096
		if f.present("sliding_window") {
			w = f.intOr("sliding_window", 0)
		}
		for i := range windows {
			windows[i] = w
		}
	case Qwen2:
		att.QKVBias = true // Qwen2Attention hard-codes bias on q, k, v
		windows = qwenWindows(f, n)
	case Qwen3:
		att.QKNorm = true
		att.QKVBias = f.boolOr("attention_bias", false)
		att.OutBias = att.QKVBias
		windows = qwenWindows(f, n)
	}
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := range m.Layers {
		a, x := att, mlp
		a.SlidingWindow = windows[i]
		m.Layers[i] = Layer{Attention: &a, MLP: &x}
	}
}

func readQwen3MoE(f *fields, m *Model) {
	n := numLayers(f)
	heads, kv, hd := attentionShape(f, m)
	act := f.strOr("hidden_act", "silu")
	att := Attention{Heads: heads, KVHeads: kv, HeadDim: hd, QKNorm: true}
	att.QKVBias = f.boolOr("attention_bias", false)
	att.OutBias = att.QKVBias
	experts := f.intOr("num_experts", 128)
	topK := f.intOr("num_experts_per_tok", 8)
	expertWidth := f.intOr("moe_intermediate_size", 768)
	step := f.intOr("decoder_sparse_step", 1)
	var dense int
	mlpOnly := map[int]bool{}
	if a, ok := f.array("mlp_only_layers"); ok {
		for i, e := range a {
			sub := &fields{m: map[string]any{"v": e}, prefix: fmt.Sprintf("mlp_only_layers[%d]", i)}
			mlpOnly[sub.intOr("v", -1)] = true
			f.fail(sub.err)
		}
	}
	windows := qwenWindows(f, n)
	f.check(experts >= 0 && experts <= maxExperts, "num_experts", "want 0..%d, got %d", maxExperts, experts)
	f.check(step >= 1, "decoder_sparse_step", "want >= 1, got %d", step)
	isMoE := func(i int) bool { return !mlpOnly[i] && experts > 0 && step > 0 && (i+1)%step == 0 }
	for i := 0; i < n; i++ {
		if !isMoE(i) {
			dense = f.reqInt("intermediate_size")
			break
		}
	}
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := range m.Layers {
		a := att
		a.SlidingWindow = windows[i]
		l := Layer{Attention: &a}
		if isMoE(i) {
			l.MoE = &MoE{Experts: experts, TopK: topK, ExpertWidth: expertWidth, Gated: true, Activation: act}
		} else {
			l.MLP = &MLP{Width: dense, Gated: true, Activation: act}
		}
		m.Layers[i] = l
	}
}

func readMixtral(f *fields, m *Model) {
	n := numLayers(f)
	heads, kv, hd := attentionShape(f, m)
	act := f.strOr("hidden_act", "silu")
	moe := MoE{
		Experts:     f.intOr("num_local_experts", 8),
		TopK:        f.intOr("num_experts_per_tok", 2),
		ExpertWidth: f.reqInt("intermediate_size"),
		Gated:       true,
		Activation:  act,
	}
	f.check(moe.Experts > 0 && moe.Experts <= maxExperts, "num_local_experts", "want 1..%d, got %d", maxExperts, moe.Experts)
	window := f.intOr("sliding_window", 0)
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := range m.Layers {
		a := Attention{Heads: heads, KVHeads: kv, HeadDim: hd, SlidingWindow: window}
		x := moe
		m.Layers[i] = Layer{Attention: &a, MoE: &x}
	}
}

func readGptOss(f *fields, m *Model) {
	n := numLayers(f)
	heads, kv, hd := attentionShape(f, m)
	bias := f.boolOr("attention_bias", true)
	window := f.intOr("sliding_window", 128)
	moe := MoE{
		Experts:     f.intOr("num_local_experts", 128),
		TopK:        f.firstInt(4, "num_experts_per_tok", "experts_per_token"),
		ExpertWidth: f.reqInt("intermediate_size"),
		Gated:       true,
		Activation:  f.strOr("hidden_act", "silu"),
		RouterBias:  true,
		ExpertBias:  true,
	}
	f.check(moe.Experts > 0 && moe.Experts <= maxExperts, "num_local_experts", "want 1..%d, got %d", maxExperts, moe.Experts)
	types, ok := layerTypes(f, n)
	if !ok && f.err == nil {
		// GptOssConfig's default alternates sliding and full attention.
		types = make([]string, n)
		for i := range types {
			types[i] = "full_attention"
			if i%2 == 0 {
				types[i] = "sliding_attention"
			}
		}
	}
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := range m.Layers {
		a := Attention{Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias, Sinks: true}
		if types[i] == "sliding_attention" {
			a.SlidingWindow = window
		}
		x := moe
		m.Layers[i] = Layer{Attention: &a, MoE: &x}
	}
}

// Nemotron-H layer-type characters of hybrid_override_pattern.
const (
	patMamba     = 'M'
	patAttention = '*'
	patMLP       = '-'
	patMoE       = 'E'
)

func readNemotronH(f *fields, m *Model) {
	pattern := f.strOr("hybrid_override_pattern", "")
	if pattern == "" {
		if a, ok := f.array("layers_block_type"); ok {
			var b strings.Builder
			for i, e := range a {
				switch e {
				case "mamba":
					b.WriteByte(patMamba)
				case "attention":
					b.WriteByte(patAttention)
				case "mlp":
					b.WriteByte(patMLP)
				case "moe":
					b.WriteByte(patMoE)
				default:
					f.bad(fmt.Sprintf("layers_block_type[%d]", i), "want mamba, attention, mlp or moe, got %v", e)
				}
			}
			pattern = b.String()
		}
	}
	if pattern == "" && f.err == nil {
		f.fail(&MissingFieldError{Key: "hybrid_override_pattern"})
	}
	if f.err != nil {
		return
	}
	n := len(pattern)
	if f.has("num_hidden_layers") {
		nl := f.intOr("num_hidden_layers", 0)
		f.check(nl == n, "num_hidden_layers", "is %d but hybrid_override_pattern has %d layers", nl, n)
	}
	f.check(n <= maxLayers, "hybrid_override_pattern", "has %d layers, more than %d", n, maxLayers)
	var (
		att   Attention
		mamba Mamba
		mlp   MLP
		moe   MoE
	)
	act := f.strOr("mlp_hidden_act", "relu2")
	mlpBias := f.boolOr("mlp_bias", false)
	if strings.ContainsRune(pattern, patAttention) {
		heads, kv, hd := attentionShape(f, m)
		bias := f.boolOr("attention_bias", false)
		att = Attention{Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias, SlidingWindow: f.intOr("sliding_window", 0)}
	}
	if strings.ContainsRune(pattern, patMamba) {
		mamba = Mamba{
			Heads:      f.reqInt("mamba_num_heads"),
			HeadDim:    f.reqInt("mamba_head_dim"),
			StateSize:  f.intOr("ssm_state_size", 128),
			Groups:     f.intOr("n_groups", 8),
			ConvKernel: f.intOr("conv_kernel", 4),
			ConvBias:   f.boolOr("use_conv_bias", true),
			Bias:       f.boolOr("use_bias", false),
			ChunkSize:  f.intOr("chunk_size", 128),
		}
	}
	if strings.ContainsRune(pattern, patMLP) {
		mlp = MLP{Width: f.reqInt("intermediate_size"), Activation: act, Bias: mlpBias}
	}
	if strings.ContainsRune(pattern, patMoE) {
		moe = MoE{
			Experts:          f.reqInt("n_routed_experts"),
			TopK:             f.reqInt("num_experts_per_tok"),
			ExpertWidth:      f.reqInt("moe_intermediate_size"),
			Activation:       act,
			ExpertBias:       mlpBias,
			RouterCorrection: true,
			LatentSize:       f.intOr("moe_latent_size", 0),
		}
		if f.intOr("n_shared_experts", 1) > 0 {
			moe.SharedWidth = f.intOr("moe_shared_expert_intermediate_size", 0)
		}
		f.check(moe.Experts > 0 && moe.Experts <= maxExperts, "n_routed_experts", "want 1..%d, got %d", maxExperts, moe.Experts)
	}
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := 0; i < n; i++ {
		var l Layer
		switch pattern[i] {
		case patMamba:
			x := mamba
			l.Mamba = &x
		case patAttention:
			x := att
			l.Attention = &x
		case patMLP:
			x := mlp
			l.MLP = &x
		case patMoE:
			x := moe
			l.MoE = &x
		default:
			f.bad("hybrid_override_pattern", "character %q at layer %d is not one of M (Mamba2), * (attention), - (MLP), E (MoE)", pattern[i], i)
			return
		}
		m.Layers[i] = l
	}
}

// FFNMultToWidth is the DeciLM rule, copied by every engine that reads
// block_configs: intermediate = round_up(int(2·ffn_mult·hidden/3), 256).
func FFNMultToWidth(ffnMult float64, hidden int) int {
	w := int(2 * ffnMult * float64(hidden) / 3)
	return (w + 255) / 256 * 256
}

func readDeciLM(f *fields, m *Model) {
	heads, _, hd := attentionShape(f, m)
	blocks, ok := f.array("block_configs")
	if !ok {
		if f.err == nil {
			f.fail(&MissingFieldError{Key: "block_configs"})
		}
		return
	}
	n := len(blocks)
	f.check(n > 0 && n <= maxLayers, "block_configs", "want 1..%d entries, got %d", maxLayers, n)
	if f.has("num_hidden_layers") {
		nl := f.intOr("num_hidden_layers", 0)
		f.check(nl == n, "num_hidden_layers", "is %d but block_configs has %d entries", nl, n)
	}
	bias := f.boolOr("attention_bias", false)
	mlpBias := f.boolOr("mlp_bias", false)
	act := f.strOr("hidden_act", "silu")
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i, b := range blocks {
		p := fmt.Sprintf("block_configs[%d]", i)
		obj, ok := b.(map[string]any)
		if !ok {
			f.fail(&ConfigError{Key: p, Msg: fmt.Sprintf("want an object, got %s", jsonKind(b))})
			return
		}
		bf := &fields{m: obj, prefix: p + "."}
		var l Layer
		if a, ok := bf.object("attention"); ok {
			if unsupportedBlock(f, a, p+".attention", "mamba", "moe") {
				return
			}
			if !a.boolOr("no_op", false) {
				kv := 0
				switch {
				case a.has("num_key_value_heads"):
					kv = a.intOr("num_key_value_heads", 0)
				case a.has("n_heads_in_group"):
					g := a.intOr("n_heads_in_group", 0)
					a.check(g > 0 && heads%g == 0, "n_heads_in_group", "must divide num_attention_heads %d, got %d", heads, g)
					if g > 0 {
						kv = heads / g
					}
				default:
					a.fail(&MissingFieldError{Key: p + ".attention.n_heads_in_group"})
				}
				l.Attention = &Attention{Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
					SlidingWindow: a.intOr("window_length", 0)}
			}
			f.fail(a.err)
		} else {
			f.fail(bf.err)
			f.fail(&MissingFieldError{Key: p + ".attention"})
		}
		if x, ok := bf.object("ffn"); ok {
			if unsupportedBlock(f, x, p+".ffn", "moe") {
				return
			}
			if !x.boolOr("no_op", false) {
				w := 0
				switch {
				case x.has("intermediate_size"):
					w = x.intOr("intermediate_size", 0)
				case x.has("ffn_mult"):
					mult := x.floatOr("ffn_mult", 0)
					x.check(mult > 0 && mult < 1e6, "ffn_mult", "want a positive multiplier, got %v", mult)
					if mult > 0 && mult < 1e6 {
						w = FFNMultToWidth(mult, m.Hidden)
					}
				default:
					x.fail(&MissingFieldError{Key: p + ".ffn.ffn_mult"})
				}
				l.MLP = &MLP{Width: w, Gated: true, Activation: act, Bias: mlpBias}
			}
			f.fail(x.err)
		} else {
			f.fail(bf.err)
			f.fail(&MissingFieldError{Key: p + ".ffn"})
		}
		if f.err != nil {
			return
		}
		m.Layers[i] = l
	}
}

// unsupportedBlock rejects DeciLM sub-block features that a Layer cannot
// express, naming the field.
func unsupportedBlock(f *fields, b *fields, path string, nested ...string) bool {
	if b.boolOr("replace_with_linear", false) {
		f.fail(&UnsupportedArchError{Arch: DeciLM, Reason: path + ".replace_with_linear is true: linear replacement blocks are not supported (no serving engine but TensorRT-LLM and llama.cpp loads them)"})
		return true
	}
	for _, k := range nested {
		if b.has(k) {
			f.fail(&UnsupportedArchError{Arch: DeciLM, Reason: path + "." + k + " is set: Puzzle " + k + " sub-blocks inside block_configs are not supported"})
			return true
		}
	}
	for _, k := range []string{"sparsify", "num_sink_tokens", "parallel_blocks"} {
		if b.has(k) {
			f.fail(&UnsupportedArchError{Arch: DeciLM, Reason: path + "." + k + " is set: this block_configs feature is not supported"})
			return true
		}
	}
	return false
}
