package search

import (
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
)

// TestGptOssLayerRemovalKeepsVLLMWindows: vLLM windows a gpt-oss layer by
// its index, not layer_types (export's gpt-oss-even-windows), so the
// space for vLLM offers the removal of the last layer only, and every
// layer removal it offers loads; SGLang, which reads layer_types, may
// remove any layer. (Before, 210 of the 252 single-layer removals the
// vLLM space offered for this parent were shapes vLLM computes wrongly,
// dropped only when the candidates were ranked.)
func TestGptOssLayerRemovalKeepsVLLMWindows(t *testing.T) {
	m, err := architecture.FromConfig([]byte(`{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 4096,
	"hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
	"intermediate_size": 512, "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": 128,
	"attention_bias": true, "max_position_embeddings": 4096, "tie_word_embeddings": false}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		eng       estimate.Engine
		removable []int
	}{{estimate.VLLM, []int{5}}, {estimate.SGLang, []int{0, 1, 2, 3, 4, 5}}} {
		sp, err := NewSpace(m, SpaceOptions{Engine: c.eng})
		if err != nil {
			t.Fatal(err)
		}
		e := &evaluator{sp: sp}
		removed := map[int]bool{}
		for _, g := range e.globals() {
			for l := range m.Layers {
				for _, s := range e.shapes(nil, l, g) {
					if !s.Removed {
						continue
					}
					removed[l] = true
					cand := Candidate{Hidden: g.hidden, Heads: g.heads, Layers: make([]LayerShape, len(m.Layers))}
					for k := range m.Layers {
						cand.Layers[k] = e.shapes(nil, k, g)[0]
					}
					cand.Layers[l] = s
					if ch := sp.Model(&cand); !sp.ServeOn.Loads(ch, sp.TP) {
						t.Errorf("%s: the space removes layer %d (%s), which it does not load: %v", c.eng, l, sp.Describe(&cand), sp.ServeOn.Check(ch, sp.TP).Violations)
					}
				}
			}
		}
		var got []int
		for l := range m.Layers {
			if removed[l] {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, c.removable) {
			t.Errorf("%s: layers %v offered for removal, want %v", c.eng, got, c.removable)
		}
		noted := false
		for _, n := range sp.Notes {
			noted = noted || strings.Contains(n, "[gpt-oss-even-windows]")
		}
		if noted != (c.eng == estimate.VLLM) {
			t.Errorf("%s: notes %q", c.eng, sp.Notes)
		}
	}
}
