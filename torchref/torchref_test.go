package torchref

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// python is the interpreter Debian's python3-torch is installed for.
const python = "/usr/bin/python3"

// needTorch skips the test without /usr/bin/python3 or its torch.
func needTorch(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s: install Debian's python3-torch (apt-get install python3-torch) to run the reference trainer's tests", python)
	}
	if out, err := exec.Command(python, "-c", "import torch").CombinedOutput(); err != nil {
		t.Skipf("%s cannot import torch (%v: %s): install Debian's python3-torch to run the reference trainer's tests", python, err, bytes.TrimSpace(out))
	}
}

// trainer writes the embedded trainer into a fresh directory and returns
// the path of its entry point.
func trainer(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, filepath.FromSlash(Entry))
}

// pyCmd is a command running the trainer with one thread (the machine is
// shared, and a fixed thread count keeps runs bit-identical).
func pyCmd(entry string, args ...string) *exec.Cmd {
	cmd := exec.Command(python, append([]string{entry}, args...)...)
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1")
	return cmd
}

func runPy(t testing.TB, entry string, args ...string) {
	t.Helper()
	if out, err := pyCmd(entry, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", entry, args, err, out)
	}
}

// writeShard writes tokens as a nanoGPT shard (256 int32 header words:
// magic 278895051, version 1, count, 2 bytes per token; then uint16
// tokens), as job/CONTRACT.md has it.
func writeShard(t testing.TB, path string, tokens []int32) {
	t.Helper()
	var b bytes.Buffer
	head := make([]int32, 256)
	head[0], head[1], head[2], head[3] = 278895051, 1, int32(len(tokens)), 2
	binary.Write(&b, binary.LittleEndian, head)
	for _, v := range tokens {
		binary.Write(&b, binary.LittleEndian, uint16(v))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

func readTensor(t testing.TB, path, name string) []float32 {
	t.Helper()
	r, err := checkpoint.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v, err := r.Float32(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// relErr is max |a−b| over max |b|.
func relErr(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	return d / m
}

func seq(lo, n, step int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = lo + i*step
	}
	return s
}

// deciChild prunes the embedded parent into a per-layer DeciLM child:
// hidden 192 → 128, and in its layers removed attention, removed MLP, a
// removed layer, half the neurons. (DeciLM has one global query-head count,
// so a pruned Llama child keeps its KV groups.)
func deciChild(t testing.TB) string {
	t.Helper()
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1, Hidden: seq(0, 128, 1), OutputFormat: prune.FormatDeciLM, Layers: []prune.LayerPlan{
		{Layer: 1, RemoveAttention: true},
		{Layer: 2, RemoveMLP: true},
		{Layer: 3, Remove: true},
		{Layer: 4, Neurons: seq(0, 256, 2)},
	}}
	out := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLogitsParity: the reference model's float32 logits equal the native
// engine's on the embedded parent, a per-layer DeciLM child of it, and
// random models of the features the parent lacks (familyConfigs); one
// Python process computes them all.
func TestLogitsParity(t *testing.T) {
	needTorch(t)
	entry := trainer(t)
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"parent", "decilm-child"}
	dirs := []string{pdir, deciChild(t)}
	for _, name := range slices.Sorted(maps.Keys(familyConfigs)) {
		names = append(names, name)
		dirs = append(dirs, randomModel(t, familyConfigs[name], 11))
	}
	// 48 positions: beyond llama3-rope's original 32. Token ids below
	// every model's vocabulary (300).
	const B, T = 2, 48
	tokens := randomTokens(B*T, 300, 7)
	tmp := t.TempDir()
	shard, out := filepath.Join(tmp, "tokens.bin"), filepath.Join(tmp, "logits.safetensors")
	writeShard(t, shard, tokens)
	runPy(t, entry, append([]string{"logits", strconv.Itoa(B), strconv.Itoa(T), shard, out}, dirs...)...)
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			m, err := engine.Load(dirs[i])
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.Forward(tokens, B, T)
			if err != nil {
				t.Fatal(err)
			}
			got := readTensor(t, out, fmt.Sprintf("logits.%d", i))
			if len(got) != len(want) {
				t.Fatalf("torch gave %d logits, the engine %d", len(got), len(want))
			}
			e := relErr(got, want)
			t.Logf("%s: max |torch − native| / max |native| = %.3g over %d logits", name, e, len(want))
			if e > 1e-4 {
				t.Errorf("logits differ by %.3g relative (want ≤ 1e-4)", e)
			}
		})
	}
}

// familyConfigs are small random models of the features the parent lacks:
// qk-norm (Qwen3), q/k/v biases (Qwen2), llama3 RoPE scaling with an
// untied head, and DeciLM layers with different KV groups and no_op blocks.
var familyConfigs = map[string]string{
	// gpt-oss (gptoss_test.go): sinks, a window of 5 below T, YaRN, the
	// clamp reached, top-k-then-softmax routing; the engine runs it
	// forward only.
	"gpt-oss": gptOssConfig,
	"qwen3": `{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":300,
		"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":false,"max_position_embeddings":512}`,
	"qwen2": `{"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,"vocab_size":300,
		"rms_norm_eps":1e-6,"rope_theta":10000,"tie_word_embeddings":true,"max_position_embeddings":512}`,
	"llama3-rope": `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":300,"rms_norm_eps":1e-5,
		"rope_theta":500000,"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,
		"original_max_position_embeddings":32},"tie_word_embeddings":false,"max_position_embeddings":512}`,
	"decilm": `{"architectures":["DeciLMForCausalLM"],"model_type":"nemotron-nas","hidden_size":128,"num_attention_heads":4,
		"head_dim":32,"vocab_size":300,"rms_norm_eps":1e-5,"rope_theta":10000,"tie_word_embeddings":false,
		"max_position_embeddings":512,"hidden_act":"silu","block_configs":[
		{"attention":{"n_heads_in_group":2},"ffn":{"ffn_mult":3}},
		{"attention":{"n_heads_in_group":4},"ffn":{"ffn_mult":6}},
		{"attention":{"no_op":true},"ffn":{"ffn_mult":3}},
		{"attention":{"n_heads_in_group":1},"ffn":{"no_op":true}}]}`,
	// A hybrid: Mamba2 mixers (grouped heads, conv bias), attention
	// without RoPE and relu² MLPs (acmamba.py).
	"nemotron-h": `{"architectures":["NemotronHForCausalLM"],"model_type":"nemotron_h","hidden_size":64,
		"hybrid_override_pattern":"M*-M-*","num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
		"intermediate_size":96,"mlp_hidden_act":"relu2","mamba_num_heads":8,"mamba_head_dim":8,"ssm_state_size":16,
		"n_groups":2,"conv_kernel":4,"use_conv_bias":true,"vocab_size":300,"layer_norm_epsilon":1e-5,
		"tie_word_embeddings":false,"max_position_embeddings":512}`,
	// Mixture of experts (acmoe.py): Qwen3-MoE with a dense layer
	// (mlp_only_layers) and its default norm_topk_prob false; Mixtral,
	// whose router always renormalises the top-k weights.
	"qwen3-moe": `{"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":64,
		"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":300,
		"intermediate_size":96,"num_experts":6,"num_experts_per_tok":2,"moe_intermediate_size":32,"mlp_only_layers":[1],
		"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":false,"max_position_embeddings":512}`,
	"mixtral": `{"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":64,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":300,
		"intermediate_size":48,"num_local_experts":4,"num_experts_per_tok":2,
		"rms_norm_eps":1e-5,"rope_theta":1000000,"tie_word_embeddings":false,"max_position_embeddings":512}`,
}

// randomModel writes a checkpoint of config cfg with every parameter
// (norm weights and biases included) drawn at random, in float32.
func randomModel(t testing.TB, cfg string, seed uint64) string {
	t.Helper()
	a, err := architecture.FromConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.New(a, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	for _, s := range m.Specs() {
		v := m.Tensor(s.Name)
		for i := range v {
			switch {
			case len(s.Shape) == 1 && strings.HasSuffix(s.Name, "norm.weight"):
				v[i] = float32(1 + 0.3*r.NormFloat64())
			case len(s.Shape) == 1:
				v[i] = float32(0.1 * r.NormFloat64())
			default:
				v[i] = float32(0.08 * r.NormFloat64())
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWrite: Write lays out the trainer's files, byte for byte the
// embedded ones, with the entry point among them; no torch needed.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"trainer/autocompress_torch.py", "trainer/acmodel.py", "trainer/acio.py"} {
		want, err := files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: not written as embedded (%v)", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(Entry))); err != nil {
		t.Errorf("entry point %s: %v", Entry, err)
	}
	// Writing again over a job directory replaces the files.
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(Entry)), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(Entry))); string(b) == "stale" {
		t.Error("a second Write left the stale entry point")
	}
}
