package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
)

// FuzzLoadConfig loads a fixed checkpoint with fuzzed config.json files:
// Load must return an error or a model that runs, never panic or allocate
// what the tensors do not hold.
func FuzzLoadConfig(f *testing.F) {
	m, err := New(uniformArch(), 1)
	if err != nil {
		f.Fatal(err)
	}
	src := filepath.Join(f.TempDir(), "model")
	if err := m.Save(src, checkpoint.F32); err != nil {
		f.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(src, checkpoint.SingleFileName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cfg)
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":16,"intermediate_size":24,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,"num_hidden_layers":2,"vocab_size":32,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":16}}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":16,"intermediate_size":24,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,"num_hidden_layers":2,"vocab_size":1000000000}`))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":16,"intermediate_size":24,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":4,"num_hidden_layers":2,"vocab_size":32}`))
	f.Fuzz(func(t *testing.T, config []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, checkpoint.SingleFileName), weights, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			return
		}
		if got.NumParams() != m.NumParams() {
			t.Fatalf("loaded %d parameters from a file holding %d", got.NumParams(), m.NumParams())
		}
		if _, err := got.Forward([]int32{1, 2, 3}, 1, 3); err != nil {
			t.Fatalf("loaded model does not run: %v", err)
		}
		c := got.NewCache(4)
		if _, err := got.Step([]*Cache{c}, [][]int32{{1, 2}}, false); err != nil {
			t.Fatalf("loaded model does not decode: %v", err)
		}
	})
}
