package eval

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
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

// BenchmarkEngineLM reports how much faster EngineLM scores
// HellaSwag-shaped questions (a 48-token context, four 24-token endings)
// than scoring each choice with its own full forward pass, measured in the
// same run on a 4-layer, hidden-192 Llama (the parent's widths).
func BenchmarkEngineLM(b *testing.B) {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 4096, Hidden: 192,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 512,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{0}}
	for range 4 {
		a.Layers = append(a.Layers, architecture.Layer{Attention: &architecture.Attention{Heads: 8, KVHeads: 2, HeadDim: 24},
			MLP: &architecture.MLP{Width: 512, Gated: true, Activation: "silu"}})
	}
	m, err := engine.New(a, 1)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	seq := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(4096))
		}
		return s
	}
	var reqs []Request
	for range 16 {
		c := seq(48)
		for range 4 {
			reqs = append(reqs, Request{c, seq(24)})
		}
	}
	lm := &EngineLM{Model: m}
	var grouped, naive time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := lm.LogLikelihood(context.Background(), reqs, nil); err != nil {
			b.Fatal(err)
		}
		grouped += time.Since(t0)
		t0 = time.Now()
		for _, q := range reqs {
			full := append(append([]int32(nil), q.Context...), q.Cont...)
			if _, err := m.Forward(full[:len(full)-1], 1, len(full)-1); err != nil {
				b.Fatal(err)
			}
		}
		naive += time.Since(t0)
	}
	b.ReportMetric(naive.Seconds()/grouped.Seconds(), "naive/grouped")
	b.ReportMetric(float64(len(reqs)*b.N)/grouped.Seconds(), "req/s")
}
