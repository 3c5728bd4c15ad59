package architecture

import "fmt"

// The Qwen family: Qwen2 (q, k, v biases), Qwen3 (qk-norm) and Qwen3-MoE.
const (
	Qwen2    = "Qwen2ForCausalLM"
	Qwen3    = "Qwen3ForCausalLM"
	Qwen3MoE = "Qwen3MoeForCausalLM"
)

func init() {
	mustRegister(Family{
		Arch: Qwen2, ModelType: "qwen2",
		Defaults: Defaults{RopeTheta: 10000, NormEps: 1e-6, KVHeads: 32, MaxPositions: 32768},
		Read: func(c *ConfigReader, m *Model) {
			readDense(c.f, m, func(f *fields, n int, a *Attention, x *MLP) []int {
				a.QKVBias = true // Qwen2Attention hard-codes bias on q, k, v
				return qwenWindows(f, n)
			})
		},
		Write:       func(w *ConfigWriter) error { return w.dense(false) },
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention: AttentionRule{Bias: QKVBias},
		Windows:   QwenWindows,
		Engine:    EngineSupport{Runs: true},
	})
	mustRegister(Family{
		Arch: Qwen3, ModelType: "qwen3",
		Defaults: Defaults{RopeTheta: 10000, NormEps: 1e-6, KVHeads: 32, HeadDim: 128, MaxPositions: 32768},
		Read: func(c *ConfigReader, m *Model) {
			readDense(c.f, m, func(f *fields, n int, a *Attention, x *MLP) []int {
				a.QKNorm = true
				a.QKVBias = f.boolOr("attention_bias", false)
				a.OutBias = a.QKVBias
				return qwenWindows(f, n)
			})
		},
		Write:       func(w *ConfigWriter) error { return w.dense(false) },
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention: AttentionRule{QKNorm: true, Bias: AttentionBias},
		Windows:   QwenWindows,
		Engine:    EngineSupport{Runs: true},
	})
	mustRegister(Family{
		Arch: Qwen3MoE, ModelType: "qwen3_moe",
		Defaults:    Defaults{RopeTheta: 10000, NormEps: 1e-6, KVHeads: 4, HeadDim: 128, MaxPositions: 32768},
		Read:        func(c *ConfigReader, m *Model) { readQwen3MoE(c.f, m) },
		Write:       (*ConfigWriter).qwen3MoE,
		Tensors:     func(m *Model, t *TensorList) { llamaTensors(m, t, qwenMoETensors) },
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention: AttentionRule{QKNorm: true, Bias: AttentionBias},
		Windows:   QwenWindows,
		Engine:    EngineSupport{Runs: true},
		Router:    RouterRule{RenormalizeKey: "norm_topk_prob"},
	})
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

func (w *ConfigWriter) qwen3MoE() error {
	m, o, b := w.m, w.out, w.b
	var dense []any
	for i, l := range m.Layers {
		if l.MLP != nil {
			dense = append(dense, i)
		}
	}
	if dense == nil {
		dense = []any{}
	}
	if b.MoE != nil {
		if b.MoE.SharedWidth != 0 || !b.MoE.Gated || b.MoE.RouterBias || b.MoE.ExpertBias || b.MoE.LatentSize != 0 || b.MoE.RouterCorrection {
			return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("Qwen3-MoE experts are gated, unbiased and unshared; got %+v", *b.MoE)}
		}
		o["num_experts"] = b.MoE.Experts
		o["num_experts_per_tok"] = b.MoE.TopK
		o["moe_intermediate_size"] = b.MoE.ExpertWidth
		o["hidden_act"] = b.MoE.Activation
	}
	if b.MLP != nil {
		if b.MoE != nil && b.MLP.Activation != b.MoE.Activation {
			return &FormatError{Format: Native, Layer: -1, Msg: "dense and expert activations differ; Qwen3-MoE has one hidden_act"}
		}
		o["intermediate_size"] = b.MLP.Width
		o["hidden_act"] = b.MLP.Activation
	}
	o["mlp_only_layers"] = dense
	o["decoder_sparse_step"] = 1
	return nil
}

// qwenMoETensors lists Qwen3-MoE's experts (mlp.gate router,
// mlp.experts.E.gate_proj/up_proj/down_proj); Llama-style families without
// their own MoE naming use it too.
func qwenMoETensors(b *TensorList, p string, i int, h int64, x *MoE) { b.qwenMoE(p+"mlp.", i, h, x) }

func (b *TensorList) qwenMoE(p string, i int, h int64, x *MoE) {
	b.linear(p+"gate", i, "moe_router", x.RouterBias, int64(x.Experts), h)
	w := int64(x.ExpertWidth)
	for e := range b.experts(x.Experts) {
		q := b.expertPrefix(p, e)
		if x.Gated {
			b.expertLinear(q+"gate_proj", i, e, 1, "expert_gate", x.ExpertBias, w, h)
		}
		b.expertLinear(q+"up_proj", i, e, 1, "expert_up", x.ExpertBias, w, h)
		b.expertLinear(q+"down_proj", i, e, 1, "expert_down", x.ExpertBias, h, w)
	}
}
