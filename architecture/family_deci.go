package architecture

import (
	"fmt"
	"strconv"
)

// DeciLM is DeciLMForCausalLM (model_type nemotron-nas): Llama blocks with
// per-layer shapes in block_configs, the format per-layer children of
// Llama-family parents are written in.
const DeciLM = "DeciLMForCausalLM"

const deciLMModelType = "nemotron-nas"

func init() {
	mustRegister(Family{
		Arch: DeciLM, ModelType: deciLMModelType, Defaults: llamaDefaults,
		Read:        func(c *ConfigReader, m *Model) { readDeciLM(c.f, m) },
		Write:       (*ConfigWriter).deciLM,
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention:    AttentionRule{Bias: AttentionBias},
		Windows:      NoWindows,
		DeciLMBlocks: true,
		PerLayer:     true,
		Engine:       EngineSupport{Runs: true},
	})
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
func (w *ConfigWriter) deciLM() error {
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
		// Both ffn_mult and intermediate_size: vLLM, SGLang, TensorRT-LLM
		// and llama.cpp read ffn_mult, NVIDIA's newer block_config.py only
		// intermediate_size (and the older one drops it with a warning);
		// they agree because the width round-trips (prune/PLAN.md).
		ffn := map[string]any{"ffn_mult": nil, "intermediate_size": nil, "no_op": true, "replace_with_linear": false, "sparsify": nil}
		if x := l.MLP; x != nil {
			mult, ok := ffnMult(x.Width, m.Hidden)
			if !ok {
				return &FormatError{Format: DeciLMFormat, Layer: i, Msg: fmt.Sprintf("FFN width %d has no ffn_mult that maps back to it at hidden size %d", x.Width, m.Hidden)}
			}
			ffn["ffn_mult"] = mult
			ffn["intermediate_size"] = x.Width
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
	o["model_type"] = deciLMModelType
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
		// The configuration module prune writes beside the weights
		// (package prune/remotecode); a modeling module is named only by
		// a writer that ships one (ConfigOptions.AutoMap).
		o["auto_map"] = map[string]any{"AutoConfig": "configuration_decilm.DeciLMConfig"}
	}
	return nil
}
