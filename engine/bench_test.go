package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine/blas"
)

// benchArch is a 6.1M-parameter Llama (vocab 4096, hidden 256, 6 layers,
// 4 heads of 64, GQA 4:2, FFN 768, tied head).
func benchArch() *architecture.Model {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 4096, Hidden: 256,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 1024,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: 1, EOS: []int{2}}
	for range 6 {
		a.Layers = append(a.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 64},
			MLP:       &architecture.MLP{Width: 768, Gated: true, Activation: "silu"}})
	}
	return a
}

// sgemmPeak measures the best GFLOP/s of Sgemm on a 1024³ NT product.
func sgemmPeak() float64 {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 1))
	a, b, c := randSlice(r, n*n), randSlice(r, n*n), make([]float32, n*n)
	blas.Sgemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
	best := time.Duration(math.MaxInt64)
	for range 3 {
		t0 := time.Now()
		blas.Sgemm(false, true, n, n, n, 1, a, n, b, n, 0, c, n)
		best = min(best, time.Since(t0))
	}
	return 2 * n * n * n / best.Seconds() / 1e9
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

type speed struct{ peak, fwd, train float64 }

// measureSpeed returns the sgemm peak and the forward and training rates in
// model GFLOP/s (best of reps).
func measureSpeed(tb testing.TB, B, T, reps int) speed {
	m, err := New(benchArch(), 1)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	toks, tg := randTokens(r, B*T, 4096), randTokens(r, B*T, 4096)
	flops := m.ForwardFLOPs(B, T)
	var s speed
	s.peak = sgemmPeak()
	m.Forward(toks, B, T) // allocate, warm up
	best := time.Duration(math.MaxInt64)
	for range reps {
		t0 := time.Now()
		m.Forward(toks, B, T)
		best = min(best, time.Since(t0))
	}
	s.fwd = flops / best.Seconds() / 1e9
	m.ForwardLoss(toks, tg, B, T)
	m.Backward()
	best = time.Duration(math.MaxInt64)
	for range reps {
		t0 := time.Now()
		m.ZeroGrad()
		m.ForwardLoss(toks, tg, B, T)
		m.Backward()
		best = min(best, time.Since(t0))
	}
	s.train = 3 * flops / best.Seconds() / 1e9
	return s
}

// BenchmarkEngineSpeed prints, in one run, the measured sgemm peak and the
// forward and training (forward + backward) rates of a 6.1M-parameter model
// at B=4, T=256 in model FLOPs (ForwardFLOPs; training = 3×), as ratios of
// the peak, for the compiled-in backend and for the pure-Go kernel.
//
//	go test -tags openblas -run XXX -bench EngineSpeed -benchtime 1x ./engine/
func BenchmarkEngineSpeed(b *testing.B) {
	const B, T = 4, 256
	for b.Loop() {
		m, _ := New(benchArch(), 1)
		b.Logf("model: %d params, B=%d T=%d, %.2f GFLOP per forward, %d cores, GOMAXPROCS %d",
			m.NumParams(), B, T, m.ForwardFLOPs(B, T)/1e9, runtime.NumCPU(), runtime.GOMAXPROCS(0))
		s := measureSpeed(b, B, T, 3)
		b.Logf("%-8s sgemm peak %6.1f GFLOP/s | forward %6.1f GFLOP/s = %3.0f%% of peak | training %6.1f GFLOP/s = %3.0f%% of peak",
			blas.Backend(), s.peak, s.fwd, 100*s.fwd/s.peak, s.train, 100*s.train/s.peak)
		b.ReportMetric(s.peak, "sgemm-GFLOP/s")
		b.ReportMetric(s.fwd/s.peak, "fwd/peak")
		b.ReportMetric(s.train/s.peak, "train/peak")
		if blas.Backend() != "go" {
			prev := blas.ForceGo(true)
			g := measureSpeed(b, B, T, 1)
			blas.ForceGo(prev)
			b.Logf("%-8s sgemm peak %6.1f GFLOP/s | forward %6.1f GFLOP/s = %3.0f%% of peak | training %6.1f GFLOP/s = %3.0f%% of peak",
				"go", g.peak, g.fwd, 100*g.fwd/g.peak, g.train, 100*g.train/g.peak)
			b.ReportMetric(g.fwd/g.peak, "go-fwd/peak")
			b.ReportMetric(g.train/g.peak, "go-train/peak")
		}
	}
}
