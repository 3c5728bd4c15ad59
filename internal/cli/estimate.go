package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/scenarios"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/workload"
)

// Defaults of "autocompress estimate" with no flags (the README's main job).
const (
	estDefaultModel    = "meta-llama/Meta-Llama-3.1-8B"
	estDefaultGPU      = "h100-sxm"
	estDefaultEngine   = "vllm"
	estDefaultWorkload = "chat"
)

func init() {
	Register(&Command{
		Name:  "estimate",
		Usage: "[--model M] [--gpu G] [--engine E] [--precision P] [--tp N] [--workload W | --isl N --osl N (--concurrency N | --rate R)] [--json] | --scenarios in.csv --out out.csv [--force]",
		Short: "predict memory, KV capacity, TTFT, TPOT and throughput of a model on a GPU and engine",
		Long: `Estimate prices one deployment: the memory plan of the engine (weights, activations,
overheads, KV pool, KV capacity in tokens and the concurrency that fits) and the
latency and throughput of a workload from a fitted step-time model: the analytic steady
state (the path validate-estimator measures) beside a continuous-batching simulation
(mean and p90; it shares the step model but not the fitted queueing terms, so its TTFT
is less accurate). Batch mode reports the analytic figures. With no flags it
prices meta-llama/Meta-Llama-3.1-8B on h100-sxm with vllm, bf16 and the chat workload.

--model takes a preset name, a config.json or a checkpoint directory.
--gpu takes a catalog name, optionally with the node's GPU count ("rtx-4090x2",
the same as --gpus 2); the count bounds --tp (default: --tp GPUs) and one TP
replica is priced. --tp must split the model's heads and widths as the engines
do (the rule validate applies). --gpu-file adds devices (see the README).
--rate takes requests per second, or "inf" for an offline run of --num-requests.

--json writes "analytic" (the figures to use: the path validate-estimator
scores), "simulated" (the simulation; absent with --analytic), "latency" (the
figures the text leads with, kept for older readers), "use": "analytic",
"context" (tokens, where they come from, the longest request) and
"error_band" (held-out median and p90 APE per metric).

Batch mode: --scenarios reads a CSV with the columns
  id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests
(request_rate empty or 0 means closed loop at concurrency; "inf" = offline) and the
optional columns kv_dtype,mem_fraction,max_num_seqs,max_batched_tokens,context, each
meaning what the flag of that name means (empty = the engine's default), and gpus (GPUs
per node, as --gpus; at least tp). It writes
--out with one row per scenario:
  id,fits,weights_gib,kv_gib,overhead_gib,total_gib,kv_capacity_tokens,max_concurrency,
  ttft_ms,tpot_ms,e2e_ms,output_tok_s,prefill_tok_s,decode_tok_s,error
A bad row gets an error value; the others still come out. An existing --out is
replaced only with --force. prefill_tok_s is the server's
input-token throughput, decode_tok_s the decode speed one user sees (1000/tpot_ms).`,
		Flags: estimateFlags,
	})
}

type estFlags struct {
	model, gpu, gpuFile, engine, precision, kvDType string
	tp, gpus, maxSeqs, maxBatched                   int
	memFraction                                     float64
	jsonOut, analytic, allowLong, force, offline    bool
	scenarios, out, coeffs                          string
	wl                                              workloadFlags
}

func estimateFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	f := &estFlags{}
	fs.StringVar(&f.model, "model", estDefaultModel, "model: preset name (see inspect --model list), config.json, checkpoint directory or \"parent\"")
	fs.StringVar(&f.gpu, "gpu", estDefaultGPU, "GPU name, optionally with the node's GPU count: rtx-4090x2 (see the error of an unknown name for the list)")
	intVar(fs, &f.gpus, "gpus", 0, 1, maxGPUs, "GPUs in the node (bounds --tp; default: --tp); the same as a GPU name ending in xN")
	fs.StringVar(&f.gpuFile, "gpu-file", "", "YAML or JSON file adding devices to the catalog")
	fs.StringVar(&f.engine, "engine", estDefaultEngine, "serving engine: "+strings.Join(estimate.Engines(), ", "))
	fs.StringVar(&f.precision, "precision", "", "weight precision: bf16, fp16, fp8, fp8-block, nvfp4, mxfp4, int4-awq, int4-gptq, q4_0, q4_k_m, q5_k_m, q6_k, q8_0, f16, mxfp4_moe (default: what a checkpoint's quantization_config says, else bf16; f16 for llamacpp, mxfp4_moe there for an MXFP4 checkpoint)")
	fs.StringVar(&f.kvDType, "kv-dtype", "auto", "KV cache type: auto, bf16, fp16, fp8 (llamacpp: f16, q8_0, q4_0)")
	intVar(fs, &f.tp, "tp", 1, 1, maxGPUs, "tensor-parallel degree")
	f.wl = workloadFlags{DefaultPreset: estDefaultWorkload}
	f.wl.Register(fs)
	fs.BoolVar(&f.allowLong, "allow-long-context", false, "allow a context past the model's max_position_embeddings (as VLLM_ALLOW_LONG_MAX_MODEL_LEN does)")
	intVar(fs, &f.maxSeqs, "max-num-seqs", 0, 1, maxClients, "engine sequence limit; llamacpp: parallel slots -np (default: the engine's; llamacpp: the concurrency)")
	intVar(fs, &f.maxBatched, "max-batched-tokens", 0, 1, maxTokens, "per-step token budget; llamacpp: n_batch (default: the engine's; llamacpp 2048, computed in n_ubatch 512 passes)")
	floatVar(fs, &f.memFraction, "mem-fraction", 0, fraction, "gpu_memory_utilization / mem_fraction_static / free_gpu_memory_fraction (default: the engine's)")
	fs.BoolVar(&f.jsonOut, "json", false, "print JSON")
	fs.BoolVar(&f.analytic, "analytic", false, "use the analytic steady state only (no simulation)")
	fs.BoolVar(&f.offline, offlineFlag, false, offlineHelp)
	fs.StringVar(&f.scenarios, "scenarios", "", "batch mode: input CSV of scenarios")
	fs.StringVar(&f.out, "out", "", "batch mode: output CSV")
	fs.BoolVar(&f.force, "force", false, "batch mode: replace an existing --out")
	fs.StringVar(&f.coeffs, "coeffs", "", "coefficient JSON to use instead of the embedded one (as written by calibrate --out)")
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		cat, err := hardware.LoadCatalog(f.gpuFile)
		if err != nil {
			return err
		}
		var coeffs *estimate.CoeffFile
		if f.coeffs != "" {
			b, err := os.ReadFile(f.coeffs)
			if err != nil {
				return err
			}
			if coeffs, err = estimate.ParseCoeffs(b); err != nil {
				return fmt.Errorf("%s: %w", f.coeffs, err)
			}
		}
		if f.scenarios != "" || f.out != "" {
			if f.scenarios == "" || f.out == "" {
				return Usagef("batch mode needs both --scenarios and --out")
			}
			return runScenarios(ctx, env, cat, coeffs, f)
		}
		w, err := f.wl.Workload()
		if err != nil {
			return err
		}
		node, err := cat.LookupNode(f.gpu, f.gpus)
		if err != nil {
			return Usagef("--gpu %s: %v", f.gpu, err)
		}
		hw := node.GPU
		eng, err := estimate.LookupEngine(f.engine)
		if err != nil {
			return Usagef("%v", err)
		}
		m, err := modelArch(f.model)
		if err != nil {
			return err
		}
		if err := useHostCalibration(ctx, env, eng, hw, f.offline); err != nil {
			return err
		}
		what := ""
		if f.wl.Set("isl") || f.wl.Set("osl") {
			what = fmt.Sprintf("--isl %d + --osl %d", f.wl.isl, f.wl.osl)
		}
		wctx, err := w.FitContext(workload.ContextRule{MaxPositions: m.MaxPositions, Explicit: f.wl.Set("context"), AllowLong: f.allowLong, What: what, ContextFlag: "--context", AllowFlag: allowLongFlag})
		if err != nil {
			return Usagef("%v", err)
		}
		o := estimate.Options{Precision: f.precision, KVDType: f.kvDType, TP: f.tp, GPUs: node.Count, MaxModelLen: f.wl.limit,
			MaxNumSeqs: f.maxSeqs, MaxBatchedTokens: f.maxBatched, MemFraction: f.memFraction}
		if f.tp < 1 {
			return Usagef("--tp must be ≥ 1, got %d", f.tp)
		}
		if f.precision != "" {
			if _, err := estimate.LookupPrecision(f.precision); err != nil {
				return Usagef("%v", err)
			}
		}
		if _, err := estimate.LookupKVType(f.kvDType); err != nil {
			return Usagef("%v", err)
		}
		res, err := estimate.EstimateWith(m, hw, eng, o, w, coeffs, f.analytic)
		if res != nil && res.PrecisionFromConfig {
			fmt.Fprintf(env.Stderr, "precision %s, from the checkpoint's quantization_config (override with --precision)\n", res.Memory.Precision)
		}
		var ue *estimate.UnsupportedError
		var te *architecture.TPError
		if errors.As(err, &te) {
			return Usagef("--tp %d: %v", o.TP, err)
		}
		if errors.As(err, &ue) {
			if ue.Flag != "" {
				return Usagef("--%s: %v", ue.Flag, err)
			}
			return Usagef("%v", err)
		}
		if err != nil {
			var fe *estimate.FitError
			if errors.As(err, &fe) && res != nil {
				if f.jsonOut {
					_ = writeJSON(env.Stdout, estJSON(res, hw, err, f.analytic, &wctx))
				} else {
					printMemory(env.Stdout, res, hw, &wctx)
				}
			}
			return err
		}
		if f.jsonOut {
			return writeJSON(env.Stdout, estJSON(res, hw, nil, f.analytic, &wctx))
		}
		printEstimate(env.Stdout, res, hw, f.analytic, &wctx)
		return nil
	}
}

func gib(b float64) float64 { return b / estimate.GiB }

// bandP90 formats a held-out p90 APE; 0 means the coefficient file does not
// record it (written by a calibrate before it did).
func bandP90(x float64) string {
	if x <= 0 {
		return "p90 not recorded"
	}
	return band(x)
}

// band formats a held-out median APE; 0 means the metric had no data.
func band(x float64) string {
	if x <= 0 {
		return "n/a (no data)"
	}
	return fmt.Sprintf("±%.0f%%", x*100)
}

func printMemory(w io.Writer, r *estimate.Result, hw *hardware.GPU, wc *workload.Context) {
	mem := &r.Memory
	spec, err := estimate.LookupSpec(r.Engine)
	if err != nil {
		fmt.Fprintf(w, "autocompress estimate: %v\n", err)
		return
	}
	fmt.Fprintf(w, "autocompress estimate: %s on %s (%s) with %s, %s weights, KV %s, TP %d\n",
		r.Model, hw.Name, hw.Description, r.Engine, mem.Precision, mem.KVDType, mem.TP)
	fmt.Fprintf(w, "parameters: %s total, %s active per token\n", search.FormatCount(r.Params.Total), search.FormatCount(r.Params.Active))
	fmt.Fprintf(w, "workload: %s\n\n", r.Workload)
	fmt.Fprintf(w, "%-40sGiB\n", spec.Words.Memory)
	fmt.Fprintf(w, "  weights                          %8.2f\n", gib(mem.WeightsBytes))
	fmt.Fprintf(w, "  activations (peak)               %8.2f\n", gib(mem.ActivationBytes))
	fmt.Fprintf(w, "  %-33s%8.2f\n", spec.Words.Overhead, gib(mem.OverheadBytes))
	fmt.Fprintf(w, "  KV cache + state pool            %8.2f\n", gib(mem.KVPoolBytes))
	fmt.Fprintf(w, "  total held                       %8.2f of %.2f usable (engine budget %.2f)\n", gib(mem.TotalBytes()), gib(mem.DeviceBytes), gib(mem.BudgetBytes))
	switch {
	case spec.Words.Held != "":
		fmt.Fprintf(w, "  (total held: the four terms above, %s)\n", spec.Words.Held)
	case !spec.Pool:
		fmt.Fprintf(w, "  (total held: the four terms above on each GPU; %s allocates exactly that, so the budget is the same figure)\n", r.Engine)
	case mem.DeviceBytes > 0:
		fmt.Fprintf(w, "  (total held: the four terms above on each GPU; engine budget: the %.2f memory fraction of the usable memory that %s\n"+
			"   sizes its KV pool to fill, the CUDA context and any runtime outside it adding to the total)\n", mem.BudgetBytes/mem.DeviceBytes, r.Engine)
	}
	fmt.Fprintf(w, "KV cache: %.1f KiB/token", mem.KVBytesPerToken/1024)
	if mem.StateBytesPerSeq > 0 {
		fmt.Fprintf(w, ", recurrent state %.1f MiB/sequence", mem.StateBytesPerSeq/(1<<20))
	}
	switch spec.Sched {
	case estimate.PoolScheduler:
		fmt.Fprintf(w, "; capacity %s tokens\n", scenarios.FormatTokens(mem.KVCapacityTokens))
		fmt.Fprintf(w, "max concurrency at %d-token context: %d (%s %d)\n", mem.MaxModelLen, mem.MaxConcurrency, spec.Words.Limit, mem.MaxSeqs)
	case estimate.ServeScheduler:
		// engine.Serve holds exactly each sequence's prompt and output.
		n := max(mem.InFlight, 1)
		fmt.Fprintf(w, "; capacity %s tokens = %d %s × %d tokens (prompt + output)\n",
			scenarios.FormatTokens(mem.KVCapacityTokens), n, spec.Words.Limit, int(mem.KVCapacityTokens)/n)
		fmt.Fprintf(w, "max concurrency: memory would hold %d such sequences; %d run at once (the clients, at most --max-num-seqs %d)\n",
			max(mem.MaxConcurrency, 0), mem.InFlight, mem.MaxSeqs)
	case estimate.SlotScheduler:
		// llama-server allocates -np slots of the context, each padded to 256 cells.
		fmt.Fprintf(w, "; capacity %s tokens = %d slots (-np) × %d cells (the %d-token context padded to 256)\n",
			scenarios.FormatTokens(mem.KVCapacityTokens), mem.MaxSeqs, int(mem.KVCapacityTokens)/max(mem.MaxSeqs, 1), mem.MaxModelLen)
		fmt.Fprintf(w, "max concurrency at %d-token context: %d (the slots); memory would hold %d such slots with a larger -np (--max-num-seqs)\n",
			mem.MaxModelLen, mem.MaxConcurrency, mem.MaxSlots)
	}
	if wc != nil {
		fmt.Fprintf(w, "context %d tokens: %s; the longest request is %d tokens", wc.Tokens, wc.Source, wc.Longest)
		switch {
		case wc.Clipped:
			fmt.Fprintf(w, " (longer ones are clipped to the context)")
		case wc.Long:
			fmt.Fprintf(w, " (past the model's max_position_embeddings: --allow-long-context)")
		}
		fmt.Fprintln(w)
	}
}

func printEstimate(w io.Writer, r *estimate.Result, hw *hardware.GPU, analyticOnly bool, wc *workload.Context) {
	printMemory(w, r, hw, wc)
	a, l := r.Analytic, r.Latency
	if analyticOnly {
		fmt.Fprintf(w, "\nLatency (analytic steady state, the validated path)\n")
		fmt.Fprintf(w, "  TTFT           ms  %9.1f\n", a.TTFT*1e3)
		fmt.Fprintf(w, "  TPOT           ms  %9.2f\n", a.TPOT*1e3)
		fmt.Fprintf(w, "  E2E            s   %9.2f\n", a.E2E)
	} else {
		fmt.Fprintf(w, "\nLatency                  analytic  | simulated mean     p90\n")
		fmt.Fprintf(w, "  TTFT           ms  %9.1f     | %9.1f %9.1f\n", a.TTFT*1e3, l.TTFT*1e3, l.TTFTP90*1e3)
		fmt.Fprintf(w, "  TPOT           ms  %9.2f     | %9.2f %9.2f\n", a.TPOT*1e3, l.TPOT*1e3, l.TPOTP90*1e3)
		fmt.Fprintf(w, "  E2E            s   %9.2f     | %9.2f %9.2f\n", a.E2E, l.E2E, l.E2EP90)
		fmt.Fprintf(w, "Use the analytic figures: they are the path validate-estimator scores (the error band below). The simulation\n"+
			"replays continuous batching request by request for the p90s and queue build-up; it shares the step model but\n"+
			"not the fitted queueing terms, so its means differ (most in TTFT, where it is less accurate).\n")
	}
	fmt.Fprintf(w, "Throughput (analytic): %.0f output tok/s, %.0f input tok/s, %.1f tok/s per user, %.2f requests/s\n",
		a.OutputTokS, a.PrefillTokS, a.DecodeTokS, a.RequestsPerS)
	if !analyticOnly {
		fmt.Fprintf(w, "Throughput (simulated): %.0f output tok/s\n", l.OutputTokS)
	}
	if a.Saturated {
		fmt.Fprintf(w, "warning: the request rate exceeds the service capacity; queues grow without bound\n")
	}
	spec, _ := estimate.LookupSpec(r.Engine)
	switch spec.Sched {
	case estimate.ServeScheduler:
		fmt.Fprintf(w, "Scheduling (%s): %d sequences per step, decodes plus prompt chunks of at most %d tokens; memory: the weights as stored (bf16 in place), float32 KV, step buffers, the garbage of a run and the process (as bench-serve's VmHWM)\n",
			spec.Words.Server, r.Memory.MaxSeqs, r.Memory.BudgetTokens)
	case estimate.SlotScheduler:
		printSlots(w, r, spec, analyticOnly)
	}
	c := r.Coeffs
	printBand(w, r.Band(hw, thisHost()), spec.Local)
	if c.EngineVersion != "" {
		fmt.Fprintf(w, "Coefficients: %s, fitted on %d rows (engine versions %s)\n", r.Family, c.Rows, c.EngineVersion)
	}
	if p, err := estimate.LookupPrecision(r.Memory.Precision); err == nil {
		if p.Block && c.Block > 0 {
			fmt.Fprintf(w, "fp8-block kernels: weight streaming and GEMMs ×%.2f of per-tensor FP8 (fitted)\n", c.Block)
		}
		if estimate.WeightOnly(&p, hw) && c.Dequant > 0 {
			fmt.Fprintf(w, "%s on %s runs weight-only kernels (weights unpacked to BF16 in the GEMM): ×%.2f (fitted)\n", p.Name, hw.Name, c.Dequant)
		}
	}
}

// printBand writes the error band with where and when its rows were
// measured, and plainly whether that is the device priced (for the native
// engine: this host).
func printBand(w io.Writer, b estimate.Band, native bool) {
	switch {
	case !b.Fitted && native:
		// A quick probe of this host (estimate/nativecal.Resolve): fitted on
		// its few points, with no held-out rows of its own.
		c := estimate.DefaultNativeCoeffs().Machines["cpu-local"]
		fmt.Fprintf(w, "Error band: %s is a quick probe of this host, with no held-out rows of its own (the committed fit's held-out median on its host: TPOT %s, TTFT %s, throughput %s)\n",
			b.Family, band(c.ErrTPOT), band(c.ErrTTFT), band(c.ErrThroughput))
	case !b.Fitted:
		fmt.Fprintf(w, "Error band: %s has no fitted data (priors only); expect ±30%% or worse\n", b.Family)
		return
	case native:
		fmt.Fprintf(w, "Error band (held-out APE for %s, median): TPOT %s, TTFT %s, throughput %s\n",
			b.Family, band(b.TPOT), band(b.TTFT), band(b.Throughput))
	default:
		fmt.Fprintf(w, "Error band (held-out APE for %s, median / p90): TPOT %s / %s, TTFT %s / %s, throughput %s / %s\n",
			b.Family, band(b.TPOT), bandP90(b.TPOTP90), band(b.TTFT), bandP90(b.TTFTP90), band(b.Throughput), bandP90(b.ThroughputP90))
	}
	on, when := b.MeasuredOn, b.Measured
	if on == "" {
		on = "a host or GPUs not recorded"
	}
	if when == "" {
		when = "at a time not recorded"
	}
	fmt.Fprintf(w, "  measured on %s, %s\n", on, when)
	switch {
	case native && b.Applies != hardware.SameHost:
		this := "this host"
		if b.ThisHost != nil {
			this = fmt.Sprintf("this host (%s)", b.ThisHost)
		}
		verdict := "is not the calibration's host: the band does not apply here"
		if b.Applies == hardware.UncertainHost {
			verdict = "may not be the calibration's host: the band holds only there"
		}
		fmt.Fprintf(w, "  %s %s (%s).\n  Calibrate this host for its own coefficients and band: autocompress calibrate-native (about 12 minutes)\n", this, verdict, b.Why)
	case native:
		fmt.Fprintf(w, "  this host matches the calibration's (%s); the band held there at that time\n", b.Why)
	case b.Applies == hardware.OtherHost:
		fmt.Fprintf(w, "  the band does not apply here: %s\n", b.Why)
	case b.Applies == hardware.UncertainHost:
		fmt.Fprintf(w, "  whether the band applies here is not known: %s\n", b.Why)
	}
}

// printSlots shows llama-server's scheduling: the parallel slots (-np), the
// per-step batch and the two waits in TTFT (for a free slot; for room in
// n_batch behind other prompts).
func printSlots(w io.Writer, r *estimate.Result, spec *estimate.EngineSpec, analyticOnly bool) {
	mem, a, l := &r.Memory, r.Analytic, r.Latency
	slots := min(mem.MaxSeqs, max(mem.MaxConcurrency, 1))
	name := spec.Words.Server
	plural := "s"
	if slots == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "Scheduling (%s): %d slot%s (-np %d), n_batch %d tokens per step computed in n_ubatch %d passes\n",
		name, slots, plural, mem.MaxSeqs, mem.BudgetTokens, mem.MicroBatch)
	if a.Running > 0 && a.Queue > 0 {
		fmt.Fprintf(w, "  requests beyond the %d slots queue for one: %.1f running, mean slot wait %.1f ms analytic", slots, a.Running, a.Queue*1e3)
		if !analyticOnly {
			fmt.Fprintf(w, ", %.1f ms simulated", l.Queue*1e3)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "  every request has a slot: no slot queue\n")
	}
	fmt.Fprintf(w, "  prompt wait for n_batch room behind other prompts (in TTFT): %.1f ms analytic\n", a.PromptWait*1e3)
}

type estJSONOut struct {
	Model    string  `json:"model"`
	GPU      string  `json:"gpu"`
	Engine   string  `json:"engine"`
	Family   string  `json:"coefficient_family"`
	Workload string  `json:"workload"`
	Params   float64 `json:"params_total"`
	Active   float64 `json:"params_active"`
	Fits     bool    `json:"fits"`
	Error    string  `json:"error,omitempty"`
	Memory   struct {
		Precision        string  `json:"precision"`
		KVDType          string  `json:"kv_dtype"`
		TP               int     `json:"tp"`
		DeviceGiB        float64 `json:"device_gib"`
		BudgetGiB        float64 `json:"budget_gib"`
		WeightsGiB       float64 `json:"weights_gib"`
		ActivationGiB    float64 `json:"activation_gib"`
		OverheadGiB      float64 `json:"overhead_gib"`
		KVPoolGiB        float64 `json:"kv_pool_gib"`
		TotalGiB         float64 `json:"total_gib"`
		KVBytesPerToken  float64 `json:"kv_bytes_per_token"`
		StateBytesPerSeq float64 `json:"state_bytes_per_seq"`
		KVCapacityTokens float64 `json:"kv_capacity_tokens"`
		MaxModelLen      int     `json:"max_model_len"`
		MaxConcurrency   int     `json:"max_concurrency"`
		MaxSlots         int     `json:"max_slots,omitempty"` // llama.cpp: slots memory could hold
	} `json:"memory"`
	// Analytic is the steady state, the figures to use (validate-estimator
	// scores them); Simulated the continuous-batching simulation (absent
	// with --analytic). Latency repeats the figures the text leads with
	// (Simulated, or Analytic with --analytic), kept for older readers.
	Analytic  *latJSON `json:"analytic,omitempty"`
	Simulated *latJSON `json:"simulated,omitempty"`
	Latency   *latJSON `json:"latency,omitempty"`
	// Use names the key to read: "analytic".
	Use     string `json:"use,omitempty"`
	Context *struct {
		Tokens  int    `json:"tokens"`
		Source  string `json:"source"`
		Longest int    `json:"longest_request"`
		Clipped bool   `json:"clipped,omitempty"`
		Long    bool   `json:"past_max_positions,omitempty"`
	} `json:"context,omitempty"`
	// ErrBand is the held-out error band with where and when its rows
	// were measured and whether that is the device priced ("applies").
	ErrBand estimate.Band `json:"error_band"`
}

type latJSON struct {
	TTFTms     float64 `json:"ttft_ms"`
	TTFTP90ms  float64 `json:"ttft_p90_ms"`
	TPOTms     float64 `json:"tpot_ms"`
	TPOTP90ms  float64 `json:"tpot_p90_ms"`
	E2Ems      float64 `json:"e2e_ms"`
	E2EP90ms   float64 `json:"e2e_p90_ms"`
	OutputTokS float64 `json:"output_tok_s"`
	InputTokS  float64 `json:"prefill_tok_s"`
	UserTokS   float64 `json:"decode_tok_s"`
	ReqS       float64 `json:"requests_per_s"`
	Saturated  bool    `json:"saturated,omitempty"`
	// SlotWaitms is the mean wait for a sequence slot (llama.cpp -np) or KV
	// admission; PromptWaitms the analytic wait behind other prompts.
	SlotWaitms   float64 `json:"queue_ms"`
	PromptWaitms float64 `json:"prompt_wait_ms,omitempty"`
}

func toLatJSON(l estimate.Latency) *latJSON {
	fin := func(x float64) float64 {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return -1
		}
		return x
	}
	return &latJSON{TTFTms: fin(l.TTFT * 1e3), TTFTP90ms: fin(l.TTFTP90 * 1e3), TPOTms: fin(l.TPOT * 1e3), TPOTP90ms: fin(l.TPOTP90 * 1e3),
		E2Ems: fin(l.E2E * 1e3), E2EP90ms: fin(l.E2EP90 * 1e3), OutputTokS: fin(l.OutputTokS), InputTokS: fin(l.PrefillTokS),
		UserTokS: fin(l.DecodeTokS), ReqS: fin(l.RequestsPerS), Saturated: l.Saturated,
		SlotWaitms: fin(l.Queue * 1e3), PromptWaitms: fin(l.PromptWait * 1e3)}
}

func estJSON(r *estimate.Result, hw *hardware.GPU, err error, analyticOnly bool, wc *workload.Context) *estJSONOut {
	o := &estJSONOut{Model: r.Model, GPU: hw.Name, Engine: string(r.Engine), Family: r.Family, Workload: r.Workload,
		Params: r.Params.Total, Active: r.Params.Active, Fits: err == nil}
	if err != nil {
		o.Error = inFlags(err)
	}
	m := &r.Memory
	o.Memory.Precision, o.Memory.KVDType, o.Memory.TP = m.Precision, m.KVDType, m.TP
	o.Memory.DeviceGiB, o.Memory.BudgetGiB = gib(m.DeviceBytes), gib(m.BudgetBytes)
	o.Memory.WeightsGiB, o.Memory.ActivationGiB, o.Memory.OverheadGiB = gib(m.WeightsBytes), gib(m.ActivationBytes), gib(m.OverheadBytes)
	o.Memory.KVPoolGiB, o.Memory.TotalGiB = gib(m.KVPoolBytes), gib(m.TotalBytes())
	o.Memory.KVBytesPerToken, o.Memory.StateBytesPerSeq = m.KVBytesPerToken, m.StateBytesPerSeq
	o.Memory.KVCapacityTokens = m.KVCapacityTokens
	if math.IsInf(m.KVCapacityTokens, 1) {
		o.Memory.KVCapacityTokens = -1
	}
	o.Memory.MaxModelLen, o.Memory.MaxConcurrency, o.Memory.MaxSlots = m.MaxModelLen, m.MaxConcurrency, m.MaxSlots
	if err == nil {
		o.Latency = toLatJSON(r.Latency)
		o.Analytic = toLatJSON(r.Analytic)
		o.Use = "analytic"
		if !analyticOnly {
			o.Simulated = o.Latency
		}
	}
	if wc != nil {
		o.Context = &struct {
			Tokens  int    `json:"tokens"`
			Source  string `json:"source"`
			Longest int    `json:"longest_request"`
			Clipped bool   `json:"clipped,omitempty"`
			Long    bool   `json:"past_max_positions,omitempty"`
		}{wc.Tokens, wc.Source, wc.Longest, wc.Clipped, wc.Long}
	}
	o.ErrBand = r.Band(hw, thisHost())
	return o
}

func runScenarios(ctx context.Context, env *Env, cat *hardware.Catalog, cf *estimate.CoeffFile, f *estFlags) error {
	in, err := os.Open(f.scenarios)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := output.CreateFile(f.out, f.force)
	if err != nil {
		return err
	}
	defer out.Abort() // does nothing after Commit
	n, bad, err := scenarios.Run(ctx, in, out, cat, cf, f.analytic)
	if err != nil {
		return fmt.Errorf("%s: %w", f.scenarios, err)
	}
	if err := out.Commit(); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "estimate: wrote %d scenarios to %s (%d with errors)\n", n, f.out, bad)
	return nil
}
