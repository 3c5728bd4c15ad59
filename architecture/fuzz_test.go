package architecture

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// FuzzFromConfig feeds arbitrary bytes to FromConfig. Seeds: the hand-written
// configs in testdata/seeds and, when present, every real config of the
// shared folder. Whatever is accepted must validate, list tensors whose
// element count is Params().Total, and write back (in the format FormatFor
// picks) to a config that reads back to the same model. Only DeciLM configs
// may be refused, with a *FormatError that says why (e.g. a per-layer
// intermediate_size that is not a multiple of 256, which engines reading
// ffn_mult cannot load).
func FuzzFromConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	if dir, ok := shareddata.Path("configs"); ok {
		real, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		seeds = append(seeds, real...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":-Infinity}`))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_attention_heads":1,"num_hidden_layers":1,"vocab_size":1,"rope_theta":NaN}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":4194304,"intermediate_size":4194304,"num_attention_heads":1,"num_hidden_layers":4096,"vocab_size":16777216}`))
	f.Add([]byte(`{"architectures":["MistralForCausalLM"],"hidden_size":1,"intermediate_size":1,"num_attention_heads":1,"num_hidden_layers":1,"vocab_size":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := FromConfig(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted but invalid: %v", err)
		}
		var sum int64
		for _, s := range m.Tensors() {
			sum += s.Numel()
		}
		p := m.Params()
		if sum != p.Total || p.Active > p.Total || p.Active <= 0 {
			t.Fatalf("tensors hold %d, Params %+v", sum, p)
		}
		out, err := m.Config(ConfigOptions{})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Config failed without a FormatError: %v", err)
			}
			if m.Arch != DeciLM {
				// Whatever a native config expresses, it can write back.
				t.Fatalf("native config read but not written: %v", err)
			}
			return
		}
		back, err := FromConfig(out)
		if err != nil {
			t.Fatalf("written config does not read back: %v\n%s", err, out)
		}
		if back.Arch == m.Arch && !sameModel(m, back) {
			t.Fatalf("round trip changed the model: %s\n%s", diffModel(m, back), out)
		}
	})
}

// TestSeedsRoundTrip requires the hand-written seeds to be accepted and to
// round-trip (no FormatError), so the fuzz corpus starts from good inputs.
func TestSeedsRoundTrip(t *testing.T) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	if len(seeds) < 5 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	for _, s := range seeds {
		t.Run(filepath.Base(s), func(t *testing.T) {
			m, err := Load(s)
			if err != nil {
				t.Fatal(err)
			}
			back, _ := roundTrip(t, m, ConfigOptions{})
			if !sameModel(m, back) {
				t.Errorf("changed: %s", diffModel(m, back))
			}
		})
	}
}

// FuzzConfigFields builds structurally valid configs of every supported
// architecture from fuzzed numbers and a fuzzed hybrid pattern, reaching the
// shape logic that byte-level mutation of JSON rarely gets to. The
// properties are those of FuzzFromConfig.
func FuzzConfigFields(f *testing.F) {
	f.Add(uint8(0), uint16(64), uint8(8), uint8(4), uint8(2), uint16(128), uint8(4), uint8(2), "M*-E", false)
	f.Add(uint8(6), uint16(256), uint8(4), uint8(2), uint8(5), uint16(512), uint8(8), uint8(1), "ME*-M", true)
	f.Add(uint8(7), uint16(512), uint8(8), uint8(2), uint8(3), uint16(768), uint8(2), uint8(2), "", true)
	f.Fuzz(func(t *testing.T, archIdx uint8, hidden uint16, heads, kv, layers uint8, width uint16, experts, topK uint8, pattern string, flag bool) {
		archs := Supported()
		arch := archs[int(archIdx)%len(archs)]
		if len(pattern) > 64 {
			pattern = pattern[:64]
		}
		cfg := map[string]any{
			"architectures": []any{arch}, "hidden_size": int(hidden), "vocab_size": 97, "num_attention_heads": int(heads),
			"num_key_value_heads": int(kv), "num_hidden_layers": int(layers), "intermediate_size": int(width),
			"moe_intermediate_size": int(width), "num_experts": int(experts), "num_local_experts": int(experts),
			"n_routed_experts": int(experts), "num_experts_per_tok": int(topK), "tie_word_embeddings": flag,
			"hybrid_override_pattern": pattern, "mamba_num_heads": int(heads), "mamba_head_dim": 8, "n_groups": int(kv) + 1,
			"use_sliding_window": flag, "sliding_window": int(width), "max_window_layers": int(layers) / 2,
			"moe_shared_expert_intermediate_size": int(width) / 2,
		}
		if flag {
			cfg["head_dim"] = 16
			cfg["moe_latent_size"] = int(hidden) / 2
			cfg["mlp_only_layers"] = []any{0}
		}
		if arch == DeciLM {
			var blocks []any
			for i := 0; i < int(layers)%8; i++ {
				a := map[string]any{"n_heads_in_group": int(kv) + i%2, "no_op": i%3 == 2}
				x := map[string]any{"ffn_mult": float64(width%64) / 8, "no_op": i%4 == 3}
				blocks = append(blocks, map[string]any{"attention": a, "ffn": x})
			}
			cfg["block_configs"] = blocks
			delete(cfg, "num_hidden_layers")
		}
		data, err := encodeJSON(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromConfig(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted but invalid: %v", err)
		}
		p := m.Params()
		var sum int64
		for _, s := range m.Tensors() {
			sum += s.Numel()
		}
		if sum != p.Total || p.Active > p.Total || p.Active <= 0 {
			t.Fatalf("tensors hold %d, Params %+v", sum, p)
		}
		out, err := m.Config(ConfigOptions{})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Config failed without a FormatError: %v", err)
			}
			if m.Arch != DeciLM {
				// Whatever a native config expresses, it can write back.
				t.Fatalf("native config read but not written: %v", err)
			}
			return
		}
		back, err := FromConfig(out)
		if err != nil {
			t.Fatalf("written config does not read back: %v\n%s", err, out)
		}
		if !sameModel(m, back) {
			t.Fatalf("round trip changed the model: %s\n%s", diffModel(m, back), out)
		}
	})
}
