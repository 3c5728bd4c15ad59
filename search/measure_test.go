package search

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/workload"
)

// heldOut returns n packed rows of T+1 tokens of the State of the Union
// validation split, tokenized for the embedded parent; it skips when the
// corpus is not unpacked.
func heldOut(t testing.TB, dir string, n, T int) [][]int32 {
	t.Helper()
	root, ok := shareddata.ModuleRoot()
	if !ok {
		t.Skip("module root not found")
	}
	docs, err := corpus.SOTU(filepath.Join(root, corpus.SOTUDir))
	if err != nil {
		t.Skipf("held-out text absent (%v)", err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var streams [][]int32
	for _, d := range corpus.Split(docs, corpus.Validation) {
		ids, err := tok.Encode(d.Text, false)
		if err != nil {
			t.Fatal(err)
		}
		s := make([]int32, len(ids))
		for i, x := range ids {
			s[i] = int32(x)
		}
		streams = append(streams, s)
	}
	rows := corpus.Pack(streams, 4095, T+1)
	if len(rows) < n {
		t.Skipf("only %d held-out rows", len(rows))
	}
	return rows[:n]
}

// fakeMeasurer scores a plan by the neurons it keeps, to test the re-ranking.
type fakeMeasurer struct{ calls int }

func (f *fakeMeasurer) Measure(_ context.Context, p *prune.Plan) (Measurement, error) {
	f.calls++
	kept := 0.0
	for _, l := range p.Layers {
		kept += float64(len(l.Neurons))
	}
	return Measurement{KL: -kept, Loss: -kept, Tokens: 100}, nil
}

// TestMeasuredReRanking: Minitron measures its whole top-k and takes the
// lowest loss; autocompress measures only candidates within CloseFraction
// of the best proxy; tokens are counted.
func TestMeasuredReRanking(t *testing.T) {
	m := embedded(t)
	w := &workload.Workload{Input: workload.FixedLength(256), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	pc := parentCosts(t, m, "cpu-local", estimate.Native, w)
	s := setup{parent: m, gpu: "cpu-local", engine: estimate.Native, work: w, b: Budgets{MaxParams: 0.8 * pc.Params}}
	for _, st := range Strategies() {
		so := s.space
		so.Engine, so.Uniform = estimate.Native, st == Minitron
		sp, err := NewSpace(m, so)
		if err != nil {
			t.Fatal(err)
		}
		px, _ := NewProxy(m, nil)
		f := &fakeMeasurer{}
		res, err := Run(context.Background(), sp, px, Options{Strategy: st, GPU: gpu(t, "cpu-local"), Workload: w, Budgets: s.b,
			Measurer: f, Plan: func(c *Candidate) (*prune.Plan, error) { return sp.Plan(c, nil) }, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		if st == Minitron && f.calls != len(res.TopK) {
			t.Errorf("minitron measured %d of %d", f.calls, len(res.TopK))
		}
		if res.Tokens != int64(100*f.calls) {
			t.Errorf("%s: tokens %d for %d measurements", st, res.Tokens, f.calls)
		}
		if f.calls > 0 && res.Best.Measured == nil {
			t.Errorf("%s: best not measured", st)
		}
		for i := 1; i < len(res.TopK); i++ {
			a, b := res.TopK[i-1].Measured, res.TopK[i].Measured
			if a != nil && b != nil && a.Loss > b.Loss {
				t.Errorf("%s: top-k not sorted by the measurement", st)
			}
		}
	}
}

var searchTiming = flag.Bool("search.timing", false, "TestEmbeddedParentMeasured also fails past a minute per strategy (on a quiet machine)")

// TestEmbeddedParentMeasured: both strategies on the embedded parent for the
// native engine with the measured KL proxy, spending counted tokens, within
// a minute (the target) when -search.timing asks for it.
func TestEmbeddedParentMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the parent and several children; run without -short")
	}
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	em, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := heldOut(t, dir, 16, 128)
	m := embedded(t)
	w := &workload.Workload{Input: workload.FixedLength(256), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	pc := parentCosts(t, m, "cpu-local", estimate.Native, w)
	b := Budgets{MaxE2E: 0.75 * pc.E2E}
	for _, st := range Strategies() {
		start := time.Now()
		meas, err := NewKLMeasurer(context.Background(), em, rows, proxy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, Uniform: st == Minitron})
		if err != nil {
			t.Fatal(err)
		}
		px, _ := NewProxy(m, nil)
		res, err := Run(context.Background(), sp, px, Options{Strategy: st, GPU: gpu(t, "cpu-local"), Workload: w, Budgets: b,
			Measurer: meas, Plan: func(c *Candidate) (*prune.Plan, error) { return sp.Plan(c, nil) }, CloseFraction: Ptr(0.05)})
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		el := time.Since(start)
		kl := "not measured"
		if res.Best.Measured != nil {
			kl = "KL " + ftoa(res.Best.Measured.KL)
		}
		t.Logf("%s: %s, proxy %.3f, %s, %d evaluations, %d tokens, %v (loaded machine)", st, sp.Describe(&res.Best), res.Best.Quality, kl, res.Evaluations, res.Tokens, el)
		// The minute is a target for a quiet machine, checked only
		// when asked (-search.timing): a loaded or slower machine takes
		// longer without anything being wrong.
		if *searchTiming && el > time.Minute {
			t.Errorf("%s took %v, over a minute", st, el)
		}
		if !b.Meets(&res.Best.Costs) {
			t.Errorf("%s: budgets broken", st)
		}
	}
}
