package prune

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

// synth is a synthetic test model: a config and how to shard it.
type synth struct {
	name   string
	cfg    map[string]any
	dtype  checkpoint.DType
	shards int
}

func llamaCfg(tied bool) map[string]any {
	return map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"vocab_size": 96, "hidden_size": 32, "intermediate_size": 48,
		"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 4,
		"num_hidden_layers": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": tied,
		"torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2,
	}
}

func qwen3Cfg() map[string]any {
	c := llamaCfg(false)
	c["architectures"] = []string{"Qwen3ForCausalLM"}
	c["model_type"] = "qwen3"
	c["head_dim"] = 8 // ≠ hidden/heads, as in real Qwen3
	return c
}

func qwen2Cfg() map[string]any {
	c := llamaCfg(true)
	c["architectures"] = []string{"Qwen2ForCausalLM"}
	c["model_type"] = "qwen2"
	c["num_key_value_heads"] = 2
	return c
}

func nemotronHCfg() map[string]any {
	return map[string]any{
		"architectures": []string{"NemotronHForCausalLM"}, "model_type": "nemotron_h",
		"vocab_size": 80, "hidden_size": 32, "intermediate_size": 40,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "attention_head_dim": 8,
		"hybrid_override_pattern": "M*M-M-", "num_hidden_layers": 6,
		"mamba_num_heads": 8, "mamba_head_dim": 4, "n_groups": 2, "ssm_state_size": 4, "expand": 1,
		"conv_kernel": 3, "use_conv_bias": true, "use_bias": false, "chunk_size": 16,
		"mlp_hidden_act": "relu2", "mlp_bias": false, "attention_bias": false,
		"layer_norm_epsilon": 1e-5, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
		"torch_dtype": "bfloat16", "max_position_embeddings": 256,
		"time_step_limit": []any{0.0, "INF"},
	}
}

func mixtralCfg() map[string]any {
	c := llamaCfg(false)
	c["architectures"] = []string{"MixtralForCausalLM"}
	c["model_type"] = "mixtral"
	c["num_local_experts"] = 3
	c["num_experts_per_tok"] = 2
	return c
}

func qwen3MoECfg() map[string]any {
	c := qwen3Cfg()
	c["architectures"] = []string{"Qwen3MoeForCausalLM"}
	c["model_type"] = "qwen3_moe"
	c["num_experts"] = 3
	c["num_experts_per_tok"] = 2
	c["moe_intermediate_size"] = 16
	c["decoder_sparse_step"] = 1
	c["mlp_only_layers"] = []int{}
	return c
}

func synths() []synth {
	return []synth{
		{name: "llama-gqa", cfg: llamaCfg(false), dtype: checkpoint.BF16},
		{name: "llama-tied", cfg: llamaCfg(true), dtype: checkpoint.F32},
		{name: "llama-sharded", cfg: llamaCfg(false), dtype: checkpoint.BF16, shards: 3},
		{name: "qwen3-qknorm", cfg: qwen3Cfg(), dtype: checkpoint.BF16},
		{name: "qwen2-bias", cfg: qwen2Cfg(), dtype: checkpoint.F16},
		{name: "nemotron-h", cfg: nemotronHCfg(), dtype: checkpoint.BF16, shards: 2},
		{name: "mixtral", cfg: mixtralCfg(), dtype: checkpoint.BF16},
		{name: "qwen3-moe", cfg: qwen3MoECfg(), dtype: checkpoint.BF16},
	}
}

// configBytes encodes a test config; "INF" strings become bare Infinity.
func configBytes(t testing.TB, cfg map[string]any) []byte {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(b), `"INF"`, "Infinity"))
}

// writeSynth writes the synthetic checkpoint of s into a temp dir and
// returns the dir and its model.
func writeSynth(t testing.TB, s synth) (string, *architecture.Model) {
	t.Helper()
	cfg := configBytes(t, s.cfg)
	m, err := architecture.FromConfig(cfg)
	if err != nil {
		t.Fatalf("%s: config: %v", s.name, err)
	}
	var specs []checkpoint.TensorSpec
	for _, ts := range m.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: ts.Name, DType: s.dtype, Shape: ts.Shape})
	}
	dir := filepath.Join(t.TempDir(), s.name)
	err = testutil.Write(dir, specs, testutil.Options{Seed: 7, Shards: s.shards, Files: map[string][]byte{
		"config.json":            cfg,
		"tokenizer.json":         []byte(`{"model":{"type":"BPE"}}`),
		"generation_config.json": []byte(`{"bos_token_id":1}`),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// runPrune prunes dir with plan into a fresh output directory.
func runPrune(t testing.TB, dir string, plan *Plan, engine string) (string, *Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "child")
	res, err := Prune(context.Background(), Options{Model: dir, Plan: plan, Out: out, Engine: engine})
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	return out, res
}

// readAll returns every tensor of a checkpoint as float32 with its shape.
func readAll(t testing.TB, dir string) (map[string][]float32, map[string][]int64) {
	t.Helper()
	r, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	vals := map[string][]float32{}
	shapes := map[string][]int64{}
	for _, ti := range r.Tensors() {
		v, err := r.Float32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		vals[ti.Name] = v
		shapes[ti.Name] = ti.Shape
	}
	return vals, shapes
}

// refTake is the test's own slicing: out[i][j] = in[rows[i]][cols[j]] over
// a tensor viewed as [d0, d1, rest], with -1 giving 0; nil keeps all.
func refTake(in []float32, shape []int64, rows, cols []int) ([]float32, []int64) {
	d0 := int(shape[0])
	d1, rest := 1, 1
	if len(shape) >= 2 {
		d1 = int(shape[1])
		for _, d := range shape[2:] {
			rest *= int(d)
		}
	}
	if rows == nil {
		for i := 0; i < d0; i++ {
			rows = append(rows, i)
		}
	}
	if cols == nil {
		for j := 0; j < d1; j++ {
			cols = append(cols, j)
		}
	}
	var out []float32
	for _, r := range rows {
		for _, c := range cols {
			for k := 0; k < rest; k++ {
				if r < 0 || c < 0 {
					out = append(out, 0)
				} else {
					out = append(out, in[(r*d1+c)*rest+k])
				}
			}
		}
	}
	shp := append([]int64(nil), shape...)
	shp[0] = int64(len(rows))
	if len(shp) >= 2 {
		shp[1] = int64(len(cols))
	}
	return out, shp
}

func equalF32(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if a[i] != b[i] {
			return i, false
		}
	}
	return 0, true
}

func writePlanFile(t testing.TB, p *Plan) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func ints(a ...int) []int { return a }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
