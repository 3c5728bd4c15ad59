package architecture

// Llama is LlamaForCausalLM (model_type llama): the reference block every
// other dense family varies.
const Llama = "LlamaForCausalLM"

// llamaDefaults are LlamaConfig's (also the base of DeciLMConfig).
var llamaDefaults = Defaults{RopeTheta: 10000, NormEps: 1e-6, KVHeads: -1, MaxPositions: 2048}

func init() {
	mustRegister(Family{
		Arch: Llama, ModelType: "llama", Defaults: llamaDefaults,
		Read: func(c *ConfigReader, m *Model) {
			readDense(c.f, m, func(f *fields, n int, a *Attention, x *MLP) []int {
				a.QKVBias = f.boolOr("attention_bias", false)
				a.OutBias = a.QKVBias
				x.Bias = f.boolOr("mlp_bias", false)
				return make([]int, n)
			})
		},
		Write:       func(w *ConfigWriter) error { return w.dense(true) },
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention:    AttentionRule{Bias: AttentionBias},
		Windows:      NoWindows,
		DeciLMBlocks: true,
		Engine:       EngineSupport{Runs: true},
	})
}
