package distill

import (
	"context"
	"flag"
	"math/rand/v2"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/train"
)

// benchArch is a Llama with vocab 4096, hidden 256, 4 heads of 64 sharing
// 2 KV heads, SwiGLU FFN 768, tied head; 6 layers = 5,770,496 parameters
// (engine's BenchmarkEngineSpeed model), 8 layers for the teacher.
func benchArch(layers int) *architecture.Model {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 4096, Hidden: 256,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 1024,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: 1, EOS: []int{2}}
	for range layers {
		a.Layers = append(a.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 64},
			MLP:       &architecture.MLP{Width: 768, Gated: true, Activation: "silu"}})
	}
	return a
}

// sgemmPeak returns the best GFLOP/s of 3 back-to-back 1024³ NT products
// (the shape of the engine's forward GEMMs), as engine's benchmark does.
type peakProblem struct{ a, b, c []float32 }

func newPeak() *peakProblem {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 1))
	p := &peakProblem{make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)}
	for i := range p.a {
		p.a[i], p.b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	return p
}

func (p *peakProblem) best() float64 {
	const n = 1024
	best := 0.0
	for range 3 {
		t0 := time.Now()
		blas.Sgemm(false, true, n, n, n, 1, p.a, n, p.b, n, 0, p.c, n)
		best = max(best, 2*n*n*n/time.Since(t0).Seconds()/1e9)
	}
	return best
}

var benchRounds = flag.Int("rounds", 8, "BenchmarkDistillStep: interleaved rounds")

// BenchmarkDistillStep measures distillation steps — teacher forward (8
// layers, 7.4M parameters), student forward, KD loss (KL at T = 2 plus CE)
// and student backward (6 layers, 5.8M parameters), B 4 × T 256 — in model
// FLOPs (teacher ForwardFLOPs + 3 × student ForwardFLOPs), as a ratio of
// the sgemm peak measured just before each step (interleaved rounds, so
// load from other processes affects both alike). It reports the median
// ratio (dense teacher, and reading a warm top-32 cache) and the time per
// step of each, the saving of the cache.
//
//	go test -run XXX -bench DistillStep -benchtime 1x ./distill/
func BenchmarkDistillStep(b *testing.B) {
	const B, T = 4, 256
	rounds := *benchRounds
	teacher, err := engine.New(benchArch(8), 1)
	if err != nil {
		b.Fatal(err)
	}
	student, err := engine.New(benchArch(6), 2)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	rows := make([][]int32, B)
	for i := range rows {
		rows[i] = make([]int32, T+1)
		for j := range rows[i] {
			rows[i][j] = int32(r.IntN(4096))
		}
	}
	batch := &train.Batch{B: B, T: T, Rows: []int{0, 1, 2, 3}}
	for _, row := range rows {
		batch.Inputs = append(batch.Inputs, row[:T]...)
		batch.Targets = append(batch.Targets, row[1:]...)
	}
	dense := NewModelTeacher(teacher)
	cache, err := OpenTopKCache(b.TempDir(), CacheKey{Teacher: "bench", Data: dataset.HashRows(rows), Rows: B, SeqLen: T, K: 32, Shared: 4096}, dense)
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close()
	flops := teacher.ForwardFLOPs(B, T) + 3*student.ForwardFLOPs(B, T)
	cachedFlops := 3 * student.ForwardFLOPs(B, T)
	step := func(src Teacher) time.Duration {
		loss := train.FromLogits(&KD{Teacher: src, Temperature: 2, KDWeight: 1, CEWeight: 0.5, Shared: 4096})
		t0 := time.Now()
		student.ZeroGrad()
		if _, err := loss.Step(context.Background(), student, batch); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	p := newPeak()
	for b.Loop() {
		p.best()
		step(dense) // allocate activations
		step(cache) // fill the cache
		var ratio, cratio []float64
		var td, tc time.Duration
		var cpuPeak, cpuDense, cpuCached float64 // CPU seconds of each kind of work
		peakBest := 0.0
		for range rounds {
			c0 := processCPUSeconds()
			peak := p.best()
			c1 := processCPUSeconds()
			peakBest = max(peakBest, peak)
			d := step(dense)
			c2 := processCPUSeconds()
			ratio = append(ratio, flops/d.Seconds()/1e9/peak)
			c3 := processCPUSeconds()
			peak = p.best()
			c4 := processCPUSeconds()
			c := step(cache)
			c5 := processCPUSeconds()
			cratio = append(cratio, cachedFlops/c.Seconds()/1e9/peak)
			td, tc = td+d, tc+c
			cpuPeak, cpuDense, cpuCached = cpuPeak+(c1-c0)+(c4-c3), cpuDense+(c2-c1), cpuCached+(c5-c4)
		}
		n := time.Duration(rounds)
		b.Logf("%s sgemm, GOMAXPROCS %d: teacher %d + student %d parameters, B %d × T %d, %.1f model GFLOP per step (%.1f with cached teacher)",
			blas.Backend(), runtime.GOMAXPROCS(0), teacher.NumParams(), student.NumParams(), B, T, flops/1e9, cachedFlops/1e9)
		b.Logf("dense teacher: %.0f%% of the sgemm peak (median of %d rounds, %.0f–%.0f%%), %.2f s/step; top-32 cache: student part %.0f%% of peak, %.2f s/step (%.0f%% of the dense step's time); best peak %.1f GFLOP/s",
			100*median(ratio), rounds, 100*minf(ratio), 100*maxf(ratio), (td / n).Seconds(),
			100*median(cratio), (tc / n).Seconds(), 100*tc.Seconds()/td.Seconds(), peakBest)
		if cpuPeak > 0 && cpuDense > 0 && cpuCached > 0 {
			// Per CPU-second: insensitive to time the process spent waiting
			// for a core that another process held.
			peakRate := 2 * float64(rounds) * 3 * 2 * 1024 * 1024 * 1024 / cpuPeak
			denseRate := float64(rounds) * flops / cpuDense
			b.Logf("per CPU-second: dense step %.0f%% of the sgemm peak's rate, cached step (student part) %.0f%%; CPU time per step %.2f s dense, %.2f s cached (%.0f%%)",
				100*denseRate/peakRate, 100*float64(rounds)*cachedFlops/cpuCached/peakRate,
				cpuDense/float64(rounds), cpuCached/float64(rounds), 100*cpuCached/cpuDense)
			b.ReportMetric(denseRate/peakRate, "cpu-step/peak")
			b.ReportMetric(cpuCached/cpuDense, "cpu-cached/dense")
		}
		b.ReportMetric(median(ratio), "step/peak")
		b.ReportMetric((td / n).Seconds(), "s/step")
		b.ReportMetric((tc / n).Seconds(), "cached-s/step")
		b.ReportMetric(tc.Seconds()/td.Seconds(), "cached/dense")
	}
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = min(m, v)
	}
	return m
}

func maxf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	return m
}
