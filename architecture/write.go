package architecture

import (
	"fmt"
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
	// AutoMap, when not nil, is written as config.json's auto_map in place
	// of the one the format would keep or write: the remote-code modules
	// the checkpoint directory really contains (prune writes DeciLM's).
	AutoMap map[string]string
}

// FormatFor returns the format Config uses by default: Native when the model
// is uniform (or already DeciLM, whose native format is per-layer), DeciLM
// for a non-uniform Llama or Mistral model or any non-uniform model whose
// layers DeciLM can express, else Native (and Config then says why the shape
// cannot be written).
func FormatFor(m *Model) Format {
	fam := familyOf(m.Arch)
	if fam.PerLayer || m.Uniform() {
		return Native
	}
	if deciLMProblem(m) == nil || fam.DeciLMBlocks {
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
	w := &ConfigWriter{m: m, out: out, raw: m.Raw}
	fam := familyOf(m.Arch)
	var err error
	switch {
	case f == DeciLMFormat:
		err = w.deciLM()
	case f == Native && fam.PerLayer:
		err = fam.Write(w)
	case f == Native:
		err = w.native(fam)
	default:
		err = &FormatError{Format: f, Layer: -1, Msg: "unknown format"}
	}
	if err != nil {
		return nil, err
	}
	w.globals(opts.DType)
	if opts.AutoMap != nil {
		am := map[string]any{}
		for k, v := range opts.AutoMap {
			am[k] = v
		}
		out["auto_map"] = am
	}
	return encodeJSON(out)
}

// globals writes the model-wide keys every format shares.
func (w *ConfigWriter) globals(dtype string) {
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
		if w.RawHas("dtype") {
			o["dtype"] = dtype
		}
	}
	if m.MaxPositions > 0 {
		o["max_position_embeddings"] = m.MaxPositions
	}
	epsKey := familyOf(m.Arch).EpsKey
	o[epsKey] = m.NormEps
	for _, k := range []string{"rms_norm_eps", "layer_norm_epsilon", "norm_eps"} {
		if k != epsKey && w.RawHas(k) && w.raw[k] != nil {
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

func (w *ConfigWriter) rope() {
	r, o := w.m.Rope, w.out
	if p, ok := o["rope_parameters"].(map[string]any); ok {
		p["rope_theta"] = r.Theta
		return
	}
	if familyOf(w.m.Arch).NoRoPE && !w.RawHas("rope_theta") {
		return // no RoPE: a rope_theta would be invented
	}
	o["rope_theta"] = r.Theta
	if r.PartialFactor != 1 || w.RawHas("partial_rotary_factor") {
		o["partial_rotary_factor"] = r.PartialFactor
	}
	if r.Scaling == nil {
		if w.RawHas("rope_scaling") {
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

// uniform finds the single shape of each sub-block kind, or reports the
// first layer that differs.
func (w *ConfigWriter) uniform(f Format) (Blocks, error) {
	var b Blocks
	m := w.m
	hybrid := familyOf(m.Arch).Hybrid
	for i, l := range m.Layers {
		if !hybrid {
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
			if b.Attention == nil {
				b.Attention = &a
			} else if *b.Attention != a {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("attention %s differs from the first attention layer's %s; %s", descAtt(&a), descAtt(b.Attention), perLayerHint(m))}
			}
		}
		if l.MLP != nil {
			if b.MLP == nil {
				b.MLP = l.MLP
			} else if *b.MLP != *l.MLP {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("MLP width %d (%s) differs from the first MLP layer's %d (%s); %s", l.MLP.Width, l.MLP.Activation, b.MLP.Width, b.MLP.Activation, perLayerHint(m))}
			}
		}
		if l.Mamba != nil {
			if b.Mamba == nil {
				b.Mamba = l.Mamba
			} else if *b.Mamba != *l.Mamba {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("Mamba %+v differs from the first Mamba layer's %+v; native configs hold one Mamba shape", *l.Mamba, *b.Mamba)}
			}
		}
		if l.MoE != nil {
			if b.MoE == nil {
				b.MoE = l.MoE
			} else if *b.MoE != *l.MoE {
				return b, &FormatError{Format: f, Layer: i, Msg: fmt.Sprintf("MoE %+v differs from the first MoE layer's %+v; native configs hold one MoE shape", *l.MoE, *b.MoE)}
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

// native writes m in its own architecture's config format: the keys every
// family shares, then the family's own.
func (w *ConfigWriter) native(fam *Family) error {
	m, o := w.m, w.out
	b, err := w.uniform(Native)
	if err != nil {
		return err
	}
	w.b = b
	o["architectures"] = []any{m.Arch}
	o["model_type"] = fam.ModelType
	if m.ModelType != "" {
		o["model_type"] = m.ModelType
	}
	delete(o, "block_configs")
	if a := b.Attention; a != nil {
		if err := checkAttentionFlags(m.Arch, fam.Attention, a); err != nil {
			return err
		}
		o["num_attention_heads"] = a.Heads
		o["num_key_value_heads"] = a.KVHeads
		o["head_dim"] = a.HeadDim
		if w.RawHas("attention_head_dim") {
			o["attention_head_dim"] = a.HeadDim
		}
		if fam.Attention.Bias == AttentionBias {
			o["attention_bias"] = a.QKVBias
		}
		if err := w.windows(fam.Windows); err != nil {
			return err
		}
	}
	return fam.Write(w)
}

// dense writes the feed-forward keys of the dense Llama-style families;
// mlpBias: the class has an mlp_bias key (Llama), else its MLPs have no bias.
func (w *ConfigWriter) dense(mlpBias bool) error {
	m, o, b := w.m, w.out, w.b
	if b.MoE != nil || b.MLP == nil {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s layers have a dense MLP, not MoE", m.Arch)}
	}
	o["intermediate_size"] = b.MLP.Width
	o["hidden_act"] = b.MLP.Activation
	if mlpBias {
		o["mlp_bias"] = b.MLP.Bias
	}
	if !b.MLP.Gated || b.MLP.Bias && !mlpBias {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s has a gated MLP without bias", m.Arch)}
	}
	return nil
}

// checkAttentionFlags rejects attention features the architecture class
// fixes differently (e.g. Qwen3 always has qk-norm).
func checkAttentionFlags(arch string, r AttentionRule, a *Attention) error {
	want := Attention{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, QKNorm: r.QKNorm, Sinks: r.Sinks}
	switch r.Bias {
	case QKVBias:
		want.QKVBias = true
	case AttentionBias:
		want.QKVBias, want.OutBias = a.QKVBias, a.QKVBias
	}
	if *a != want {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s attention is %+v but the class fixes %+v", arch, *a, want)}
	}
	return nil
}

// windows writes the sliding-window keys as rule says.
func (w *ConfigWriter) windows(rule WindowRule) error {
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
	switch rule {
	case NoWindows:
		if sliding != 0 {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s has no sliding-window attention", m.Arch)}
		}
	case OneWindow:
		if !allSame {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("%s applies one sliding window to every layer; layers differ", m.Arch)}
		}
		if sliding == 0 {
			o["sliding_window"] = nil
		} else {
			o["sliding_window"] = sliding
		}
	case QwenWindows:
		if w.RawHas("layer_types") {
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
	case LayerTypeWindows:
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
