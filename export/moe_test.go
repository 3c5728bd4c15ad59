package export

import (
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// TestMoERules: per-layer expert counts, a top-k above the experts kept
// and an expert count n_group does not divide are refused by every
// serving engine, with the rule and what to change; a uniform expert cut
// loads.
func TestMoERules(t *testing.T) {
	for _, preset := range []string{"Qwen/Qwen3-30B-A3B", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "mistralai/Mixtral-8x7B-v0.1", "openai/gpt-oss-20b"} {
		parent, err := architecture.Load(preset)
		if err != nil {
			t.Fatal(err)
		}
		moe := func(f func(i int, x *architecture.MoE)) *architecture.Model {
			m := parent.Clone()
			n := 0
			for i := range m.Layers {
				if x := m.Layers[i].MoE; x != nil {
					f(n, x)
					n++
				}
			}
			return m
		}
		cases := []struct {
			name string
			m    *architecture.Model
			rule string // "" loads
		}{
			{"uniform half", moe(func(_ int, x *architecture.MoE) { x.Experts /= 2 }), ""},
			{"per layer", moe(func(i int, x *architecture.MoE) {
				if i == 1 {
					x.Experts /= 2
				}
			}), "moe-per-layer-experts"},
			{"top-k above experts", moe(func(_ int, x *architecture.MoE) { x.Experts = x.TopK - 1 }), "moe-top-k"},
		}
		for _, c := range cases {
			for _, e := range []string{"vllm", "sglang", "trtllm", "llamacpp", "hf"} {
				caps, _ := Lookup(e)
				r := caps.Check(c.m, 1)
				if loads := caps.Loads(c.m, 1); loads != (c.rule == "") {
					t.Errorf("%s %s %s: Loads = %v", preset, c.name, e, loads)
				}
				if c.rule == "" {
					if len(r.Violations) > 0 {
						t.Errorf("%s %s %s: %v", preset, c.name, e, r.Violations)
					}
					continue
				}
				found := false
				for _, v := range r.Violations {
					found = found || v.Rule == c.rule && strings.Contains(v.Msg, "keep")
				}
				if !found {
					t.Errorf("%s %s %s: violations %v lack rule %s", preset, c.name, e, r.Violations, c.rule)
				}
			}
		}
	}
	// A grouped router: n_group must divide the experts kept.
	m, err := architecture.Load("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{}
	c := m.Clone()
	for i := range c.Layers {
		if x := c.Layers[i].MoE; x != nil {
			x.Experts = 510
		}
	}
	checkMoE(r, c, Capabilities{Name: "vllm"}, map[string]any{"n_group": 4.0})
	if len(r.Violations) == 0 || r.Violations[0].Rule != "moe-n-group" {
		t.Errorf("510 experts in 4 groups: %v", r.Violations)
	}
}

// TestNativeLoadsMoE: the native engine's rules take the MoE blocks it
// runs (Qwen3-MoE, Mixtral and, forward, gpt-oss's top-k-first router:
// engine.Check) and refuse those it does not (Nemotron-3's sigmoid router and shared expert), naming
// the engine's reason.
func TestNativeLoadsMoE(t *testing.T) {
	caps, _ := Lookup("native")
	for _, c := range []struct {
		cfg  string
		ok   bool
		want string
	}{
		{`{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 64, "hidden_size": 16,
			"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
			"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8}`, true, ""},
		{`{"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": 64, "hidden_size": 16,
			"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
			"intermediate_size": 8, "num_local_experts": 4, "num_experts_per_tok": 2}`, true, ""},
		{`{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 64, "hidden_size": 16,
			"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
			"intermediate_size": 8, "num_local_experts": 4, "num_experts_per_tok": 2}`, true, ""},
		// Nemotron-3's sigmoid-routed MoE with a shared expert.
		{`{"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
			"vocab_size": 64, "hidden_size": 16, "hybrid_override_pattern": "ME*E",
			"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "mlp_hidden_act": "relu2",
			"mamba_num_heads": 4, "mamba_head_dim": 4, "ssm_state_size": 8, "n_groups": 2, "conv_kernel": 4,
			"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "n_shared_experts": 1,
			"moe_shared_expert_intermediate_size": 16, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5,
			"norm_topk_prob": true}`, false, "native does not run this model"},
	} {
		m, err := architecture.FromConfig([]byte(c.cfg))
		if err != nil {
			t.Fatal(err)
		}
		if got := caps.Loads(m, 1); got != c.ok {
			t.Errorf("%s: Loads = %v, want %v (%v)", m.Arch, got, c.ok, caps.Check(m, 1).Err())
		}
		if err := caps.Check(m, 1).Err(); !c.ok && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Check = %v, want %q", m.Arch, err, c.want)
		}
	}
}
