package torchref

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/prune"
)

// TestDistillGptOss: a gpt-oss child with one of its 6 stacked experts
// pruned (prune's expert selection along dimension 0 of gate_up_proj,
// down_proj and their biases) and its hidden size cut 32 → 24 (rows of
// gate_up_proj, the last dimension of down_proj) is distilled from its random-weight parent
// by the torch job on 2 gloo ranks for 2 steps on a repeated batch; the
// KD loss falls, the checkpoint validates with the child's shape, holds
// every tensor architecture lists for it, its router, sinks and stacked
// experts moved, an eval job of it gives the distillation's held-out
// loss (1e-5 relative), and it reloads in the trainer with finite logits.
func TestDistillGptOss(t *testing.T) {
	needTorch(t)
	teacher := randomCheckpoint(t, gptOssConfig, 5)
	a, err := architecture.Load(teacher)
	if err != nil {
		t.Fatal(err)
	}
	// Hidden 32 → 24 (the first 24 channels) and expert 3 of 6 removed.
	plan := &prune.Plan{Version: 1, Hidden: seq(0, 24, 1)}
	for i, l := range a.Layers {
		if l.MoE != nil {
			plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: i, Experts: []int{0, 1, 2, 4, 5}})
		}
	}
	student := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: teacher, Plan: plan, Out: student}); err != nil {
		t.Fatalf("pruning the gpt-oss parent: %v", err)
	}
	sa, err := architecture.Load(student)
	if err != nil {
		t.Fatal(err)
	}
	if x := sa.Layers[1].MoE; x == nil || x.Experts != 5 || x.TopK != 2 {
		t.Fatalf("child layer 1 MoE %+v, want 5 experts, top-2", x)
	}
	if sa.Hidden != 24 {
		t.Fatalf("child hidden %d, want 24", sa.Hidden)
	}
	// Expert 3 is gone: the child's expert 3 is the parent's expert 4, its
	// gate_up_proj [hidden, 2·width] cut to the first 24 rows, its
	// down_proj [width, hidden] to the first 24 columns (prune's
	// Selection.Inner), the layout acmoe.GptOssExperts multiplies by.
	st, pt := filepath.Join(student, "model.safetensors"), filepath.Join(teacher, "model.safetensors")
	const gu, dp = "model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj"
	cg, pg := readTensor(t, st, gu), readTensor(t, pt, gu)
	cd, pd := readTensor(t, st, dp), readTensor(t, pt, dp)
	for h := range 24 {
		for c := range 24 {
			if cg[(3*24+h)*24+c] != pg[(4*32+h)*24+c] {
				t.Fatalf("child's %s[3][%d][%d] is not the parent's [4][%d][%d]", gu, h, c, h, c)
			}
		}
	}
	for w := range 12 {
		for h := range 24 {
			if cd[(3*12+w)*24+h] != pd[(4*12+w)*32+h] {
				t.Fatalf("child's %s[3][%d][%d] is not the parent's [4][%d][%d]", dp, w, h, w, h)
			}
		}
	}
	r := distillRecipe{steps: 2, batch: 4, seqLen: 16, warmup: 1, lr: 3e-3, minLR: 3e-3, wd: 0.1, clip: 1,
		temp: 1, kd: 1, ce: 0.1, seed: 1}
	j, res, valid := distillRepeated(t, teacher, student, r, 41)
	out, entry := filepath.Join(j.dir, "out"), filepath.Join(j.dir, filepath.FromSlash(Entry))
	oa, err := architecture.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	ot := filepath.Join(out, "model.safetensors")
	for _, s := range oa.Tensors() {
		readTensor(t, ot, s.Name) // fails the test when absent
	}
	for _, l := range []int{0, 1} {
		p := "model.layers." + strconv.Itoa(l) + "."
		for _, n := range []string{"self_attn.sinks", "mlp.router.weight", "mlp.router.bias", "mlp.experts.gate_up_proj",
			"mlp.experts.down_proj_bias"} {
			if relErr(readTensor(t, ot, p+n), readTensor(t, st, p+n)) == 0 {
				t.Errorf("layer %d: %s did not change in training", l, n)
			}
		}
	}
	// An eval job of the checkpoint on the held-out rows gives the loss
	// the distillation reported after its last step (the same ce_sum,
	// another job, 1 rank instead of 2).
	ej := newJob(t, "eval", 1, map[string]any{"seq_len": r.seqLen, "batch": r.batch})
	ej.model("model", out)
	ej.rows("valid", valid)
	econtract, eentry := ej.write()
	mustRun(t, eentry, econtract, 1)
	got, want := ej.result()["loss"].(float64), res["loss"].(float64)
	t.Logf("eval job's loss %.7f, the distillation's %.7f", got, want)
	if rel1(got, want) > 1e-5 {
		t.Errorf("eval job's loss of the checkpoint %.7f, the distillation's held-out loss %.7f (want ≤ 1e-5 relative)", got, want)
	}
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
