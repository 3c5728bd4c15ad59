package estimate

import (
	"math"
	"math/rand/v2"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// Latency holds the time and throughput predictions of one deployment.
// Times are in seconds, rates in tokens (or requests) per second.
type Latency struct {
	TTFT, TPOT, E2E float64 // means
	// TTFTP90, TPOTP90, E2EP90 are 90th percentiles over requests: from
	// the requests themselves in the simulation, a tail estimate from the
	// workload's length distributions, arrivals and batching on the
	// analytic path (steadyTail).
	TTFTP90, TPOTP90, E2EP90 float64
	// OutputTokS is the server's output-token throughput; PrefillTokS its
	// input-token throughput; DecodeTokS the decode speed one user sees (1/TPOT).
	OutputTokS, PrefillTokS, DecodeTokS float64
	RequestsPerS                        float64
	// Running is the mean number of requests being served; Queue the mean
	// wait for admission included in TTFT and E2E.
	Running, Queue float64
	// PromptWait is the mean wait of a new prompt behind other prompts'
	// prefill once admitted (llama.cpp: for room in n_batch), included in
	// TTFT; the analytic path only.
	PromptWait float64
	// Saturated is true when a Poisson rate exceeds the service capacity.
	Saturated bool
	// StepTime is the mean engine step during steady decode.
	StepTime float64
	Step     Terms // breakdown of that step
}

// steadyIn are the inputs of the analytic closed-loop model.
type steadyIn struct {
	isl, osl float64 // mean lengths
	conc     float64 // clients (closed loop)
	capacity float64 // max concurrent requests that fit (KV and sequence limits)
	budget   float64 // per-step token budget
	alpha0   float64
	// fill marks llama-server's scheduler: each iteration gathers one token
	// per generating slot and then prompt tokens of every slot processing a
	// prompt, up to n_batch (budget). Prompts that arrive together share a
	// step instead of queueing one behind another; they wait only when the
	// prompt tokens in flight exceed the step's room.
	fill bool
	// late marks a closed loop on llama-server: a client's next request
	// arrives just after the server started its next step (see steady).
	late bool
	// tail describes the spread of the workload, for the p90s (see tail).
	tail tailIn
}

// tailIn are the inputs of the analytic p90s: the workload's length
// distributions (precomputed by Compile), its arrival process, and an
// admission wait added by the caller (Poisson).
type tailIn struct {
	isl90, osl90 float64 // 90th percentiles of the prompt and output lengths
	// invDec is E[1/(osl−1)] over requests with more than one output
	// token: the binomial variance of the share of a request's decode
	// steps that carry another prompt's chunk scales with it.
	invDec float64
	// cv2 is the squared coefficient of variation of the gaps between
	// other requests' prompts: 1 for Poisson arrivals, the squared CV of a
	// request's lifetime (≈ of its output length) for a closed loop, whose
	// clients send one request after another.
	cv2 float64
	// poisson marks open arrivals: the number of running requests then
	// fluctuates around its mean (M/G/∞: variance = mean).
	poisson bool
	// wait and waitP: an admission wait of mean wait that a share waitP of
	// the requests incurs (exponential when incurred), whose mean the
	// caller adds to TTFT and E2E; steady adds its spread to the p90s.
	wait, waitP float64
	// skip leaves the p90s equal to the means (inner fixed-point
	// iterations, whose tails nobody reads).
	skip bool
}

// z90 is the standard normal's 90th percentile.
const z90 = 1.2815515655446004

// tailSpread combines independent spreads into the p90 excess over the
// mean: excesses given as p90 − mean of each component and standard
// deviations σ (as z90·σ), root-sum-square, as for a sum of independent,
// roughly normal parts.
func tailSpread(excess ...float64) float64 {
	s := 0.0
	for _, e := range excess {
		s += e * e
	}
	return math.Sqrt(s)
}

// atomExpSigma is the standard deviation of a wait that is 0 with
// probability 1−p and exponential otherwise, with overall mean w:
// E[W²] = 2w²/p.
func atomExpSigma(w, p float64) float64 {
	if w <= 0 || p <= 0 {
		return 0
	}
	return w * math.Sqrt(max(2/min(p, 1)-1, 0))
}

// steady is the analytic steady state of a closed loop of conc clients with
// chunked prefill mixed into decode steps. Per request: n_p prefill steps
// and osl−1 decode steps; with C requests running, a mean step holds
// C·(osl−1)/L decodes and C·isl/L prefill tokens (L = n_p + osl − 1). The
// others' prompts arrive as whole chunks, so my decode steps are priced as
// a mixture of steps with a chunk and decode-only steps (for dense models
// that is the mean step; for MoE it is cheaper, experts touched growing
// sub-linearly with tokens): TPOT is that mixture's mean.
//
// TTFT = α0 + the steps carrying my own prefill chunks + half a step (the
// step in flight when I arrive) + the wait behind other prompts' prefill +
// FirstSteps decode steps (engines that schedule a step ahead return a
// token one step late). The prompt wait is an M/D/1 wait ρ/(2(1−ρ)) own
// prefills (ρ: prefill share of step time, scaled by the fitted Queue),
// capped at (c−1)·ρ/2 because a closed loop of c clients has at most c−1
// other prompts to queue behind, plus the lock-step burst: Burst × (c−1)/2
// prompts prefilled ahead of mine when clients arrive together, a share of
// the others' prefill that is then taken out of my decode steps (each
// cycle's work counted once).
func steady(m *stepModel, in steadyIn) Latency {
	var out Latency
	c := min(in.conc, in.capacity)
	if c < 1 {
		c = 1
	}
	isl, osl := max(in.isl, 1), max(in.osl, 1)
	dec := osl - 1
	np := math.Ceil(isl / in.budget)
	// Over one request's lifetime (L steps) the c running requests each do
	// one prefill; my decode steps carry the other c−1 requests' prefill
	// work and decodes, my prefill steps carry my own chunk as well.
	var b, mine Batch
	L := np + dec
	for range 3 {
		L = np + dec
		if in.fill {
			// n_batch bounds the tokens of a step: c requests need
			// c·(isl+dec) tokens per lifetime of L steps.
			L = max(L, c*(isl+dec)/in.budget)
		}
		b = Batch{
			Decode:     c * dec / L,
			Prefill:    c * isl / L,
			PrefillSeq: c * np / L,
			PrefillAtt: c * isl * (isl + 1) / 2 / L,
		}
		b.PrefillDone = c / L
		b.DecodeCtx = b.Decode * (isl + osl/2)
		o := (c - 1) / c // share of the work done by the others
		mine = Batch{
			Decode:      1 + b.Decode*o,
			Prefill:     b.Prefill * o,
			PrefillSeq:  b.PrefillSeq * o,
			PrefillAtt:  b.PrefillAtt * o,
			PrefillDone: b.PrefillDone * o,
		}
		mine.DecodeCtx = mine.Decode * (isl + osl/2)
		room := max(in.budget-b.Decode, in.budget/8)
		n2 := math.Ceil(isl / room)
		if n2 == np {
			break
		}
		np = n2
	}
	// Others' prompts arrive as chunks of isl/np tokens, not as a thin
	// layer of prefill on every step: a share q of the steps carries a
	// chunk, the rest decode only. For dense models the step cost is linear
	// in the batch and the mixture equals the mean step; for MoE models the
	// experts touched grow sub-linearly with tokens, so pricing the mean
	// step would charge a decode step for experts only a chunk touches.
	// (llama-server's passes follow their own rule, in fill mode.)
	qMine, qAll := 1.0, 1.0
	if !in.fill {
		qMine = min(1, (c-1)*np/L)
		qAll = min(1, c*np/L)
	}
	tm := m.mixed(mine, qMine)
	tauD := -1.0 // my decode-only step, when computed here (for steadyTail)
	if !in.fill && m.co.Burst > 0 && c > 1 {
		// Lock-step clients (Burst = 1) send their prompts together: on
		// average half of the others' prompts are prefilled before my first
		// token (the Burst term of the prompt wait below) and only the other
		// half interrupts my decode. Move that half out of the decode steps,
		// so that the work of a cycle is counted once.
		dOnly := m.terms(mine.decodeOnly())
		tauD = dOnly.Total()
		tm = blendTerms(tm, dOnly, m.co.Burst/2)
	}
	tau := tm.Total() // my decode step: TPOT
	// The step that carries a request's own prefill chunk holds that chunk
	// (and its attention pairs) on top of the others' work.
	chunk := isl / np
	own := mine
	own.Decode = mine.Decode - 1
	own.DecodeCtx = own.Decode * (isl + osl/2)
	own.Prefill += chunk
	own.PrefillAtt += chunk * (isl - chunk/2 + 0.5)
	own.PrefillSeq++
	own.PrefillDone += 1 / np
	tauOwn := m.time(own)
	// Wait behind other prompts' prefill: ρ is the share of step time spent
	// on prefill; M/D/1 wait ρ/(2(1−ρ)) × own prefill time.
	rho := 0.0
	if tb := m.mixed(b, qAll).Total(); tb > 0 {
		rho = min(max((tb-m.time(b.decodeOnly()))/tb, 0), 0.95)
	}
	// A closed loop has no more than c−1 other prompts to wait for: the open
	// M/D/1 form is capped at the others' share of prefill work in flight.
	var one float64 // one prompt's prefill alone (the lock-step burst)
	qwait := m.co.Queue * min(rho/(2*(1-rho)), (c-1)*rho/2) * np * tauOwn
	if in.fill {
		// llama-server: no M/D/1 queue behind single prompts; a prompt waits
		// only for n_batch room, the L − dec − np steps a saturated loop
		// adds to each request (0 when the prompts in flight fit a step).
		qwait = max(L-dec-np, 0) * m.time(b)
	} else if m.co.Burst > 0 && c > 1 {
		one = m.time(Batch{Prefill: isl, PrefillAtt: isl * (isl + 1) / 2, PrefillSeq: 1, PrefillDone: 1}) - m.time(Batch{})
		qwait += m.co.Burst * (c - 1) / 2 * max(one, 0)
	}
	inFlight := 0.5 * tau // a random arrival waits half the step in flight
	if in.late {
		// llama-server starts its next batch as soon as it has sent a
		// response, so a closed-loop client's next request arrives just
		// after a step started and waits all of it, unless no other request
		// keeps the server busy (c = 1).
		inFlight = min(max(c-1, 0), 1) * tau
	}
	ttft := in.alpha0 + m.co.AlphaTok*isl + np*tauOwn + inFlight + qwait + m.co.FirstSteps*tau
	e2e := ttft + dec*tau
	x := c / e2e // requests per second in service
	wait := 0.0
	if in.conc > c {
		wait = (in.conc - c) / x
	}
	out.TTFT = ttft + wait
	out.TPOT = tau
	out.E2E = e2e + wait

	out.TTFTP90, out.TPOTP90, out.E2EP90 = out.TTFT, out.TPOT, out.E2E
	if !in.tail.skip {
		steadyTail(m, &in, &out, tailState{c: c, isl: isl, osl: osl, dec: dec, np: np, L: L, qMine: qMine, tau: tau, tauOwn: tauOwn,
			chunk: chunk, qwait: qwait, rho: rho, wait: wait, mine: mine, own: own, b: b, tauD: tauD, one: one})
	}
	out.RequestsPerS = x
	out.OutputTokS = x * osl
	out.PrefillTokS = x * isl
	out.DecodeTokS = 1 / tau
	out.Running = c
	out.Queue = wait
	out.PromptWait = qwait
	out.StepTime = tau
	out.Step = tm
	return out
}

// tailState carries steady's intermediate quantities to steadyTail.
type tailState struct {
	c, isl, osl, dec, np, L, qMine float64
	tau, tauOwn, chunk, qwait, rho float64
	wait                           float64
	mine, own, b                   Batch
	tauD, one                      float64 // decode-only step (−1: not computed), one prompt's prefill
}

// steadyTail sets the p90s of out, whose means steady computed: each p90 is
// the mean plus the root-sum-square of the p90 excesses of the independent
// parts of one request's latency (ACCURACY.md, "Analytic p90"):
//
//   - TPOT: the share of a request's decode steps that carry other
//     prompts' chunks (a count of prompts, np chunks each, over its osl−1
//     steps: variance ∝ np·q·E[1/(osl−1)]) and, for Poisson arrivals, the
//     running count (√N);
//   - TTFT: the prefill of a p90 prompt instead of the mean one, the step in
//     flight at arrival (uniform), the wait behind other prompts (none with
//     probability 1−ρ, exponential otherwise), the lock-step burst (uniform
//     over the other clients), the wait for a slot past capacity, and the
//     caller's admission wait (Poisson);
//   - E2E: a p90 output's decode steps, the TTFT parts, and the chunk and
//     running-count spread summed over the decode steps.
//
// Every queueing spread is scaled by the arrivals' randomness
// g = min(1, 2·CV(output length)) in a closed loop (1 for Poisson): with
// fixed lengths the loop runs in a fixed rhythm and the simulation shows
// no tail at all. The lengths' percentiles come from Compile
// (workloadTail), so this adds a few step prices and no allocation.
func steadyTail(m *stepModel, in *steadyIn, out *Latency, st tailState) {
	c, isl, osl, dec, np, L, qMine := st.c, st.isl, st.osl, st.dec, st.np, st.L, st.qMine
	tau, tauOwn, chunk, qwait, rho, wait := st.tau, st.tauOwn, st.chunk, st.qwait, st.rho, st.wait
	mine, own, b := st.mine, st.own, st.b
	// The p90s: the mean plus the root-sum-square of the p90 excesses of
	// the independent parts of a request's latency (see tail).
	t := &in.tail
	// TPOT: a request's decode steps carry others' chunks in a share q of
	// the steps on average; the share it sees varies binomially over its
	// dec steps (less when prompts arrive regularly, cv2 < 1), and with
	// Poisson arrivals the running count itself varies (√c).
	//
	// Prompts arrive at random when lengths vary (or arrivals are
	// Poisson) but in a fixed rhythm when every request is alike: the
	// randomness g = min(1, 2·CV) scales every queueing spread below (0
	// for fixed lengths in a closed loop, where the simulation shows no
	// tail at all). A prompt comes as np consecutive chunks, so the number
	// of chunk steps a request sees varies like np × a count of prompts:
	// variance np·q·dec (Poisson count of mean q·dec/np prompts, × np²).
	g := min(1, 2*math.Sqrt(t.cv2))
	q := qMine
	if in.fill {
		q = min(1, (c-1)*np/L) // llama-server: steps with prompt tokens
	}
	tauD := st.tauD
	if tauD < 0 {
		tauD = m.time(mine.decodeOnly())
	}
	tauC := tauD
	if q > 0 && mine.Prefill > 0 {
		pre := mine
		pre.Prefill /= q
		pre.PrefillAtt /= q
		pre.PrefillSeq /= q
		pre.PrefillDone /= q
		tauC = m.time(pre)
	}
	chunkVar := g * np * q * (1 - min(q, 1)/np) // per decode step
	chunkSD := max(tauC-tauD, 0) * math.Sqrt(chunkVar*t.invDec)
	var occSD float64 // TPOT change for one standard deviation of the running count
	if t.poisson && c > 1 {
		one := mine.decodeOnly()
		one.Decode++
		one.DecodeCtx = one.Decode * (isl + osl/2)
		slope := m.time(one) - tauD + max(tauC-tauD, 0)*np/L*q/max(qMine, 1e-9)
		occSD = slope * math.Sqrt(c)
	}
	out.TPOTP90 = tau + z90*tailSpread(chunkSD, occSD)
	// TTFT: the prompt's own length (the prefill of a p90 prompt), the
	// step in flight at arrival (uniform on [0, τ]: p90 excess 0.4τ), the
	// wait behind other prompts (0 or exponential), the lock-step burst
	// (uniform over 0..c−1 prompts ahead), the admission wait.
	isl90 := max(t.isl90, isl)
	np90 := math.Ceil(isl90 / max(in.budget-b.Decode, in.budget/8))
	own90 := own
	chunk90 := isl90 / np90
	own90.Prefill += chunk90 - chunk
	own90.PrefillAtt += chunk90*(isl90-chunk90/2+0.5) - chunk*(isl-chunk/2+0.5)
	promptEx := m.co.AlphaTok*(isl90-isl) + np90*m.time(own90) - np*tauOwn
	flightEx := 0.0
	if !in.late {
		flightEx = 0.4 * tau * g
	}
	var burstSD float64
	waitSD := atomExpSigma(qwait, rho)
	if in.fill {
		waitSD = qwait
	} else if m.co.Burst > 0 && c > 1 {
		one := st.one
		burst := m.co.Burst * (c - 1) / 2 * max(one, 0)
		waitSD = atomExpSigma(qwait-burst, rho)
		burstSD = m.co.Burst * max(one, 0) * math.Sqrt((c*c-1)/12)
	}
	// A closed loop beyond capacity: a request waits for in.conc − c
	// completions; the gaps between completions vary like the lifetimes.
	var slotSD float64
	if wait > 0 {
		slotSD = wait * math.Sqrt(t.cv2/(in.conc-c))
	}
	admitSD := atomExpSigma(t.wait, t.waitP)
	ttftEx := tailSpread(promptEx, flightEx, z90*g*waitSD, z90*g*burstSD, z90*slotSD, z90*admitSD)
	out.TTFTP90 = out.TTFT + ttftEx
	// E2E: the output length (osl90 decode steps), the TTFT parts, and the
	// chunks and running-count changes summed over the decode steps.
	outEx := (max(t.osl90, osl) - osl) * tau
	decChunkSD := max(tauC-tauD, 0) * math.Sqrt(chunkVar*dec)
	out.E2EP90 = out.E2E + tailSpread(outEx, ttftEx, z90*decChunkSD, z90*occSD*dec)
}

// poissonSteady solves Little's law N = λ·E2E(N) for the mean number of
// requests in the system at rate λ (fixed point, damped).
func poissonSteady(m *stepModel, in steadyIn, rate float64) Latency {
	maxRun := steady(m, steadyIn{isl: in.isl, osl: in.osl, conc: in.capacity, capacity: in.capacity, budget: in.budget, alpha0: in.alpha0, tail: tailIn{skip: true}})
	if rate >= maxRun.RequestsPerS {
		maxRun.Saturated = true
		maxRun.Queue = math.Inf(1)
		maxRun.TTFT, maxRun.E2E, maxRun.TTFTP90, maxRun.E2EP90 = math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)
		return maxRun
	}
	n := 1.0
	var l Latency
	final := in.tail
	in.tail.skip = true
	for range 60 {
		in.conc = n
		l = steady(m, in)
		nn := rate * (l.E2E - l.Queue)
		if math.Abs(nn-n) < 1e-3*n {
			break
		}
		n = 0.5*n + 0.5*max(nn, 1e-3)
	}
	// M/G/1-style wait for admission when the running set nears capacity.
	util := rate / maxRun.RequestsPerS
	wait := 0.0
	if util > 0.5 {
		wait = (l.E2E - l.Queue) / in.capacity * util / (1 - util) / 2
	}
	in.conc = min(n, in.capacity)
	in.tail = final
	in.tail.wait, in.tail.waitP = wait, util
	l = steady(m, in)
	l.Queue = wait
	l.TTFT += wait
	l.E2E += wait
	l.TTFTP90 += wait
	l.E2EP90 += wait
	l.RequestsPerS = rate
	l.OutputTokS = rate * in.osl
	l.PrefillTokS = rate * in.isl
	return l
}

// staticBatch prices an offline batch of n requests that all arrive at time
// zero with the same lengths (Argonne's LLM.generate runs): prefill in chunks
// of budget tokens, then osl−1 decode steps with all n sequences. It returns
// the time to the first token of the last prompt and the total latency.
func staticBatch(m *stepModel, n, isl, osl, budget float64) (ttft, total float64) {
	remaining := n * isl
	t := 0.0
	done := 0.0
	for remaining > 0 {
		chunk := min(budget, remaining)
		seqs := max(chunk/isl, 1)
		// attention pairs: whole prompts when chunks hold several.
		att := seqs * isl * (isl + 1) / 2
		if chunk < isl {
			off := isl - remaining
			if off < 0 {
				off = 0
			}
			att = chunk * (math.Mod(off, isl) + (chunk+1)/2)
		}
		finished := min(math.Floor((done+chunk)/isl)-math.Floor(done/isl), n)
		t += m.time(Batch{Prefill: chunk, PrefillAtt: att, PrefillSeq: seqs, PrefillDone: max(finished, 0)})
		remaining -= chunk
		done += chunk
	}
	ttft = t
	if osl > 1 {
		b := Batch{Decode: n, DecodeCtx: n * (isl + osl/2)}
		t += (osl - 1) * m.time(b)
	}
	return ttft, t
}

// Compiled is an estimator specialised to one GPU, engine, options and
// workload, for pricing many candidate architectures cheaply: Price reuses
// internal buffers and does not allocate. A Compiled is not safe for
// concurrent use; compile one per goroutine.
type Compiled struct {
	hw       *hardware.GPU
	r        resolved
	co       Coeffs
	family   string
	w        workload.Workload
	mode     workload.Mode
	isl, osl float64
	ctx      float64
	conc     float64
	nreq     float64
	tail     tailIn // length spread for the p90s (Compile)
	sum      Summary
	mem      MemoryReport
	nat      NativeCoeffs // native engine only
}

// Price is the fast estimate of one candidate.
type Price struct {
	Fits bool
	// FailTerm names the memory term that does not fit (when !Fits).
	FailTerm         string
	WeightsBytes     float64
	TotalBytes       float64
	KVCapacityTokens float64
	MaxConcurrency   int
	Latency
}

// Compile prepares an estimator for hw, engine eng, options o and workload
// w (which must validate). Coefficients come from the embedded file unless
// co is non-nil.
func Compile(hw *hardware.GPU, eng Engine, o Options, w *workload.Workload, co *Coeffs) (*Compiled, error) {
	return compile(hw, eng, o, w, co, nil)
}

// CompileNative is Compile for the native engine with the native
// coefficients nat instead of the active ones (ActiveNativeCoeffs), as a
// calibration prices its rows: it reads no coefficient file, so a
// calibration whose output is the local override path does not need that
// file to exist.
func CompileNative(hw *hardware.GPU, o Options, w *workload.Workload, nat NativeCoeffs) (*Compiled, error) {
	return compile(hw, Native, o, w, nil, &nat)
}

func compile(hw *hardware.GPU, eng Engine, o Options, w *workload.Workload, co *Coeffs, nat *NativeCoeffs) (*Compiled, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	maxLen := o.MaxModelLen
	if maxLen <= 0 {
		maxLen = w.MaxContext()
	}
	o2 := o
	if sp, ok := eng.Spec(); ok && sp.Defaults.SeqsFromClients && o2.MaxNumSeqs == 0 && w.Mode() == workload.ClosedLoop {
		o2.MaxNumSeqs = w.Concurrency
	}
	r, err := resolve(eng, hw, &o2, maxLen)
	if err != nil {
		return nil, err
	}
	c := &Compiled{hw: hw, r: r, w: *w, mode: w.Mode()}
	c.family = eng.Family(hw)
	if co != nil {
		c.co = *co
	} else {
		c.co, c.family = DefaultCoeffs().Family(c.family)
	}
	c.isl, c.osl = w.Input.MeanValue(), w.Output.MeanValue()
	if r.spec.step == stepNative {
		if nat != nil {
			c.nat, c.family = *nat, "native@given"
		} else {
			f, src, err := ActiveNativeCoeffs()
			if err != nil {
				return nil, err
			}
			c.nat, _ = f.Machine(hw.Name)
			c.family = "native@" + src
		}
		c.r.natTokens = c.isl + c.osl
		c.r.natISL = c.isl
		// engine.Serve runs min(clients, MaxBatch) sequences at once (a
		// closed loop's limit defaults to its clients above); the other
		// clients' requests wait for a free slot.
		slots := min(max(w.Concurrency, 1), c.r.maxSeqs)
		c.r.natSlots = slots
		c.r.natSteps = float64(w.Requests()) / float64(slots) * (c.osl + 1) * math.Sqrt(float64(slots))
		c.r.nat = &c.nat
	}
	c.ctx = float64(maxLen)
	c.conc = float64(w.Concurrency)
	c.nreq = float64(w.Requests())
	c.tail = workloadTail(w)
	return c, nil
}

// tailSamples is the fixed-seed sample size of workloadTail.
const tailSamples = 4096

// workloadTail measures what the analytic p90s need of the workload's
// length distributions, from a fixed-seed sample (exact for fixed
// lengths): the 90th percentiles of the prompt and output lengths,
// E[1/(osl−1)] and the squared CV of the output length.
func workloadTail(w *workload.Workload) tailIn {
	r := rand.New(rand.NewPCG(3, 4))
	in := make([]float64, tailSamples)
	out := make([]float64, tailSamples)
	var inv, n, sum, sum2 float64
	for i := range in {
		in[i] = float64(w.Input.Sample(r))
		o := float64(w.Output.Sample(r))
		out[i] = o
		sum += o
		sum2 += o * o
		if o > 1 {
			inv += 1 / (o - 1)
			n++
		}
	}
	var t tailIn
	_, t.isl90 = meanP90(in)
	_, t.osl90 = meanP90(out)
	if n > 0 {
		t.invDec = inv / n
	}
	mean := sum / tailSamples
	if mean > 0 {
		t.cv2 = max(sum2/tailSamples/(mean*mean)-1, 0)
	}
	return t
}

// Family returns the coefficient family in use.
func (c *Compiled) Family() string { return c.family }

// Coeffs returns the coefficients in use. For the native engine, whose
// step model has its own coefficients (NativeCoeffs), the error fields
// carry the native calibration's held-out errors.
func (c *Compiled) Coeffs() Coeffs {
	co := c.co
	if c.r.spec.step == stepNative {
		n := c.nat
		co.ErrTTFT, co.ErrTPOT, co.ErrThroughput, co.Rows, co.Source = n.ErrTTFT, n.ErrTPOT, n.ErrThroughput, n.Rows, n.Source
		co.ErrTTFTP90, co.ErrTPOTP90, co.ErrThroughputP90 = 0, 0, 0
		co.Host, co.Measured, co.GPUs = n.Host, n.Measured, nil
	}
	return co
}

// Price estimates memory and latency of m with the analytic steady-state
// model. It does not allocate.
func (c *Compiled) Price(m *architecture.Model) Price {
	Summarize(&c.sum, m, &c.r.prec, c.r.kv, c.r.stateBytes, c.r.tp)
	return c.PriceSummary(&c.sum)
}

// PriceSummary is Price for a precomputed Summary (s must use the same
// precision, KV type and TP as c; see Compiled.Summarize).
func (c *Compiled) PriceSummary(s *Summary) Price {
	var p Price
	ok := planMemory(&c.mem, s, c.hw, &c.r, c.ctx, c.r.maxSeqs)
	p.WeightsBytes = c.mem.WeightsBytes
	p.TotalBytes = c.mem.TotalBytes()
	p.KVCapacityTokens = c.mem.KVCapacityTokens
	p.MaxConcurrency = c.mem.MaxConcurrency
	if !ok {
		p.FailTerm = c.mem.Fail.Term
		return p
	}
	p.Fits = true
	m := c.stepModel(s)
	p.Latency = c.latency(&m, &c.mem)
	return p
}

// Summarize computes the Summary of m with c's precision, KV type and TP.
func (c *Compiled) Summarize(s *Summary, m *architecture.Model) {
	Summarize(s, m, &c.r.prec, c.r.kv, c.r.stateBytes, c.r.tp)
}

func (c *Compiled) capacity(mem *MemoryReport) float64 {
	if c.r.spec.Sched != PoolScheduler {
		return float64(max(mem.MaxConcurrency, 1))
	}
	// Pool engines admit by the request footprint they account for: the
	// prompt and the share of the output EngineSpec.OutputReserve says.
	per := c.isl + c.r.spec.OutputReserve*c.osl
	capTok := mem.KVCapacityTokens
	n := float64(c.r.maxSeqs)
	if per > 0 && !math.IsInf(capTok, 1) {
		n = min(n, math.Floor(capTok/per))
	}
	return max(n, 1)
}

func (c *Compiled) latency(m *stepModel, mem *MemoryReport) Latency {
	if c.r.spec.Sched == ServeScheduler && c.mode == workload.ClosedLoop {
		return c.nativeLatency(m)
	}
	in := steadyIn{isl: c.isl, osl: c.osl, capacity: c.capacity(mem), budget: float64(c.r.budgetToks), alpha0: c.co.Alpha0, tail: c.tail}
	if c.r.spec.Sched != PoolScheduler {
		in.capacity = min(in.capacity, float64(c.r.maxSeqs))
		in.fill = true
	}
	switch c.mode {
	case workload.Poisson:
		in.tail.poisson, in.tail.cv2 = true, 1
		return poissonSteady(m, in, c.w.Rate)
	case workload.Offline:
		in.conc = min(c.nreq, in.capacity)
		l := steady(m, in)
		// n requests drained at the steady rate; mean wait is half the drain.
		total := c.nreq/l.RequestsPerS + (l.E2E - l.Queue)
		wait := max(total-(l.E2E-l.Queue), 0) / 2
		l.Queue = wait
		// The drain wait is uniform on [0, 2·wait]: its p90 excess over
		// the mean is 0.8·wait, combined with the per-request spread.
		l.TTFTP90 = l.TTFT + wait + tailSpread(l.TTFTP90-l.TTFT, 0.8*wait)
		l.E2EP90 = l.E2E + wait + tailSpread(l.E2EP90-l.E2E, 0.8*wait)
		l.TTFT += wait
		l.E2E += wait
		return l
	default:
		in.conc = c.conc
		in.late = in.fill
		return steady(m, in)
	}
}

// SetCoeffs replaces the coefficients (used by calibration).
func (c *Compiled) SetCoeffs(co Coeffs) { c.co = co }

// StaticBatch prices an offline static batch of n requests of isl input
// and osl output tokens that all start together (as in LLM.generate
// benchmarks), with a per-step prefill budget of budget tokens (0 = the
// engine's). It returns the time to the last first token and the total
// batch latency, in seconds.
func (c *Compiled) StaticBatch(s *Summary, n, isl, osl, budget int) (ttft, total float64) {
	m := c.stepModel(s)
	if budget <= 0 {
		budget = c.r.budgetToks
	}
	ttft, total = staticBatch(&m, float64(n), float64(isl), float64(osl), float64(budget))
	return ttft + c.co.Alpha0, total + c.co.Alpha0
}

// Memory returns the memory plan of s under c (see Memory).
func (c *Compiled) Memory(s *Summary) (MemoryReport, bool) {
	var rep MemoryReport
	ok := planMemory(&rep, s, c.hw, &c.r, c.ctx, c.r.maxSeqs)
	return rep, ok
}
