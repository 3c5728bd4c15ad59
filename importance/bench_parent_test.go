package importance

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
)

// BenchmarkImportanceParent scores a real-size parent: by default a tiny
// stand-in of the Llama-3.1-8B shape (2 layers, every width divided by 8)
// on 1,024 tokens, so that it finishes in seconds anywhere; the full shape
// with 8,192 tokens, on a quiet machine with 24 GiB:
//
//	autocompress init --config meta-llama/Llama-3.1-8B --out /data/llama8b-init
//	go test ./importance -run '^$' -bench ImportanceParent -benchtime 1x -parent /data/llama8b-init -parent-tokens 8192 -parent-seq-len 128 -parent-batch 8
//
// Short sequences keep the budget's floor low: the skip losses are scored
// on whole sequences, and one of n costs about 1.5 × layers / n passes (at
// 32 layers, 16 sequences of 512 tokens would cost 3 passes each, past the
// budget of 4 with the calibration pass; 64 of 128 cost 0.75 each).
//
// It reports the wall time, the equivalent forward passes the computation
// cost (Scores.Passes, against the default budget of 4), the sequences the
// skip losses were scored on, and the process's peak RSS.
var (
	benchParent       = flag.String("parent", "", "checkpoint directory of the parent (default: init a tiny stand-in of the Llama-3.1-8B shape)")
	benchParentTokens = flag.Int("parent-tokens", 1024, "calibration tokens")
	benchParentSeqLen = flag.Int("parent-seq-len", 128, "tokens per sequence")
	benchParentBatch  = flag.Int("parent-batch", 2, "sequences per forward pass")
	benchParentPasses = flag.Float64("parent-passes", 4, "pass budget (0: every sequence scored)")
)

func BenchmarkImportanceParent(b *testing.B) {
	dir := *benchParent
	if dir == "" {
		a, err := architecture.Preset("meta-llama/Llama-3.1-8B")
		if err != nil {
			b.Fatal(err)
		}
		a, err = a.StandIn(2, 8)
		if err != nil {
			b.Fatal(err)
		}
		dir = filepath.Join(b.TempDir(), "parent")
		if err := engine.Init(context.Background(), a, dir, engine.InitOptions{Seed: 1, DType: checkpoint.BF16}); err != nil {
			b.Fatal(err)
		}
	}
	m, err := engine.LoadWith(dir, engine.LoadOptions{Mapped: true})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	T := *benchParentSeqLen
	n := max(1, *benchParentTokens/T)
	r := rand.New(rand.NewPCG(3, 4))
	data := make([][]int32, n)
	for i := range data {
		data[i] = make([]int32, T+1)
		for j := range data[i] {
			data[i][j] = int32(r.IntN(m.Arch().Vocab))
		}
	}
	var s *Scores
	var elapsed time.Duration
	for b.Loop() {
		t0 := time.Now()
		if s, err = Compute(context.Background(), m, data, Options{Batch: *benchParentBatch, Passes: *benchParentPasses}); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(t0)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	rss := float64(ru.Maxrss<<10) / (1 << 30)
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/scoring")
	b.ReportMetric(s.Passes, "equivalent-passes")
	b.ReportMetric(float64(s.SkipSequences), "scored-seqs")
	b.ReportMetric(rss, "peak-RSS-GiB")
	fmt.Fprintf(os.Stderr, "importance of %s on %d × %d tokens: %.1f s, %.2f equivalent forward passes (budget %g), skip losses on %d of %d sequences, peak RSS %.2f GiB\n",
		m.Arch().Name, n, T, elapsed.Seconds()/float64(b.N), s.Passes, *benchParentPasses, s.SkipSequences, n, rss)
}
