package architecture

// Mistral is MistralForCausalLM (model_type mistral): Llama blocks with one
// sliding window.
const Mistral = "MistralForCausalLM"

func init() {
	mustRegister(Family{
		Arch: Mistral, ModelType: "mistral",
		Defaults: Defaults{RopeTheta: 10000, NormEps: 1e-6, KVHeads: 8, MaxPositions: 4096 * 32},
		Read: func(c *ConfigReader, m *Model) {
			readDense(c.f, m, func(f *fields, n int, a *Attention, x *MLP) []int {
				// MistralConfig defaults sliding_window to 4096; null disables it.
				w := 4096
				if f.present("sliding_window") {
					w = f.intOr("sliding_window", 0)
				}
				windows := make([]int, n)
				for i := range windows {
					windows[i] = w
				}
				return windows
			})
		},
		Write:       func(w *ConfigWriter) error { return w.dense(false) },
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention:    AttentionRule{Bias: NoBias},
		Windows:      OneWindow,
		DeciLMBlocks: true,
		Engine:       EngineSupport{Runs: true},
	})
}
