package search

import (
	"context"
	"testing"
	"time"

	"github.com/autocompress/autocompress/estimate"
)

// priceRate measures Compiled.Price on m: calls per second, in this run.
func priceRate(t testing.TB, s setup) float64 {
	c, err := estimate.Compile(gpu(t, s.gpu), s.engine, estimate.Options{Precision: "fp8"}, s.work, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	start := time.Now()
	for time.Since(start) < 300*time.Millisecond {
		for range 1000 {
			_ = c.Price(s.parent)
		}
		n += 1000
	}
	return float64(n) / time.Since(start).Seconds()
}

func setup70B(t testing.TB) setup {
	return setup{parent: preset(t, "meta-llama/Meta-Llama-3.1-70B"), gpu: "h100-sxm", engine: estimate.VLLM, work: wl(t, "chat"),
		space: SpaceOptions{Precisions: []string{"fp8", "bf16", "int4-awq"}, KVDTypes: []string{"auto", "fp8"}}, b: Budgets{MaxMemory: 75 << 30, MaxTPOT: 0.025}}
}

// TestSearchSpeed70B: a Llama-3.1-70B-sized per-layer search makes at
// least a million estimator evaluations in under 10 s; its rate is printed
// next to Compiled.Price's own, measured in the same run.
func TestSearchSpeed70B(t *testing.T) {
	if testing.Short() {
		t.Skip("a million estimator evaluations; run without -short")
	}
	s := setup70B(t)
	rate := priceRate(t, s)
	so := s.space
	so.Engine, so.Concurrency, so.MaxMemory, so.DeviceBytes = s.engine, s.work.Concurrency, s.b.MaxMemory, float64(gpu(t, s.gpu).MemoryBytes)
	sp, err := NewSpace(s.parent, so)
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(s.parent, nil)
	start := time.Now()
	res, err := Run(context.Background(), sp, px, Options{GPU: gpu(t, s.gpu), Workload: s.work, Budgets: s.b, MaxEvaluations: 20000})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	srate := float64(res.Evaluations) / el.Seconds()
	t.Logf("70B per-layer search: %d evaluations in %v (%.0f/s); Compiled.Price on the 70B parent %.0f/s in the same run: ratio %.2f; chose %s, proxy %.3f",
		res.Evaluations, el.Round(time.Millisecond), srate, rate, srate/rate, sp.Describe(&res.Best), res.Best.Quality)
	if res.Evaluations < 1_000_000 {
		t.Errorf("%d evaluations, want ≥ 1,000,000", res.Evaluations)
	}
	// Wall time means something only when the machine is not shared: the
	// estimator's own rate (about a million per second per core unloaded,
	// estimate/ACCURACY.md) says whether it is.
	switch {
	case rate < 500e3:
		t.Logf("Compiled.Price runs at %.0f/s here, a loaded machine: the 10 s bound is not checked (at the unloaded rate and this run's ratio it would take %.1f s)",
			rate, float64(res.Evaluations)/(1e6*srate/rate))
	case el > 10*time.Second:
		t.Errorf("took %v, want < 10 s", el)
	}
}

// BenchmarkSearch70B runs the 70B per-layer search and reports, beside
// the time per search, its evaluations, evaluations per second and their
// ratio to Compiled.Price's rate on the 70B parent measured in the same
// run (Price runs on one core; the search on every core it is given).
func BenchmarkSearch70B(b *testing.B) {
	s := setup70B(b)
	rate := priceRate(b, s)
	var evals int64
	for b.Loop() {
		_, res, err := s.run(b, AutoCompress)
		if err != nil {
			b.Fatal(err)
		}
		evals += res.Evaluations
	}
	el := b.Elapsed().Seconds()
	srate := float64(evals) / el
	b.ReportMetric(float64(evals)/float64(b.N), "evals/op")
	b.ReportMetric(srate, "evals/s")
	b.ReportMetric(rate, "price/s")
	b.ReportMetric(srate/rate, "ratio_to_price")
	b.Logf("%d evaluations per search in %.2f s (%.0f/s); Compiled.Price %.0f/s in the same run: ratio %.2f",
		evals/int64(b.N), el/float64(b.N), srate, rate, srate/rate)
}
