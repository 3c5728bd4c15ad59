package engine

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// The real-size parent benchmarks. By default they run at a tiny stand-in
// of the Llama-3.1-8B shape (2 layers, every width divided by 8), so that
// they finish in seconds anywhere; the full shape, on a quiet machine with
// 24 GiB and 20 GB of disk:
//
//	autocompress init --config meta-llama/Llama-3.1-8B --out /data/llama8b-init
//	go test ./engine -run '^$' -bench 'ParentForward$' -benchtime 3x -parent /data/llama8b-init -parent-tokens 512
//	go test ./engine -run '^$' -bench 'ParentForwardStreamed$' -benchtime 3x -parent /data/llama8b-init -parent-tokens 512
//
// (one benchmark per process: the peak RSS they report is the process's).
var (
	benchParent       = flag.String("parent", "", "checkpoint directory for the parent benchmarks (default: init a tiny stand-in of the Llama-3.1-8B shape)")
	benchParentTokens = flag.Int("parent-tokens", 128, "tokens per forward pass in the parent benchmarks")
)

// tinyLlama8B is the Llama-3.1-8B preset with 2 layers and every width
// divided by 8 (hidden 512, 4 heads of 128 sharing 1 KV head, FFN 1792,
// vocab 16032).
func tinyLlama8B(tb testing.TB) *architecture.Model {
	a, err := architecture.Preset("meta-llama/Llama-3.1-8B")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := a.StandIn(2, 8)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// parentDir returns the benchmark parent's checkpoint: -parent, or a bf16
// stand-in written by Init.
func parentDir(b *testing.B) string {
	if *benchParent != "" {
		return *benchParent
	}
	dir := filepath.Join(b.TempDir(), "parent")
	if err := Init(context.Background(), tinyLlama8B(b), dir, InitOptions{Seed: 1, DType: checkpoint.BF16}); err != nil {
		b.Fatal(err)
	}
	return dir
}

// peakRSS is the process's peak resident set (getrusage), in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss << 10 // KiB on Linux
}

func BenchmarkParentForward(b *testing.B)         { benchParentForward(b, false) }
func BenchmarkParentForwardStreamed(b *testing.B) { benchParentForward(b, true) }

// benchParentForward runs forward passes of -parent-tokens tokens of the
// parent, its weights read in place in their checkpoint dtype (streamed one
// layer at a time or not), and reports tokens/s, model GFLOP/s and their
// ratio to the sgemm peak measured in the same run (the median of per-round
// ratios, each against the peak measured just before), and the process's
// peak RSS next to the checkpoint's size.
func benchParentForward(b *testing.B, stream bool) {
	dir := parentDir(b)
	m, err := LoadWith(dir, LoadOptions{Mapped: true, Stream: stream})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	m.SetInference(true)
	T := *benchParentTokens
	r := rand.New(rand.NewPCG(1, 2))
	toks := randTokens(r, T, m.Arch().Vocab)
	flops := m.ForwardFLOPs(1, T)
	p := newPeakProblem()
	p.run()
	if _, err := m.Forward(toks, 1, T); err != nil { // warm up: buffers, pages
		b.Fatal(err)
	}
	var ratios []float64
	var best, peak float64
	var elapsed time.Duration
	b.ResetTimer()
	for b.Loop() {
		pk := 0.0
		for range 3 {
			pk = max(pk, p.run())
		}
		peak = max(peak, pk)
		t0 := time.Now()
		if _, err := m.Forward(toks, 1, T); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		elapsed += d
		g := flops / d.Seconds() / 1e9
		best = max(best, g)
		ratios = append(ratios, g/pk)
	}
	sort.Float64s(ratios)
	st, _ := os.Stat(filepath.Join(dir, checkpoint.SingleFileName))
	var size int64
	if st != nil {
		size = st.Size()
	} else if r, err := checkpoint.Open(dir); err == nil {
		size = r.TotalSize()
		r.Close()
	}
	b.ReportMetric(float64(T*b.N)/elapsed.Seconds(), "tok/s")
	b.ReportMetric(best, "GFLOP/s")
	b.ReportMetric(peak, "sgemm-GFLOP/s")
	b.ReportMetric(ratios[len(ratios)/2], "x-sgemm-peak")
	b.ReportMetric(float64(peakRSS())/(1<<30), "peak-RSS-GiB")
	b.ReportMetric(float64(size)/(1<<30), "weights-GiB")
	fmt.Fprintf(os.Stderr, "%s (stream=%v, %d tokens): %.1f tok/s, %.1f GFLOP/s = %.2f× the sgemm peak (%.1f GFLOP/s) measured in the same run; peak RSS %.2f GiB for %.2f GiB of weights\n",
		m.Arch().Name, stream, T, float64(T*b.N)/elapsed.Seconds(), best, ratios[len(ratios)/2], peak, float64(peakRSS())/(1<<30), float64(size)/(1<<30))
}
