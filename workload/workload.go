// Package workload describes the traffic a deployment must serve: request
// input and output lengths (fixed or drawn from a seeded distribution), how
// requests arrive (closed-loop concurrency, a Poisson rate, or an offline run
// of N requests), and the context limit.
//
// Three arrival modes are kept apart because measurements mix them up:
//
//   - Closed loop: Concurrency clients each send a request as soon as the
//     previous one finishes (benchmark "concurrency", AIConfigurator's
//     batch_size).
//   - Poisson: requests arrive at Rate per second.
//   - Offline: NumRequests requests are all present at time zero (Rate = +Inf,
//     vLLM's LLM.generate, Argonne's static batches).
package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
)

// Upper bounds of a workload: far beyond any deployment, and small enough
// that sums and products of lengths and counts stay well inside an int
// (and the simulator's int32 request indices).
const (
	// MaxTokens bounds a request's length and the context limit: 64Mi
	// tokens, six times the longest context a published model has
	// (Llama 4 Scout's 10M).
	MaxTokens = 1 << 26
	// MaxConcurrency bounds the closed-loop clients (65,536).
	MaxConcurrency = 1 << 16
	// MaxRequests bounds the requests of a run (about a million).
	MaxRequests = 1 << 20
)

// Dist names a length distribution.
type Dist string

// Distributions.
const (
	Fixed     Dist = "fixed"
	Uniform   Dist = "uniform"   // integers in [Min, Max]
	Normal    Dist = "normal"    // Mean, Std, clipped to [Min, Max]
	LogNormal Dist = "lognormal" // with the given Mean and Std of the length itself, clipped
)

// Length is a token-count distribution.
type Length struct {
	Dist Dist
	Mean float64 // Fixed: the length
	Std  float64
	Min  int // lower clip (≥ 1); Uniform: low end
	Max  int // upper clip; Uniform: high end; 0 = unbounded
}

// FixedLength returns a fixed length of n tokens.
func FixedLength(n int) Length { return Length{Dist: Fixed, Mean: float64(n)} }

// Validate checks the distribution: lengths are whole numbers of tokens
// from 1 to MaxTokens (a continuous distribution's mean + 4 std, its
// longest draw when unclipped, included).
func (l Length) Validate(what string) error {
	switch l.Dist {
	case Fixed, "":
		if !(l.Mean >= 1 && l.Mean <= MaxTokens) || l.Mean != math.Trunc(l.Mean) {
			return &Error{Field: what, Msg: fmt.Sprintf("length must be a whole number of tokens from 1 to %d, got %g", MaxTokens, l.Mean)}
		}
	case Uniform:
		if l.Min < 1 || l.Max < l.Min || l.Max > MaxTokens {
			return &Error{Field: what, Msg: fmt.Sprintf("uniform range [%d, %d] must satisfy 1 ≤ min ≤ max ≤ %d", l.Min, l.Max, MaxTokens)}
		}
	case Normal, LogNormal:
		if !(l.Mean >= 1 && l.Mean <= MaxTokens) || !(l.Std >= 0 && l.Std <= MaxTokens) {
			return &Error{Field: what, Msg: fmt.Sprintf("%s needs 1 ≤ mean ≤ %d and 0 ≤ std ≤ %d, got mean %g std %g", l.Dist, MaxTokens, MaxTokens, l.Mean, l.Std)}
		}
		if l.Min < 0 || (l.Max != 0 && l.Max < l.Min) || l.Min > MaxTokens || l.Max > MaxTokens {
			return &Error{Field: what, Msg: fmt.Sprintf("clip range [%d, %d] is empty or past %d tokens", l.Min, l.Max, MaxTokens)}
		}
		if l.Max == 0 && l.Mean+4*l.Std > MaxTokens {
			return &Error{Field: what, Msg: fmt.Sprintf("mean %g + 4 std %g reaches past %d tokens: give a clip maximum", l.Mean, l.Std, MaxTokens)}
		}
	default:
		return &Error{Field: what, Msg: fmt.Sprintf("unknown distribution %q (want fixed, uniform, normal or lognormal)", l.Dist)}
	}
	return nil
}

// Sample draws one length.
func (l Length) Sample(r *rand.Rand) int {
	var x float64
	switch l.Dist {
	case Fixed, "":
		return int(l.Mean)
	case Uniform:
		return l.Min + r.IntN(l.Max-l.Min+1)
	case Normal:
		x = l.Mean + l.Std*r.NormFloat64()
	case LogNormal:
		// Parameters of the underlying normal from the mean and std of the variable.
		v := l.Std * l.Std / (l.Mean * l.Mean)
		sigma := math.Sqrt(math.Log1p(v))
		mu := math.Log(l.Mean) - sigma*sigma/2
		x = math.Exp(mu + sigma*r.NormFloat64())
	}
	n := int(math.Round(x))
	lo := max(l.Min, 1)
	if n < lo {
		n = lo
	}
	if l.Max > 0 && n > l.Max {
		n = l.Max
	}
	return n
}

// MeanValue returns the expected length after clipping, estimated with a
// fixed-seed sample for clipped continuous distributions.
func (l Length) MeanValue() float64 {
	switch l.Dist {
	case Fixed, "":
		return l.Mean
	case Uniform:
		return float64(l.Min+l.Max) / 2
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 4096
	s := 0.0
	for range n {
		s += float64(l.Sample(r))
	}
	return s / n
}

// MaxValue returns the largest length the distribution can produce (the mean
// plus four standard deviations when unbounded).
func (l Length) MaxValue() int {
	switch l.Dist {
	case Fixed, "":
		return toInt(l.Mean)
	case Uniform:
		return l.Max
	}
	if l.Max > 0 {
		return l.Max
	}
	return toInt(math.Ceil(l.Mean + 4*l.Std))
}

// toInt converts x to an int, saturating (NaN is 0).
func toInt(x float64) int {
	switch {
	case !(x > math.MinInt64):
		if math.IsNaN(x) {
			return 0
		}
		return math.MinInt
	case x >= math.MaxInt64:
		return math.MaxInt
	}
	return int(x)
}

func (l Length) String() string {
	switch l.Dist {
	case Fixed, "":
		return fmt.Sprintf("%d", int(l.Mean))
	case Uniform:
		return fmt.Sprintf("uniform[%d,%d]", l.Min, l.Max)
	}
	s := fmt.Sprintf("%s(mean %g, std %g", l.Dist, l.Mean, l.Std)
	if l.Min > 0 || l.Max > 0 {
		s += fmt.Sprintf(", clip [%d,%d]", l.Min, l.Max)
	}
	return s + ")"
}

// Mode is how requests arrive.
type Mode string

// Arrival modes.
const (
	ClosedLoop Mode = "closed"
	Poisson    Mode = "poisson"
	Offline    Mode = "offline"
)

// Workload is the traffic to serve.
type Workload struct {
	Name   string
	Input  Length // prompt tokens
	Output Length // generated tokens

	// Concurrency is the number of closed-loop clients (ClosedLoop mode).
	Concurrency int
	// Rate is the Poisson arrival rate in requests per second; +Inf means an
	// offline run with every request present at time zero.
	Rate float64
	// NumRequests is the number of requests of a Poisson or offline run (and
	// the sample size of a closed-loop simulation); 0 picks a default.
	NumRequests int
	// ContextLimit is the server's maximum model length (input + output);
	// 0 means input max + output max.
	ContextLimit int
	// Seed makes the sampled lengths and arrivals reproducible.
	Seed uint64
}

// Mode returns the arrival mode.
func (w *Workload) Mode() Mode {
	switch {
	case math.IsInf(w.Rate, 1):
		return Offline
	case w.Rate > 0:
		return Poisson
	default:
		return ClosedLoop
	}
}

// Error is a workload a user must fix.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("workload %s: %s", e.Field, e.Msg) }

// Validate checks every field and reports all problems together.
func (w *Workload) Validate() error {
	var errs []error
	if err := w.Input.Validate("input length"); err != nil {
		errs = append(errs, err)
	}
	if err := w.Output.Validate("output length"); err != nil {
		errs = append(errs, err)
	}
	switch {
	case math.IsNaN(w.Rate) || w.Rate < 0 || math.IsInf(w.Rate, -1):
		errs = append(errs, &Error{Field: "rate", Msg: fmt.Sprintf("request rate must be > 0 requests/s or inf, got %g", w.Rate)})
	case w.Rate == 0 && w.Concurrency <= 0:
		errs = append(errs, &Error{Field: "concurrency", Msg: fmt.Sprintf("set a concurrency ≥ 1 or a request rate (got concurrency %d)", w.Concurrency)})
	case w.Rate > 0 && w.Concurrency > 0:
		errs = append(errs, &Error{Field: "rate", Msg: "set either a concurrency or a request rate, not both"})
	case w.Concurrency > MaxConcurrency:
		errs = append(errs, &Error{Field: "concurrency", Msg: fmt.Sprintf("%d clients, more than the %d allowed", w.Concurrency, MaxConcurrency)})
	}
	if w.NumRequests < 0 || w.NumRequests > MaxRequests {
		errs = append(errs, &Error{Field: "num_requests", Msg: fmt.Sprintf("must be from 0 to %d, got %d", MaxRequests, w.NumRequests)})
	}
	if w.ContextLimit < 0 || w.ContextLimit > MaxTokens {
		errs = append(errs, &Error{Field: "context limit", Msg: fmt.Sprintf("must be from 0 to %d tokens, got %d", MaxTokens, w.ContextLimit)})
	}
	if len(errs) == 0 && w.ContextLimit > 0 {
		if need := w.Longest(); need > w.ContextLimit && w.Input.Dist == Fixed && w.Output.Dist == Fixed {
			errs = append(errs, &Error{Field: "context limit", Msg: fmt.Sprintf("input + output = %d tokens exceeds the context limit %d", need, w.ContextLimit)})
		}
	}
	return errors.Join(errs...)
}

// MaxContext returns the per-request context the server must allow.
func (w *Workload) MaxContext() int {
	if w.ContextLimit > 0 {
		return w.ContextLimit
	}
	return w.Longest()
}

// Longest returns the longest request w can draw, input max + output max;
// the sum saturates at math.MaxInt, so a workload that Validate has not
// checked cannot wrap it around to a short one.
func (w *Workload) Longest() int {
	a, b := max(w.Input.MaxValue(), 0), max(w.Output.MaxValue(), 0)
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// Requests returns the default number of requests to simulate.
func (w *Workload) Requests() int {
	if w.NumRequests > 0 {
		return w.NumRequests
	}
	if w.Mode() == ClosedLoop {
		return max(4*w.Concurrency, 64)
	}
	return 256
}

// Request is one sampled request.
type Request struct {
	Arrival float64 // seconds from the start (closed loop: 0, the simulator schedules)
	Input   int
	Output  int
}

// Sample draws n requests with lengths clipped to the context limit.
// It allocates; the simulator reuses a caller buffer through SampleInto.
func (w *Workload) Sample(n int) []Request {
	return w.SampleInto(make([]Request, 0, n), n)
}

// SampleInto appends n sampled requests to dst.
func (w *Workload) SampleInto(dst []Request, n int) []Request {
	r := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	t := 0.0
	limit := w.ContextLimit
	mode := w.Mode()
	for range n {
		in, out := w.Input.Sample(r), w.Output.Sample(r)
		if limit > 0 && in+out > limit {
			if in >= limit {
				in = limit - 1
			}
			out = max(limit-in, 1)
		}
		if mode == Poisson {
			t += r.ExpFloat64() / w.Rate
		}
		dst = append(dst, Request{Arrival: t, Input: in, Output: out})
	}
	return dst
}

func (w *Workload) String() string {
	var b strings.Builder
	if w.Name != "" {
		fmt.Fprintf(&b, "%s: ", w.Name)
	}
	fmt.Fprintf(&b, "input %s, output %s, ", w.Input, w.Output)
	switch w.Mode() {
	case ClosedLoop:
		fmt.Fprintf(&b, "concurrency %d", w.Concurrency)
	case Poisson:
		fmt.Fprintf(&b, "Poisson %g req/s", w.Rate)
	case Offline:
		fmt.Fprintf(&b, "offline %d requests", w.Requests())
	}
	return b.String()
}

var presets = map[string]Workload{
	// Interactive chat: prompts with history (~1k tokens), answers of a few hundred tokens.
	"chat": {Name: "chat",
		Input:       Length{Dist: LogNormal, Mean: 1024, Std: 768, Min: 16, Max: 8192},
		Output:      Length{Dist: LogNormal, Mean: 256, Std: 192, Min: 8, Max: 2048},
		Concurrency: 16, ContextLimit: 16384, Seed: 1},
	// Coding assistant with repository context: long prompts, medium answers.
	"long-context-coding": {Name: "long-context-coding",
		Input:       Length{Dist: Normal, Mean: 32768, Std: 8192, Min: 4096, Max: 100000},
		Output:      Length{Dist: Normal, Mean: 512, Std: 256, Min: 32, Max: 4096},
		Concurrency: 4, ContextLimit: 131072, Seed: 1},
	// Non-player character in a game: short persona prompt and history, one-line replies, many players.
	"game-character": {Name: "game-character",
		Input:       Length{Dist: Uniform, Min: 256, Max: 768},
		Output:      Length{Dist: Uniform, Min: 16, Max: 64},
		Concurrency: 64, ContextLimit: 2048, Seed: 1},
	// Offline summarisation of documents.
	"batch-summarization": {Name: "batch-summarization",
		Input:  Length{Dist: Normal, Mean: 4096, Std: 1024, Min: 512, Max: 8192},
		Output: Length{Dist: Normal, Mean: 256, Std: 64, Min: 64, Max: 512},
		Rate:   math.Inf(1), NumRequests: 1000, ContextLimit: 16384, Seed: 1},
}

// Presets returns the preset names, sorted.
func Presets() []string {
	out := make([]string, 0, len(presets))
	for n := range presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Preset returns a copy of the named preset.
func Preset(name string) (Workload, error) {
	w, ok := presets[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return Workload{}, &Error{Field: "preset", Msg: fmt.Sprintf("unknown preset %q; valid presets: %s", name, strings.Join(Presets(), ", "))}
	}
	return w, nil
}

// Fixed returns a closed-loop workload with fixed lengths.
func FixedClosed(isl, osl, concurrency int) Workload {
	return Workload{Input: FixedLength(isl), Output: FixedLength(osl), Concurrency: concurrency}
}
