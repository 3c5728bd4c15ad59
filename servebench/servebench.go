// Package servebench measures serving latency, throughput and peak memory
// of a model on this machine with the native engine's continuous-batching
// scheduler (engine.Model.Serve). It is the library behind "autocompress
// bench-serve" and the measurements of "autocompress calibrate-native".
//
// The work is fixed: the same seeded prompts every run, greedy decoding,
// every request generating exactly its output length. Warm-up runs (a short
// slice of the requests, not reported) repeat until two in a row agree on
// TPOT and TTFT within 5% (at most MaxWarmup), so caches, buffers and CPU
// frequency are steady; then Repeats measured runs follow, each after a
// forced garbage collection. Each metric is the per-run mean or p90; the
// report gives its median over the runs with the min–max range, the
// relative spread (max−min)/median and the relative interquartile range.
// Peak memory is the process's VmHWM (Linux), so it describes one model
// only when the process measured one model (as bench-serve does).
package servebench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/workload"
)

// Options configure Run. Zero fields take the defaults of EnsureDefaults.
type Options struct {
	Repeats       int // measured runs (0: 5)
	MaxWarmup     int // most warm-up runs, at least 2 (0: 6)
	PrefillTokens int // most prompt tokens per scheduler step (estimate's max-batched-tokens; 0: 512)
	// MaxNumSeqs is the engine's sequence limit (estimate's max-num-seqs):
	// at most that many requests in the scheduler at once; the other
	// clients' requests wait, and the wait counts in their TTFT and E2E
	// (0: one per client).
	MaxNumSeqs int
}

// EnsureDefaults fills the unset (zero) fields and returns o. MaxNumSeqs
// keeps 0, which means one sequence per client.
func (o *Options) EnsureDefaults() *Options {
	if o.Repeats == 0 {
		o.Repeats = 5
	}
	if o.MaxWarmup == 0 {
		o.MaxWarmup = 6
	}
	if o.PrefillTokens == 0 {
		o.PrefillTokens = DefaultPrefillTokens
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.Repeats < 1:
		return fmt.Errorf("servebench: repeats %d: want at least 1 measured run", o.Repeats)
	case o.MaxWarmup < 2:
		return fmt.Errorf("servebench: max warm-up %d: want at least 2 runs (two in a row must agree)", o.MaxWarmup)
	case o.PrefillTokens < 1:
		return fmt.Errorf("servebench: prefill tokens %d: want at least 1 per step", o.PrefillTokens)
	case o.MaxNumSeqs < 0:
		return fmt.Errorf("servebench: max sequences %d: want >= 0 (0: one per client)", o.MaxNumSeqs)
	}
	return nil
}

// DefaultPrefillTokens is engine.Serve's prompt-token budget per step.
const DefaultPrefillTokens = 512

// DefaultRequests is the request count of a fixed-length measurement that
// gives none: 16 per client, at least 64.
func DefaultRequests(w *workload.Workload) int { return max(16*max(w.Concurrency, 1), 64) }

// Workload prepares w for a measurement on a model, as bench-serve and the
// pipeline's measure stage both do. A workload without a request count
// gets requests when that is > 0; otherwise a fixed-length workload (no
// preset name) gets DefaultRequests and a preset keeps its own default.
// The context is resolved and checked by workload.FitContext with r
// (r.MaxPositions is the model's max_position_embeddings); the result sets
// ContextLimit to it and must validate.
func Workload(w workload.Workload, requests int, r workload.ContextRule) (workload.Workload, workload.Context, error) {
	if w.NumRequests == 0 {
		switch {
		case requests > 0:
			w.NumRequests = requests
		case w.Name == "":
			w.NumRequests = DefaultRequests(&w)
		}
	}
	c, err := w.FitContext(r)
	if err != nil {
		return w, c, err
	}
	if err := w.Validate(); err != nil {
		return w, c, err
	}
	return w, c, nil
}

// Run measures w on m: warm-up runs, then o.Repeats measured runs. Only
// closed-loop and open-loop workloads with at least one request are valid.
// Each warm-up run is reported through pf as running work (stage
// "servebench", phase "warm-up") and each measured run as a note of its
// figures. The returned report has PeakRSSBytes set to the process's VmHWM
// at the end.
func Run(ctx context.Context, m *engine.Model, w *workload.Workload, o Options, pf progress.Func) (*Report, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	repeats, maxWarm := o.Repeats, o.MaxWarmup
	arch := m.Arch()
	reqs := Requests(w, arch.Vocab)
	opt := engine.ServeOptions{PrefillTokens: o.PrefillTokens, MaxBatch: o.MaxNumSeqs}
	seqs := o.MaxNumSeqs
	if w.Mode() == workload.ClosedLoop {
		opt.Concurrency = w.Concurrency
		if seqs <= 0 || seqs > w.Concurrency {
			seqs = w.Concurrency
		}
	}
	warmups, err := warmUp(ctx, m, reqs, opt, maxWarm, pf)
	if err != nil {
		return nil, err
	}
	var runs []RunStats
	for i := 0; i < repeats; i++ {
		run, err := measure(ctx, m, reqs, opt)
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
		pf.Notef("servebench", "run %d/%d: %.1f output tokens/s, TTFT %.1f ms, TPOT %.2f ms",
			i+1, repeats, run.OutputTPS, 1e3*run.TTFT.Mean, 1e3*run.TPOT.Mean)
	}
	rep := &Report{
		Params: m.NumParams(), Backend: blas.Backend(), Threads: runtime.GOMAXPROCS(0),
		Workload: w.String(), ContextLimit: w.ContextLimit, Clipped: Clipped(w), Requests: len(reqs), Repeats: repeats, WarmupRuns: warmups, Runs: runs,
		MaxNumSeqs: seqs, MaxBatchedTokens: opt.PrefillTokens, PeakRSSBytes: PeakRSS(),
	}
	rep.aggregate()
	return rep, nil
}

// warmUp runs a slice of the requests (at least two per client) until two
// runs in a row agree on mean TPOT and mean TTFT within 5%, at most maxRuns
// times, and returns the number of runs.
func warmUp(ctx context.Context, m *engine.Model, reqs []engine.ServeRequest, opt engine.ServeOptions, maxRuns int, pf progress.Func) (int, error) {
	task := progress.Start(pf, progress.Event{Stage: "servebench", Phase: "warm-up"})
	warm := reqs[:min(len(reqs), max(2*opt.Concurrency, 8))]
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.05*b }
	var prev RunStats
	for i := 1; ; i++ {
		st, err := m.Serve(ctx, warm, opt)
		if err != nil {
			return i, err
		}
		run := summarizeRun(st)
		task.Set(int64(i), fmt.Sprintf("TTFT %.1f ms, TPOT %.2f ms", 1e3*run.TTFT.Mean, 1e3*run.TPOT.Mean))
		if run.TPOT.Mean == 0 { // one-token outputs: compare wall time
			run.TPOT.Mean = st.Wall
		}
		if i >= maxRuns || (i > 1 && near(run.TPOT.Mean, prev.TPOT.Mean) && near(run.TTFT.Mean, prev.TTFT.Mean)) {
			return i, nil
		}
		prev = run
	}
}

// measure runs the requests once after a forced garbage collection and
// summarises the run, with the number of collections during it.
func measure(ctx context.Context, m *engine.Model, reqs []engine.ServeRequest, opt engine.ServeOptions) (RunStats, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	st, err := m.Serve(ctx, reqs, opt)
	if err != nil {
		return RunStats{}, err
	}
	runtime.ReadMemStats(&ms)
	run := summarizeRun(st)
	run.GCCycles = int(ms.NumGC - gc0)
	if run.Seconds > 0 {
		run.CPUShare = run.CPUSeconds / (run.Seconds * float64(runtime.GOMAXPROCS(0)))
	}
	return run, nil
}

// Requests samples the workload's requests with random prompt ids drawn
// from a generator seeded with w.Seed.
func Requests(w *workload.Workload, vocab int) []engine.ServeRequest {
	sampled := w.Sample(w.Requests())
	r := rand.New(rand.NewPCG(w.Seed, 0xbe7c4))
	reqs := make([]engine.ServeRequest, len(sampled))
	for i, s := range sampled {
		p := make([]int32, max(s.Input, 1))
		for j := range p {
			p[j] = int32(r.IntN(vocab))
		}
		reqs[i] = engine.ServeRequest{Arrival: s.Arrival, Prompt: p, Output: max(s.Output, 1)}
	}
	return reqs
}

// Stat is the mean and 90th percentile of one metric within a run.
type Stat struct {
	Mean float64 `json:"mean"`
	P90  float64 `json:"p90"`
}

func meanP90(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	// Nearest-rank percentile.
	idx := int(math.Ceil(0.9*float64(len(s)))) - 1
	return Stat{Mean: sum / float64(len(s)), P90: s[max(idx, 0)]}
}

// RunStats are the figures of one measured run.
type RunStats struct {
	Seconds    float64 `json:"seconds"`
	TTFT       Stat    `json:"ttft_s"`
	TPOT       Stat    `json:"tpot_s"`
	E2E        Stat    `json:"e2e_s"`
	OutputTPS  float64 `json:"output_tokens_per_s"`
	TotalTPS   float64 `json:"total_tokens_per_s"`
	RequestsPS float64 `json:"requests_per_s"`
	InputToks  int     `json:"input_tokens"`
	OutputToks int     `json:"output_tokens"`
	Steps      int     `json:"steps"`
	MaxBatch   int     `json:"max_batch"`
	PeakKV     int64   `json:"peak_kv_bytes"`
	// CPUSeconds is the process's user+system CPU time during the run;
	// output tokens per CPU-second vary less than wall-clock rates when
	// other processes share the cores.
	CPUSeconds   float64 `json:"cpu_seconds"`
	OutputPerCPU float64 `json:"output_tokens_per_cpu_s"`
	// GCCycles is the number of garbage collections during the run.
	GCCycles int `json:"gc_cycles"`
	// CPUShare is CPUSeconds / (Seconds × threads): the share of its
	// threads' time the process got. When other processes take cores it
	// drops, and wall-clock figures of that run are slower.
	CPUShare float64 `json:"cpu_share"`
}

func summarizeRun(st *engine.ServeStats) RunStats {
	var ttft, tpot, e2e []float64
	for _, r := range st.Requests {
		ttft = append(ttft, r.TTFT)
		e2e = append(e2e, r.E2E)
		if r.Output > 1 {
			tpot = append(tpot, r.TPOT)
		}
	}
	r := RunStats{
		Seconds: st.Wall, TTFT: meanP90(ttft), TPOT: meanP90(tpot), E2E: meanP90(e2e),
		OutputTPS: float64(st.OutputTokens) / st.Wall, TotalTPS: float64(st.OutputTokens+st.InputTokens) / st.Wall,
		RequestsPS: float64(len(st.Requests)) / st.Wall, InputToks: st.InputTokens, OutputToks: st.OutputTokens, Steps: st.Steps, MaxBatch: st.MaxBatch, PeakKV: st.PeakKVBytes,
	}
	if st.CPUSeconds > 0 {
		r.CPUSeconds = st.CPUSeconds
		r.OutputPerCPU = float64(st.OutputTokens) / st.CPUSeconds
	}
	return r
}

// Spread is one metric across runs: the median, the range, the relative
// spread (max−min)/median and the relative interquartile range
// (Q3−Q1)/median, quartiles interpolated linearly between order statistics.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Spread float64 `json:"spread"`
	RelIQR float64 `json:"rel_iqr"`
}

// SpreadOf is SpreadOfValues of f over the runs.
func SpreadOf(runs []RunStats, f func(RunStats) float64) Spread {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return SpreadOfValues(xs)
}

// SpreadOfValues summarises xs (the zero Spread when empty).
func SpreadOfValues(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		x := p * float64(len(s)-1)
		i := int(x)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	r := Spread{Median: q(0.5), Min: s[0], Max: s[len(s)-1]}
	if r.Median != 0 {
		r.Spread = (r.Max - r.Min) / r.Median
		r.RelIQR = (q(0.75) - q(0.25)) / r.Median
	}
	return r
}

// Report is the result of Run (bench-serve's JSON output).
type Report struct {
	Model        string `json:"model"`
	Params       int    `json:"params"`
	Backend      string `json:"backend"`
	Threads      int    `json:"threads"`
	Workload     string `json:"workload"`
	ContextLimit int    `json:"context_limit"` // prompt + output clipped to this (0: none)
	// ContextSource says where ContextLimit comes from; Clipped counts the
	// requests it shortened (their lengths are what ran).
	ContextSource string `json:"context_source,omitempty"`
	Clipped       int    `json:"clipped_requests"`
	Requests      int    `json:"requests_per_run"`
	Repeats       int    `json:"repeats"`
	WarmupRuns    int    `json:"warmup_runs"`
	// MaxNumSeqs is the sequence limit the run served under (0: none
	// beyond the open loop's 256) and MaxBatchedTokens the prompt tokens
	// per step, by estimate's names for them.
	MaxNumSeqs       int               `json:"max_num_seqs"`
	MaxBatchedTokens int               `json:"max_batched_tokens"`
	Summary          map[string]Spread `json:"summary"`
	Runs             []RunStats        `json:"runs"`
	PeakRSSBytes     int64             `json:"peak_rss_bytes"`
}

// Metrics are the summarised metrics, by their Report.Summary key.
var Metrics = []struct {
	Name, Label, Unit string
	Scale             float64 // printed value = Scale × stored value
	F                 func(RunStats) float64
	Higher            bool // a larger value is the better one (throughputs, rates)
}{
	{"ttft_mean_s", "TTFT mean", "ms", 1e3, func(r RunStats) float64 { return r.TTFT.Mean }, false},
	{"ttft_p90_s", "TTFT p90", "ms", 1e3, func(r RunStats) float64 { return r.TTFT.P90 }, false},
	{"tpot_mean_s", "TPOT mean", "ms", 1e3, func(r RunStats) float64 { return r.TPOT.Mean }, false},
	{"tpot_p90_s", "TPOT p90", "ms", 1e3, func(r RunStats) float64 { return r.TPOT.P90 }, false},
	{"e2e_mean_s", "latency mean", "ms", 1e3, func(r RunStats) float64 { return r.E2E.Mean }, false},
	{"e2e_p90_s", "latency p90", "ms", 1e3, func(r RunStats) float64 { return r.E2E.P90 }, false},
	{"output_tokens_per_s", "output throughput", "tok/s", 1, func(r RunStats) float64 { return r.OutputTPS }, true},
	{"total_tokens_per_s", "total throughput", "tok/s", 1, func(r RunStats) float64 { return r.TotalTPS }, true},
	{"requests_per_s", "request throughput", "req/s", 1, func(r RunStats) float64 { return r.RequestsPS }, true},
	{"output_tokens_per_cpu_s", "output per CPU-second", "tok", 1, func(r RunStats) float64 { return r.OutputPerCPU }, true},
}

func (b *Report) aggregate() {
	b.Summary = map[string]Spread{}
	for _, m := range Metrics {
		b.Summary[m.Name] = SpreadOf(b.Runs, m.F)
	}
}

// Print writes the human-readable report.
func (b *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "model      %s (%d parameters, float32, %s sgemm, %d threads)\n", b.Model, b.Params, b.Backend, b.Threads)
	fmt.Fprintf(w, "workload   %s; %d requests per run, %d runs after %d warm-up runs\n", b.Workload, b.Requests, b.Repeats, b.WarmupRuns)
	if b.ContextLimit > 0 {
		src := ""
		if b.ContextSource != "" {
			src = " (" + b.ContextSource + ")"
		}
		fmt.Fprintf(w, "context    %d tokens per request%s; %d of %d requests clipped to it\n", b.ContextLimit, src, b.Clipped, b.Requests)
	}
	fmt.Fprintf(w, "engine     native; %s, %d prompt tokens per step (--max-batched-tokens)\n", b.SeqLimit(), b.MaxBatchedTokens)
	if len(b.Runs) == 0 {
		return
	}
	if r := b.Runs[0]; b.Requests > 0 {
		fmt.Fprintf(w, "lengths    %.0f prompt and %.0f output tokens per request on average\n",
			float64(r.InputToks)/float64(b.Requests), float64(r.OutputToks)/float64(b.Requests))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-22s %18s %23s %8s %8s\n", "metric", "median of runs", "min – max", "spread", "rel IQR")
	for _, m := range Metrics {
		s := b.Summary[m.Name]
		fmt.Fprintf(w, "%-22s %12.2f %-5s %11.2f – %-9.2f %7.1f%% %7.1f%%\n", m.Label, m.Scale*s.Median, m.Unit,
			m.Scale*s.Min, m.Scale*s.Max, 100*s.Spread, 100*s.RelIQR)
	}
	gcs := 0
	for _, r := range b.Runs {
		gcs += r.GCCycles
	}
	fmt.Fprintf(w, "\nspread = (max − min)/median, rel IQR = (Q3 − Q1)/median over %d runs; %d garbage collections during them\n", len(b.Runs), gcs)
	if sh := SpreadOf(b.Runs, func(r RunStats) float64 { return r.CPUShare }); sh.Median > 0 {
		fmt.Fprintf(w, "CPU share  %.0f%% of %d threads' time (min %.0f%%, max %.0f%%)", 100*sh.Median, b.Threads, 100*sh.Min, 100*sh.Max)
		if sh.Spread > 0.1 {
			fmt.Fprint(w, ": it varied between runs, so other processes probably took cores; prefer the per-CPU-second figure or rerun on a quiet machine")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "peak memory (VmHWM)    %.1f MiB; peak KV cache %.1f MiB\n", float64(b.PeakRSSBytes)/(1<<20), float64(b.Runs[0].PeakKV)/(1<<20))
}

// SeqLimit describes the sequence limit the run served under.
func (b *Report) SeqLimit() string {
	if b.MaxNumSeqs <= 0 {
		return "no sequence limit"
	}
	return fmt.Sprintf("at most %d sequences in flight (--max-num-seqs)", b.MaxNumSeqs)
}

// ResetPeakRSS sets this process's VmHWM back to its current resident set
// (Linux: "5" written to /proc/self/clear_refs), so that PeakRSS then
// describes what came after; it reports whether the kernel took it.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil //output:not-an-output: a kernel control file, not a file
}

// PeakRSS returns VmHWM from /proc/self/status in bytes (0 where absent).
func PeakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, err := strconv.ParseInt(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// Clipped counts the sampled requests of w that its context limit shortens
// (the same draws without the limit are longer).
func Clipped(w *workload.Workload) int {
	if w.ContextLimit <= 0 {
		return 0
	}
	free := *w
	free.ContextLimit = 0
	n := 0
	for _, r := range free.Sample(w.Requests()) {
		if r.Input+r.Output > w.ContextLimit {
			n++
		}
	}
	return n
}
