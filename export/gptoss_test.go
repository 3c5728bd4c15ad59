package export

import (
	"fmt"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// gptOssChild is a gpt-oss config of the given layer_types.
func gptOssChild(types string, layers int) string {
	return fmt.Sprintf(`{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 64,
		"hidden_size": 16, "num_hidden_layers": %d, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
		"intermediate_size": 8, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
		"layer_types": [%s], "attention_bias": true}`, layers, types)
}

// TestGptOssEvenLayerWindows: vLLM windows a gpt-oss layer by its index
// (even: sliding), not by layer_types, so a child that removed one layer
// of an alternating parent (its layer_types starting full) is refused for
// vLLM, by Loads too (the search never proposes it), and passes SGLang,
// which reads layer_types; an alternating child passes both.
func TestGptOssEvenLayerWindows(t *testing.T) {
	for _, c := range []struct {
		types        string
		layers       int
		vllm, sglang bool
		bad          []int // layers vLLM's rule names
	}{
		{`"sliding_attention", "full_attention", "sliding_attention"`, 3, true, true, nil},
		// The parent [sliding, full, sliding, full] with layer 0 removed.
		{`"full_attention", "sliding_attention", "full_attention"`, 3, false, true, []int{0, 1, 2}},
		// With layer 1 removed: layers 1 and 2 have swapped spans.
		{`"sliding_attention", "sliding_attention", "full_attention"`, 3, false, true, []int{1, 2}},
	} {
		cfg := []byte(gptOssChild(c.types, c.layers))
		m, err := architecture.FromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []struct {
			name string
			ok   bool
		}{{"vllm", c.vllm}, {"sglang", c.sglang}} {
			rep, err := ValidateConfig(cfg, e.name)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() != e.ok {
				t.Errorf("[%s] on %s: OK = %v, want %v: %v", c.types, e.name, rep.OK(), e.ok, rep.Violations)
			}
			if caps, _ := capsFor(e.name); caps.Loads(m, 1) != e.ok {
				t.Errorf("[%s] on %s: Loads = %v, want %v", c.types, e.name, !e.ok, e.ok)
			}
			if e.name != "vllm" {
				continue
			}
			var got []int
			for _, v := range rep.Violations {
				if v.Rule == "gpt-oss-even-windows" {
					got = append(got, v.Layer)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.bad) {
				t.Errorf("[%s] on vllm: the rule names layers %v, want %v (%v)", c.types, got, c.bad, rep.Violations)
			}
		}
	}
}
