package job

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// qwen3MoEConfig is a small Qwen3-MoE config with one dense layer
// (mlp_only_layers) and norm_topk_prob set.
const qwen3MoEConfig = `{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 64,
	"hidden_size": 16, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
	"intermediate_size": 24, "num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
	"norm_topk_prob": true, "mlp_only_layers": [1]}`

// gptOssConfig is a small gpt-oss config (attention sinks, alternating
// sliding windows, 6 stacked experts, top-2).
const gptOssConfig = `{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 64,
	"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
	"intermediate_size": 8, "num_local_experts": 6, "num_experts_per_tok": 2, "sliding_window": 4,
	"layer_types": ["sliding_attention", "full_attention"], "attention_bias": true, "max_position_embeddings": 256,
	"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
	"original_max_position_embeddings": 64}}`

// TestMoEShape: Qwen3-MoE and Mixtral models have contract shapes with
// their MoE blocks (experts, top-k, width, the family's router rule and
// norm_topk_prob); a Qwen3-MoE shape with a dense layer is native, one
// with fewer experts in one layer is not; torch takes them (but does not
// score them), automodel and megatron-bridge refuse them, and the shape
// survives the contract's JSON. gpt-oss's shape routes topk_softmax;
// torch takes it for every kind but importance.
func TestMoEShape(t *testing.T) {
	q, err := architecture.FromConfig([]byte(qwen3MoEConfig))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ShapeOf(q)
	if err != nil {
		t.Fatal(err)
	}
	want := MoEShape{Experts: 6, TopK: 2, Width: 8, Router: RouterSoftmaxTopK, NormTopKProb: true}
	if x := s.Layers[0].MoE; x == nil || *x != want || s.Layers[0].MLP != nil || s.Layers[0].Attention == nil {
		t.Fatalf("layer 0: %+v, want MoE %+v with attention and no MLP", s.Layers[0], want)
	}
	if s.Layers[1].MoE != nil || s.Layers[1].MLP == nil || s.Layers[1].MLP.Width != 24 {
		t.Fatalf("layer 1 (mlp_only_layers): %+v, want a dense MLP of 24", s.Layers[1])
	}
	if !s.Uniform() || s.Format != FormatNative {
		t.Errorf("Qwen3-MoE with a dense layer: uniform %v, format %s; want uniform native", s.Uniform(), s.Format)
	}
	child := s
	child.Layers = append([]LayerShape(nil), s.Layers...)
	fewer := want
	fewer.Experts = 4
	child.Layers[2].MoE = &fewer
	if child.Uniform() {
		t.Error("MoE layers of 6 and 4 experts: uniform")
	}
	if ok, why := s.Equal(child); ok || !strings.Contains(why, "MoE 6 experts") || !strings.Contains(why, "MoE 4 experts") {
		t.Errorf("Equal = %v, %q", ok, why)
	}

	// Qwen3MoeConfig's norm_topk_prob default is false; Mixtral always
	// renormalises.
	var raw map[string]any
	json.Unmarshal([]byte(qwen3MoEConfig), &raw)
	delete(raw, "norm_topk_prob")
	b, _ := json.Marshal(raw)
	q2, err := architecture.FromConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := ShapeOf(q2); err != nil || s2.Layers[0].MoE.NormTopKProb {
		t.Errorf("Qwen3-MoE without norm_topk_prob: %+v, %v; want norm_topk_prob false", s2.Layers[0].MoE, err)
	}
	mx, err := architecture.FromConfig([]byte(`{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 64,
		"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
		"intermediate_size": 8, "num_local_experts": 4, "num_experts_per_tok": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ShapeOf(mx)
	if err != nil {
		t.Fatal(err)
	}
	if x := ms.Layers[1].MoE; x == nil || *x != (MoEShape{Experts: 4, TopK: 2, Width: 8, Router: RouterSoftmaxTopK, NormTopKProb: true}) {
		t.Errorf("Mixtral layer 1: %+v", x)
	}

	torch, _ := LookupEngine("torch")
	var re *RepresentError
	for _, shape := range []Shape{s, ms} {
		for _, k := range []Kind{Distill, Eval, Proxy} {
			if err := torch.RepresentFor(k, "student", shape); err != nil {
				t.Errorf("torch %s of %s: %v", k, shape.Arch, err)
			}
		}
		if err := torch.RepresentFor(Importance, "model", shape); !errors.As(err, &re) || !strings.Contains(err.Error(), "native engine") {
			t.Errorf("torch importance of %s = %v, want a RepresentError pointing at the native engine", shape.Arch, err)
		}
	}
	for _, name := range []string{"automodel", "megatron-bridge"} {
		e, _ := LookupEngine(name)
		// Even were the class among its classes, the MoE layers are refused.
		e.Classes = append(e.Classes, s.Arch)
		if err := e.RepresentFor(Distill, "student", s); !errors.As(err, &re) || !strings.Contains(err.Error(), "layer 0 is a mixture of experts") {
			t.Errorf("%s of a Qwen3-MoE child = %v, want a RepresentError naming layer 0's MoE block", name, err)
		}
	}

	// gpt-oss routes top-k first: torch runs it (distill, eval, proxy) but
	// scores it nowhere (the native engine does not run it); automodel
	// and megatron-bridge refuse its MoE layers.
	g, err := architecture.FromConfig([]byte(gptOssConfig))
	if err != nil {
		t.Fatal(err)
	}
	gs, err := ShapeOf(g)
	if err != nil {
		t.Fatal(err)
	}
	if x := gs.Layers[1].MoE; x == nil || *x != (MoEShape{Experts: 6, TopK: 2, Width: 8, Router: RouterTopKSoftmax}) || gs.Layers[1].Attention == nil || gs.Layers[1].MLP != nil {
		t.Errorf("gpt-oss layer 1: %+v, want attention and MoE 6 experts of 8, top-2, router topk_softmax, norm_topk_prob false", gs.Layers[1])
	}
	if !gs.Uniform() || gs.Format != FormatNative {
		t.Errorf("gpt-oss: uniform %v, format %s; want uniform native", gs.Uniform(), gs.Format)
	}
	for _, k := range []Kind{Distill, Eval, Proxy} {
		if err := torch.RepresentFor(k, "student", gs); err != nil {
			t.Errorf("torch %s of gpt-oss: %v", k, err)
		}
	}
	// The native engine runs gpt-oss forward, so it scores it.
	if err := torch.RepresentFor(Importance, "model", gs); !errors.As(err, &re) || !strings.Contains(err.Error(), "run importance in the native engine") {
		t.Errorf("torch importance of gpt-oss = %v, want a RepresentError pointing at the native engine", err)
	}
	for _, name := range []string{"automodel", "megatron-bridge"} {
		e, _ := LookupEngine(name)
		if err := e.RepresentFor(Distill, "student", gs); !errors.As(err, &re) || !strings.Contains(err.Error(), "routed topk_softmax") {
			t.Errorf("%s of a gpt-oss child = %v, want a RepresentError naming the router", name, err)
		}
	}

	// Through the contract's JSON: the moe record round-trips and is
	// validated.
	m := Model{Files: Files{Path: "student", SHA256: map[string]string{"config.json": strings.Repeat("0", 64)}}, Shape: s}
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"moe":{"experts":6,"top_k":2,"width":8,"router":"softmax_topk","norm_topk_prob":true}`) {
		t.Errorf("JSON %s lacks the moe record", b)
	}
	var back Model
	if err := json.Unmarshal(b, &back); err != nil || back.validate("student") != nil {
		t.Fatalf("round trip: %v, %v", err, back.validate("student"))
	}
	if ok, why := back.Shape.Equal(s); !ok {
		t.Errorf("round trip changed the shape: %s", why)
	}
	for _, c := range []struct {
		edit func(x *MoEShape, l *LayerShape)
		want string
	}{
		{func(x *MoEShape, l *LayerShape) { x.TopK = 7 }, "top_k"},
		{func(x *MoEShape, l *LayerShape) { x.Experts = 0 }, "at least one expert"},
		{func(x *MoEShape, l *LayerShape) { x.Router = "argmax" }, "router"},
		{func(x *MoEShape, l *LayerShape) { l.MLP = &MLPShape{Width: 8} }, "MLP's place"},
	} {
		var bad Model
		json.Unmarshal(b, &bad)
		c.edit(bad.Shape.Layers[0].MoE, &bad.Shape.Layers[0])
		bad.Shape.Format = FormatDeciLM // past the uniformity check, to the layer's
		var ce *ContractError
		if err := bad.validate("student"); !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || !strings.Contains(ce.Field, "layers[0].moe") {
			t.Errorf("%s: validate = %v, want a ContractError on layers[0].moe saying %q", c.want, err, c.want)
		}
	}
}
