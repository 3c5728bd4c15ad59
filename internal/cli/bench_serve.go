package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/workload"
)

func init() {
	Register(&Command{
		Name:  "bench-serve",
		Usage: "--model DIR [--isl N --osl N --concurrency N --num-requests N | --workload PRESET] [--max-num-seqs N] [--max-batched-tokens N] [--repeats N] [--threads N] [--json]",
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
decodes one token or feeds a chunk of its prompt (at most
--max-batched-tokens prompt tokens per step); finished requests leave and
new ones are admitted at once. --max-num-seqs N caps the sequences in the
scheduler at N (the engine setting estimate and search price under the
same name; search's serving.json gives its choice): with fewer than the
clients, the others' requests wait for a slot, and the wait counts in their
TTFT and end-to-end latency as in a real server's queue. The report says
the settings it measured under. GEMMs and elementwise work use GOMAXPROCS threads (--threads
fixes the number); OpenBLAS, when built with -tags openblas, runs one
thread per goroutine so nothing is oversubscribed.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` with config.json and *.safetensors, or \"parent\" for the embedded parent (required)")
			wl := workloadFlags{DefaultISL: 128, DefaultOSL: 128, DefaultConcurrency: 4}
			wl.Register(fs)
			repeats := intArg(fs, "repeats", 5, 1, maxRepeats, "measured runs after the warm-up")
			maxWarmup := intArg(fs, "max-warmup", 6, 2, maxRepeats, "most warm-up runs (at least 2 are run)")
			prefill := intArg(fs, "max-batched-tokens", servebench.DefaultPrefillTokens, 1, maxTokens, "most prompt tokens per scheduler step (chunked prefill), as estimate's --max-batched-tokens for the native engine")
			maxSeqs := intArg(fs, "max-num-seqs", 0, 0, maxClients, "most sequences in the scheduler at once, as estimate's --max-num-seqs; the other clients wait (0: one per client)")
			threads := intArg(fs, "threads", 0, 0, maxThreads, "compute threads (GOMAXPROCS) for the run; 0 keeps the current setting")
			asJSON := fs.Bool("json", false, "write the report as JSON")
			allowLong := fs.Bool("allow-long-context", false, "allow requests past the model's max_position_embeddings")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				dir, err := engineCheckpoint("--model", *model)
				if err != nil {
					return err
				}
				if *threads > 0 {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(*threads))
				}
				wp, err := wl.Workload()
				if err != nil {
					return err
				}
				m, err := engine.LoadWith(dir, engine.LoadOptions{Mapped: true})
				if err != nil {
					return err
				}
				defer m.Close()
				what := "the " + wp.Name + " workload's requests"
				if wl.Preset() == "" {
					what = fmt.Sprintf("--isl %d + --osl %d", wp.Input.MaxValue(), wp.Output.MaxValue())
				}
				w, wc, err := servebench.Workload(*wp, 0, workload.ContextRule{MaxPositions: m.Arch().MaxPositions, Explicit: wl.Set("context"),
					AllowLong: *allowLong, What: what, ContextFlag: "--context", AllowFlag: allowLongFlag})
				if err != nil {
					return Usagef("%v", err)
				}
				clipped := servebench.Clipped(&w)
				if clipped > 0 {
					fmt.Fprintf(env.Stderr, "warning: %d of %d requests are clipped to the %d-token context (%s); the lengths below are what ran\n",
						clipped, w.Requests(), wc.Tokens, wc.Source)
				}
				var term *progress.Terminal
				if !*asJSON {
					term = progress.NewTerminal(env.Stderr)
				}
				rep, err := servebench.Run(ctx, m, &w, servebench.Options{Repeats: *repeats, MaxWarmup: *maxWarmup, PrefillTokens: *prefill, MaxNumSeqs: *maxSeqs},
					term.Report)
				term.End()
				if err != nil {
					return err
				}
				rep.Model = *model
				rep.ContextSource = wc.Source
				if *asJSON {
					return writeJSON(env.Stdout, rep)
				}
				rep.Print(env.Stdout)
				return nil
			}
		},
	})
}
