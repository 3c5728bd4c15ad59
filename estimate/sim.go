package estimate

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/autocompress/autocompress/workload"
)

// Simulator runs the continuous-batching simulation (costmodel.md §4.2):
// FCFS admission while sequence slots and KV capacity allow, a per-step
// token budget filled with one token per running decode and then prefill
// chunks (chunked prefill), KV reserved for a request's full length at
// admission (no preemption), and closed-loop, Poisson or offline arrivals.
// A Simulator reuses its buffers between runs; it is not safe for
// concurrent use.
type Simulator struct {
	reqs []workload.Request
	st   []simReq
	wait []int32
	pre  []int32
	heap []heapItem
	// late holds closed-loop requests sent during the step in flight
	// (simParams.late): late[0] joins the queue after this step, late[1]
	// after the next one.
	late  [2][]int32
	ttft  []float64
	tpot  []float64
	e2e   []float64
	steps int
}

type simReq struct {
	arrival, first, done float64
	admitted             float64 // when it got a sequence slot (and KV)
	ready                float64 // when it reached the engine's queue
	prefilled            int
	ctx0                 float64
}

type heapItem struct {
	finish int64
	idx    int32
}

// maxSimRequests bounds the requests one simulation samples (its indices
// are int32): a validated workload (workload.MaxConcurrency,
// workload.MaxRequests) stays far below it.
const maxSimRequests = 1 << 28

// ErrNoProgress is returned when no waiting request can ever be admitted
// (a request larger than the whole KV capacity).
var ErrNoProgress = errors.New("simulation cannot admit a request: it is larger than the KV capacity")

type simParams struct {
	budget   int
	maxSeqs  int
	capacity float64 // KV tokens (Inf when unlimited)
	alpha0   float64
	// firstSteps delays every token by that many decode steps.
	firstSteps float64
	// alphaTok is the front end's time per prompt token (Coeffs.AlphaTok).
	alphaTok float64
	// reserve is the share of a request's output its admission counts
	// against the KV capacity (see Engine.outputReserve).
	reserve float64
	stagger float64 // closed loop: spread of the clients' first requests (s)
	// late: a client's next request reaches a busy engine after its next
	// step has started (llama-server's loop starts the next batch as soon as
	// it has sent the last token), so it waits for that step to end.
	late bool
	// promptBudget: the budget counts prompt tokens only, decodes run
	// beside it (the native engine's scheduler).
	promptBudget bool
}

// run simulates w and returns the statistics over the measured requests.
func (sim *Simulator) run(m *stepModel, p simParams, w *workload.Workload) (Latency, error) {
	mode := w.Mode()
	conc := w.Concurrency
	n := w.Requests()
	if conc < 0 || n < 0 || conc > maxSimRequests/4 || n > maxSimRequests/4 {
		// Unreachable through Compile, which validates the workload; the
		// sums below could otherwise wrap.
		return Latency{}, fmt.Errorf("estimate: cannot simulate %d requests at concurrency %d (at most %d)", n, conc, maxSimRequests/4)
	}
	warm := 0
	total := n // requests sampled: the measured ones plus closed-loop fillers
	if mode == workload.ClosedLoop {
		warm = conc
		n = max(n, warm+max(2*conc, 32))
		// The clients keep sending until every measured request is done, so
		// the measured ones never see the loop drain (fewer prompts to share
		// steps with would bias TTFT and TPOT low); the fillers are not measured.
		total = n + conc
	}
	sim.reqs = w.SampleInto(sim.reqs[:0], total)
	sim.st = slices.Grow(sim.st[:0], total)[:total]
	for i := range sim.st {
		sim.st[i] = simReq{arrival: sim.reqs[i].Arrival, ready: sim.reqs[i].Arrival, first: -1, done: -1}
	}
	sim.wait, sim.pre, sim.heap = sim.wait[:0], sim.pre[:0], sim.heap[:0]
	sim.late[0], sim.late[1] = sim.late[0][:0], sim.late[1][:0]
	next := 0 // next request not yet arrived
	initial := 0
	if mode == workload.ClosedLoop {
		// Clients start spread over one request lifetime (p.stagger) so the
		// loop begins near its steady state instead of in lock-step.
		initial = min(conc, n)
		for i := 0; i < initial; i++ {
			sim.st[i].arrival = p.stagger * float64(i) / float64(initial)
			sim.st[i].ready = sim.st[i].arrival
		}
		next = initial
	}
	started := 0
	now := 0.0
	var step int64
	kvUsed := 0.0
	decodeCtx := 0.0
	completed := 0
	tWarm := 0.0
	outAfterWarm := 0.0
	budget := p.budget
	for completed < n {
		if mode != workload.ClosedLoop {
			for next < n && sim.st[next].arrival <= now {
				sim.wait = append(sim.wait, int32(next))
				next++
			}
		} else {
			for started < initial && sim.st[started].arrival <= now {
				sim.wait = append(sim.wait, int32(started))
				started++
			}
		}
		d := len(sim.heap)
		room := budget - d
		if p.promptBudget {
			room = budget
		}
		var b Batch
		b.Decode = float64(d)
		b.DecodeCtx = decodeCtx
		// Continue partial prefills, then admit FCFS.
		for _, i := range sim.pre {
			if room <= 0 {
				break
			}
			r := &sim.st[i]
			in := sim.reqs[i].Input
			chunk := min(in-r.prefilled, room)
			addChunk(&b, float64(r.prefilled), float64(chunk), r.prefilled+chunk == in)
			room -= chunk
		}
		for room > 0 && len(sim.wait) > 0 && d+len(sim.pre) < p.maxSeqs {
			i := sim.wait[0]
			need := float64(sim.reqs[i].Input) + p.reserve*float64(sim.reqs[i].Output)
			if kvUsed+need > p.capacity {
				break
			}
			sim.wait = sim.wait[1:]
			kvUsed += need
			sim.pre = append(sim.pre, i)
			sim.st[i].admitted = now
			in := sim.reqs[i].Input
			chunk := min(in, room)
			addChunk(&b, 0, float64(chunk), chunk == in)
			room -= chunk
		}
		if b.Decode == 0 && b.Prefill == 0 {
			if len(sim.late[0])+len(sim.late[1]) > 0 {
				// An idle engine takes the requests at once.
				for _, j := range sim.late[0] {
					sim.st[j].ready = now
				}
				for _, j := range sim.late[1] {
					sim.st[j].ready = now
				}
				sim.wait = append(append(sim.wait, sim.late[0]...), sim.late[1]...)
				sim.late[0], sim.late[1] = sim.late[0][:0], sim.late[1][:0]
				continue
			}
			if mode != workload.ClosedLoop && next < n {
				now = math.Max(now, sim.st[next].arrival)
				continue
			}
			if mode == workload.ClosedLoop && started < initial {
				now = math.Max(now, sim.st[started].arrival)
				continue
			}
			return Latency{}, ErrNoProgress
		}
		tau := m.time(b)
		now += tau
		step++
		// Apply the prefill chunks in the same order they were scheduled.
		room = budget - d
		if p.promptBudget {
			room = budget
		}
		keep := sim.pre[:0]
		for _, i := range sim.pre {
			r := &sim.st[i]
			in := sim.reqs[i].Input
			if room > 0 {
				chunk := min(in-r.prefilled, room)
				r.prefilled += chunk
				room -= chunk
			}
			if r.prefilled < in {
				keep = append(keep, i)
				continue
			}
			r.first = now
			out := sim.reqs[i].Output
			if out <= 1 {
				r.done = now
				kvUsed -= float64(in) + p.reserve*float64(out)
				if int(i) < n {
					completed++
				}
				if completed == warm {
					tWarm = now
				}
				if completed > warm {
					outAfterWarm += float64(out)
				}
				sim.finish(i, mode, &next, total, now, p.late)
				continue
			}
			r.ctx0 = float64(in + 1)
			sim.push(heapItem{finish: step + int64(out-1), idx: i})
			decodeCtx += r.ctx0
		}
		sim.pre = keep
		decodeCtx += float64(d)
		for len(sim.heap) > 0 && sim.heap[0].finish <= step {
			it := sim.pop()
			i := it.idx
			r := &sim.st[i]
			r.done = now
			in, out := sim.reqs[i].Input, sim.reqs[i].Output
			decodeCtx -= float64(in + out)
			kvUsed -= float64(in) + p.reserve*float64(out)
			if int(i) < n {
				completed++
			}
			if completed == warm {
				tWarm = now
			}
			if completed > warm {
				outAfterWarm += float64(out)
			}
			sim.finish(i, mode, &next, total, now, p.late)
		}
		if p.late {
			// Requests sent during the previous step have arrived by now; those
			// sent at the end of this one arrive while the next step runs.
			for _, j := range sim.late[0] {
				sim.st[j].ready = now
			}
			sim.wait = append(sim.wait, sim.late[0]...)
			sim.late[0], sim.late[1] = sim.late[1], sim.late[0][:0]
		}
	}
	sim.steps = int(step)
	// Statistics over measured requests (closed loop: those sent after the
	// initial burst).
	sim.ttft, sim.tpot, sim.e2e = sim.ttft[:0], sim.tpot[:0], sim.e2e[:0]
	inTok, outTok := 0.0, 0.0
	queued := 0.0
	first, last := math.Inf(1), 0.0
	frontSum := 0.0 // per-request front-end time (α0 + AlphaTok × prompt)
	for i := warm; i < n; i++ {
		r := &sim.st[i]
		q := sim.reqs[i]
		front := p.alpha0 + p.alphaTok*float64(q.Input)
		sim.ttft = append(sim.ttft, r.first-r.arrival+front)
		sim.e2e = append(sim.e2e, r.done-r.arrival+front)
		frontSum += front
		if q.Output > 1 {
			sim.tpot = append(sim.tpot, (r.done-r.first)/float64(q.Output-1))
		}
		queued += r.admitted - r.ready
		inTok += float64(q.Input)
		outTok += float64(q.Output)
		first = math.Min(first, r.arrival)
		last = math.Max(last, r.done)
	}
	var l Latency
	l.TTFT, l.TTFTP90 = meanP90(sim.ttft)
	l.TPOT, l.TPOTP90 = meanP90(sim.tpot)
	l.E2E, l.E2EP90 = meanP90(sim.e2e)
	front := frontSum / float64(max(n-warm, 1)) // mean front-end time, outside the engine
	// Tokens reach the client FirstSteps decode steps after the step that
	// computed them (see Coeffs.FirstSteps): the first one, and so the
	// whole request, is that much later.
	if shift := p.firstSteps * l.TPOT; shift > 0 {
		l.TTFT += shift
		l.TTFTP90 += shift
		l.E2E += shift
		l.E2EP90 += shift
		front += shift // counted like the per-request overhead below
	}
	// Queue: the wait for a sequence slot (and KV) once at the engine.
	l.Queue = queued / float64(max(n-warm, 1))
	span := last - first
	if mode == workload.ClosedLoop && l.E2E > 0 {
		// Little's law over the measured requests: conc requests in the system.
		m := float64(n - warm)
		l.RequestsPerS = float64(conc) / (l.E2E - front)
		l.OutputTokS = l.RequestsPerS * outTok / m
		l.PrefillTokS = l.RequestsPerS * inTok / m
		span = 0
	}
	_, _ = tWarm, outAfterWarm
	if span > 0 {
		l.OutputTokS = outTok / span
		l.PrefillTokS = inTok / span
		l.RequestsPerS = float64(n-warm) / span
	}
	if l.TPOT > 0 {
		l.DecodeTokS = 1 / l.TPOT
	}
	l.Running = l.RequestsPerS * (l.E2E - front)
	if mode == workload.ClosedLoop {
		l.Running = float64(conc)
	}
	if span > 0 {
		l.StepTime = span / float64(max(step, 1))
	}
	return l, nil
}

func addChunk(b *Batch, offset, chunk float64, last bool) {
	b.Prefill += chunk
	b.PrefillAtt += chunk * (offset + (chunk+1)/2)
	b.PrefillSeq++
	if last {
		b.PrefillDone++
	}
}

// finish hands the client of a closed loop its next request.
func (sim *Simulator) finish(i int32, mode workload.Mode, next *int, n int, now float64, late bool) {
	if mode != workload.ClosedLoop || *next >= n {
		return
	}
	j := *next
	*next++
	sim.st[j].arrival, sim.st[j].ready = now, now
	if late {
		sim.late[1] = append(sim.late[1], int32(j))
		return
	}
	sim.wait = append(sim.wait, int32(j))
}

func (sim *Simulator) push(it heapItem) {
	h := append(sim.heap, it)
	k := len(h) - 1
	for k > 0 {
		p := (k - 1) / 2
		if h[p].finish <= h[k].finish {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
	sim.heap = h
}

func (sim *Simulator) pop() heapItem {
	h := sim.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	k := 0
	for {
		l := 2*k + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r].finish < h[l].finish {
			c = r
		}
		if h[k].finish <= h[c].finish {
			break
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
	sim.heap = h
	return top
}

// meanP90 returns the mean and the 90th percentile (nearest rank); it sorts xs.
func meanP90(xs []float64) (mean, p90 float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	slices.Sort(xs)
	k := int(math.Ceil(0.9*float64(len(xs)))) - 1
	return s / float64(len(xs)), xs[max(k, 0)]
}

// Simulate runs the simulation for the compiled deployment and model m.
func (c *Compiled) Simulate(sim *Simulator, m *Summary) (Latency, error) {
	if !planMemory(&c.mem, m, c.hw, &c.r, c.ctx, c.r.maxSeqs) {
		f := c.mem.Fail
		return Latency{}, &f
	}
	sm := c.stepModel(m)
	p := simParams{budget: c.r.budgetToks, maxSeqs: c.r.maxSeqs, capacity: c.mem.KVCapacityTokens, alpha0: c.co.Alpha0, alphaTok: c.co.AlphaTok, firstSteps: c.co.FirstSteps, reserve: c.r.spec.OutputReserve}
	if c.mode == workload.ClosedLoop {
		// Burst is the fitted share of clients moving in lock-step: the
		// initial requests spread over (1 − Burst) of a request lifetime.
		p.stagger = (1 - math.Min(c.co.Burst, 1)) * (c.latency(&sm, &c.mem).E2E - c.co.Alpha0)
	}
	if c.r.spec.Sched == ServeScheduler && c.mode == workload.ClosedLoop {
		// nativeLoop follows engine.Serve's closed loop step by step already.
		return c.nativeLatency(&sm), nil
	}
	if c.r.spec.Sched == ServeScheduler {
		// engine.Serve: at most maxSeqs sequences in flight, 512 prompt
		// tokens per step beside the decodes (open-loop arrivals; the
		// closed loop is nativeLoop's above).
		p = simParams{budget: c.r.budgetToks, maxSeqs: c.r.maxSeqs, capacity: math.Inf(1), alpha0: c.nat.Alpha0, reserve: 1, promptBudget: true}
		return sim.run(&sm, p, &c.w)
	}
	if c.r.spec.Sched == SlotScheduler {
		// llama.cpp: one slot per sequence, each with its own context.
		p.maxSeqs = min(c.r.maxSeqs, max(c.mem.MaxConcurrency, 1))
		p.capacity = math.Inf(1)
		p.late = true
	}
	return sim.run(&sm, p, &c.w)
}
