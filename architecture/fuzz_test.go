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
	// Negative and huge counts (issue 17, class 5): an error, never a panic.
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":-4,"vocab_size":97}`))
	f.Add([]byte(`{"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":97,"max_position_embeddings":-5,"bos_token_id":-7,"sliding_window":9007199254740992}`))
	f.Add([]byte(`{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"hybrid_override_pattern":"M","mamba_num_heads":4294967296,"mamba_head_dim":4294967296,"vocab_size":97}`))
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
// shape logic that byte-level mutation of JSON rarely gets to. The numbers
// are signed and wide, so negative and huge counts (num_hidden_layers -4,
// max_position_embeddings past any model) reach the readers: whatever they
// are, FromConfig returns an error or a valid model, never panics. The
// properties are those of FuzzFromConfig.
func FuzzConfigFields(f *testing.F) {
	f.Add(uint8(0), int32(64), int16(8), int16(4), int16(2), int32(128), int16(4), int16(2), int64(4096), "M*-E", false)
	f.Add(uint8(6), int32(256), int16(4), int16(2), int16(5), int32(512), int16(8), int16(1), int64(131072), "ME*-M", true)
	f.Add(uint8(7), int32(512), int16(8), int16(2), int16(3), int32(768), int16(2), int16(2), int64(0), "", true)
	f.Add(uint8(3), int32(64), int16(8), int16(4), int16(-4), int32(128), int16(4), int16(2), int64(8192), "", false)
	f.Add(uint8(2), int32(64), int16(8), int16(4), int16(2), int32(128), int16(4), int16(2), int64(-5), "", false)
	f.Add(uint8(5), int32(-64), int16(-8), int16(-4), int16(2), int32(-128), int16(-4), int16(-2), int64(1)<<62, "M*", true)
	f.Fuzz(func(t *testing.T, archIdx uint8, hidden int32, heads, kv, layers int16, width int32, experts, topK int16, positions int64, pattern string, flag bool) {
		archs := Supported()
		arch := archs[int(archIdx)%len(archs)]
		if len(pattern) > 64 {
			pattern = pattern[:64]
		}
		// The model must stay small enough to list its tensors quickly.
		if int64(hidden)*int64(width) > 1<<24 || int64(hidden)*int64(layers) > 1<<20 || int64(width)*int64(experts) > 1<<20 {
			return
		}
		cfg := map[string]any{
			"architectures": []any{arch}, "hidden_size": int(hidden), "vocab_size": 97, "num_attention_heads": int(heads),
			"num_key_value_heads": int(kv), "num_hidden_layers": int(layers), "intermediate_size": int(width),
			"moe_intermediate_size": int(width), "num_experts": int(experts), "num_local_experts": int(experts),
			"n_routed_experts": int(experts), "num_experts_per_tok": int(topK), "tie_word_embeddings": flag,
			"hybrid_override_pattern": pattern, "mamba_num_heads": int(heads), "mamba_head_dim": 8, "n_groups": int(kv) + 1,
			"use_sliding_window": flag, "sliding_window": int(width), "max_window_layers": int(layers) / 2,
			"moe_shared_expert_intermediate_size": int(width) / 2, "max_position_embeddings": positions,
			"bos_token_id": positions % 200, "eos_token_id": []any{int(topK), positions % 97},
		}
		if flag {
			cfg["head_dim"] = 16
			cfg["moe_latent_size"] = int(hidden) / 2
			cfg["mlp_only_layers"] = []any{0}
			cfg["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": float64(topK), "original_max_position_embeddings": positions / 16}
			cfg["chunk_size"] = int(kv)
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
