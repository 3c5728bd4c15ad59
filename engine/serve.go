package engine

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// ServeRequest is one request of a serving benchmark.
type ServeRequest struct {
	// Arrival is when the request arrives, in seconds from the start of the
	// run; used only without closed-loop concurrency.
	Arrival float64
	Prompt  []int32
	// Output is the number of tokens to generate. Generation does not stop
	// at EOS (as in serving benchmarks' ignore_eos), so every run does the
	// same work.
	Output int
}

// ServeOptions configure Serve's scheduler.
type ServeOptions struct {
	// Concurrency > 0 runs a closed loop: that many clients each send their
	// next request when the previous one completes. 0 uses the requests'
	// arrival times.
	Concurrency int
	// MaxBatch is the most sequences in flight, the engine's sequence
	// limit (estimate's --max-num-seqs; 0: Concurrency, or 256). With fewer
	// than Concurrency, the other clients' requests wait in arrival order
	// and their wait counts in TTFT and E2E, as in a real server's queue.
	MaxBatch int
	// PrefillTokens is the most prompt tokens processed per step across all
	// sequences (chunked prefill; 0: 512). Decoding sequences always
	// advance by one token per step.
	PrefillTokens int
}

// RequestStats are the measured timings of one request, in seconds.
type RequestStats struct {
	Input, Output int
	// Arrival is when the request was sent, Start when it was admitted.
	Arrival, Start float64
	// TTFT is arrival to first generated token; TPOT the mean time per
	// generated token after the first; E2E arrival to last token.
	TTFT, TPOT, E2E float64
	Tokens          []int32
}

// ServeStats summarise a Serve run.
type ServeStats struct {
	Requests     []RequestStats
	Wall         float64 // seconds from start to the last completion
	InputTokens  int
	OutputTokens int
	Steps        int
	MaxBatch     int   // largest number of sequences in one step
	PeakKVBytes  int64 // most KV-cache memory held at once
	// CPUSeconds is the user+system CPU time the process used during the
	// run (0 where the OS does not report it).
	CPUSeconds float64
}

type serveSeq struct {
	req     int
	cache   *Cache
	fed     int // prompt tokens already in the cache
	tokens  []int32
	lastTok float64
}

// Serve runs requests through the model with continuous batching: every
// step runs one Step over all sequences in flight, each decoding one token
// or feeding a chunk of its prompt, and admits new requests as soon as
// others finish. Tokens are chosen greedily. Times are wall-clock.
func (m *Model) Serve(ctx context.Context, reqs []ServeRequest, opt ServeOptions) (*ServeStats, error) {
	for i, r := range reqs {
		if len(r.Prompt) == 0 || r.Output <= 0 {
			return nil, &InputError{fmt.Sprintf("serve: request %d has %d prompt tokens and %d output tokens (both must be ≥ 1)", i, len(r.Prompt), r.Output)}
		}
	}
	if err := opt.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	maxBatch, budget := opt.MaxBatch, opt.PrefillTokens
	st := &ServeStats{Requests: make([]RequestStats, len(reqs))}
	// Arrival order: closed loop sends the first Concurrency requests at 0
	// and each further one when a slot frees; open loop uses Arrival.
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	closed := opt.Concurrency > 0
	if !closed {
		sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].Arrival < reqs[order[b]].Arrival })
	}
	next := 0
	cpu0 := processCPUSeconds()
	start := time.Now()
	now := func() float64 { return time.Since(start).Seconds() }
	var active []*serveSeq
	var kv int64
	// Reused across steps, so that the loop does not allocate (garbage
	// collection during a run is timing noise): the step's lists, and the
	// KV caches of finished requests (kept by the model for later runs
	// too), resliced for the next request.
	var caches []*Cache
	var toks [][]int32
	var seqs []*serveSeq
	free := &m.freeCaches
	// sent holds, in order, the times at which closed-loop clients sent a
	// request not yet admitted: all clients at 0, then each at the step
	// its previous request finished.
	var sent []float64
	if closed {
		sent = make([]float64, opt.Concurrency, opt.Concurrency+1)
	}
	for done := 0; done < len(reqs); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Admit.
		for next < len(reqs) && len(active) < maxBatch {
			i := order[next]
			var arrival float64
			if closed {
				if len(sent) == 0 {
					break
				}
				arrival = sent[0]
				sent = sent[:copy(sent, sent[1:])]
			} else {
				arrival = reqs[i].Arrival
				if arrival > now() {
					break
				}
			}
			r := reqs[i]
			s := &serveSeq{req: i, cache: m.reuseCache(free, len(r.Prompt)+r.Output), tokens: make([]int32, 0, r.Output)}
			kv += s.cache.Bytes()
			st.PeakKVBytes = max(st.PeakKVBytes, kv)
			st.Requests[i] = RequestStats{Input: len(r.Prompt), Output: r.Output, Arrival: arrival, Start: now()}
			active = append(active, s)
			next++
		}
		if len(active) == 0 {
			// Open loop, nothing in flight: wait for the next arrival.
			time.Sleep(time.Duration((reqs[order[next]].Arrival - now()) * float64(time.Second)))
			continue
		}
		// Build the step: decoders first, then prompt chunks within budget.
		caches, toks, seqs = caches[:0], toks[:0], seqs[:0]
		left := budget
		for _, s := range active {
			r := reqs[s.req]
			if s.fed == len(r.Prompt) {
				caches, toks, seqs = append(caches, s.cache), append(toks, s.tokens[len(s.tokens)-1:]), append(seqs, s)
			}
		}
		for _, s := range active {
			r := reqs[s.req]
			if s.fed < len(r.Prompt) && left > 0 {
				n := min(left, len(r.Prompt)-s.fed)
				left -= n
				caches, toks, seqs = append(caches, s.cache), append(toks, r.Prompt[s.fed:s.fed+n]), append(seqs, s)
			}
		}
		logits, err := m.Step(caches, toks, false)
		if err != nil {
			return nil, err
		}
		st.Steps++
		st.MaxBatch = max(st.MaxBatch, len(seqs))
		t := now()
		for j, s := range seqs {
			r := reqs[s.req]
			rs := &st.Requests[s.req]
			if s.fed < len(r.Prompt) {
				s.fed += len(toks[j])
				if s.fed < len(r.Prompt) {
					continue // more prompt to feed
				}
				rs.TTFT = t - rs.Arrival
			}
			s.tokens = append(s.tokens, Argmax(logits[j]))
			s.lastTok = t
		}
		// Retire finished sequences.
		kept := active[:0]
		for _, s := range active {
			rs := &st.Requests[s.req]
			if len(s.tokens) < reqs[s.req].Output {
				kept = append(kept, s)
				continue
			}
			rs.E2E = s.lastTok - rs.Arrival
			if rs.Output > 1 {
				rs.TPOT = (rs.E2E - rs.TTFT) / float64(rs.Output-1)
			}
			rs.Tokens = s.tokens
			kv -= s.cache.Bytes()
			*free = append(*free, s.cache)
			if len(*free) > maxBatch { // keep at most one batch's worth
				*free = append((*free)[:0], (*free)[1:]...)
			}
			s.cache = nil
			st.InputTokens += rs.Input
			st.OutputTokens += rs.Output
			done++
			if closed {
				sent = append(sent, t)
			}
		}
		active = kept
	}
	st.Wall = now()
	st.CPUSeconds = processCPUSeconds() - cpu0
	return st, nil
}

// reuseCache returns an empty cache for capacity tokens, taking the first
// cache in *free whose memory suffices (removed from *free) or making one.
// A reused cache is resliced to capacity, so Bytes reports what the request
// needs, not what the buffer once held.
func (m *Model) reuseCache(free *[]*Cache, capacity int) *Cache {
	for i, c := range *free {
		if c.fits(m, capacity) {
			last := len(*free) - 1
			(*free)[i] = (*free)[last]
			*free = (*free)[:last]
			c.resize(m, capacity)
			return c
		}
	}
	return m.NewCache(capacity)
}
