package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestServeMatchesGenerate: continuous batching with chunked prefill gives
// every request the tokens it gets when generated alone.
func TestServeMatchesGenerate(t *testing.T) {
	m, err := New(uniformArch(), 11)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 12, 0.5)
	r := rand.New(rand.NewPCG(4, 4))
	var reqs []ServeRequest
	for i := range 7 {
		reqs = append(reqs, ServeRequest{Prompt: randTokens(r, 3+5*i, 32), Output: 2 + i%4})
	}
	for _, opt := range []ServeOptions{{Concurrency: 3, PrefillTokens: 8}, {Concurrency: 1}, {MaxBatch: 4, PrefillTokens: 17}} {
		st, err := m.Serve(context.Background(), reqs, opt)
		if err != nil {
			t.Fatal(err)
		}
		if opt.Concurrency > 0 && st.MaxBatch > opt.Concurrency {
			t.Errorf("%+v: %d sequences in one step", opt, st.MaxBatch)
		}
		for i, rq := range reqs {
			want, err := m.Generate(context.Background(), rq.Prompt, GenerateOptions{MaxTokens: rq.Output, Greedy: true, EOS: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			rs := st.Requests[i]
			if fmt.Sprint(rs.Tokens) != fmt.Sprint(want) {
				t.Fatalf("%+v request %d: served %v, alone %v", opt, i, rs.Tokens, want)
			}
			if rs.TTFT <= 0 || rs.E2E < rs.TTFT || (rs.Output > 1 && rs.TPOT <= 0) {
				t.Fatalf("request %d timings %+v", i, rs)
			}
		}
		if st.OutputTokens != 2+3+4+5+2+3+4 || st.PeakKVBytes <= 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}
