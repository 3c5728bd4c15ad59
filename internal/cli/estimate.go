package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/groundtruth"
	"github.com/autocompress/autocompress/hardware"
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
		Usage: "[--model M] [--gpu G] [--engine E] [--precision P] [--tp N] [--workload W | --isl N --osl N (--concurrency N | --rate R)] [--json] | --scenarios in.csv --out out.csv",
		Short: "predict memory, KV capacity, TTFT, TPOT and throughput of a model on a GPU and engine",
		Long: `Estimate prices one deployment: the memory plan of the engine (weights, activations,
overheads, KV pool, KV capacity in tokens and the concurrency that fits) and the
latency and throughput of a workload from a fitted step-time model: the analytic steady
state (the path validate-estimator measures) beside a continuous-batching simulation
(mean and p90; it shares the step model but not the fitted queueing terms, so its TTFT
is less accurate). Batch mode reports the analytic figures. With no flags it
prices meta-llama/Meta-Llama-3.1-8B on h100-sxm with vllm, bf16 and the chat workload.

--model takes a preset name, a config.json or a checkpoint directory.
--rate takes requests per second, or "inf" for an offline run of --num-requests.

Batch mode: --scenarios reads a CSV with the columns
  id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests
(request_rate empty or 0 means closed loop at concurrency; "inf" = offline) and writes
--out with one row per scenario:
  id,fits,weights_gib,kv_gib,overhead_gib,total_gib,kv_capacity_tokens,max_concurrency,
  ttft_ms,tpot_ms,e2e_ms,output_tok_s,prefill_tok_s,decode_tok_s,error
A bad row gets an error value; the others still come out. prefill_tok_s is the server's
input-token throughput, decode_tok_s the decode speed one user sees (1000/tpot_ms).`,
		Flags: estimateFlags,
	})
}

type estFlags struct {
	model, gpu, gpuFile, engine, precision, kvDType, workload string
	tp, isl, osl, concurrency, numRequests, context           int
	maxSeqs, maxBatched                                       int
	memFraction                                               float64
	rate                                                      string
	jsonOut, analytic                                         bool
	scenarios, out, coeffs                                    string
}

func estimateFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	f := &estFlags{}
	fs.StringVar(&f.model, "model", estDefaultModel, "model: preset name, config.json or checkpoint directory")
	fs.StringVar(&f.gpu, "gpu", estDefaultGPU, "GPU name (see the error of an unknown name for the list)")
	fs.StringVar(&f.gpuFile, "gpu-file", "", "YAML or JSON file adding devices to the catalog")
	fs.StringVar(&f.engine, "engine", estDefaultEngine, "serving engine: vllm, sglang, trtllm, llamacpp, native")
	fs.StringVar(&f.precision, "precision", "", "weight precision: bf16, fp16, fp8, fp8-block, nvfp4, mxfp4, int4-awq, int4-gptq, q4_0, q4_k_m, q5_k_m, q6_k, q8_0, f16 (default: what a checkpoint's quantization_config says, else bf16; f16 for llamacpp)")
	fs.StringVar(&f.kvDType, "kv-dtype", "auto", "KV cache type: auto, bf16, fp16, fp8 (llamacpp: f16, q8_0, q4_0)")
	fs.IntVar(&f.tp, "tp", 1, "tensor-parallel degree")
	fs.StringVar(&f.workload, "workload", "", "workload preset: "+strings.Join(workload.Presets(), ", ")+" (default chat when --isl/--osl are not given)")
	fs.IntVar(&f.isl, "isl", 0, "input tokens per request (fixed)")
	fs.IntVar(&f.osl, "osl", 0, "output tokens per request (fixed)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "closed-loop concurrency")
	fs.StringVar(&f.rate, "rate", "", "Poisson request rate per second, or inf for an offline run")
	fs.IntVar(&f.numRequests, "num-requests", 0, "requests of a Poisson or offline run (default 256)")
	fs.IntVar(&f.context, "context", 0, "per-request context limit (max model length); default from the workload")
	fs.IntVar(&f.maxSeqs, "max-num-seqs", 0, "engine sequence limit; llamacpp: parallel slots -np (default: the engine's; llamacpp: the concurrency)")
	fs.IntVar(&f.maxBatched, "max-batched-tokens", 0, "per-step token budget; llamacpp: n_batch (default: the engine's; llamacpp 2048, computed in n_ubatch 512 passes)")
	fs.Float64Var(&f.memFraction, "mem-fraction", 0, "gpu_memory_utilization / mem_fraction_static / free_gpu_memory_fraction (default: the engine's)")
	fs.BoolVar(&f.jsonOut, "json", false, "print JSON")
	fs.BoolVar(&f.analytic, "analytic", false, "use the analytic steady state only (no simulation)")
	fs.StringVar(&f.scenarios, "scenarios", "", "batch mode: input CSV of scenarios")
	fs.StringVar(&f.out, "out", "", "batch mode: output CSV")
	fs.StringVar(&f.coeffs, "coeffs", "", "coefficient JSON to use instead of the embedded one (as written by calibrate --out)")
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		cat := hardware.Default()
		if f.gpuFile != "" {
			gs, err := hardware.ParseFile(f.gpuFile)
			if err != nil {
				return err
			}
			if err := cat.Add(gs...); err != nil {
				return fmt.Errorf("%s: %w", f.gpuFile, err)
			}
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
		w, err := estWorkload(f, set)
		if err != nil {
			return err
		}
		hw, err := cat.Lookup(f.gpu)
		if err != nil {
			return Usagef("%v", err)
		}
		eng, err := estimate.LookupEngine(f.engine)
		if err != nil {
			return Usagef("%v", err)
		}
		m, err := estModel(f.model)
		if err != nil {
			return err
		}
		if f.precision == "" && eng.Pool() {
			// A quantized checkpoint says what it ships: default to that.
			if p := checkpointPrecision(m.Raw); p != "" {
				f.precision = p
				fmt.Fprintf(env.Stderr, "precision %s, from the checkpoint's quantization_config (override with --precision)\n", p)
			}
		}
		o := estimate.Options{Precision: f.precision, KVDType: f.kvDType, TP: f.tp, MaxModelLen: f.context,
			MaxNumSeqs: f.maxSeqs, MaxBatchedTokens: f.maxBatched, MemFraction: f.memFraction}
		if f.tp < 1 {
			return Usagef("--tp must be ≥ 1, got %d", f.tp)
		}
		if _, err := estimate.LookupPrecision(orDefault(f.precision, "bf16")); err != nil {
			return Usagef("%v", err)
		}
		if _, err := estimate.LookupKVType(f.kvDType); err != nil {
			return Usagef("%v", err)
		}
		res, err := estRun(m, hw, eng, o, &w, coeffs, f.analytic)
		if err != nil {
			var fe *estimate.FitError
			if errors.As(err, &fe) && res != nil {
				if f.jsonOut {
					_ = writeJSON(env.Stdout, estJSON(res, hw, err))
				} else {
					printMemory(env.Stdout, res, hw)
				}
			}
			return err
		}
		if f.jsonOut {
			return writeJSON(env.Stdout, estJSON(res, hw, nil))
		}
		printEstimate(env.Stdout, res, hw, f.analytic)
		return nil
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// estWorkload builds the workload from the flags: a preset, or fixed
// lengths with a concurrency or a rate.
func estWorkload(f *estFlags, set map[string]bool) (workload.Workload, error) {
	var w workload.Workload
	custom := set["isl"] || set["osl"] || set["concurrency"] || set["rate"]
	switch {
	case f.workload != "" && (set["isl"] || set["osl"]):
		return w, Usagef("give either --workload or --isl/--osl, not both")
	case f.workload != "" || !custom:
		p, err := workload.Preset(orDefault(f.workload, estDefaultWorkload))
		if err != nil {
			return w, Usagef("%v", err)
		}
		w = p
		if set["concurrency"] {
			w.Concurrency, w.Rate = f.concurrency, 0
		}
	default:
		if !set["isl"] || !set["osl"] {
			return w, Usagef("--isl and --osl are both needed without --workload")
		}
		w = workload.Workload{Input: workload.FixedLength(f.isl), Output: workload.FixedLength(f.osl), Concurrency: f.concurrency, Seed: 1}
		if !set["concurrency"] && !set["rate"] {
			w.Concurrency = 1
		}
	}
	if set["rate"] {
		r, err := parseRate(f.rate)
		if err != nil {
			return w, Usagef("%v", err)
		}
		w.Rate = r
		if !set["concurrency"] {
			w.Concurrency = 0
		}
	}
	if f.numRequests != 0 {
		w.NumRequests = f.numRequests
	}
	if f.context != 0 {
		w.ContextLimit = f.context
	}
	if err := w.Validate(); err != nil {
		return w, Usagef("%v", err)
	}
	return w, nil
}

func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "0" {
		return 0, nil
	}
	if s == "inf" || s == "+inf" || s == "infinity" {
		return math.Inf(1), nil
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r < 0 || math.IsNaN(r) {
		return 0, fmt.Errorf("request rate %q must be a positive number of requests per second or inf", s)
	}
	return r, nil
}

// estModel resolves a preset, config.json or checkpoint directory, falling
// back to the shapes the ground-truth mapping knows.
func estModel(name string) (*architecture.Model, error) {
	m, err := architecture.Load(name)
	if err == nil {
		if m.Name == "" {
			m.Name = name
		}
		return m, nil
	}
	if _, statErr := os.Stat(name); statErr == nil {
		return nil, err // a real file or directory that failed to parse
	}
	if m, ok := groundtruth.Describe(name); ok {
		return m, nil
	}
	names := append(architecture.Presets(), groundtruth.Known()...)
	sort.Strings(names)
	names = dedup(names)
	return nil, Usagef("unknown model %q: give a config.json, a checkpoint directory or one of: %s", name, strings.Join(names, ", "))
}

func dedup(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// estRun prices one deployment with optional coefficient overrides.
func estRun(m *architecture.Model, hw *hardware.GPU, eng estimate.Engine, o estimate.Options, w *workload.Workload, cf *estimate.CoeffFile, analyticOnly bool) (*estimate.Result, error) {
	var co *estimate.Coeffs
	if cf != nil {
		c, _ := cf.Family(eng.Family(hw))
		co = &c
	}
	c, err := estimate.Compile(hw, eng, o, w, co)
	if err != nil {
		return nil, err
	}
	var s estimate.Summary
	c.Summarize(&s, m)
	res := &estimate.Result{Model: m.Name, GPU: hw.Name, Engine: eng, Family: c.Family(), Workload: w.String(), Coeffs: c.Coeffs()}
	res.Params.Total, res.Params.Active = s.TotalParams, s.ActiveParams
	mem, ok := c.Memory(&s)
	res.Memory = mem
	if !ok {
		fe := mem.Fail
		return res, &fe
	}
	p := c.PriceSummary(&s)
	res.Analytic = p.Latency
	if analyticOnly {
		res.Latency = p.Latency
		return res, nil
	}
	var sim estimate.Simulator
	l, err := c.Simulate(&sim, &s)
	if err != nil {
		return res, err
	}
	res.Latency = l
	return res, nil
}

func gib(b float64) float64 { return b / estimate.GiB }

// band formats a held-out median APE; 0 means the metric had no data.
func band(x float64) string {
	if x <= 0 {
		return "n/a (no data)"
	}
	return fmt.Sprintf("±%.0f%%", x*100)
}

func printMemory(w io.Writer, r *estimate.Result, hw *hardware.GPU) {
	mem := &r.Memory
	fmt.Fprintf(w, "autocompress estimate: %s on %s (%s) with %s, %s weights, KV %s, TP %d\n",
		r.Model, hw.Name, hw.Description, r.Engine, mem.Precision, mem.KVDType, mem.TP)
	fmt.Fprintf(w, "parameters: %.2f B total, %.2f B active per token\n", r.Params.Total/1e9, r.Params.Active/1e9)
	fmt.Fprintf(w, "workload: %s\n\n", r.Workload)
	fmt.Fprintf(w, "Memory per GPU                          GiB\n")
	fmt.Fprintf(w, "  weights                          %8.2f\n", gib(mem.WeightsBytes))
	fmt.Fprintf(w, "  activations (peak)               %8.2f\n", gib(mem.ActivationBytes))
	fmt.Fprintf(w, "  engine + CUDA overhead           %8.2f\n", gib(mem.OverheadBytes))
	fmt.Fprintf(w, "  KV cache + state pool            %8.2f\n", gib(mem.KVPoolBytes))
	fmt.Fprintf(w, "  total held                       %8.2f of %.2f usable (engine budget %.2f)\n", gib(mem.TotalBytes()), gib(mem.DeviceBytes), gib(mem.BudgetBytes))
	fmt.Fprintf(w, "KV cache: %.1f KiB/token", mem.KVBytesPerToken/1024)
	if mem.StateBytesPerSeq > 0 {
		fmt.Fprintf(w, ", recurrent state %.1f MiB/sequence", mem.StateBytesPerSeq/(1<<20))
	}
	fmt.Fprintf(w, "; capacity %s tokens\n", fmtTokens(mem.KVCapacityTokens))
	fmt.Fprintf(w, "max concurrency at %d-token context: %d (engine limit %d)\n", mem.MaxModelLen, mem.MaxConcurrency, mem.MaxSeqs)
}

func fmtTokens(t float64) string {
	if math.IsInf(t, 1) {
		return "unlimited (no KV)"
	}
	return strconv.FormatFloat(t, 'f', 0, 64)
}

func printEstimate(w io.Writer, r *estimate.Result, hw *hardware.GPU, analyticOnly bool) {
	printMemory(w, r, hw)
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
	}
	fmt.Fprintf(w, "Throughput (analytic): %.0f output tok/s, %.0f input tok/s, %.1f tok/s per user, %.2f requests/s\n",
		a.OutputTokS, a.PrefillTokS, a.DecodeTokS, a.RequestsPerS)
	if !analyticOnly {
		fmt.Fprintf(w, "Throughput (simulated): %.0f output tok/s\n", l.OutputTokS)
	}
	if a.Saturated {
		fmt.Fprintf(w, "warning: the request rate exceeds the service capacity; queues grow without bound\n")
	}
	if r.Engine == estimate.Native {
		fmt.Fprintf(w, "Scheduling (native engine, engine.Serve): %d sequences per step, decodes plus prompt chunks of at most %d tokens; memory: float32 weights and KV, step buffers, the garbage of a run and the process (as bench-serve's VmHWM)\n",
			r.Memory.MaxSeqs, r.Memory.BudgetTokens)
	} else if !r.Engine.Pool() {
		printSlots(w, r, analyticOnly)
	}
	c := r.Coeffs
	if c.ErrTPOT > 0 || c.ErrTTFT > 0 || c.ErrThroughput > 0 {
		fmt.Fprintf(w, "Error band (held-out median APE for %s): TPOT %s, TTFT %s, throughput %s\n",
			r.Family, band(c.ErrTPOT), band(c.ErrTTFT), band(c.ErrThroughput))
	} else {
		fmt.Fprintf(w, "Error band: %s has no fitted data (priors only); expect ±30%% or worse\n", r.Family)
	}
	if r.Engine != estimate.Native && (hw.Backend != hardware.CUDA || !(strings.HasPrefix(hw.Name, "h") || strings.HasPrefix(hw.Name, "b") || strings.HasPrefix(hw.Name, "gb") || strings.HasPrefix(hw.Name, "a100") || hw.Name == "gh200")) {
		fmt.Fprintf(w, "note: no public serving data covers %s; the estimate extrapolates from datasheet figures\n", hw.Name)
	}
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

// printSlots shows llama-server's scheduling: the parallel slots (-np), the
// per-step batch and the two waits in TTFT (for a free slot; for room in
// n_batch behind other prompts).
func printSlots(w io.Writer, r *estimate.Result, analyticOnly bool) {
	mem, a, l := &r.Memory, r.Analytic, r.Latency
	slots := min(mem.MaxSeqs, max(mem.MaxConcurrency, 1))
	name := "llama-server"
	if r.Engine != estimate.LlamaCPP {
		name = string(r.Engine) + " engine, modelled like llama-server"
	}
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
	} `json:"memory"`
	Latency  *latJSON `json:"latency,omitempty"`
	Analytic *latJSON `json:"analytic,omitempty"`
	ErrBand  struct {
		TTFT       float64 `json:"ttft_median_ape"`
		TPOT       float64 `json:"tpot_median_ape"`
		Throughput float64 `json:"throughput_median_ape"`
	} `json:"error_band"`
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

func estJSON(r *estimate.Result, hw *hardware.GPU, err error) *estJSONOut {
	o := &estJSONOut{Model: r.Model, GPU: hw.Name, Engine: string(r.Engine), Family: r.Family, Workload: r.Workload,
		Params: r.Params.Total, Active: r.Params.Active, Fits: err == nil}
	if err != nil {
		o.Error = err.Error()
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
	o.Memory.MaxModelLen, o.Memory.MaxConcurrency = m.MaxModelLen, m.MaxConcurrency
	if err == nil {
		o.Latency = toLatJSON(r.Latency)
		o.Analytic = toLatJSON(r.Analytic)
	}
	o.ErrBand.TTFT, o.ErrBand.TPOT, o.ErrBand.Throughput = r.Coeffs.ErrTTFT, r.Coeffs.ErrTPOT, r.Coeffs.ErrThroughput
	return o
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// checkpointPrecision reads the precision a config.json's
// quantization_config declares: FP8 with weight_block_size is fp8-block,
// plain FP8 fp8, MXFP4 mxfp4, ModelOpt NVFP4 nvfp4, AWQ and GPTQ 4-bit
// int4-awq and int4-gptq. "" when the config declares none (or another).
func checkpointPrecision(raw map[string]any) string {
	q, ok := raw["quantization_config"].(map[string]any)
	if !ok {
		return ""
	}
	method, _ := q["quant_method"].(string)
	bits, _ := q["bits"].(float64)
	switch strings.ToLower(method) {
	case "fp8":
		if _, ok := q["weight_block_size"]; ok {
			return "fp8-block"
		}
		return "fp8"
	case "mxfp4":
		return "mxfp4"
	case "awq":
		if bits == 4 {
			return "int4-awq"
		}
	case "gptq":
		if bits == 4 {
			return "int4-gptq"
		}
	case "modelopt":
		switch a, _ := q["quant_algo"].(string); strings.ToUpper(a) {
		case "FP8":
			return "fp8"
		case "NVFP4":
			return "nvfp4"
		}
	}
	return ""
}

// Scenario CSV columns.
var (
	scenarioIn  = []string{"id", "model", "gpu", "engine", "precision", "tp", "isl", "osl", "concurrency", "request_rate", "num_requests"}
	scenarioOut = []string{"id", "fits", "weights_gib", "kv_gib", "overhead_gib", "total_gib", "kv_capacity_tokens", "max_concurrency",
		"ttft_ms", "tpot_ms", "e2e_ms", "output_tok_s", "prefill_tok_s", "decode_tok_s", "error"}
)

// maxScenarios caps the rows of a scenario file.
const maxScenarios = 1 << 20

func runScenarios(ctx context.Context, env *Env, cat *hardware.Catalog, cf *estimate.CoeffFile, f *estFlags) error {
	in, err := os.Open(f.scenarios)
	if err != nil {
		return err
	}
	defer in.Close()
	dir := filepath.Dir(f.out)
	tmp, err := os.CreateTemp(dir, ".estimate-*.csv")
	if err != nil {
		return fmt.Errorf("creating output next to %s: %w", f.out, err)
	}
	defer os.Remove(tmp.Name())
	n, bad, err := EstimateScenarios(ctx, in, tmp, cat, cf, f.analytic)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.scenarios, err)
	}
	if err := os.Rename(tmp.Name(), f.out); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "estimate: wrote %d scenarios to %s (%d with errors)\n", n, f.out, bad)
	return nil
}

// EstimateScenarios reads scenario rows from r and writes one result row per
// scenario to w. It returns the rows written and how many carry an error.
// Only a malformed file (no header, missing columns) is an error.
func EstimateScenarios(ctx context.Context, r io.Reader, w io.Writer, cat *hardware.Catalog, cf *estimate.CoeffFile, analyticOnly bool) (int, int, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return 0, 0, fmt.Errorf("reading the header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	var miss []string
	for _, c := range []string{"id", "model", "gpu", "engine", "isl", "osl"} {
		if _, ok := col[c]; !ok {
			miss = append(miss, c)
		}
	}
	if len(miss) > 0 {
		return 0, 0, fmt.Errorf("missing columns %s (want %s)", strings.Join(miss, ", "), strings.Join(scenarioIn, ","))
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(scenarioOut); err != nil {
		return 0, 0, err
	}
	n, bad := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return n, bad, err
		}
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if n >= maxScenarios {
			return n, bad, fmt.Errorf("more than %d scenarios", maxScenarios)
		}
		var out []string
		if err != nil {
			out = scenarioError(fmt.Sprintf("row %d", n+1), "malformed CSV row: "+err.Error())
		} else {
			out = estimateScenario(rec, col, cat, cf, analyticOnly)
		}
		if out[len(out)-1] != "" {
			bad++
		}
		if err := cw.Write(out); err != nil {
			return n, bad, err
		}
		n++
	}
	cw.Flush()
	return n, bad, cw.Error()
}

func scenarioError(id, msg string) []string {
	out := make([]string, len(scenarioOut))
	out[0], out[1], out[len(out)-1] = id, "false", msg
	return out
}

func estimateScenario(rec []string, col map[string]int, cat *hardware.Catalog, cf *estimate.CoeffFile, analyticOnly bool) []string {
	get := func(c string) string {
		if i, ok := col[c]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	id := get("id")
	num := func(c string, def int) (int, error) {
		s := get(c)
		if s == "" {
			return def, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not an integer", c, s)
		}
		return v, nil
	}
	fail := func(err error) []string { return scenarioError(id, err.Error()) }
	hw, err := cat.Lookup(get("gpu"))
	if err != nil {
		return fail(err)
	}
	eng, err := estimate.LookupEngine(get("engine"))
	if err != nil {
		return fail(err)
	}
	m, err := estModel(get("model"))
	if err != nil {
		return fail(err)
	}
	tp, err := num("tp", 1)
	if err != nil {
		return fail(err)
	}
	isl, err := num("isl", 0)
	if err != nil {
		return fail(err)
	}
	osl, err := num("osl", 0)
	if err != nil {
		return fail(err)
	}
	conc, err := num("concurrency", 0)
	if err != nil {
		return fail(err)
	}
	nreq, err := num("num_requests", 0)
	if err != nil {
		return fail(err)
	}
	rate, err := parseRate(get("request_rate"))
	if err != nil {
		return fail(err)
	}
	if rate > 0 {
		conc = 0
	} else if conc == 0 {
		conc = 1
	}
	w := workload.Workload{Input: workload.FixedLength(isl), Output: workload.FixedLength(osl), Concurrency: conc, Rate: rate, NumRequests: nreq, Seed: 1}
	if err := w.Validate(); err != nil {
		return fail(err)
	}
	if tp < 1 {
		return fail(fmt.Errorf("tp must be ≥ 1, got %d", tp))
	}
	o := estimate.Options{Precision: get("precision"), TP: tp}
	res, err := estRun(m, hw, eng, o, &w, cf, analyticOnly)
	if err != nil {
		out := fail(err)
		if res != nil {
			mem := &res.Memory
			out[2] = ff(gib(mem.WeightsBytes), 3)
		}
		return out
	}
	mem, l := &res.Memory, res.Analytic
	return []string{id, "true", ff(gib(mem.WeightsBytes), 3), ff(gib(mem.KVPoolBytes), 3), ff(gib(mem.ActivationBytes+mem.OverheadBytes), 3),
		ff(gib(mem.TotalBytes()), 3), fmtTokens(mem.KVCapacityTokens), strconv.Itoa(mem.MaxConcurrency),
		ff(l.TTFT*1e3, 2), ff(l.TPOT*1e3, 3), ff(l.E2E*1e3, 1), ff(l.OutputTokS, 1), ff(l.PrefillTokS, 1), ff(l.DecodeTokS, 2), ""}
}

func ff(x float64, prec int) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "inf"
	}
	return strconv.FormatFloat(x, 'f', prec, 64)
}
