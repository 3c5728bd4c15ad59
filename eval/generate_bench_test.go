package eval

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/tokenizer"
)

// BenchmarkGenerateVsServe compares generation throughput (output tokens
// per second) of EngineLM.Generate, as the generation tasks run it (stop
// sequences checked on the decoded text after every token), with
// bench-serve's engine.Serve on the same model (the embedded parent), the
// same batch (16 sequences), the same 64 random prompt tokens and 64
// output tokens per request (neither stops early: EOS off, stop sequences
// that never occur), both timed in each iteration, one after the other.
// gen/serve is the ratio of the two throughputs (1: as fast as
// bench-serve; the issue asks for at least 0.5). Run with
//
//	go test -run '^$' -bench GenerateVsServe -benchtime 3x ./eval
func BenchmarkGenerateVsServe(b *testing.B) {
	dir, err := parent.Dir()
	if err != nil {
		b.Fatal(err)
	}
	m, err := engine.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	const batch, in, out = 16, 64, 64
	r := rand.New(rand.NewPCG(1, 2))
	var sreqs []engine.ServeRequest
	var greqs []GenRequest
	for range batch {
		p := make([]int32, in)
		for i := range p {
			p[i] = int32(r.IntN(m.Arch().Vocab))
		}
		sreqs = append(sreqs, engine.ServeRequest{Prompt: p, Output: out})
		greqs = append(greqs, GenRequest{Prompt: p, MaxTokens: out, Until: []string{"\x00never\x00", "\x01"}})
	}
	decode := func(ids []int32) (string, error) {
		b := make([]int, len(ids))
		for i, v := range ids {
			b[i] = int(v)
		}
		return tok.Decode(b, true)
	}
	e := &EngineLM{Model: m}
	var serveSec, genSec float64
	var serveTok, genTok int
	for b.Loop() {
		t0 := time.Now()
		st, err := m.Serve(context.Background(), sreqs, engine.ServeOptions{Concurrency: batch, MaxBatch: batch})
		if err != nil {
			b.Fatal(err)
		}
		serveSec += time.Since(t0).Seconds()
		serveTok += st.OutputTokens
		t0 = time.Now()
		gens, err := e.Generate(context.Background(), greqs, GenOptions{Decode: decode, EOS: []int32{}, Batch: batch})
		if err != nil {
			b.Fatal(err)
		}
		genSec += time.Since(t0).Seconds()
		for _, g := range gens {
			genTok += g.Tokens
		}
	}
	if genTok != serveTok {
		b.Fatalf("generated %d tokens, bench-serve %d: not the same work", genTok, serveTok)
	}
	gen, serve := float64(genTok)/genSec, float64(serveTok)/serveSec
	b.ReportMetric(gen, "gen-tok/s")
	b.ReportMetric(serve, "serve-tok/s")
	b.ReportMetric(gen/serve, "gen/serve")
	b.Logf("batch %d, %d+%d tokens: generation %.0f tok/s, bench-serve %.0f tok/s, ratio %.2f", batch, in, out, gen, serve, gen/serve)
}
