// Package testutil generates synthetic safetensors checkpoints for tests:
// given tensor specs it writes deterministic pseudo-random values, in one
// file or sharded into N files with an index, plus any extra files such as
// config.json. The values depend only on the tensor's name, dtype, shape and
// the seed, so a test can recompute what any tensor holds (Data, Values)
// without reading the file back.
package testutil

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
)

// Options controls Write.
type Options struct {
	// Seed selects the pseudo-random values (0 is a valid seed).
	Seed uint64
	// Shards is the number of files; 0 or 1 writes model.safetensors,
	// more writes model-0000i-of-0000N.safetensors and the index. It may
	// not exceed the number of tensors.
	Shards int
	// Metadata goes into every file's __metadata__; nil means {"format": "pt"}.
	Metadata map[string]string
	// Files are extra files to write beside the weights (name → contents),
	// e.g. "config.json".
	Files map[string][]byte
}

// Write writes a checkpoint of the given tensors into dir (created if
// needed). Tensor i holds Data(specs[i], opt.Seed).
func Write(dir string, specs []checkpoint.TensorSpec, opt Options) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := max(opt.Shards, 1)
	if n > len(specs) && len(specs) > 0 {
		return fmt.Errorf("testutil: %d shards requested for %d tensors", n, len(specs))
	}
	plan := checkpoint.ShardPlan{}
	for i := range n {
		plan.Files = append(plan.Files, checkpoint.ShardName(i, n))
		plan.Tensors = append(plan.Tensors, specs[i*len(specs)/n:(i+1)*len(specs)/n])
	}
	md := opt.Metadata
	if md == nil {
		md = map[string]string{"format": "pt"}
	}
	w, err := checkpoint.CreateSharded(dir, plan, md)
	if err != nil {
		return err
	}
	for _, s := range specs {
		if err := w.WriteTensor(s.Name, Data(s, opt.Seed)); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	for name, b := range opt.Files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil { //output:inside (test fixtures in a caller-owned directory)
			return err
		}
	}
	return nil
}

// WriteTB writes a checkpoint into a new temporary directory of the test and
// returns the directory; it fails the test on error.
func WriteTB(tb testing.TB, specs []checkpoint.TensorSpec, opt Options) string {
	tb.Helper()
	dir := tb.TempDir()
	if err := Write(dir, specs, opt); err != nil {
		tb.Fatalf("testutil.Write: %v", err)
	}
	return dir
}

// rng is splitmix64.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func stream(s checkpoint.TensorSpec, seed uint64) rng {
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	h.Write([]byte{0})
	h.Write([]byte(s.DType))
	return rng(h.Sum64() ^ seed*0x2545f4914f6cdd1d)
}

// Float32s returns the float32 values behind a float tensor before it is
// encoded in its dtype: uniform in [-1, 1).
func Float32s(s checkpoint.TensorSpec, seed uint64) []float32 {
	r := stream(s, seed)
	out := make([]float32, s.NumElements())
	for i := range out {
		out[i] = float32(int64(r.next()>>40)-(1<<23)) / (1 << 23)
	}
	return out
}

// Data returns the exact bytes Write stores for s. Float dtypes (F32, F16,
// BF16, F64) hold Float32s encoded with rounding to nearest even; F8 types
// hold random finite codes; integer types random bits; BOOL 0 or 1.
func Data(s checkpoint.TensorSpec, seed uint64) []byte {
	switch s.DType {
	case checkpoint.F32, checkpoint.F16, checkpoint.BF16:
		b, _ := checkpoint.FromFloat32(s.DType, Float32s(s, seed))
		return b
	case checkpoint.F64:
		f := Float32s(s, seed)
		b := make([]byte, 8*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
		return b
	}
	r := stream(s, seed)
	b := make([]byte, s.Size())
	for i := range b {
		v := byte(r.next())
		switch s.DType {
		case checkpoint.Bool:
			v &= 1
		case checkpoint.F8E4M3:
			if v&0x7f == 0x7f { // NaN code
				v ^= 1
			}
		case checkpoint.F8E5M2:
			if v&0x7c == 0x7c { // Inf/NaN codes
				v &^= 0x04
			}
		}
		b[i] = v
	}
	return b
}

// Values returns what Reader.Float32 must return for s written by Write
// (float dtypes only).
func Values(s checkpoint.TensorSpec, seed uint64) ([]float32, error) {
	return checkpoint.ToFloat32(s.DType, Data(s, seed))
}

// Llama describes a Llama-family model shape for LlamaSpecs and LlamaConfig.
type Llama struct {
	Vocab, Hidden, Intermediate, Heads, KVHeads, HeadDim, Layers int
	Tied                                                         bool // tie_word_embeddings: no lm_head.weight
}

// LlamaSpecs returns the tensors of a HuggingFace LlamaForCausalLM in the
// order transformers saves them.
func LlamaSpecs(m Llama, dt checkpoint.DType) []checkpoint.TensorSpec {
	hd := m.HeadDim
	if hd == 0 {
		hd = m.Hidden / m.Heads
	}
	H, I := int64(m.Hidden), int64(m.Intermediate)
	q, kv := int64(m.Heads*hd), int64(m.KVHeads*hd)
	specs := []checkpoint.TensorSpec{{Name: "model.embed_tokens.weight", DType: dt, Shape: []int64{int64(m.Vocab), H}}}
	for l := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		specs = append(specs,
			checkpoint.TensorSpec{Name: p + "input_layernorm.weight", DType: dt, Shape: []int64{H}},
			checkpoint.TensorSpec{Name: p + "self_attn.q_proj.weight", DType: dt, Shape: []int64{q, H}},
			checkpoint.TensorSpec{Name: p + "self_attn.k_proj.weight", DType: dt, Shape: []int64{kv, H}},
			checkpoint.TensorSpec{Name: p + "self_attn.v_proj.weight", DType: dt, Shape: []int64{kv, H}},
			checkpoint.TensorSpec{Name: p + "self_attn.o_proj.weight", DType: dt, Shape: []int64{H, q}},
			checkpoint.TensorSpec{Name: p + "post_attention_layernorm.weight", DType: dt, Shape: []int64{H}},
			checkpoint.TensorSpec{Name: p + "mlp.gate_proj.weight", DType: dt, Shape: []int64{I, H}},
			checkpoint.TensorSpec{Name: p + "mlp.up_proj.weight", DType: dt, Shape: []int64{I, H}},
			checkpoint.TensorSpec{Name: p + "mlp.down_proj.weight", DType: dt, Shape: []int64{H, I}},
		)
	}
	specs = append(specs, checkpoint.TensorSpec{Name: "model.norm.weight", DType: dt, Shape: []int64{H}})
	if !m.Tied {
		specs = append(specs, checkpoint.TensorSpec{Name: "lm_head.weight", DType: dt, Shape: []int64{int64(m.Vocab), H}})
	}
	return specs
}

// LlamaConfig returns a config.json for m with torch_dtype set from dt.
func LlamaConfig(m Llama, dt checkpoint.DType) []byte {
	hd := m.HeadDim
	if hd == 0 {
		hd = m.Hidden / m.Heads
	}
	cfg := map[string]any{
		"architectures":           []string{"LlamaForCausalLM"},
		"model_type":              "llama",
		"vocab_size":              m.Vocab,
		"hidden_size":             m.Hidden,
		"intermediate_size":       m.Intermediate,
		"num_attention_heads":     m.Heads,
		"num_key_value_heads":     m.KVHeads,
		"head_dim":                hd,
		"num_hidden_layers":       m.Layers,
		"max_position_embeddings": 2048,
		"rms_norm_eps":            1e-5,
		"rope_theta":              10000.0,
		"hidden_act":              "silu",
		"tie_word_embeddings":     m.Tied,
		"torch_dtype":             dt.TorchName(),
		"bos_token_id":            1,
		"eos_token_id":            2,
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n')
}

// TinyQwen3MoEConfig is a Qwen3-MoE config.json of two layers of 8 routed
// experts (top-2, norm_topk_prob) at the embedded parent's 4,096-id
// vocabulary, so that the parent's tokenizer reads a test's text: the MoE
// parent of the distill, search/trained and pipeline tests.
const TinyQwen3MoEConfig = `{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
	"vocab_size": 4096, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
	"num_key_value_heads": 1, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
	"moe_intermediate_size": 64, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
	"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": true,
	"max_position_embeddings": 512, "eos_token_id": 4095, "bos_token_id": 4095}`
