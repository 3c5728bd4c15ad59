package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine/blas"
)

// benchArch is a 5.8M-parameter Llama (vocab 4096, hidden 256, 6 layers,
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

// peakProblem is a 1024³ NT product, the shape of the engine's forward
// GEMMs, used as the measured sgemm peak.
type peakProblem struct{ a, b, c []float32 }

func newPeakProblem() *peakProblem {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 1))
	return &peakProblem{randSlice(r, n*n), randSlice(r, n*n), make([]float32, n*n)}
}

func (p *peakProblem) run() float64 {
	const n = 1024
	t0 := time.Now()
	blas.Sgemm(false, true, n, n, n, 1, p.a, n, p.b, n, 0, p.c, n)
	return 2 * n * n * n / time.Since(t0).Seconds() / 1e9
}

// sgemmPeak measures the best GFLOP/s of Sgemm on a 1024³ NT product.
func sgemmPeak() float64 {
	p := newPeakProblem()
	p.run()
	best := 0.0
	for range 3 {
		best = max(best, p.run())
	}
	return best
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

type speed struct {
	peak, fwd, train float64 // best wall-clock GFLOP/s
	// Per round: forward and training rate over the sgemm peak measured
	// just before, so that load from other processes, which changes
	// between rounds, affects numerator and denominator alike.
	fwdRatio, trainRatio []float64
	// The same per CPU-second of the process (GFLOP per CPU-second times
	// GOMAXPROCS): less sensitive to other processes sharing the cores.
	peakCPU, fwdCPU, trainCPU float64
}

// measureSpeed returns the sgemm peak and the forward and training rates in
// model GFLOP/s. The three are measured in interleaved rounds and the best
// of each kept, so that load from other processes on a shared machine
// affects them alike; CPU-time rates are accumulated over all rounds.
func measureSpeed(tb testing.TB, B, T, rounds int) speed {
	m, err := New(benchArch(), 1)
	if err != nil {
		tb.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	toks, tg := randTokens(r, B*T, 4096), randTokens(r, B*T, 4096)
	flops := m.ForwardFLOPs(B, T)
	p := newPeakProblem()
	// Warm up: allocate activations and gradients buffers.
	p.run()
	m.ForwardLoss(toks, tg, B, T)
	m.Backward()
	var s speed
	var cpuPeak, cpuFwd, cpuTrain float64
	for range rounds {
		c0 := processCPUSeconds()
		peak := 0.0
		for range 3 { // back to back: the first call after a step may meet a GC cycle
			peak = max(peak, p.run())
		}
		s.peak = max(s.peak, peak)
		c1 := processCPUSeconds()
		t0 := time.Now()
		m.Forward(toks, B, T)
		fwd := flops / time.Since(t0).Seconds() / 1e9
		c2 := processCPUSeconds()
		t0 = time.Now()
		m.ZeroGrad()
		m.ForwardLoss(toks, tg, B, T)
		m.Backward()
		train := 3 * flops / time.Since(t0).Seconds() / 1e9
		c3 := processCPUSeconds()
		s.fwd, s.train = max(s.fwd, fwd), max(s.train, train)
		s.fwdRatio, s.trainRatio = append(s.fwdRatio, fwd/peak), append(s.trainRatio, train/peak)
		cpuPeak, cpuFwd, cpuTrain = cpuPeak+c1-c0, cpuFwd+c2-c1, cpuTrain+c3-c2
	}
	procs := float64(runtime.GOMAXPROCS(0))
	if cpuPeak > 0 && cpuFwd > 0 && cpuTrain > 0 {
		n := float64(rounds)
		s.peakCPU = 3 * n * 2 * 1024 * 1024 * 1024 / cpuPeak / 1e9 * procs
		s.fwdCPU = n * flops / cpuFwd / 1e9 * procs
		s.trainCPU = 3 * n * flops / cpuTrain / 1e9 * procs
	}
	return s
}

// BenchmarkEngineSpeed prints, in one run, the measured sgemm peak and the
// forward and training (forward + backward) rates of a 6.1M-parameter model
// at B=4, T=256 in model FLOPs (ForwardFLOPs; training = 3×), as ratios of
// the peak, for the compiled-in backend and for the pure-Go kernel.
//
//	go test -tags openblas -run XXX -bench EngineSpeed -benchtime 1x ./engine/
//
// Each of the rounds measures the sgemm peak (best of 3), one forward pass
// and one training step back to back; the reported fwd/peak and
// train/peak metrics are the medians over rounds of the per-round ratios
// (robust to other processes taking a core for part of the run), and the
// log also gives their range and the ratios of the best rates.
func BenchmarkEngineSpeed(b *testing.B) {
	const B, T, rounds = 4, 256, 12
	for b.Loop() {
		m, _ := New(benchArch(), 1)
		b.Logf("model: %d params, B=%d T=%d, %.2f GFLOP per forward, %d cores, GOMAXPROCS %d",
			m.NumParams(), B, T, m.ForwardFLOPs(B, T)/1e9, runtime.NumCPU(), runtime.GOMAXPROCS(0))
		s := measureSpeed(b, B, T, rounds)
		report(b, blas.Backend(), s)
		b.ReportMetric(s.peak, "sgemm-GFLOP/s")
		b.ReportMetric(median(s.fwdRatio), "fwd/peak")
		b.ReportMetric(median(s.trainRatio), "train/peak")
		if blas.Backend() != "go" { // also measure the pure-Go kernel in this run
			prev := blas.ForceGo(true)
			g := measureSpeed(b, B, T, rounds)
			blas.ForceGo(prev)
			report(b, "go", g)
			b.ReportMetric(median(g.fwdRatio), "go-fwd/peak")
			b.ReportMetric(median(g.trainRatio), "go-train/peak")
		}
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(b *testing.B, backend string, s speed) {
	lo, hi := slices.Min(s.fwdRatio), slices.Max(s.fwdRatio)
	tlo, thi := slices.Min(s.trainRatio), slices.Max(s.trainRatio)
	b.Logf("%-8s per round (median, min–max over %d rounds): forward %3.0f%% of peak (%.0f–%.0f%%) | training %3.0f%% of peak (%.0f–%.0f%%)",
		backend, len(s.fwdRatio), 100*median(s.fwdRatio), 100*lo, 100*hi, 100*median(s.trainRatio), 100*tlo, 100*thi)
	b.Logf("%-8s best: sgemm peak %6.1f GFLOP/s | forward %6.1f GFLOP/s = %3.0f%% of peak | training %6.1f GFLOP/s = %3.0f%% of peak",
		backend, s.peak, s.fwd, 100*s.fwd/s.peak, s.train, 100*s.train/s.peak)
	if s.peakCPU > 0 {
		b.Logf("%-8s CPU:  sgemm peak %6.1f GFLOP/s | forward %6.1f GFLOP/s = %3.0f%% of peak | training %6.1f GFLOP/s = %3.0f%% of peak (per CPU-second × GOMAXPROCS)",
			backend, s.peakCPU, s.fwdCPU, 100*s.fwdCPU/s.peakCPU, s.trainCPU, 100*s.trainCPU/s.peakCPU)
	}
}

// BenchmarkForward runs only the forward pass of the BenchmarkEngineSpeed
// model (B=4, T=256), for profiling:
//
//	go test -tags openblas -run XXX -bench 'Forward$' -cpuprofile cpu.prof ./engine/
func BenchmarkForward(b *testing.B) {
	const B, T = 4, 256
	m, err := New(benchArch(), 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	toks := randTokens(r, B*T, 4096)
	if _, err := m.Forward(toks, B, T); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		m.Forward(toks, B, T)
	}
	b.ReportMetric(m.ForwardFLOPs(B, T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// parentShapedArch is the embedded parent's shape (parent/model/config.json)
// with attention kept in the layers attn says.
func parentShapedArch(attn func(l int) bool) *architecture.Model {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 4096, Hidden: 192,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 512,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: 1, EOS: []int{2}}
	for l := range 8 {
		ly := architecture.Layer{MLP: &architecture.MLP{Width: 512, Gated: true, Activation: "silu"}}
		if attn(l) {
			ly.Attention = &architecture.Attention{Heads: 8, KVHeads: 2, HeadDim: 24}
		}
		a.Layers = append(a.Layers, ly)
	}
	return a
}

// decodeCases are the decode benchmarks' shapes: the parent's, and with
// attention only in its last two layers.
var decodeCases = []struct {
	name string
	attn func(int) bool
}{{"parent", func(int) bool { return true }}, {"noattn6", func(l int) bool { return l >= 6 }}}

// newDecodeBench builds a model of the parent's shape with attention in the
// layers attn says and conc sequences holding 160 tokens each, and returns
// a function that runs one decoding step (one new token per sequence),
// rewinding the sequences to 160 tokens whenever they reach 224.
func newDecodeBench(b *testing.B, attn func(int) bool, conc int) (step func()) {
	m, err := New(parentShapedArch(attn), 1)
	if err != nil {
		b.Fatal(err)
	}
	m.SetInference(true)
	r := rand.New(rand.NewPCG(2, 2))
	caches := make([]*Cache, conc)
	toks := make([][]int32, conc)
	for i := range caches {
		caches[i] = m.NewCache(256)
		if _, err := m.Step(caches[i:i+1], [][]int32{randTokens(r, 160, 4096)}, false); err != nil {
			b.Fatal(err)
		}
		toks[i] = []int32{int32(i)}
	}
	return func() {
		if _, err := m.Step(caches, toks, false); err != nil {
			b.Fatal(err)
		}
		if caches[0].Len() >= 224 {
			for _, ca := range caches {
				ca.n = 160
			}
		}
	}
}

// BenchmarkDecodeStep times one decoding step (one new token for each of
// conc sequences holding 160 to 224 tokens) of the parent's shape, with and
// without attention in six layers, with the blas team off (every product
// of a few rows on one core, as before #12) and on, and reports the
// process's CPU share (1 when the step runs on one core; the team's
// helpers spinning between products count too) and the team's stalls.
// Profile it with
// -cpuprofile to see where a decode step's time goes.
func BenchmarkDecodeStep(b *testing.B) {
	for _, c := range decodeCases {
		for _, conc := range []int{1, 4, 8} {
			for _, team := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/conc%d/team=%v", c.name, conc, team), func(b *testing.B) {
					defer blas.SetTeam(blas.SetTeam(team))
					step := newDecodeBench(b, c.attn, conc)
					_, stalls0 := blas.TeamStats()
					cpu0, t0 := processCPUSeconds(), time.Now()
					b.ResetTimer()
					for range b.N {
						step()
					}
					b.StopTimer()
					if wall := time.Since(t0).Seconds(); wall > 0 {
						b.ReportMetric((processCPUSeconds()-cpu0)/wall, "cpu-share")
					}
					// Each stall (a helper lost its core to another process) turned the
					// team off for 100 ms: many of them mean the run measured a loaded
					// machine, not the engine.
					_, stalls := blas.TeamStats()
					b.ReportMetric(float64(stalls-stalls0), "stalls")
				})
			}
		}
	}
}

// BenchmarkDecodeStepAB times decoding steps of the parent's shape with the
// blas team off and on in alternating blocks (see teamAB).
func BenchmarkDecodeStepAB(b *testing.B) {
	for _, c := range decodeCases {
		for _, conc := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("%s/conc%d", c.name, conc), func(b *testing.B) {
				teamAB(b, 16, "step", newDecodeBench(b, c.attn, conc))
			})
		}
	}
}

// BenchmarkForwardAB is BenchmarkForward (prefill and training shapes: B=4,
// T=256) with the blas team off and on in alternating blocks: the team must
// not slow large products down.
func BenchmarkForwardAB(b *testing.B) {
	const B, T = 4, 256
	m, err := New(benchArch(), 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 2))
	toks := randTokens(r, B*T, 4096)
	teamAB(b, 2, "forward", func() {
		if _, err := m.Forward(toks, B, T); err != nil {
			b.Fatal(err)
		}
	})
}

// teamAB runs fn in blocks of block calls with the blas team off and on in
// turn, once per benchmark iteration each, and reports each mode's mean time
// per call, the median over block pairs of off/on (the team's speed-up) and
// the team's stalls, so that load that comes and goes on a shared machine
// hits both modes alike.
func teamAB(b *testing.B, block int, unit string, fn func()) {
	defer blas.SetTeam(blas.SetTeam(true))
	var sum [2]time.Duration
	var ratios []float64
	_, stalls0 := blas.TeamStats()
	for b.Loop() {
		var d [2]time.Duration
		for mode := range 2 {
			blas.SetTeam(mode == 1)
			t0 := time.Now()
			for range block {
				fn()
			}
			d[mode] = time.Since(t0)
			sum[mode] += d[mode]
		}
		ratios = append(ratios, d[0].Seconds()/d[1].Seconds())
	}
	slices.Sort(ratios)
	n := float64(b.N * block)
	b.ReportMetric(sum[0].Seconds()/n*1e3, "ms/"+unit+"-off")
	b.ReportMetric(sum[1].Seconds()/n*1e3, "ms/"+unit+"-on")
	b.ReportMetric(ratios[len(ratios)/2], "speedup")
	_, stalls := blas.TeamStats()
	b.ReportMetric(float64(stalls-stalls0), "stalls")
}
