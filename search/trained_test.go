package search

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/workload"
)

// trainedFake ranks plans one way untrained and the opposite way trained:
// the more neurons kept, the better untrained and the worse trained.
type trainedFake struct{ calls int }

func (f *trainedFake) Measure(_ context.Context, p *prune.Plan) (Measurement, error) {
	f.calls++
	kept := 0.0
	for _, l := range p.Layers {
		kept += float64(len(l.Neurons))
	}
	return Measurement{Loss: kept, UntrainedLoss: -kept, TrainTokens: 10, Tokens: 30}, nil
}

func (f *trainedFake) Ranking() string { return "a fake trained loss" }

// TestTrainedRankingPicksByTrainedLoss: with a trained measurement Minitron
// picks the lowest loss after training even where the untrained loss orders
// the candidates the other way, and the notes say the choice changed and
// what the ranking rests on.
func TestTrainedRankingPicksByTrainedLoss(t *testing.T) {
	m := embedded(t)
	w := &workload.Workload{Input: workload.FixedLength(256), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	pc := parentCosts(t, m, "cpu-local", estimate.Native, w)
	b := Budgets{MaxParams: 0.8 * pc.Params}
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, Uniform: true})
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(m, nil)
	f := &trainedFake{}
	res, err := Run(context.Background(), sp, px, Options{Strategy: Minitron, GPU: gpu(t, "cpu-local"), Workload: w, Budgets: b,
		Measurer: f, Plan: func(c *Candidate) (*prune.Plan, error) { return sp.Plan(c, nil) }, TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	if f.calls < 2 || f.calls != len(res.TopK) {
		t.Fatalf("measured %d of %d candidates, want all and at least 2", f.calls, len(res.TopK))
	}
	for i := range res.TopK {
		if res.TopK[i].Measured.Loss < res.Best.Measured.Loss {
			t.Errorf("best has trained loss %g, candidate %d has %g", res.Best.Measured.Loss, i, res.TopK[i].Measured.Loss)
		}
	}
	if n := untrainedChoice(res.TopK); n != len(res.TopK)-1 {
		t.Errorf("untrained choice at rank %d, want the last (%d)", n+1, len(res.TopK))
	}
	if res.Tokens != int64(30*f.calls) {
		t.Errorf("tokens %d, want %d", res.Tokens, 30*f.calls)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"a fake trained loss", "the brief training changed the choice", "tokens spent choosing the architecture"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// embeddedRows returns n rows of T+1 ids of one embedded split of the parent.
func embeddedRows(t testing.TB, dir, split string, n, T int) [][]int32 {
	t.Helper()
	o := dataset.Options{ModelDir: dir}
	o.SeqLen, o.Sep, o.Vocab = T, 4095, 4096
	p, err := dataset.Rows(context.Background(), []string{parent.DataPrefix + split}, o)
	if err != nil {
		t.Fatal(err)
	}
	rows := p.Rows
	if len(rows) < n {
		t.Fatalf("%s: %d rows of %d tokens, want %d", split, len(rows), T+1, n)
	}
	return rows[:n]
}

// TestTrainedMeasurer trains real children of the embedded parent briefly:
// the measurement is deterministic for a seed, counts the tokens it spends
// (with and without the teacher cache), lowers the held-out loss, and stops
// on cancellation.
func TestTrainedMeasurer(t *testing.T) {
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	em, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const T = 32
	held := embeddedRows(t, dir, "validation", 4, T)
	tr := embeddedRows(t, dir, "train-sample", 16, T)
	m := embedded(t)
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, Uniform: true})
	if err != nil {
		t.Fatal(err)
	}
	c := Candidate{Hidden: 128, Heads: 8}
	for range m.Layers {
		c.Layers = append(c.Layers, LayerShape{KVGroups: 2, MLP: 384})
	}
	plan, err := sp.Plan(&c, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := TrainOptions{Tokens: 3 * 4 * T, Batch: 4, SeqLen: T, LR: 2e-3, Seed: 7}
	ctx := context.Background()
	measure := func(o TrainOptions) (Measurement, Measurement) {
		tm, err := NewTrainedMeasurer(ctx, em, held, tr, o)
		if err != nil {
			t.Fatal(err)
		}
		defer tm.Close()
		a, err := tm.Measure(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tm.Measure(ctx, plan)
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	refTokens := int64(len(held) * T)
	train := int64(3 * 4 * T)
	for _, k := range []int{0, 64} {
		o := o
		o.CacheK = k
		a, b := measure(o)
		if a.Loss != b.Loss || a.KL != b.KL || a.UntrainedLoss != b.UntrainedLoss {
			t.Errorf("cache %d: the same candidate measured twice: %+v then %+v", k, a, b)
		}
		if a.TrainTokens != train {
			t.Errorf("cache %d: %d training tokens, want %d", k, a.TrainTokens, train)
		}
		if !(a.Loss < a.UntrainedLoss) {
			t.Errorf("cache %d: loss %.4f after training, %.4f before", k, a.Loss, a.UntrainedLoss)
		}
		// First: reference + student + teacher + two scoring passes. The
		// second pays no reference, and with the cache no teacher (the
		// first candidate saw every row it sees).
		if want := refTokens + 2*train + 2*refTokens; a.Tokens != want {
			t.Errorf("cache %d: first measurement %d tokens, want %d", k, a.Tokens, want)
		}
		want := 2*train + 2*refTokens
		if k > 0 {
			want = train + 2*refTokens
		}
		if b.Tokens != want {
			t.Errorf("cache %d: second measurement %d tokens, want %d", k, b.Tokens, want)
		}
		t.Logf("cache %d: loss %.4f → %.4f, KL %.4f; tokens %d then %d", k, a.UntrainedLoss, a.Loss, a.KL, a.Tokens, b.Tokens)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	co := o
	co.Tokens = 100 * 4 * T
	steps := 0
	co.Progress = func(e progress.Event) {
		if e.Phase != "training top-k candidate 1" || e.Unit != "step" {
			t.Errorf("event %+v", e)
		}
		steps = int(e.Done)
		if steps == 2 {
			cancel()
		}
	}
	tm, err := NewTrainedMeasurer(ctx, em, held, tr, co)
	if err != nil {
		t.Fatal(err)
	}
	defer tm.Close()
	if _, err := tm.Measure(cctx, plan); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled measurement: %v, want context.Canceled", err)
	}
	if steps > 3 {
		t.Errorf("ran %d steps after cancelling at 2", steps)
	}
}

// BenchmarkTopKTrainCache: Minitron++'s brief training of 4 top-k
// candidates of the embedded parent (the default 16,384 tokens each, batch
// 8 × 128, scored on 16 held-out rows) with the dense teacher every step and
// with the teacher's top-64 logits cached across the candidates; it reports
// the cached run's time as a ratio of the dense run's, both measured in the
// same iteration, and the loss each reaches.
//
//	nice -n 10 go test -run '^$' -bench TopKTrainCache -benchtime 1x ./search
func BenchmarkTopKTrainCache(b *testing.B) {
	dir, err := parent.Dir()
	if err != nil {
		b.Fatal(err)
	}
	em, err := engine.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	const T = 128
	held := embeddedRows(b, dir, "validation", 16, T)
	o := TrainOptions{Tokens: DefaultTopKTrainTokens, Batch: 8, SeqLen: T, Seed: 1}
	tr := embeddedRows(b, dir, "train-sample", o.Steps()*o.Batch, T)
	m := embedded(b)
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, Uniform: true})
	if err != nil {
		b.Fatal(err)
	}
	var plans []*prune.Plan
	for _, s := range []struct{ hidden, mlp int }{{192, 256}, {128, 512}, {160, 384}, {128, 384}} {
		c := Candidate{Hidden: s.hidden, Heads: 8}
		for range m.Layers {
			c.Layers = append(c.Layers, LayerShape{KVGroups: 2, MLP: s.mlp})
		}
		p, err := sp.Plan(&c, nil)
		if err != nil {
			b.Fatal(err)
		}
		plans = append(plans, p)
	}
	run := func(k int) (time.Duration, []float64, int64) {
		start := time.Now()
		o := o
		o.CacheK = k
		tm, err := NewTrainedMeasurer(context.Background(), em, held, tr, o)
		if err != nil {
			b.Fatal(err)
		}
		defer tm.Close()
		var loss []float64
		var tokens int64
		for _, p := range plans {
			r, err := tm.Measure(context.Background(), p)
			if err != nil {
				b.Fatal(err)
			}
			loss, tokens = append(loss, r.Loss), tokens+r.Tokens
		}
		return time.Since(start), loss, tokens
	}
	for range b.N {
		dt, dl, dn := run(0)
		ct, cl, cn := run(64)
		b.ReportMetric(dt.Seconds(), "dense-s")
		b.ReportMetric(ct.Seconds()/dt.Seconds(), "cached/dense")
		b.Logf("dense teacher: %v, %d tokens, losses %.4f", dt.Round(time.Millisecond), dn, dl)
		b.Logf("top-64 cache:  %v, %d tokens, losses %.4f", ct.Round(time.Millisecond), cn, cl)
	}
}
