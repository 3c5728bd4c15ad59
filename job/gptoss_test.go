//go:build unix

package job

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/prune"
)

// gptOssParentConfig is a small gpt-oss with the embedded parent's
// vocabulary (its tokenizer is copied in): a sliding-window and a full
// layer, sinks, biases, YaRN, 6 stacked experts with top-2.
const gptOssParentConfig = `{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 4096,
	"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
	"intermediate_size": 12, "num_local_experts": 6, "num_experts_per_tok": 2, "sliding_window": 8,
	"layer_types": ["sliding_attention", "full_attention"], "attention_bias": true, "rms_norm_eps": 1e-5,
	"rope_theta": 150000, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
	"truncate": false, "original_max_position_embeddings": 64}, "max_position_embeddings": 256,
	"tie_word_embeddings": false, "hidden_act": "silu"}`

// randomGptOss writes a bf16 checkpoint of gptOssParentConfig with the
// tensors package architecture lists, drawn at random (norm weights near
// 1, vectors N(0, 0.1²), matrices N(0, 0.08²)), and the embedded parent's
// tokenizer files.
func randomGptOss(t *testing.T) string {
	t.Helper()
	a, err := architecture.FromConfig([]byte(gptOssParentConfig))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gpt-oss")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(gptOssParentConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		if err := copyFile(filepath.Join(parentDir(t), n), filepath.Join(dir, n)); err != nil && !(errors.Is(err, os.ErrNotExist) && n != "tokenizer.json") {
			t.Fatal(err)
		}
	}
	var specs []checkpoint.TensorSpec
	for _, s := range a.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: checkpoint.BF16, Shape: s.Shape})
	}
	w, err := checkpoint.Create(filepath.Join(dir, "model.safetensors"), specs, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 3))
	for _, s := range specs {
		v := make([]float32, s.NumElements())
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
		if err := w.WriteFloat32(s.Name, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunGptOssTorch: gpt-oss through the Go side end to end: a random
// bf16 gpt-oss parent pruned by package prune to 5 of its 6 stacked experts,
// distilled by Run (Emit writes the contract with ShapeOf's topk_softmax
// shape, the trainer checks it against config.json, Launch runs 2 local
// gloo ranks, Ingest checks the checkpoint, the output is placed): the job
// ends done after its 3 steps on one repeated batch, the KD loss falls, and
// the placed checkpoint, in bf16, has the child's architecture (5
// experts, top-2, sinks, the windows); Ingest refuses a checkpoint
// missing a tensor.
func TestRunGptOssTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 2-rank torch distillation")
	}
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skip("no torch for /usr/bin/python3 (Debian: apt-get install python3-torch)")
	}
	parent := randomGptOss(t)
	plan := &prune.Plan{Version: 1}
	for l := range 2 {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Experts: []int{0, 1, 2, 4, 5}})
	}
	student := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: parent, Plan: plan, Out: student}); err != nil {
		t.Fatalf("pruning the gpt-oss parent: %v", err)
	}
	// One batch of token ids (4 rows of seq_len+1), so that every step
	// sees the same rows and the KD loss measures learning, not the batch.
	ids := filepath.Join(t.TempDir(), "batch.ids")
	var lines []string
	r := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		var row []string
		for range 33 {
			row = append(row, strconv.Itoa(r.IntN(4096)))
		}
		lines = append(lines, strings.Join(row, " "))
	}
	if err := os.WriteFile(ids, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "distilled")
	c := RunConfig{
		Emit: EmitConfig{
			Kind: Distill, Engine: "torch", Dir: filepath.Join(t.TempDir(), "job"), Teacher: parent, Student: student,
			Data: []string{ids}, EvalData: []string{"parent:test"},
			Recipe:    Recipe{Tokens: 3 * 4 * 32, SeqLen: 32, Batch: 4, LR: 3e-3, Seed: 3, EvalRows: 8, Temperature: 1, KDWeight: 1, CEWeight: 0.1},
			WorldSize: 2, CheckpointEvery: 2,
		},
		Launch: LaunchConfig{Mode: LaunchLocal, Python: python, Poll: 20 * time.Millisecond},
		Out:    out,
	}
	res, err := Run(context.Background(), c)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Emit.Dir, LaunchLog))
		t.Fatalf("%v\n%s", err, log)
	}
	// The training shard holds the one batch, step after step.
	train, err := ReadShardFile(filepath.Join(res.Emitted.Dir, filepath.FromSlash(res.Emitted.Contract.Data.Train[0])))
	if err != nil {
		t.Fatal(err)
	}
	if len(train) != 3*4*33 {
		t.Fatalf("training shard of %d tokens: want 3 steps of 4 rows of 33", len(train))
	}
	step := func(i int) []string { // step i's rows, sorted (each epoch has its own order)
		var rows []string
		for j := range 4 {
			rows = append(rows, fmt.Sprint(train[(i*4+j)*33:(i*4+j+1)*33]))
		}
		slices.Sort(rows)
		return rows
	}
	if !slices.Equal(step(0), step(1)) || !slices.Equal(step(0), step(2)) {
		t.Fatal("the steps do not all take the same 4 rows")
	}
	l := res.Launched.Result
	if l == nil || l.Status != StatusDone || l.Steps != 3 || len(l.Losses) != 3 {
		t.Fatalf("result %+v", l)
	}
	if l.Loss == nil {
		t.Fatal("no held-out loss in the result")
	}
	t.Logf("KD loss %v; held-out loss %.5f", l.Losses, *l.Loss)
	if !(l.Losses[2] < l.Losses[0]) {
		t.Errorf("the loss did not fall: %v", l.Losses)
	}
	a, err := architecture.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// The trainer wrote the student's dtype, bf16.
	cr, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if ti, ok := cr.Tensor("model.layers.1.mlp.experts.down_proj"); !ok || ti.DType != checkpoint.BF16 {
		t.Errorf("placed down_proj: %+v, want bf16", ti)
	}
	cr.Close()
	// Ingest loads such a checkpoint in the native engine (which runs
	// gpt-oss forward): one without layer 0's sinks is refused.
	var specs []checkpoint.TensorSpec
	for _, s := range a.Tensors() {
		if s.Name != "model.layers.0.self_attn.sinks" {
			specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: checkpoint.BF16, Shape: s.Shape})
		}
	}
	w, err := checkpoint.Create(filepath.Join(res.Emitted.Dir, "out", "model.safetensors"), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := w.WriteFloat32(s.Name, make([]float32, s.NumElements())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var ie *IngestError
	if _, err := Ingest(res.Emitted.Dir); !errors.As(err, &ie) || !strings.Contains(err.Error(), `does not load in the native engine`) || !strings.Contains(err.Error(), `missing tensor "model.layers.0.self_attn.sinks"`) {
		t.Errorf("Ingest of a checkpoint without sinks = %v, want an IngestError naming the missing tensor", err)
	}
	for i, ly := range a.Layers {
		if x, at := ly.MoE, ly.Attention; x == nil || x.Experts != 5 || x.TopK != 2 || at == nil || !at.Sinks || at.SlidingWindow != []int{8, 0}[i] {
			t.Errorf("placed checkpoint layer %d: attention %+v, MoE %+v; want sinks, window %d, 5 experts, top-2", i, at, x, []int{8, 0}[i])
		}
	}
}

// TestEmitRefusesMXFP4: a gpt-oss checkpoint with its experts in MXFP4
// (gate_up_proj_blocks and _scales, as the released gpt-oss holds them) is
// refused by a torch job's Emit before anything is written, saying to
// dequantize first; the dense one is taken.
func TestEmitRefusesMXFP4(t *testing.T) {
	dense := randomGptOss(t)
	a, err := architecture.Load(dense)
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(t.TempDir(), "mxfp4")
	if err := os.MkdirAll(q, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"config.json", "tokenizer.json"} {
		if err := copyFile(filepath.Join(dense, n), filepath.Join(q, n)); err != nil {
			t.Fatal(err)
		}
	}
	var specs []checkpoint.TensorSpec
	for _, s := range a.Tensors() {
		if strings.HasSuffix(s.Name, "experts.gate_up_proj") {
			specs = append(specs, checkpoint.TensorSpec{Name: s.Name + "_blocks", DType: checkpoint.U8, Shape: []int64{6, 24, 1, 16}},
				checkpoint.TensorSpec{Name: s.Name + "_scales", DType: checkpoint.U8, Shape: []int64{6, 24, 1}})
			continue
		}
		specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: checkpoint.BF16, Shape: s.Shape})
	}
	w, err := checkpoint.Create(filepath.Join(q, "model.safetensors"), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := w.WriteTensor(s.Name, make([]byte, s.Size())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c := EmitConfig{Kind: Eval, Engine: "torch", Dir: filepath.Join(t.TempDir(), "job"), Model: q,
		Data: []string{"parent:test"}, Recipe: Recipe{SeqLen: 32, Batch: 4}, WorldSize: 1}
	var re *RepresentError
	if _, err := Emit(context.Background(), c); !errors.As(err, &re) || !strings.Contains(err.Error(), "gate_up_proj_blocks is an MXFP4-quantized block") || !strings.Contains(err.Error(), "dequantize first") {
		t.Errorf("Emit of an MXFP4 gpt-oss = %v, want a RepresentError saying to dequantize", err)
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused job's directory exists (%v)", err)
	}
	c.Model = dense
	if _, err := Emit(context.Background(), c); err != nil {
		t.Errorf("Emit of the dense gpt-oss: %v", err)
	}
}
