package eval

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkScoreSliding reports the cost of sliding windows (stride
// SeqLen/4) relative to packed windows on the same tokens, measured in the
// same run; the ideal ratio is 4 (four times the windows).
func BenchmarkScoreSliding(b *testing.B) {
	m := tinyModel(b, 64, 1)
	r := rand.New(rand.NewPCG(1, 1))
	ids := make([]int32, 2049)
	for i := range ids {
		ids[i] = int32(r.IntN(64))
	}
	var packed, sliding time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Score(context.Background(), m, ids, 0, Options{SeqLen: 64, Batch: 8}); err != nil {
			b.Fatal(err)
		}
		packed += time.Since(t0)
		t0 = time.Now()
		if _, err := Score(context.Background(), m, ids, 0, Options{SeqLen: 64, Stride: 16, Batch: 8}); err != nil {
			b.Fatal(err)
		}
		sliding += time.Since(t0)
	}
	b.ReportMetric(sliding.Seconds()/packed.Seconds(), "sliding/packed")
	b.ReportMetric(float64(2048*b.N)/packed.Seconds(), "packed-tok/s")
}
