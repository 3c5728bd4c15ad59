package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/workload"
)

func init() {
	Register(&Command{
		Name:  "bench-serve",
		Usage: "--model DIR [--isl N --osl N --concurrency N --num-requests N | --workload PRESET] [--repeats N] [--threads N] [--json]",
		Short: "measure serving latency and throughput of a model on this machine (native engine)",
		Long: `Runs a model with the native engine's continuous-batching scheduler
and reports measured time to first token (TTFT), time per output token
(TPOT), end-to-end latency, throughput and peak memory.

Traffic is either fixed lengths in a closed loop (--isl prompt tokens,
--osl generated tokens, --concurrency clients, --num-requests in total) or a
workload preset (--workload chat, game-character, ...; its length
distributions, arrival mode and request count; --num-requests and
--concurrency override them; --context clips its lengths). Prompts are
random token ids from a seeded generator; every request generates exactly
its output length (EOS is ignored) so runs do the same work.

The work is fixed: the same seeded prompts every run, greedy decoding,
every request generating exactly its output length. Warm-up runs (a short
slice of the requests, not reported) repeat until two in a row agree on
TPOT and TTFT within 5% (at most --max-warmup), so caches, buffers and CPU
frequency are steady; then --repeats measured runs follow, each after a
forced garbage collection (the serving loop itself reuses its buffers, so
collections during a run are rare; their count is reported). Each metric
is the per-run mean or p90; the report gives its median over the runs with
the min–max range, the relative spread (max−min)/median and the relative
interquartile range, so run-to-run noise is visible. Wall-clock rates
depend on what else runs on the machine; output tokens per CPU-second of
this process are reported beside them as a load-independent figure. Peak
memory is the process's VmHWM (Linux).

The scheduler: every step runs all sequences in flight as one batch; each
decodes one token or feeds a chunk of its prompt (at most --prefill-tokens
prompt tokens per step); finished requests leave and new ones are admitted
at once. GEMMs and elementwise work use GOMAXPROCS threads (--threads
fixes the number); OpenBLAS, when built with -tags openblas, runs one
thread per goroutine so nothing is oversubscribed.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` with config.json and *.safetensors, or \"parent\" for the embedded parent (required)")
			wl := workloadFlags{DefaultISL: 128, DefaultOSL: 128, DefaultConcurrency: 4}
			wl.Register(fs)
			repeats := fs.Int("repeats", 5, "measured runs after the warm-up")
			maxWarmup := fs.Int("max-warmup", 6, "most warm-up runs (at least 2 are run)")
			prefill := fs.Int("prefill-tokens", 512, "most prompt tokens per scheduler step (chunked prefill)")
			threads := fs.Int("threads", 0, "compute threads (GOMAXPROCS) for the run; 0 keeps the current setting")
			asJSON := fs.Bool("json", false, "write the report as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				dir, err := checkpointDir(*model)
				if err != nil {
					return err
				}
				switch {
				case *repeats < 1:
					return Usagef("--repeats must be ≥ 1, got %d", *repeats)
				case *maxWarmup < 2:
					return Usagef("--max-warmup must be ≥ 2, got %d", *maxWarmup)
				case *prefill < 1:
					return Usagef("--prefill-tokens must be ≥ 1, got %d", *prefill)
				case *threads < 0:
					return Usagef("--threads must be ≥ 0, got %d", *threads)
				}
				if *threads > 0 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*threads))
				}
				wp, err := wl.Workload()
				if err != nil {
					return err
				}
				w := *wp
				preset := wl.Preset()
				if w.NumRequests == 0 && preset == "" {
					w.NumRequests = max(16*max(w.Concurrency, 1), 64)
				}
				m, err := engine.Load(dir)
				if err != nil {
					return err
				}
				arch := m.Arch()
				limit := wl.limit
				if limit == 0 {
					limit = w.ContextLimit
					if arch.MaxPositions > 0 && (limit == 0 || limit > arch.MaxPositions) {
						limit = arch.MaxPositions
					}
				}
				if limit > 0 {
					if isl, osl := w.Input.MaxValue(), w.Output.MaxValue(); preset == "" && isl+osl > limit {
						return Usagef("--isl %d + --osl %d exceeds the model's context of %d tokens", isl, osl, limit)
					}
					w.ContextLimit = limit
				}
				if err := w.Validate(); err != nil {
					return &UsageError{Msg: err.Error()}
				}
				reqs := bsBenchRequests(&w, arch.Vocab)
				opt := engine.ServeOptions{PrefillTokens: *prefill}
				if w.Mode() == workload.ClosedLoop {
					opt.Concurrency = w.Concurrency
				}
				warmups, err := bsWarmUp(ctx, m, reqs, opt, *maxWarmup)
				if err != nil {
					return err
				}
				var runs []bsBenchRun
				for i := 0; i < *repeats; i++ {
					run, err := bsMeasure(ctx, m, reqs, opt)
					if err != nil {
						return err
					}
					runs = append(runs, run)
					if !*asJSON {
						fmt.Fprintf(env.Stderr, "run %d/%d: %.1f output tokens/s, TTFT %.1f ms, TPOT %.2f ms\n",
							i+1, *repeats, run.OutputTPS, 1e3*run.TTFT.Mean, 1e3*run.TPOT.Mean)
					}
				}
				rep := bsBenchReport{
					Model: *model, Params: m.NumParams(), Backend: blas.Backend(), Threads: runtime.GOMAXPROCS(0),
					Workload: w.String(), ContextLimit: w.ContextLimit, Requests: len(reqs), Repeats: *repeats, WarmupRuns: warmups, Runs: runs,
					PeakRSSBytes: bsPeakRSS(),
				}
				rep.aggregate()
				if *asJSON {
					return writeJSON(env.Stdout, rep)
				}
				rep.print(env)
				return nil
			}
		},
	})
}

// bsWarmUp runs a slice of the requests (at least two per client) until two
// runs in a row agree on mean TPOT and mean TTFT within 5%, at most maxRuns
// times, and returns the number of runs.
func bsWarmUp(ctx context.Context, m *engine.Model, reqs []engine.ServeRequest, opt engine.ServeOptions, maxRuns int) (int, error) {
	warm := reqs[:min(len(reqs), max(2*opt.Concurrency, 8))]
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.05*b }
	var prev bsBenchRun
	for i := 1; ; i++ {
		st, err := m.Serve(ctx, warm, opt)
		if err != nil {
			return i, err
		}
		run := bsSummarizeRun(st)
		if run.TPOT.Mean == 0 { // one-token outputs: compare wall time
			run.TPOT.Mean = st.Wall
		}
		if i >= maxRuns || (i > 1 && near(run.TPOT.Mean, prev.TPOT.Mean) && near(run.TTFT.Mean, prev.TTFT.Mean)) {
			return i, nil
		}
		prev = run
	}
}

// bsMeasure runs the requests once after a forced garbage collection and
// summarises the run, with the number of collections during it.
func bsMeasure(ctx context.Context, m *engine.Model, reqs []engine.ServeRequest, opt engine.ServeOptions) (bsBenchRun, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	st, err := m.Serve(ctx, reqs, opt)
	if err != nil {
		return bsBenchRun{}, err
	}
	runtime.ReadMemStats(&ms)
	run := bsSummarizeRun(st)
	run.GCCycles = int(ms.NumGC - gc0)
	if run.Seconds > 0 {
		run.CPUShare = run.CPUSeconds / (run.Seconds * float64(runtime.GOMAXPROCS(0)))
	}
	return run, nil
}

// bsBenchRequests samples the workload's requests with random prompt ids.
func bsBenchRequests(w *workload.Workload, vocab int) []engine.ServeRequest {
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

// bsStat is the mean and 90th percentile of one metric within a run.
type bsStat struct {
	Mean float64 `json:"mean"`
	P90  float64 `json:"p90"`
}

func bsMeanP90(xs []float64) bsStat {
	if len(xs) == 0 {
		return bsStat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	// Nearest-rank percentile.
	idx := int(math.Ceil(0.9*float64(len(s)))) - 1
	return bsStat{Mean: sum / float64(len(s)), P90: s[max(idx, 0)]}
}

type bsBenchRun struct {
	Seconds    float64 `json:"seconds"`
	TTFT       bsStat  `json:"ttft_s"`
	TPOT       bsStat  `json:"tpot_s"`
	E2E        bsStat  `json:"e2e_s"`
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

func bsSummarizeRun(st *engine.ServeStats) bsBenchRun {
	var ttft, tpot, e2e []float64
	for _, r := range st.Requests {
		ttft = append(ttft, r.TTFT)
		e2e = append(e2e, r.E2E)
		if r.Output > 1 {
			tpot = append(tpot, r.TPOT)
		}
	}
	r := bsBenchRun{
		Seconds: st.Wall, TTFT: bsMeanP90(ttft), TPOT: bsMeanP90(tpot), E2E: bsMeanP90(e2e),
		OutputTPS: float64(st.OutputTokens) / st.Wall, TotalTPS: float64(st.OutputTokens+st.InputTokens) / st.Wall,
		RequestsPS: float64(len(st.Requests)) / st.Wall, InputToks: st.InputTokens, OutputToks: st.OutputTokens, Steps: st.Steps, MaxBatch: st.MaxBatch, PeakKV: st.PeakKVBytes,
	}
	if st.CPUSeconds > 0 {
		r.CPUSeconds = st.CPUSeconds
		r.OutputPerCPU = float64(st.OutputTokens) / st.CPUSeconds
	}
	return r
}

// bsSpread is one metric across runs: the median, the range, the relative
// spread (max−min)/median and the relative interquartile range
// (Q3−Q1)/median, quartiles interpolated linearly between order statistics.
type bsSpread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Spread float64 `json:"spread"`
	RelIQR float64 `json:"rel_iqr"`
}

func bsSpreadOf(runs []bsBenchRun, f func(bsBenchRun) float64) bsSpread {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return bsSpreadOfValues(xs)
}

func bsSpreadOfValues(xs []float64) bsSpread {
	if len(xs) == 0 {
		return bsSpread{}
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
	r := bsSpread{Median: q(0.5), Min: s[0], Max: s[len(s)-1]}
	if r.Median != 0 {
		r.Spread = (r.Max - r.Min) / r.Median
		r.RelIQR = (q(0.75) - q(0.25)) / r.Median
	}
	return r
}

type bsBenchReport struct {
	Model        string              `json:"model"`
	Params       int                 `json:"params"`
	Backend      string              `json:"backend"`
	Threads      int                 `json:"threads"`
	Workload     string              `json:"workload"`
	ContextLimit int                 `json:"context_limit"` // prompt + output clipped to this (0: none)
	Requests     int                 `json:"requests_per_run"`
	Repeats      int                 `json:"repeats"`
	WarmupRuns   int                 `json:"warmup_runs"`
	Summary      map[string]bsSpread `json:"summary"`
	Runs         []bsBenchRun        `json:"runs"`
	PeakRSSBytes int64               `json:"peak_rss_bytes"`
}

var bsBenchMetrics = []struct {
	name, label, unit string
	scale             float64 // printed value = scale × stored value
	f                 func(bsBenchRun) float64
}{
	{"ttft_mean_s", "TTFT mean", "ms", 1e3, func(r bsBenchRun) float64 { return r.TTFT.Mean }},
	{"ttft_p90_s", "TTFT p90", "ms", 1e3, func(r bsBenchRun) float64 { return r.TTFT.P90 }},
	{"tpot_mean_s", "TPOT mean", "ms", 1e3, func(r bsBenchRun) float64 { return r.TPOT.Mean }},
	{"tpot_p90_s", "TPOT p90", "ms", 1e3, func(r bsBenchRun) float64 { return r.TPOT.P90 }},
	{"e2e_mean_s", "latency mean", "ms", 1e3, func(r bsBenchRun) float64 { return r.E2E.Mean }},
	{"e2e_p90_s", "latency p90", "ms", 1e3, func(r bsBenchRun) float64 { return r.E2E.P90 }},
	{"output_tokens_per_s", "output throughput", "tok/s", 1, func(r bsBenchRun) float64 { return r.OutputTPS }},
	{"total_tokens_per_s", "total throughput", "tok/s", 1, func(r bsBenchRun) float64 { return r.TotalTPS }},
	{"requests_per_s", "request throughput", "req/s", 1, func(r bsBenchRun) float64 { return r.RequestsPS }},
	{"output_tokens_per_cpu_s", "output per CPU-second", "tok", 1, func(r bsBenchRun) float64 { return r.OutputPerCPU }},
}

func (b *bsBenchReport) aggregate() {
	b.Summary = map[string]bsSpread{}
	for _, m := range bsBenchMetrics {
		b.Summary[m.name] = bsSpreadOf(b.Runs, m.f)
	}
}

func (b *bsBenchReport) print(env *Env) {
	w := env.Stdout
	fmt.Fprintf(w, "model      %s (%d parameters, float32, %s sgemm, %d threads)\n", b.Model, b.Params, b.Backend, b.Threads)
	fmt.Fprintf(w, "workload   %s; %d requests per run, %d runs after %d warm-up runs\n", b.Workload, b.Requests, b.Repeats, b.WarmupRuns)
	if b.ContextLimit > 0 {
		fmt.Fprintf(w, "context    prompt + output clipped to %d tokens per request\n", b.ContextLimit)
	}
	if r := b.Runs[0]; b.Requests > 0 {
		fmt.Fprintf(w, "lengths    %.0f prompt and %.0f output tokens per request on average\n",
			float64(r.InputToks)/float64(b.Requests), float64(r.OutputToks)/float64(b.Requests))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-22s %18s %23s %8s %8s\n", "metric", "median of runs", "min – max", "spread", "rel IQR")
	for _, m := range bsBenchMetrics {
		s := b.Summary[m.name]
		fmt.Fprintf(w, "%-22s %12.2f %-5s %11.2f – %-9.2f %7.1f%% %7.1f%%\n", m.label, m.scale*s.Median, m.unit,
			m.scale*s.Min, m.scale*s.Max, 100*s.Spread, 100*s.RelIQR)
	}
	gcs := 0
	for _, r := range b.Runs {
		gcs += r.GCCycles
	}
	fmt.Fprintf(w, "\nspread = (max − min)/median, rel IQR = (Q3 − Q1)/median over %d runs; %d garbage collections during them\n", len(b.Runs), gcs)
	if sh := bsSpreadOf(b.Runs, func(r bsBenchRun) float64 { return r.CPUShare }); sh.Median > 0 {
		fmt.Fprintf(w, "CPU share  %.0f%% of %d threads' time (min %.0f%%, max %.0f%%)", 100*sh.Median, b.Threads, 100*sh.Min, 100*sh.Max)
		if sh.Spread > 0.1 {
			fmt.Fprint(w, ": it varied between runs, so other processes probably took cores; prefer the per-CPU-second figure or rerun on a quiet machine")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "peak memory (VmHWM)    %.1f MiB; peak KV cache %.1f MiB\n", float64(b.PeakRSSBytes)/(1<<20), float64(b.Runs[0].PeakKV)/(1<<20))
}

// bsPeakRSS returns VmHWM from /proc/self/status in bytes (0 where absent).
func bsPeakRSS() int64 {
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
