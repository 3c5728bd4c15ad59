package importance

import (
	"context"
	"testing"
	"time"
)

// BenchmarkObserverOverhead measures the cost of accumulating the Minitron
// statistics: the same forward passes with and without the collector, in
// the same run, reported as a ratio (1.0 = free).
func BenchmarkObserverOverhead(b *testing.B) {
	m := model(b)
	data := rows(16, 64, 5)
	var with, without time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := meanLoss(context.Background(), m, data, 8, nil); err != nil {
			b.Fatal(err)
		}
		without += time.Since(t0)
		t0 = time.Now()
		if _, err := Compute(context.Background(), m, data, Options{Batch: 8, NoSkipLoss: true}); err != nil {
			b.Fatal(err)
		}
		with += time.Since(t0)
	}
	b.ReportMetric(with.Seconds()/without.Seconds(), "x-plain-forward")
	b.ReportMetric(float64(16*64*b.N)/with.Seconds(), "tok/s")
}
