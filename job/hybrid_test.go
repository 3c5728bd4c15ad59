package job

import (
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
	// Nemotron-3's MoE layers (sigmoid routing, shared experts) have a
	// shape, which torch refuses.
	moe := a.Clone()
	moe.Layers[2] = architecture.Layer{MoE: &architecture.MoE{Experts: 4, TopK: 2, ExpertWidth: 8, SharedWidth: 16, Activation: "relu2", RouterCorrection: true}}
	ms, err := ShapeOf(moe)
	if err != nil {
		t.Fatal(err)
	}
	if x := ms.Layers[2].MoE; x == nil || x.Router != RouterSigmoid || x.SharedWidth != 16 {
		t.Errorf("Nemotron-3 MoE layer shape %+v, want sigmoid_corrected with shared width 16", x)
	}
	if err := torch.RepresentFor(Distill, "student", ms); !errors.As(err, &re) || !strings.Contains(err.Error(), "sigmoid_corrected") {
		t.Errorf("torch of a sigmoid-routed MoE = %v, want a RepresentError naming the router", err)
	}
}
