package torchref

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/prune"
)

// nemotronMoEConfig is a small Nemotron-3-shaped hybrid (Mamba2, MoE,
// attention, MoE): 8 routed experts in 2 groups, top-2 within 1 kept
// group, norm_topk_prob, routed_scaling_factor 2.5 and a shared expert.
const nemotronMoEConfig = `{"architectures":["NemotronHForCausalLM"],"model_type":"nemotron_h","hidden_size":64,
	"hybrid_override_pattern":"ME*E","num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
	"mlp_hidden_act":"relu2","mamba_num_heads":8,"mamba_head_dim":8,"ssm_state_size":16,"n_groups":2,
	"conv_kernel":4,"use_conv_bias":true,"n_routed_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":24,
	"n_shared_experts":1,"moe_shared_expert_intermediate_size":48,"n_group":2,"topk_group":1,
	"routed_scaling_factor":2.5,"norm_topk_prob":true,"vocab_size":300,"layer_norm_epsilon":1e-5,
	"tie_word_embeddings":false,"max_position_embeddings":512}`

// randomCheckpoint writes config cfg and a float32 checkpoint of the
// tensors package architecture lists for it, drawn at random (norm
// weights near 1, vectors and e_score_correction_bias N(0, 0.1²),
// matrices N(0, 0.08²)), for families the native engine cannot build.
func randomCheckpoint(t testing.TB, cfg string, seed uint64) string {
	t.Helper()
	a, err := architecture.FromConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var specs []checkpoint.TensorSpec
	for _, s := range a.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: checkpoint.F32, Shape: s.Shape})
	}
	w, err := checkpoint.Create(filepath.Join(dir, "model.safetensors"), specs, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 3))
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

// TestDistillNemotronMoE: a Nemotron-H child with MoE layers (sigmoid
// routing in groups, shared experts), one expert of each group pruned
// (8 → 6, n_group 2 kept), is distilled from its random-weight parent by
// the torch job on 2 gloo ranks; the KD loss on a repeated batch falls,
// the checkpoint validates with the child's shape, holds every tensor the
// architecture lists for it, keeps e_score_correction_bias as it was
// (frozen) while the router weights move, and reloads in the trainer,
// whose logits of it are finite.
func TestDistillNemotronMoE(t *testing.T) {
	needTorch(t)
	teacher := randomCheckpoint(t, nemotronMoEConfig, 5)
	a, err := architecture.Load(teacher)
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1}
	for i, l := range a.Layers {
		if l.MoE != nil {
			plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: i, Experts: []int{0, 1, 3, 4, 5, 7}})
		}
	}
	student := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: teacher, Plan: plan, Out: student}); err != nil {
		t.Fatalf("pruning the Nemotron-H MoE parent: %v", err)
	}
	sa, err := architecture.Load(student)
	if err != nil {
		t.Fatal(err)
	}
	if x := sa.Layers[1].MoE; x == nil || x.Experts != 6 || x.SharedWidth != 48 || !x.RouterCorrection {
		t.Fatalf("child layer 1 MoE %+v, want 6 sigmoid-routed experts with a shared expert of 48", x)
	}
	r := distillRecipe{steps: 12, batch: 4, seqLen: 16, warmup: 2, lr: 3e-3, minLR: 3e-4, wd: 0.1, clip: 1,
		temp: 1, kd: 1, ce: 0.1, seed: 1}
	j, _, _ := distillRepeated(t, teacher, student, r, 31)
	out, entry := filepath.Join(j.dir, "out"), filepath.Join(j.dir, filepath.FromSlash(Entry))
	oa, err := architecture.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range oa.Tensors() {
		readTensor(t, filepath.Join(out, "model.safetensors"), s.Name) // fails the test when absent
	}
	st, ot := filepath.Join(student, "model.safetensors"), filepath.Join(out, "model.safetensors")
	for _, l := range []int{1, 3} {
		p := "backbone.layers." + strconv.Itoa(l) + ".mixer."
		if e := relErr(readTensor(t, ot, p+"gate.e_score_correction_bias"), readTensor(t, st, p+"gate.e_score_correction_bias")); e != 0 {
			t.Errorf("layer %d: e_score_correction_bias moved in training (%.3g relative)", l, e)
		}
		for _, n := range []string{"gate.weight", "shared_experts.up_proj.weight"} {
			if relErr(readTensor(t, ot, p+n), readTensor(t, st, p+n)) == 0 {
				t.Errorf("layer %d: %s did not change in training", l, n)
			}
		}
	}
	// The checkpoint reloads in the trainer (acmodel.load), whose logits
	// of it are finite.
	tmp := t.TempDir()
	shard, logits := filepath.Join(tmp, "tokens.bin"), filepath.Join(tmp, "logits.safetensors")
	writeShard(t, shard, randomTokens(2*16, 300, 9))
	runPy(t, entry, "logits", "2", "16", shard, logits, out)
	for _, v := range readTensor(t, logits, "logits.0") {
		if v != v || v > 1e30 || v < -1e30 {
			t.Fatalf("logit %v of the reloaded checkpoint", v)
		}
	}
}
