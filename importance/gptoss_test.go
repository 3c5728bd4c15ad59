package importance

import (
	"context"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

// gptOssModel is a small random gpt-oss (sinks, a sliding layer, YaRN,
// stacked clamped-SwiGLU experts), which the native engine runs forward.
func gptOssModel(t *testing.T) *engine.Model {
	a, err := architecture.FromConfig([]byte(`{"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss",
		"hidden_size":32,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,
		"vocab_size":32,"intermediate_size":12,"num_local_experts":4,"num_experts_per_tok":2,"sliding_window":4,
		"layer_types":["sliding_attention","full_attention"],"rope_theta":100,"swiglu_limit":0.5,
		"tie_word_embeddings":false,"max_position_embeddings":256}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.New(a, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Specs() {
		if len(s.Shape) >= 2 {
			for i, w := range m.Tensor(s.Name) {
				m.Tensor(s.Name)[i] = 5 * w
			}
		}
	}
	return m
}

// TestGptOssImportance: importance runs on gpt-oss in the native engine
// (forward only): routing statistics count every position's top-k
// experts, REAP scores fit the model, and Compute scores its heads.
func TestGptOssImportance(t *testing.T) {
	m := gptOssModel(t)
	data := rows(4, 10, 3)
	st, err := ExpertRouting(context.Background(), m, data, 2)
	if err != nil {
		t.Fatal(err)
	}
	for l := range 2 {
		var n int64
		for _, c := range st.Counts[l] {
			n += c
		}
		if st.Rows[l] != 40 || n != 80 {
			t.Errorf("layer %d: %d rows, %d routings; want 40, 80", l, st.Rows[l], n)
		}
	}
	es, err := RoutedExperts(context.Background(), m, data, 2, ExpertREAP)
	if err != nil {
		t.Fatal(err)
	}
	if err := es.Check(m.Arch()); err != nil {
		t.Fatal(err)
	}
	s, err := Compute(context.Background(), m, data, Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Heads[0]) != 4 || s.Neurons[0] != nil {
		t.Errorf("Compute on gpt-oss: heads %v, neurons %v; want 4 and none", s.Heads[0], s.Neurons[0])
	}
}
