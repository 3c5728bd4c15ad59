package trained

import (
	"context"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"slices"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/train"
)

// TestTrainedMeasurerMoE: Minitron++'s top-k measurement runs on a
// mixture-of-experts parent (the native engine trains MoE children): a
// Qwen3-MoE parent, first trained briefly on the embedded train sample so
// that its routing is not uniform, and three children keeping 6, 4 and 2
// of its 8 routed experts are each distilled briefly from it and scored;
// every one's held-out loss falls with the training, a second measurement
// of a plan repeats the first, and the ranking by trained loss puts the
// 2-expert child last (6 and 4 experts come out within 0.01 nats of each
// other on this fixture, an order the test does not decide).
func TestTrainedMeasurerMoE(t *testing.T) {
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	a, err := architecture.FromConfig([]byte(testutil.TinyQwen3MoEConfig))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := engine.New(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	const T = 32
	held := embeddedRows(t, dir, "validation", 4, T)
	tr := embeddedRows(t, dir, "train-sample", 512, T)
	ctx := context.Background()
	pt, err := train.New(pm, tr, nil, train.Options{Steps: 64, Batch: 8, SeqLen: T, LR: 1e-2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	pres, err := pt.Run(ctx)
	if err != nil {
		t.Fatalf("training the MoE parent: %v", err)
	}
	t.Logf("parent trained 64 steps: last loss %.3f", pres.LastLoss)

	sp, err := search.NewSpace(a, search.SpaceOptions{Engine: estimate.Native, Uniform: true})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Tokens: 4 * 4 * T, Batch: 4, SeqLen: T, LR: 1e-3, Seed: 7}
	tm, err := NewMeasurer(ctx, pm, held, tr, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	type result struct {
		experts int
		m       search.Measurement
	}
	var res []result
	var first *prune.Plan
	for _, experts := range []int{6, 4, 2} {
		c := search.Candidate{Hidden: a.Hidden, Heads: 2}
		for range a.Layers {
			c.Layers = append(c.Layers, search.LayerShape{KVGroups: 1, Experts: experts})
		}
		plan, err := sp.Plan(&c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = plan
		}
		m, err := tm.Measure(ctx, plan)
		if err != nil {
			t.Fatalf("%d experts: %v", experts, err)
		}
		if m.TrainTokens != o.Tokens {
			t.Errorf("%d experts: %d training tokens, want %d", experts, m.TrainTokens, o.Tokens)
		}
		if !(m.Loss < m.UntrainedLoss) {
			t.Errorf("%d experts: loss %.4f after training, %.4f before", experts, m.Loss, m.UntrainedLoss)
		}
		t.Logf("%d experts: loss %.4f → %.4f, KL %.4f", experts, m.UntrainedLoss, m.Loss, m.KL)
		res = append(res, result{experts, m})
	}
	again, err := tm.Measure(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if again.Loss != res[0].m.Loss || again.KL != res[0].m.KL || again.UntrainedLoss != res[0].m.UntrainedLoss {
		t.Errorf("the 6-expert child measured twice: %+v then %+v", res[0].m, again)
	}
	slices.SortStableFunc(res, func(x, y result) int {
		switch {
		case x.m.Loss < y.m.Loss:
			return -1
		case x.m.Loss > y.m.Loss:
			return 1
		}
		return 0
	})
	order := make([]int, len(res))
	for i, r := range res {
		order[i] = r.experts
	}
	t.Logf("ranking by trained loss: experts %v", order)
	if order[len(order)-1] != 2 {
		t.Errorf("ranking by trained loss %v: want the 2-expert child last", order)
	}
}
