package architecture

import "fmt"

// Mixtral is MixtralForCausalLM (model_type mixtral): Llama attention with
// block_sparse_moe experts in every layer.
const Mixtral = "MixtralForCausalLM"

func init() {
	mustRegister(Family{
		Arch: Mixtral, ModelType: "mixtral",
		Defaults: Defaults{RopeTheta: 1e6, NormEps: 1e-5, KVHeads: 8, MaxPositions: 4096 * 32},
		Read:     func(c *ConfigReader, m *Model) { readMixtral(c.f, m) },
		Write:    (*ConfigWriter).mixtral,
		Tensors: func(m *Model, t *TensorList) {
			llamaTensors(m, t, func(b *TensorList, p string, i int, h int64, x *MoE) { b.mixtralMoE(p+"block_sparse_moe.", i, h, x) })
		},
		LayerPrefix: "model.layers.", EpsKey: "rms_norm_eps",
		Attention: AttentionRule{Bias: NoBias},
		Windows:   OneWindow,
		Engine:    EngineSupport{Runs: true},
		Router:    RouterRule{Renormalize: true},
	})
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

func (w *ConfigWriter) mixtral() error {
	b, o := w.b, w.out
	if b.MLP != nil {
		return &FormatError{Format: Native, Layer: -1, Msg: "Mixtral layers are all MoE; a dense MLP layer cannot be written"}
	}
	if x := b.MoE; !x.Gated || x.RouterBias || x.ExpertBias || x.SharedWidth != 0 || x.LatentSize != 0 || x.RouterCorrection {
		return &FormatError{Format: Native, Layer: -1, Msg: fmt.Sprintf("Mixtral experts are gated, unbiased and unshared; got %+v", *x)}
	}
	o["intermediate_size"] = b.MoE.ExpertWidth
	o["num_local_experts"] = b.MoE.Experts
	o["num_experts_per_tok"] = b.MoE.TopK
	o["hidden_act"] = b.MoE.Activation
	return nil
}

func (b *TensorList) mixtralMoE(p string, i int, h int64, x *MoE) {
	b.linear(p+"gate", i, "moe_router", x.RouterBias, int64(x.Experts), h)
	w := int64(x.ExpertWidth)
	for e := range b.experts(x.Experts) {
		q := b.expertPrefix(p, e)
		b.expertLinear(q+"w1", i, e, 1, "expert_gate", x.ExpertBias, w, h)
		b.expertLinear(q+"w2", i, e, 1, "expert_down", x.ExpertBias, h, w)
		b.expertLinear(q+"w3", i, e, 1, "expert_up", x.ExpertBias, w, h)
	}
}
