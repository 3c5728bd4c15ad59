package architecture

import (
	"fmt"
	"strings"
)

// NemotronH is NemotronHForCausalLM (model_type nemotron_h): a hybrid whose
// layers each hold one Mamba2, attention, MLP or MoE mixer, named
// backbone.layers.N.mixer.*.
const NemotronH = "NemotronHForCausalLM"

func init() {
	mustRegister(Family{
		Arch: NemotronH, ModelType: "nemotron_h",
		Defaults:    Defaults{RopeTheta: 10000, NormEps: 1e-5, KVHeads: 8, HeadDim: 128, MaxPositions: 4096},
		Read:        func(c *ConfigReader, m *Model) { readNemotronH(c.f, m) },
		Write:       (*ConfigWriter).nemotronH,
		Tensors:     nemotronHTensors,
		LayerPrefix: "backbone.layers.", EpsKey: "layer_norm_epsilon",
		Attention: AttentionRule{Bias: AttentionBias},
		Windows:   OneWindow,
		Hybrid:    true,
		// vLLM nemotron_h.py NemotronHAttention builds no rotary embedding.
		NoRoPE: true,
		// NemotronHMoE.route_tokens_to_experts (transformers
		// models/nemotron_h/modeling_nemotron_h.py) divides the k sigmoid
		// scores by their sum when config.norm_topk_prob, whose
		// NemotronHConfig default is true.
		Router: RouterRule{Renormalize: true, RenormalizeKey: "norm_topk_prob"},
		// The native engine runs its Mamba2, attention and MLP layers
		// forward (training goes through the PyTorch reference trainer:
		// engine.CheckTrain); its sigmoid-routed MoE layers with shared
		// experts are refused per layer (engine.Check).
		Engine: EngineSupport{Runs: true},
	})
}

// nemotronHTensors lists backbone.embeddings, per layer its norm and one
// mixer (backbone.layers.N.mixer.*), backbone.norm_f and the LM head.
func nemotronHTensors(m *Model, b *TensorList) {
	h := int64(m.Hidden)
	v := int64(m.Vocab)
	b.add("backbone.embeddings.weight", -1, "embedding", v, h)
	for i, l := range m.Layers {
		p := b.layerPrefix("backbone.layers.", i)
		switch {
		case l.Mamba != nil:
			b.norm(p+"norm.weight", i, BlockMamba, h)
			b.mamba(p+"mixer.", i, h, l.Mamba)
		case l.Attention != nil:
			b.norm(p+"norm.weight", i, BlockAttention, h)
			b.attention(p+"mixer.", i, h, l.Attention)
		case l.MLP != nil:
			b.norm(p+"norm.weight", i, BlockMLP, h)
			b.mlp(p+"mixer.", i, h, l.MLP)
		case l.MoE != nil:
			b.norm(p+"norm.weight", i, BlockMoE, h)
			b.nemotronMoE(p+"mixer.", i, h, l.MoE)
		default:
			b.norm(p+"norm.weight", i, "", h)
		}
	}
	b.add("backbone.norm_f.weight", -1, "norm", h)
	if !m.TiedEmbeddings {
		b.add("lm_head.weight", -1, "lm_head", v, h)
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

func (w *ConfigWriter) nemotronH() error {
	m, o, b := w.m, w.out, w.b
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
	if w.RawHas("layers_block_type") {
		names := map[byte]string{patMamba: "mamba", patAttention: "attention", patMLP: "mlp", patMoE: "moe"}
		lt := make([]any, pat.Len())
		for i := 0; i < pat.Len(); i++ {
			lt[i] = names[pat.String()[i]]
		}
		o["layers_block_type"] = lt
	}
	act := ""
	if x := b.Mamba; x != nil {
		o["mamba_num_heads"] = x.Heads
		o["mamba_head_dim"] = x.HeadDim
		o["ssm_state_size"] = x.StateSize
		o["n_groups"] = x.Groups
		o["conv_kernel"] = x.ConvKernel
		o["use_conv_bias"] = x.ConvBias
		o["use_bias"] = x.Bias
		if w.RawHas("mamba_proj_bias") {
			o["mamba_proj_bias"] = x.Bias
		}
		if x.ChunkSize > 0 {
			o["chunk_size"] = x.ChunkSize
		}
		w.mambaExpand(x)
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
	if x := b.MLP; x != nil {
		if x.Gated {
			return &FormatError{Format: Native, Layer: -1, Msg: "Nemotron-H MLPs are not gated"}
		}
		o["intermediate_size"] = x.Width
		act = x.Activation
		if err := setBias(x.Bias); err != nil {
			return err
		}
	}
	if x := b.MoE; x != nil {
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
		} else if !w.RawHas("n_shared_experts") || o["n_shared_experts"] == nil {
			o["n_shared_experts"] = 1
		} else if f := (&fields{m: o}); f.intOr("n_shared_experts", 1) == 0 {
			o["n_shared_experts"] = 1
		}
		if x.LatentSize > 0 {
			o["moe_latent_size"] = x.LatentSize
		} else if w.RawHas("moe_latent_size") {
			o["moe_latent_size"] = nil
		}
	}
	if act != "" {
		o["mlp_hidden_act"] = act
	}
	return nil
}

// mambaExpand keeps Nemotron-H's expand (or its alias mamba_expand) true.
// No loader reads it: vLLM nemotron_h.py (NemotronHMambaDecoderLayer) and
// HF modeling_nemotron_h.py size the mixer as mamba_num_heads ·
// mamba_head_dim. HF's NemotronHConfig declares it `expand: int` under
// @strict, so a fraction would fail there. When the Mamba width or the
// hidden size changed from the config read, the key is rewritten as
// width/hidden where that is an integer and dropped otherwise; an unchanged
// model keeps the value it was read with (NVIDIA's Nano-30B states
// expand 2 for a width of 64·64 at hidden 2688).
func (w *ConfigWriter) mambaExpand(x *Mamba) {
	raw := &fields{m: w.raw}
	width := x.Heads * x.HeadDim
	if raw.intOr("mamba_num_heads", 0)*raw.intOr("mamba_head_dim", 0) == width && raw.intOr("hidden_size", 0) == w.m.Hidden {
		return
	}
	for _, k := range []string{"expand", "mamba_expand"} {
		if !w.RawHas(k) {
			continue
		}
		if w.m.Hidden > 0 && width%w.m.Hidden == 0 {
			w.out[k] = width / w.m.Hidden
		} else {
			delete(w.out, k)
		}
	}
}

func (b *TensorList) mamba(p string, i int, h int64, x *Mamba) {
	di := int64(x.DInner())
	gn := int64(x.Groups * x.StateSize)
	nh := int64(x.Heads)
	conv := di + 2*gn
	b.linear(p+"in_proj", i, "mamba_in", x.Bias, 2*di+2*gn+nh, h)
	b.add(p+"conv1d.weight", i, "mamba_conv", conv, 1, int64(x.ConvKernel))
	if x.ConvBias {
		b.add(p+"conv1d.bias", i, "mamba_conv_bias", conv)
	}
	b.add(p+"dt_bias", i, "mamba_dt_bias", nh)
	b.add(p+"A_log", i, "mamba_a_log", nh)
	b.add(p+"D", i, "mamba_d", nh)
	b.add(p+"norm.weight", i, "mamba_norm", di)
	b.linear(p+"out_proj", i, "mamba_out", x.Bias, h, di)
}

// nemotronMoE lists NemotronH's MoE mixer: a sigmoid router with a score
// correction bias, optional LatentMoE projections, non-gated experts and a
// non-gated shared expert at the model width.
func (b *TensorList) nemotronMoE(p string, i int, h int64, x *MoE) {
	e := int64(x.Experts)
	b.linear(p+"gate", i, "moe_router", x.RouterBias, e, h)
	if x.RouterCorrection {
		b.add(p+"gate.e_score_correction_bias", i, "moe_router_correction", e)
	}
	in := h
	if x.LatentSize > 0 {
		in = int64(x.LatentSize)
		b.linear(p+"fc1_latent_proj", i, "latent_in", x.ExpertBias, in, h)
	}
	w := int64(x.ExpertWidth)
	for k := range b.experts(x.Experts) {
		q := b.expertPrefix(p, k)
		if x.Gated {
			b.expertLinear(q+"gate_proj", i, k, 1, "expert_gate", x.ExpertBias, w, in)
		}
		b.expertLinear(q+"up_proj", i, k, 1, "expert_up", x.ExpertBias, w, in)
		b.expertLinear(q+"down_proj", i, k, 1, "expert_down", x.ExpertBias, in, w)
	}
	if x.LatentSize > 0 {
		b.linear(p+"fc2_latent_proj", i, "latent_out", x.ExpertBias, h, in)
	}
	if x.SharedWidth > 0 {
		s := int64(x.SharedWidth)
		if x.Gated {
			b.linear(p+"shared_experts.gate_proj", i, "shared_gate", x.ExpertBias, s, h)
		}
		b.linear(p+"shared_experts.up_proj", i, "shared_up", x.ExpertBias, s, h)
		b.linear(p+"shared_experts.down_proj", i, "shared_down", x.ExpertBias, h, s)
	}
}
