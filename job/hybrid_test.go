package job

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// TestHybridShape: a Nemotron-H model's contract shape has its Mamba2
// layers' widths; such a shape is uniform (one shape per block kind),
// torch reads it for every kind but importance, automodel does not, and a
// Mamba layer with heads not a multiple of its groups is refused.
func TestHybridShape(t *testing.T) {
	a, err := architecture.FromConfig([]byte(`{"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
		"vocab_size": 64, "hidden_size": 16, "hybrid_override_pattern": "M*-M",
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "intermediate_size": 24,
		"mamba_num_heads": 4, "mamba_head_dim": 4, "ssm_state_size": 8, "n_groups": 2, "conv_kernel": 4}`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ShapeOf(a)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Layers[0].Mamba; m == nil || *m != (MambaShape{Heads: 4, HeadDim: 4, State: 8, Groups: 2, Conv: 4}) || s.Layers[1].Mamba != nil || s.Layers[1].Attention == nil || s.Layers[2].MLP == nil {
		t.Fatalf("shape %+v", s.Layers)
	}
	if !s.Uniform() || s.Format != FormatNative {
		t.Errorf("a Nemotron-H shape: uniform %v, format %s; want uniform native", s.Uniform(), s.Format)
	}
	child := s
	child.Layers = append([]LayerShape(nil), s.Layers...)
	m := *s.Layers[3].Mamba
	m.Heads = 2
	child.Layers[3] = LayerShape{Mamba: &m}
	if child.Uniform() {
		t.Error("Mamba layers of 4 and 2 heads: uniform")
	}
	if ok, why := s.Equal(child); ok || !strings.Contains(why, "Mamba2 4 heads") {
		t.Errorf("Equal = %v, %q", ok, why)
	}
	torch, _ := LookupEngine("torch")
	for _, k := range []Kind{Distill, Eval, Proxy} {
		if err := torch.RepresentFor(k, "student", s); err != nil {
			t.Errorf("torch %s: %v", k, err)
		}
	}
	var re *RepresentError
	if err := torch.RepresentFor(Importance, "model", s); !errors.As(err, &re) || !strings.Contains(err.Error(), "native engine") {
		t.Errorf("torch importance of a hybrid = %v, want a RepresentError pointing at the native engine", err)
	}
	am, _ := LookupEngine("automodel")
	if err := am.RepresentFor(Distill, "student", s); !errors.As(err, &re) {
		t.Errorf("automodel of a hybrid = %v, want a RepresentError", err)
	}
	// Nemotron-3's MoE layers (sigmoid routing with a group limit and
	// scaling, shared experts) have a shape, which torch takes and
	// automodel refuses; bad groupings are refused with what is valid.
	n3, err := architecture.FromConfig([]byte(nemotron3Config))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ShapeOf(n3)
	if err != nil {
		t.Fatal(err)
	}
	want := MoEShape{Experts: 8, TopK: 2, Width: 8, Router: RouterSigmoid, NormTopKProb: true, SharedWidth: 16, Groups: 4, TopKGroups: 2, Scale: 2.5}
	if x := ms.Layers[1].MoE; x == nil || *x != want || ms.Layers[1].MLP != nil {
		t.Fatalf("Nemotron-3 MoE layer shape %+v, want %+v", x, want)
	}
	if err := torch.RepresentFor(Distill, "student", ms); err != nil {
		t.Errorf("torch of a Nemotron-3 MoE child: %v", err)
	}
	if err := am.RepresentFor(Distill, "student", ms); !errors.As(err, &re) || !strings.Contains(err.Error(), "sigmoid_corrected") {
		t.Errorf("automodel of a sigmoid-routed MoE = %v, want a RepresentError naming the router", err)
	}
	// NemotronHConfig's defaults: one group, norm_topk_prob, scale 1.
	var raw map[string]any
	json.Unmarshal([]byte(nemotron3Config), &raw)
	for _, k := range []string{"n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob"} {
		delete(raw, k)
	}
	b, _ := json.Marshal(raw)
	d, err := architecture.FromConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := ShapeOf(d); err != nil || ds.Layers[1].MoE.Groups != 1 || ds.Layers[1].MoE.TopKGroups != 1 || ds.Layers[1].MoE.Scale != 1 || !ds.Layers[1].MoE.NormTopKProb {
		t.Errorf("defaults: %+v, %v; want n_group 1, topk_group 1, scale 1, norm_topk_prob true", ds.Layers[1].MoE, err)
	}
	jm := Model{Files: Files{Path: "student", SHA256: map[string]string{"config.json": strings.Repeat("0", 64)}}, Shape: ms}
	if err := jm.validate("student"); err != nil {
		t.Fatalf("valid Nemotron-3 shape refused: %v", err)
	}
	for _, c := range []struct {
		edit func(x *MoEShape)
		want string
	}{
		{func(x *MoEShape) { x.TopKGroups = 5 }, "1 <= topk_group <= n_group (4)"},
		{func(x *MoEShape) { x.Experts = 6 }, "n_group 4 with 6 experts"},
		{func(x *MoEShape) { x.TopK = 5 }, "exceeds the 4 experts of the topk_group 2 kept group(s)"},
		{func(x *MoEShape) { x.Scale = 0 }, "routed_scaling_factor 0"},
		{func(x *MoEShape) { x.Router = RouterSoftmaxTopK }, "want them absent"},
	} {
		bad := jm
		bad.Shape.Layers = append([]LayerShape(nil), ms.Layers...)
		x := *ms.Layers[1].MoE
		c.edit(&x)
		bad.Shape.Layers[1].MoE = &x
		bad.Shape.Format = FormatDeciLM // past the uniformity check, to the layer's
		var ce *ContractError
		if err := bad.validate("student"); !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) || !strings.Contains(ce.Field, "layers[1].moe") {
			t.Errorf("%s: validate = %v, want a ContractError on layers[1].moe saying it", c.want, err)
		}
	}
}

// nemotron3Config is a small Nemotron-3-shaped hybrid: Mamba2, MoE and
// attention layers, the MoE sigmoid-routed in 4 groups of 2 (2 kept) with
// a shared expert.
const nemotron3Config = `{"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
	"vocab_size": 64, "hidden_size": 16, "hybrid_override_pattern": "ME*E",
	"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "mlp_hidden_act": "relu2",
	"mamba_num_heads": 4, "mamba_head_dim": 4, "ssm_state_size": 8, "n_groups": 2, "conv_kernel": 4,
	"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "n_shared_experts": 1,
	"moe_shared_expert_intermediate_size": 16, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
	"norm_topk_prob": true}`
