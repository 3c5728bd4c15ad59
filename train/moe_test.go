package train

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

// tinyMoEArch is tinyArch with every MLP a Qwen3-MoE block of experts
// experts (top-k topK, width 24, norm_topk_prob true), attention with
// qk-norm: the same active FFN width as tinyArch's 48 at top-2.
func tinyMoEArch(vocab, experts, topK int) *architecture.Model {
	a := tinyArch(vocab)
	a.Arch, a.ModelType = architecture.Qwen3MoE, "qwen3_moe"
	a.Raw = map[string]any{"norm_topk_prob": true}
	for i := range a.Layers {
		l := &a.Layers[i]
		at := *l.Attention
		at.QKNorm = true
		l.Attention = &at
		l.MLP = nil
		l.MoE = &architecture.MoE{Experts: experts, TopK: topK, ExpertWidth: 24, Gated: true, Activation: "silu"}
	}
	return a
}

// TestMoELossFalls: the trainer trains a mixture-of-experts model in the
// native engine (engine.CheckTrain accepts it) as TestLossFalls trains
// the dense one, and its router and experts move.
func TestMoELossFalls(t *testing.T) {
	a := tinyMoEArch(16, 4, 2)
	if err := engine.CheckTrain(a); err != nil {
		t.Fatalf("CheckTrain on a Qwen3-MoE: %v", err)
	}
	m, err := engine.New(a, 42)
	if err != nil {
		t.Fatal(err)
	}
	router := "model.layers.0.mlp.gate.weight"
	expert := "model.layers.1.mlp.experts.3.down_proj.weight"
	r0, e0 := append([]float32(nil), m.Tensor(router)...), append([]float32(nil), m.Tensor(expert)...)
	if len(r0) == 0 || len(e0) == 0 {
		t.Fatalf("no tensors %s, %s in %v", router, expert, m.Specs()[:4])
	}
	var log bytes.Buffer
	tr, err := New(m, patternRows(64, 16, 16, 1), patternRows(8, 16, 16, 2),
		Options{Steps: 60, Batch: 4, SeqLen: 16, LR: 1e-2, Warmup: Ptr(5), EvalEvery: 30, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	before, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(before-math.Log(16)) > 0.3 {
		t.Errorf("initial validation loss %.3f, want about ln 16 = 2.77", before)
	}
	if res.ValLoss > 1.4 || res.LastLoss > 1.4 {
		t.Errorf("after 60 steps: train %.3f validation %.3f; want < 1.4\n%s", res.LastLoss, res.ValLoss, log.String())
	}
	moved := func(name string, was []float32) float64 {
		var d float64
		for i, v := range m.Tensor(name) {
			d = max(d, math.Abs(float64(v-was[i])))
		}
		return d
	}
	if d := moved(router, r0); d == 0 {
		t.Errorf("the router %s did not move", router)
	}
	if d := moved(expert, e0); d == 0 {
		t.Errorf("expert %s did not move", expert)
	}
	t.Logf("validation loss %.3f → %.3f after 60 steps", before, res.ValLoss)
}
