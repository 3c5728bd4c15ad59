package distill

import (
	"context"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/train"
)

// TestRunMoE: a child of a Qwen3-MoE teacher keeping 4 of its 8 routed
// experts is distilled natively (the recovery stage's distill.engine
// native): the held-out loss falls, the output validates with the child's
// shape (4 experts, top-2), loads, and its router and experts moved.
func TestRunMoE(t *testing.T) {
	a, err := architecture.FromConfig([]byte(testutil.TinyQwen3MoEConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.CheckTrain(a); err != nil {
		t.Fatalf("CheckTrain on a Qwen3-MoE: %v", err)
	}
	ctx := context.Background()
	teacher := filepath.Join(t.TempDir(), "teacher")
	if err := engine.Init(ctx, a, teacher, engine.InitOptions{Seed: 1, DType: checkpoint.BF16}); err != nil {
		t.Fatal(err)
	}
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(pdir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(teacher, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan := &prune.Plan{Version: 1}
	for l := range a.Layers {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Experts: []int{0, 2, 5, 7}})
	}
	student := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(ctx, prune.Options{Model: teacher, Plan: plan, Out: student}); err != nil {
		t.Fatal(err)
	}
	data := corpusFile(t, 2)
	c := testConfig(t, student, data, 8)
	c.Teacher = teacher
	c.Temperature = 1
	c.CEWeight = train.Ptr(1.0)
	c.Train.LR = 1e-2
	sum, err := Run(ctx, c)
	if err != nil {
		t.Fatalf("native distillation of an MoE child: %v", err)
	}
	if sum.After.Loss >= sum.Before.Loss {
		t.Errorf("held-out loss %.4f before, %.4f after: distillation did not help", sum.Before.Loss, sum.After.Loss)
	}
	t.Logf("held-out loss %.4f → %.4f over %d steps (train loss %.4f)", sum.Before.Loss, sum.After.Loss, sum.Steps, sum.TrainLoss)
	if err := export.CheckDir(c.Out, ""); err != nil {
		t.Error(err)
	}
	out, err := engine.Load(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	in, err := engine.Load(student)
	if err != nil {
		t.Fatal(err)
	}
	if x := out.Arch().Layers[0].MoE; x == nil || x.Experts != 4 || x.TopK != 2 {
		t.Fatalf("output layer 0 MoE %+v, want 4 experts, top-2", x)
	}
	for _, name := range []string{"model.layers.0.mlp.gate.weight", "model.layers.1.mlp.experts.3.up_proj.weight"} {
		w0, w1 := in.Tensor(name), out.Tensor(name)
		if len(w0) == 0 || len(w0) != len(w1) {
			t.Fatalf("%s: %d values in the student, %d in the output", name, len(w0), len(w1))
		}
		same := true
		for i := range w0 {
			same = same && w0[i] == w1[i]
		}
		if same {
			t.Errorf("%s did not change in the distillation", name)
		}
	}
}
