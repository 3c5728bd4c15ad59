package architecture

import "fmt"

// GptOss is GptOssForCausalLM (model_type gpt_oss): attention with sinks,
// alternating sliding windows, and fused, biased experts.
const GptOss = "GptOssForCausalLM"

func init() {
	mustRegister(Family{
		Arch: GptOss, ModelType: "gpt_oss",
		Defaults: Defaults{RopeTheta: 150000, NormEps: 1e-5, KVHeads: 8, HeadDim: 64, MaxPositions: 131072},
		Read:     func(c *ConfigReader, m *Model) { readGptOss(c.f, m) },
		Write:    (*ConfigWriter).gptOss,
		Tensors: func(m *Model, t *TensorList) {
			llamaTensors(m, t, func(b *TensorList, p string, i int, h int64, x *MoE) { b.gptOssMoE(p+"mlp.", i, h, x) })
		},
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention: AttentionRule{Sinks: true, Bias: AttentionBias},
		Windows:   LayerTypeWindows,
		// The native engine runs gpt-oss forward (engine.CheckTrain
		// refuses its backward: training goes through the reference
		// trainer).
		Engine: EngineSupport{Runs: true},
		Router: RouterRule{TopKFirst: true},
		// GptOssConfig.__init__ fills in this YaRN when config.json has no
		// rope scaling (transformers models/gpt_oss/configuration_gpt_oss.py;
		// torchref/trainer/acmodel.py GPTOSS_YARN).
		YaRN: YaRNRule{Runs: true, Default: &RopeScaling{Type: "yarn", Factor: 32, OriginalMaxPositions: 4096,
			Extra: map[string]any{"beta_fast": 32.0, "beta_slow": 1.0, "truncate": false}}},
	})
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
		// GptOssExperts' alpha is 1.702 (a constant there; read where a
		// config.json gives one, as the reference trainer's acmoe.py
		// does), its limit GptOssConfig's swiglu_limit (default 7.0).
		SwiGLUAlpha: f.floatOr("swiglu_alpha", 1.702),
		SwiGLULimit: f.floatOr("swiglu_limit", 7.0),
	}
	f.check(moe.SwiGLUAlpha > 0, "swiglu_alpha", "want a positive number, got %v", moe.SwiGLUAlpha)
	f.check(moe.SwiGLULimit > 0, "swiglu_limit", "want a positive number, got %v", moe.SwiGLULimit)
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

func (w *ConfigWriter) gptOss() error {
	b, o := w.b, w.out
	if b.MLP != nil {
		return &FormatError{Format: Native, Layer: -1, Msg: "gpt-oss layers are all MoE; a dense MLP layer cannot be written"}
	}
	if x := b.MoE; !x.Gated || !x.RouterBias || !x.ExpertBias || x.SharedWidth != 0 || x.LatentSize != 0 || x.RouterCorrection {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("gpt-oss experts are gated with biases, a biased router and no shared expert; got %+v", *x)}
	}
	o["intermediate_size"] = b.MoE.ExpertWidth
	o["num_local_experts"] = b.MoE.Experts
	o["num_experts_per_tok"] = b.MoE.TopK
	if w.RawHas("experts_per_token") {
		o["experts_per_token"] = b.MoE.TopK
	}
	o["hidden_act"] = b.MoE.Activation
	return nil
}

// gptOssMoE lists transformers' GptOssMLP: a biased router and the experts
// stacked in two fused tensors, gate_up_proj [E, hidden, 2·width] and
// down_proj [E, width, hidden], each with a bias.
func (b *TensorList) gptOssMoE(p string, i int, h int64, x *MoE) {
	e := int64(x.Experts)
	w := int64(x.ExpertWidth)
	b.linear(p+"router", i, "moe_router", x.RouterBias, e, h)
	b.addExpert(p+"experts.gate_up_proj", i, -1, x.Experts, "expert_gate_up", e, h, 2*w)
	if x.ExpertBias {
		b.addExpert(p+"experts.gate_up_proj_bias", i, -1, x.Experts, "expert_gate_up_bias", e, 2*w)
	}
	b.addExpert(p+"experts.down_proj", i, -1, x.Experts, "expert_down", e, w, h)
	if x.ExpertBias {
		b.addExpert(p+"experts.down_proj_bias", i, -1, x.Experts, "expert_down_bias", e, h)
	}
}
