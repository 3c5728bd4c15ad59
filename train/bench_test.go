package train

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
)

// sgemmPeak measures the sgemm backend on a square n³ product, GFLOP/s.
func sgemmPeak(n int) float64 {
	a := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i] = float32(i%7) * 0.1
	}
	blas.Sgemm(false, true, n, n, n, 1, a, n, a, n, 0, c, n) // warm-up
	best := 0.0
	for range 3 {
		t0 := time.Now()
		blas.Sgemm(false, true, n, n, n, 1, a, n, a, n, 0, c, n)
		best = max(best, 2*float64(n*n*n)/time.Since(t0).Seconds()/1e9)
	}
	return best
}

// BenchmarkTrainStep times one optimiser step of the parent architecture
// (B 8 × T 128) and reports tokens/s, the achieved GFLOP/s (3 × the
// engine's forward FLOPs per step) and their ratio to the sgemm peak
// measured in the same run, plus the share of the step spent in AdamW.
func BenchmarkTrainStep(b *testing.B) {
	const B, T = 8, 128
	m, err := engine.New(ParentArch(4096, 4095), 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]int32, 64)
	for i := range rows {
		rows[i] = make([]int32, T+1)
		for j := range rows[i] {
			rows[i][j] = int32(r.IntN(4096))
		}
	}
	tr, err := New(m, rows, nil, Options{Steps: 1 << 30, Batch: B, SeqLen: T})
	if err != nil {
		b.Fatal(err)
	}
	tr.o.LogEvery = 0
	peak := sgemmPeak(512)
	var optTime time.Duration
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		tr.nextBatch()
		m.ZeroGrad()
		if _, err := m.ForwardLoss(tr.inputs, tr.targets, B, T); err != nil {
			b.Fatal(err)
		}
		if err := m.Backward(); err != nil {
			b.Fatal(err)
		}
		ClipGradNorm(m.Grads(), 1)
		t0 := time.Now()
		tr.Opt.Step(m.Params(), m.Grads(), 1e-3)
		optTime += time.Since(t0)
	}
	el := time.Since(start).Seconds()
	steps := float64(b.N)
	gflops := 3 * m.ForwardFLOPs(B, T) * steps / el / 1e9
	b.ReportMetric(B*T*steps/el, "tok/s")
	b.ReportMetric(gflops, "GFLOP/s")
	b.ReportMetric(gflops/peak, "of-sgemm-peak")
	b.ReportMetric(optTime.Seconds()/el, "adamw-share")
	b.Logf("%s sgemm peak %.1f GFLOP/s (512³); train step %.1f GFLOP/s = %.2f of peak; AdamW %.1f%% of the step",
		blas.Backend(), peak, gflops, gflops/peak, 100*optTime.Seconds()/el)
}
