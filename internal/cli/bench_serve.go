package cli

import (
	"bufio"
	"context"
	"encoding/json"
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
		Usage: "--model DIR [--isl N --osl N --concurrency N --requests N | --workload PRESET] [--repeats N] [--json]",
		Short: "measure serving latency and throughput of a model on this machine (native engine)",
		Long: `Runs a model with the native engine's continuous-batching scheduler
and reports measured time to first token (TTFT), time per output token
(TPOT), end-to-end latency, throughput and peak memory.

Traffic is either fixed lengths in a closed loop (--isl prompt tokens,
--osl generated tokens, --concurrency clients, --requests in total) or a
workload preset (--workload chat, game-character, ...; its length
distributions, arrival mode and request count; --requests and
--concurrency override them; --max-context clips its lengths). Prompts are
random token ids from a seeded generator; every request generates exactly
its output length (EOS is ignored) so runs do the same work.

One warm-up run (not reported) is followed by --repeats measured runs.
Each metric is reported as the mean over runs of the per-run mean and p90,
with the spread across runs ((max−min)/mean), so run-to-run noise is
visible. Wall-clock rates depend on what else runs on the machine; output
tokens per CPU-second of this process are reported beside them as a
load-independent figure. Peak memory is the process's VmHWM (Linux).

The scheduler: every step runs all sequences in flight as one batch; each
decodes one token or feeds a chunk of its prompt (at most --prefill-tokens
prompt tokens per step); finished requests leave and new ones are admitted
at once. GEMMs and elementwise work use GOMAXPROCS threads (--threads
fixes the number); OpenBLAS, when built with -tags openblas, runs one
thread per goroutine so nothing is oversubscribed.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` with config.json and *.safetensors, or \"parent\" for the embedded parent (required)")
			isl := fs.Int("isl", 128, "prompt (input) tokens per request")
			osl := fs.Int("osl", 128, "generated (output) tokens per request")
			concurrency := fs.Int("concurrency", 4, "closed-loop clients (requests in flight)")
			requests := fs.Int("requests", 0, "requests per run (default max(8 × concurrency, 32), or the preset's)")
			preset := fs.String("workload", "", "workload `preset`: "+strings.Join(workload.Presets(), ", "))
			maxContext := fs.Int("max-context", 0, "clip prompt + output to this many tokens (0: the preset's limit, capped by max_position_embeddings)")
			repeats := fs.Int("repeats", 3, "measured runs after the warm-up")
			prefill := fs.Int("prefill-tokens", 512, "most prompt tokens per scheduler step (chunked prefill)")
			seed := fs.Uint64("seed", 1, "seed of the random prompts")
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
				set := map[string]bool{}
				fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
				if *preset != "" && (set["isl"] || set["osl"]) {
					return Usagef("--workload sets the lengths; do not combine it with --isl/--osl")
				}
				switch {
				case *isl < 1 || *osl < 1:
					return Usagef("--isl and --osl must be ≥ 1, got %d and %d", *isl, *osl)
				case *concurrency < 1:
					return Usagef("--concurrency must be ≥ 1, got %d", *concurrency)
				case *requests < 0:
					return Usagef("--requests must be ≥ 0, got %d", *requests)
				case *repeats < 1:
					return Usagef("--repeats must be ≥ 1, got %d", *repeats)
				case *prefill < 1:
					return Usagef("--prefill-tokens must be ≥ 1, got %d", *prefill)
				case *maxContext < 0:
					return Usagef("--max-context must be ≥ 0, got %d", *maxContext)
				case *threads < 0:
					return Usagef("--threads must be ≥ 0, got %d", *threads)
				}
				if *threads > 0 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*threads))
				}
				w := workload.FixedClosed(*isl, *osl, *concurrency)
				if *preset != "" {
					p, err := workload.Preset(*preset)
					if err != nil {
						return &UsageError{Msg: err.Error()}
					}
					w = p
					if set["concurrency"] {
						w.Concurrency, w.Rate = *concurrency, 0
					}
				}
				if *requests > 0 {
					w.NumRequests = *requests
				} else if *preset == "" {
					w.NumRequests = max(8**concurrency, 32)
				}
				w.Seed = *seed
				m, err := engine.Load(dir)
				if err != nil {
					return err
				}
				arch := m.Arch()
				limit := *maxContext
				if limit == 0 {
					limit = w.ContextLimit
					if arch.MaxPositions > 0 && (limit == 0 || limit > arch.MaxPositions) {
						limit = arch.MaxPositions
					}
				}
				if limit > 0 {
					if *preset == "" && *isl+*osl > limit {
						return Usagef("--isl %d + --osl %d exceeds the model's context of %d tokens", *isl, *osl, limit)
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
				// Warm-up: a short run that touches every code path.
				warm := reqs[:min(len(reqs), max(opt.Concurrency, 2))]
				if _, err := m.Serve(ctx, warm, opt); err != nil {
					return err
				}
				var runs []bsBenchRun
				for i := 0; i < *repeats; i++ {
					st, err := m.Serve(ctx, reqs, opt)
					if err != nil {
						return err
					}
					runs = append(runs, bsSummarizeRun(st))
					if !*asJSON {
						fmt.Fprintf(env.Stderr, "run %d/%d: %.1f output tokens/s, TTFT %.1f ms, TPOT %.2f ms\n",
							i+1, *repeats, runs[i].OutputTPS, 1e3*runs[i].TTFT.Mean, 1e3*runs[i].TPOT.Mean)
					}
				}
				rep := bsBenchReport{
					Model: *model, Params: m.NumParams(), Backend: blas.Backend(), Threads: runtime.GOMAXPROCS(0),
					Workload: w.String(), ContextLimit: w.ContextLimit, Requests: len(reqs), Repeats: *repeats, Runs: runs,
					PeakRSSBytes: bsPeakRSS(),
				}
				rep.aggregate()
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}
				rep.print(env)
				return nil
			}
		},
	})
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

// bsSpread is a metric across runs: mean and relative spread (max−min)/mean.
type bsSpread struct {
	Mean   float64 `json:"mean"`
	Spread float64 `json:"spread"`
}

func bsSpreadOf(runs []bsBenchRun, f func(bsBenchRun) float64) bsSpread {
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, r := range runs {
		v := f(r)
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	mean := sum / float64(len(runs))
	s := 0.0
	if mean != 0 {
		s = (hi - lo) / mean
	}
	return bsSpread{Mean: mean, Spread: s}
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
	fmt.Fprintf(w, "workload   %s; %d requests per run, %d runs after a warm-up\n", b.Workload, b.Requests, b.Repeats)
	if b.ContextLimit > 0 {
		fmt.Fprintf(w, "context    prompt + output clipped to %d tokens per request\n", b.ContextLimit)
	}
	if r := b.Runs[0]; b.Requests > 0 {
		fmt.Fprintf(w, "lengths    %.0f prompt and %.0f output tokens per request on average\n",
			float64(r.InputToks)/float64(b.Requests), float64(r.OutputToks)/float64(b.Requests))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-20s %18s %8s\n", "metric", "mean of runs", "spread")
	for _, m := range bsBenchMetrics {
		s := b.Summary[m.name]
		fmt.Fprintf(w, "%-20s %12.2f %-5s %7.1f%%\n", m.label, m.scale*s.Mean, m.unit, 100*s.Spread)
	}
	fmt.Fprintf(w, "\npeak memory (VmHWM)    %.1f MiB; peak KV cache %.1f MiB\n", float64(b.PeakRSSBytes)/(1<<20), float64(b.Runs[0].PeakKV)/(1<<20))
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
