package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/autocompress/autocompress/prune"
)

// BenchmarkCandidate measures one candidate of a search over the embedded
// parent with the measured proxy: build the child in memory (Child) and
// score it against a reference of 16 rows × 128 tokens (Reference.Score).
// The candidate halves every FFN and drops two layers. It reports
// candidates/s and the cost of one candidate in parent forward passes over
// the same tokens, measured in the same run (a ratio that survives a loaded
// machine better than the absolute time):
//
//	go test -run XXX -bench Candidate ./proxy
func BenchmarkCandidate(b *testing.B) {
	par, _ := loadParent(b)
	const rows, T = 16, 128
	data := randRows(9, rows, T, par.Arch().Vocab)
	ctx := context.Background()
	ref, err := NewReference(ctx, par, data, Options{})
	if err != nil {
		b.Fatal(err)
	}
	plan := &prune.Plan{Version: 1, Layers: []prune.LayerPlan{{Layer: 2, Remove: true}, {Layer: 5, Remove: true}}}
	for _, l := range []int{0, 1, 3, 4, 6, 7} {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Neurons: seq(0, 256, 1)})
	}
	in := make([]int32, 0, 8*T)
	for _, r := range data[:8] {
		in = append(in, r[:T]...)
	}
	// Peer: the parent's forward pass over the same 16 × 128 tokens.
	parentPass := func() time.Duration {
		start := time.Now()
		for range 2 {
			if _, err := par.Forward(in, 8, T); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var cand, peer time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		child, err := Child(par, plan)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ref.Score(ctx, child, Options{}); err != nil {
			b.Fatal(err)
		}
		cand += time.Since(start)
		peer += parentPass()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/cand.Seconds(), "candidates/s")
	b.ReportMetric(cand.Seconds()/peer.Seconds(), "parent-passes/candidate")
	b.ReportMetric(float64(rows*T), "tokens/candidate")
}
