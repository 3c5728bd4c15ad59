package architecture

import (
	"fmt"
	"strconv"
	"strings"
)

// ConfigOptions controls Config.
type ConfigOptions struct {
	// Format selects the dialect; Auto (the zero value) uses FormatFor.
	Format Format
	// DType, when set, is written as torch_dtype instead of m.DType (e.g.
	// "bfloat16" for a checkpoint saved in bf16).
	DType string
	// Drop lists keys of m.Raw not to carry over, e.g. "quantization_config"
	// when the weights were written dequantised.
	Drop []string
}

// FormatFor returns the format Config uses by default: Native when the model
// is uniform (or already DeciLM, whose native format is per-layer), DeciLM
// for a non-uniform Llama or Mistral model or any non-uniform model whose
// layers DeciLM can express, else Native (and Config then says why the shape
// cannot be written).
func FormatFor(m *Model) Format {
	if m.Arch == DeciLM || m.Uniform() {
		return Native
	}
	if deciLMProblem(m) == nil || m.Arch == Llama || m.Arch == Mistral {
		// For the Llama family the DeciLM error (e.g. a width that is not a
		// multiple of 256) is the useful one.
		return DeciLMFormat
	}
	return Native
}

// Config writes m as a HuggingFace config.json: sorted keys, two-space
// indent, trailing newline. Keys of m.Raw that the format does not own
// (quantization_config, auto_map, initializer_range, ...) are kept; owned
// keys (shapes, layer counts, patterns, dtypes) are rewritten from m, and
// head_dim is always explicit. A shape the format cannot express is a
// *FormatError saying why.
func (m *Model) Config(opts ConfigOptions) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	f := opts.Format
	if f == Auto {
		f = FormatFor(m)
	}
	out := map[string]any{}
	if m.Raw != nil {
		out = deepCopyJSON(m.Raw).(map[string]any)
	}
	for _, k := range opts.Drop {
		delete(out, k)
	}
	if a, ok := out["architectures"].([]any); ok && len(a) > 0 && a[0] != m.Arch {
		// auto_map names the remote code of the class read, not of m.Arch.
		delete(out, "auto_map")
	}
	w := &writer{m: m, out: out, raw: m.Raw}
	var err error
	switch {
	case f == DeciLMFormat || f == Native && m.Arch == DeciLM:
		err = w.deciLM()
	case f == Native:
		err = w.native()
	default:
		err = &FormatError{Format: f, Layer: -1, Msg: "unknown format"}
	}
	if err != nil {
		return nil, err
	}
	w.globals(opts.DType)
	return encodeJSON(out)
}

type writer struct {
	m   *Model
	out map[string]any
	raw map[string]any
}

func (w *writer) rawHas(key string) bool {
	_, ok := w.raw[key]
	return ok
}

// globals writes the model-wide keys every format shares.
func (w *writer) globals(dtype string) {
	m, o := w.m, w.out
	o["hidden_size"] = m.Hidden
	o["vocab_size"] = m.Vocab
	o["num_hidden_layers"] = len(m.Layers)
	o["tie_word_embeddings"] = m.TiedEmbeddings
	if dtype == "" {
		dtype = m.DType
	}
	if dtype != "" {
		o["torch_dtype"] = dtype
		if w.rawHas("dtype") {
			o["dtype"] = dtype
		}
	}
	if m.MaxPositions > 0 {
		o["max_position_embeddings"] = m.MaxPositions
	}
	epsKey := "rms_norm_eps"
	if m.Arch == NemotronH {
		epsKey = "layer_norm_epsilon"
	}
	o[epsKey] = m.NormEps
	for _, k := range []string{"rms_norm_eps", "layer_norm_epsilon", "norm_eps"} {
		if k != epsKey && w.rawHas(k) && w.raw[k] != nil {
			o[k] = m.NormEps
		}
	}
	if m.BOS >= 0 {
		o["bos_token_id"] = m.BOS
	}
	if m.EOS != nil {
		if _, list := w.raw["eos_token_id"].([]any); list || len(m.EOS) != 1 {
			o["eos_token_id"] = m.EOS
		} else {
			o["eos_token_id"] = m.EOS[0]
		}
	}
	w.rope()
}

func (w *writer) rope() {
	r, o := w.m.Rope, w.out
	if p, ok := o["rope_parameters"].(map[string]any); ok {
		p["rope_theta"] = r.Theta
		return
	}
	o["rope_theta"] = r.Theta
	if r.PartialFactor != 1 || w.rawHas("partial_rotary_factor") {
		o["partial_rotary_factor"] = r.PartialFactor
	}
	if r.Scaling == nil {
		if w.rawHas("rope_scaling") {
			o["rope_scaling"] = nil
		}
		return
	}
	s := r.Scaling
	sc := map[string]any{}
	for k, v := range s.Extra {
		sc[k] = deepCopyJSON(v)
	}
	typeKey := "rope_type"
	if old, ok := w.raw["rope_scaling"].(map[string]any); ok {
		if _, hasType := old["type"]; hasType {
			if _, hasRopeType := old["rope_type"]; !hasRopeType {
				typeKey = "type"
			}
		}
	}
	if s.Type != "" {
		sc[typeKey] = s.Type
	}
	if s.Factor != 0 {
		sc["factor"] = s.Factor
	}
	if s.LowFreqFactor != 0 {
		sc["low_freq_factor"] = s.LowFreqFactor
	}
	if s.HighFreqFactor != 0 {
		sc["high_freq_factor"] = s.HighFreqFactor
	}
	if s.OriginalMaxPositions != 0 {
		sc["original_max_position_embeddings"] = s.OriginalMaxPositions
	}
	o["rope_scaling"] = sc
}

// uniformBlocks finds the single shape of each sub-block kind, or reports the
// first layer that differs.
type blocks struct {
	att   *Attention // SlidingWindow zeroed
	mlp   *MLP
	mamba *Mamba
	moe   *MoE
}

func (w *writer) uniform(f Format) (blocks, error) {
	var b blocks
	m := w.m
	for i, l := range m.Layers {
		if m.Arch != NemotronH {
			if l.Attention == nil {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("no attention: %s layers always have attention (removing sub-blocks needs the DeciLM format, Llama family only)", m.Arch)}
			}
			if l.MLP == nil && l.MoE == nil {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("no feed-forward block: %s layers always have one (removing sub-blocks needs the DeciLM format, Llama family only)", m.Arch)}
			}
		}
		if l.Attention != nil {
			a := *l.Attention
			a.SlidingWindow = 0
			if b.att == nil {
				b.att = &a
			} else if *b.att != a {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("attention %s differs from the first attention layer's %s; %s", descAtt(&a), descAtt(b.att), perLayerHint(m))}
			}
		}
		if l.MLP != nil {
			if b.mlp == nil {
				b.mlp = l.MLP
			} else if *b.mlp != *l.MLP {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("MLP width %d (%s) differs from the first MLP layer's %d (%s); %s", l.MLP.Width, l.MLP.Activation, b.mlp.Width, b.mlp.Activation, perLayerHint(m))}
			}
		}
		if l.Mamba != nil {
			if b.mamba == nil {
				b.mamba = l.Mamba
			} else if *b.mamba != *l.Mamba {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("Mamba %+v differs from the first Mamba layer's %+v; native configs hold one Mamba shape", *l.Mamba, *b.mamba)}
			}
		}
		if l.MoE != nil {
			if b.moe == nil {
				b.moe = l.MoE
			} else if *b.moe != *l.MoE {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("MoE %+v differs from the first MoE layer's %+v; native configs hold one MoE shape", *l.MoE, *b.moe)}
			}
		}
	}
	return b, nil
}

func descAtt(a *Attention) string {
	return fmt.Sprintf("%d heads / %d KV / head_dim %d", a.Heads, a.KVHeads, a.HeadDim)
}

func perLayerHint(m *Model) string {
	if deciLMProblem(m) == nil {
		return "per-layer shapes need ConfigOptions{Format: DeciLMFormat}"
	}
	return "native configs hold one shape; pad the layers to a common shape"
}

// native writes m in its own architecture's config format.
func (w *writer) native() error {
	m, o := w.m, w.out
	b, err := w.uniform(Native)
	if err != nil {
		return err
	}
	o["architectures"] = []any{m.Arch}
	o["model_type"] = modelTypes[m.Arch]
	if m.ModelType != "" {
		o["model_type"] = m.ModelType
	}
	delete(o, "block_configs")
	if a := b.att; a != nil {
		if err := w.checkAttentionFlags(a); err != nil {
			return err
		}
		o["num_attention_heads"] = a.Heads
		o["num_key_value_heads"] = a.KVHeads
		o["head_dim"] = a.HeadDim
		if w.rawHas("attention_head_dim") {
			o["attention_head_dim"] = a.HeadDim
		}
		switch m.Arch {
		case Llama, Qwen3, Qwen3MoE, GptOss, NemotronH:
			o["attention_bias"] = a.QKVBias
		}
		if err := w.windows(); err != nil {
			return err
		}
	}
	switch m.Arch {
	case Llama, Mistral, Qwen2, Qwen3:
		if b.moe != nil || b.mlp == nil {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s layers have a dense MLP, not MoE", m.Arch)}
		}
		o["intermediate_size"] = b.mlp.Width
		o["hidden_act"] = b.mlp.Activation
		if m.Arch == Llama {
			o["mlp_bias"] = b.mlp.Bias
		}
		if !b.mlp.Gated || b.mlp.Bias && m.Arch != Llama {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s has a gated MLP without bias", m.Arch)}
		}
	case Qwen3MoE:
		return w.qwen3MoE(b)
	case Mixtral:
		if b.mlp != nil {
			return &FormatError{Format: Native, Layer: -1, Msg: "Mixtral layers are all MoE; a dense MLP layer cannot be written"}
		}
		if x := b.moe; !x.Gated || x.RouterBias || x.ExpertBias || x.SharedWidth != 0 || x.LatentSize != 0 || x.RouterCorrection {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("Mixtral experts are gated, unbiased and unshared; got %+v", *x)}
		}
		o["intermediate_size"] = b.moe.ExpertWidth
		o["num_local_experts"] = b.moe.Experts
		o["num_experts_per_tok"] = b.moe.TopK
		o["hidden_act"] = b.moe.Activation
	case GptOss:
		if b.mlp != nil {
			return &FormatError{Format: Native, Layer: -1, Msg: "gpt-oss layers are all MoE; a dense MLP layer cannot be written"}
		}
		if x := b.moe; !x.Gated || !x.RouterBias || !x.ExpertBias || x.SharedWidth != 0 || x.LatentSize != 0 || x.RouterCorrection {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("gpt-oss experts are gated with biases, a biased router and no shared expert; got %+v", *x)}
		}
		o["intermediate_size"] = b.moe.ExpertWidth
		o["num_local_experts"] = b.moe.Experts
		o["num_experts_per_tok"] = b.moe.TopK
		if w.rawHas("experts_per_token") {
			o["experts_per_token"] = b.moe.TopK
		}
		o["hidden_act"] = b.moe.Activation
	case NemotronH:
		return w.nemotronH(b)
	}
	return nil
}

// checkAttentionFlags rejects attention features the architecture class
// fixes differently (e.g. Qwen3 always has qk-norm).
func (w *writer) checkAttentionFlags(a *Attention) error {
	arch := w.m.Arch
	want := Attention{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim}
	switch arch {
	case Llama, NemotronH:
		want.QKVBias, want.OutBias = a.QKVBias, a.QKVBias
	case Qwen2:
		want.QKVBias = true
	case Qwen3, Qwen3MoE:
		want.QKNorm = true
		want.QKVBias, want.OutBias = a.QKVBias, a.QKVBias
	case GptOss:
		want.QKVBias, want.OutBias, want.Sinks = a.QKVBias, a.QKVBias, true
	}
	if *a != want {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s attention is %+v but the class fixes %+v", arch, *a, want)}
	}
	return nil
}

// windows writes the sliding-window keys of the architecture.
func (w *writer) windows() error {
	m, o := w.m, w.out
	var win []int // per attention layer index i: window (0 full)
	idx := []int{}
	for i, l := range m.Layers {
		if l.Attention != nil {
			win = append(win, l.Attention.SlidingWindow)
			idx = append(idx, i)
		}
	}
	allSame := true
	for _, x := range win {
		if x != win[0] {
			allSame = false
		}
	}
	sliding := 0
	for _, x := range win {
		if x != 0 {
			if sliding != 0 && x != sliding {
				return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("sliding windows %d and %d: the config holds one window size", sliding, x)}
			}
			sliding = x
		}
	}
	switch m.Arch {
	case Llama:
		if sliding != 0 {
			return &FormatError{Format: Native, Layer: -1, Msg: "LlamaForCausalLM has no sliding-window attention"}
		}
	case Mistral, Mixtral, NemotronH:
		if !allSame {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s applies one sliding window to every layer; layers differ", m.Arch)}
		}
		if sliding == 0 {
			o["sliding_window"] = nil
		} else {
			o["sliding_window"] = sliding
		}
	case Qwen2, Qwen3, Qwen3MoE:
		if w.rawHas("layer_types") {
			// Explicit per-layer types win over max_window_layers.
			o["layer_types"] = layerTypeList(m)
			o["use_sliding_window"] = sliding != 0
			if sliding != 0 {
				o["sliding_window"] = sliding
			}
			break
		}
		// Layers at or above max_window_layers slide.
		first := len(m.Layers)
		for k, x := range win {
			if x != 0 {
				first = idx[k]
				break
			}
		}
		for k, x := range win {
			if (idx[k] >= first) != (x != 0) {
				return &FormatError{Format: Native, Layer: idx[k], Msg: "Qwen configs slide every layer from max_window_layers on; this pattern needs layer_types"}
			}
		}
		o["use_sliding_window"] = sliding != 0
		if sliding != 0 {
			o["sliding_window"] = sliding
			o["max_window_layers"] = first
		} else if mwl, ok := o["max_window_layers"]; ok && mwl != nil {
			// Unused without sliding; clamp to the layer count so it stays valid.
			f := &fields{m: o}
			if v := f.intOr("max_window_layers", 0); v > len(m.Layers) {
				o["max_window_layers"] = len(m.Layers)
			}
		}
	case GptOss:
		if sliding != 0 {
			o["sliding_window"] = sliding
		}
		o["layer_types"] = layerTypeList(m)
	}
	return nil
}

func layerTypeList(m *Model) []any {
	out := make([]any, len(m.Layers))
	for i, l := range m.Layers {
		out[i] = "full_attention"
		if l.Attention != nil && l.Attention.SlidingWindow > 0 {
			out[i] = "sliding_attention"
		}
	}
	return out
}

func (w *writer) qwen3MoE(b blocks) error {
	m, o := w.m, w.out
	var dense []any
	for i, l := range m.Layers {
		if l.MLP != nil {
			dense = append(dense, i)
		}
	}
	if dense == nil {
		dense = []any{}
	}
	if b.moe != nil {
		if b.moe.SharedWidth != 0 || !b.moe.Gated || b.moe.RouterBias || b.moe.ExpertBias || b.moe.LatentSize != 0 || b.moe.RouterCorrection {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("Qwen3-MoE experts are gated, unbiased and unshared; got %+v", *b.moe)}
		}
		o["num_experts"] = b.moe.Experts
		o["num_experts_per_tok"] = b.moe.TopK
		o["moe_intermediate_size"] = b.moe.ExpertWidth
		o["hidden_act"] = b.moe.Activation
	}
	if b.mlp != nil {
		if b.moe != nil && b.mlp.Activation != b.moe.Activation {
			return &FormatError{Format: Native, Layer: -1, Msg: "dense and expert activations differ; Qwen3-MoE has one hidden_act"}
		}
		o["intermediate_size"] = b.mlp.Width
		o["hidden_act"] = b.mlp.Activation
	}
	o["mlp_only_layers"] = dense
	o["decoder_sparse_step"] = 1
	return nil
}

func (w *writer) nemotronH(b blocks) error {
	m, o := w.m, w.out
	var pat strings.Builder
	for i, l := range m.Layers {
		switch {
		case l.Mamba != nil:
			pat.WriteByte(patMamba)
		case l.Attention != nil && l.MLP == nil && l.MoE == nil:
			pat.WriteByte(patAttention)
		case l.MLP != nil && l.Attention == nil:
			pat.WriteByte(patMLP)
		case l.MoE != nil && l.Attention == nil:
			pat.WriteByte(patMoE)
		default:
			return &FormatError{Format: Native, Layer: i, Msg: "a Nemotron-H layer holds exactly one of Mamba2, attention, MLP or MoE"}
		}
	}
	o["hybrid_override_pattern"] = pat.String()
	if w.rawHas("layers_block_type") {
		names := map[byte]string{patMamba: "mamba", patAttention: "attention", patMLP: "mlp", patMoE: "moe"}
		lt := make([]any, pat.Len())
		for i := 0; i < pat.Len(); i++ {
			lt[i] = names[pat.String()[i]]
		}
		o["layers_block_type"] = lt
	}
	act := ""
	if x := b.mamba; x != nil {
		o["mamba_num_heads"] = x.Heads
		o["mamba_head_dim"] = x.HeadDim
		o["ssm_state_size"] = x.StateSize
		o["n_groups"] = x.Groups
		o["conv_kernel"] = x.ConvKernel
		o["use_conv_bias"] = x.ConvBias
		o["use_bias"] = x.Bias
		if w.rawHas("mamba_proj_bias") {
			o["mamba_proj_bias"] = x.Bias
		}
		if x.ChunkSize > 0 {
			o["chunk_size"] = x.ChunkSize
		}
	}
	bias := -1
	setBias := func(v bool) error {
		n := 0
		if v {
			n = 1
		}
		if bias >= 0 && bias != n {
			return &FormatError{Format: Native, Layer: -1, Msg: "MLP and MoE biases differ; Nemotron-H has one mlp_bias"}
		}
		bias = n
		o["mlp_bias"] = v
		return nil
	}
	if x := b.mlp; x != nil {
		if x.Gated {
			return &FormatError{Format: Native, Layer: -1, Msg: "Nemotron-H MLPs are not gated"}
		}
		o["intermediate_size"] = x.Width
		act = x.Activation
		if err := setBias(x.Bias); err != nil {
			return err
		}
	}
	if x := b.moe; x != nil {
		if x.Gated || x.RouterBias {
			return &FormatError{Format: Native, Layer: -1, Msg: "Nemotron-H experts are not gated and the router has no bias"}
		}
		if act != "" && x.Activation != act {
			return &FormatError{Format: Native, Layer: -1, Msg: "MLP and MoE activations differ; Nemotron-H has one mlp_hidden_act"}
		}
		act = x.Activation
		if err := setBias(x.ExpertBias); err != nil {
			return err
		}
		o["n_routed_experts"] = x.Experts
		o["num_experts_per_tok"] = x.TopK
		o["moe_intermediate_size"] = x.ExpertWidth
		o["moe_shared_expert_intermediate_size"] = x.SharedWidth
		if x.SharedWidth == 0 {
			o["n_shared_experts"] = 0
		} else if !w.rawHas("n_shared_experts") || o["n_shared_experts"] == nil {
			o["n_shared_experts"] = 1
		} else if f := (&fields{m: o}); f.intOr("n_shared_experts", 1) == 0 {
			o["n_shared_experts"] = 1
		}
		if x.LatentSize > 0 {
			o["moe_latent_size"] = x.LatentSize
		} else if w.rawHas("moe_latent_size") {
			o["moe_latent_size"] = nil
		}
	}
	if act != "" {
		o["mlp_hidden_act"] = act
	}
	return nil
}

// deciLMProblem says why m cannot be written as DeciLM block_configs, or nil.
func deciLMProblem(m *Model) *FormatError {
	bad := func(layer int, format string, a ...any) *FormatError {
		return &FormatError{Format: DeciLMFormat, Layer: layer, Msg: fmt.Sprintf(format, a...)}
	}
	var first *Attention
	act := ""
	for i, l := range m.Layers {
		if l.Mamba != nil || l.MoE != nil {
			return bad(i, "DeciLM block_configs hold only Llama attention and MLP blocks (no Mamba, no MoE)")
		}
		if a := l.Attention; a != nil {
			switch {
			case a.QKNorm:
				return bad(i, "qk-norm (Qwen3) is not part of the DeciLM block")
			case a.Sinks:
				return bad(i, "attention sinks are not part of the DeciLM block")
			case a.QKVBias != a.OutBias:
				return bad(i, "DeciLM's attention_bias covers q, k, v and o together; this layer has qkv bias %v and o bias %v", a.QKVBias, a.OutBias)
			case a.SlidingWindow != 0 && m.Arch != DeciLM:
				// window_length is read back from DeciLM configs, but engines
				// may ignore it: converting a sliding-window model is refused.
				return bad(i, "sliding-window attention is not converted to DeciLM block_configs (engines may ignore window_length)")
			}
			if first == nil {
				first = a
			} else {
				switch {
				case a.Heads != first.Heads:
					return bad(i, "%d query heads, but DeciLM has one global num_attention_heads (%d); only KV heads vary per layer", a.Heads, first.Heads)
				case a.HeadDim != first.HeadDim:
					return bad(i, "head_dim %d, but DeciLM has one global head_dim (%d)", a.HeadDim, first.HeadDim)
				case a.QKVBias != first.QKVBias:
					return bad(i, "attention bias differs between layers; DeciLM has one attention_bias")
				}
			}
		}
		if x := l.MLP; x != nil {
			if !x.Gated {
				return bad(i, "DeciLM FFNs are gated (SwiGLU); this MLP is not")
			}
			if act != "" && x.Activation != act {
				return bad(i, "activation %s differs from %s; DeciLM has one hidden_act", x.Activation, act)
			}
			act = x.Activation
			if x.Width%256 != 0 {
				return bad(i, "FFN width %d is not a multiple of 256: engines that read ffn_mult round it up to %d and the weights would not load", x.Width, (x.Width+255)/256*256)
			}
		}
	}
	if first == nil {
		return bad(-1, "no layer has attention, so num_attention_heads is unknown")
	}
	return nil
}

// ffnMult returns the shortest ffn_mult that maps back to width through
// FFNMultToWidth: 3·width/(2·hidden), checked.
func ffnMult(width, hidden int) (float64, bool) {
	x := 3 * float64(width) / (2 * float64(hidden))
	// Shortest decimal repr, as Python and the JSON writer print it.
	s := strconv.FormatFloat(x, 'g', -1, 64)
	x, _ = strconv.ParseFloat(s, 64)
	return x, FFNMultToWidth(x, hidden) == width
}

// deciLM writes DeciLMForCausalLM block_configs.
func (w *writer) deciLM() error {
	m, o := w.m, w.out
	if err := deciLMProblem(m); err != nil {
		return err
	}
	var heads, headDim int
	bias, mlpBias := false, false
	act := "silu"
	blocks := make([]any, len(m.Layers))
	for i, l := range m.Layers {
		att := map[string]any{
			"n_heads_in_group": nil, "no_op": true, "num_sink_tokens": nil, "replace_with_linear": false,
			"sparsify": nil, "unshifted_sink": false, "use_prefill_window_in_sink_attention": false, "window_length": nil,
		}
		if a := l.Attention; a != nil {
			heads, headDim, bias = a.Heads, a.HeadDim, a.QKVBias
			att["n_heads_in_group"] = a.Heads / a.KVHeads
			att["no_op"] = false
			if a.SlidingWindow > 0 {
				att["window_length"] = a.SlidingWindow
			}
		}
		ffn := map[string]any{"ffn_mult": nil, "no_op": true, "replace_with_linear": false, "sparsify": nil}
		if x := l.MLP; x != nil {
			mult, ok := ffnMult(x.Width, m.Hidden)
			if !ok {
				return &FormatError{Format: DeciLMFormat, Layer: i, Msg: fmt.Sprintf("FFN width %d has no ffn_mult that maps back to it at hidden size %d", x.Width, m.Hidden)}
			}
			ffn["ffn_mult"] = mult
			ffn["no_op"] = false
			mlpBias = x.Bias
			act = x.Activation
		}
		blocks[i] = map[string]any{"attention": att, "ffn": ffn}
	}
	for _, k := range []string{"hybrid_override_pattern", "layers_block_type", "layer_types", "mlp_only_layers", "decoder_sparse_step",
		"use_sliding_window", "max_window_layers", "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "attention_head_dim"} {
		delete(o, k)
	}
	o["architectures"] = []any{DeciLM}
	o["model_type"] = modelTypes[DeciLM]
	o["block_configs"] = blocks
	o["num_attention_heads"] = heads
	o["head_dim"] = headDim
	o["num_key_value_heads"] = nil
	o["intermediate_size"] = nil
	o["attention_bias"] = bias
	o["mlp_bias"] = mlpBias
	o["hidden_act"] = act
	if _, ok := o["sliding_window"]; ok {
		o["sliding_window"] = nil
	}
	if _, ok := o["auto_map"]; !ok || w.m.Arch != DeciLM {
		o["auto_map"] = map[string]any{
			"AutoConfig":           "configuration_decilm.DeciLMConfig",
			"AutoModelForCausalLM": "modeling_decilm.DeciLMForCausalLM",
		}
	}
	return nil
}
