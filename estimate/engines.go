package estimate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/hardware"
)

// Engine names a serving engine: a key of the engine table (engineTable).
type Engine string

// The engines of the table.
const (
	VLLM     Engine = "vllm"
	SGLang   Engine = "sglang"
	TRTLLM   Engine = "trtllm"
	LlamaCPP Engine = "llamacpp"
	// Native is autocompress's own CPU engine (package engine): float32
	// weights and KV cache, its own scheduler (see native.go).
	Native Engine = "native"
)

// EngineSpec is everything the estimator knows about one serving engine,
// as data: the devices it runs on, the weight formats and KV types it
// takes, its defaults, its memory rule, its scheduler, the key of its
// coefficients, how its command line is built and how the text speaks of
// it. Every engine is one entry of engineTable; code elsewhere reads these
// facts and never tests an engine's name (TestNoEngineSwitches).
//
// Adding an engine is one entry here plus its coefficients: a family in
// coefficients.json named by Coeffs (refitted by calibrate), or, for an
// engine that runs here, a calibration. An engine whose memory or
// scheduling follows no rule below adds that rule (a memKind, a
// Scheduler), not a case on its name.
type EngineSpec struct {
	Name Engine
	// Aliases are the other spellings LookupEngine accepts.
	Aliases []string
	// Backends are the device backends it runs on, as the estimator models
	// them.
	Backends []hardware.Backend

	// Pool: it pre-allocates a KV pool from a memory budget (vLLM, SGLang,
	// TensorRT-LLM) rather than allocating exactly its context.
	Pool bool
	// ShardsTP: it shards every layer over the TP group, so the model's
	// shape must split (architecture.Model.CheckTP).
	ShardsTP bool
	// QuantConfig: an empty precision takes what the checkpoint's
	// quantization_config says (ConfigPrecision).
	QuantConfig bool
	// ConfigPrecisionAs, for an engine without QuantConfig, maps the
	// precision a checkpoint's quantization_config says to the one the
	// engine serves that checkpoint in; an empty precision takes it
	// (PrecisionFromConfig), a config not in the map the default.
	ConfigPrecisionAs map[string]string
	// GGUF: it serves the GGUF weight formats (llama.cpp), not the HF ones.
	GGUF bool
	// DefaultPrecision is what an empty precision means (an engine with a
	// FixedPrecision has no other).
	DefaultPrecision string
	// PrecisionAs respells a precision of the other format family that
	// this engine serves under its own name ("f16" → "fp16").
	PrecisionAs map[string]string
	// TensorCoreOnly lists the precisions it runs only on GPUs whose tensor
	// cores compute that type (no weight-only fallback).
	TensorCoreOnly map[string]bool
	// KVRefused maps a KV type it has not to the message that says so;
	// KVValid lists what it takes instead; KVAs respells the ones it names
	// otherwise ("bf16" → "f16").
	KVRefused map[string]string
	KVValid   []string
	KVAs      map[string]string
	// Defaults are its settings when the options leave them at 0.
	Defaults Defaults
	// OutputReserve is the share of a request's output tokens that counts
	// against the KV pool while it runs, on average.
	OutputReserve float64

	// memory plans its memory (memory.go).
	memory memoryRule
	// Sched is how it schedules requests (analytic.go, sim.go).
	Sched Scheduler
	// step is its step-time model and where its coefficients come from.
	step stepRule
	// resolve, when set, resolves the options of an engine whose options
	// follow none of the rules above (the native engine: float32 only).
	resolve func(o Options, maxLen int) (resolved, error)

	// Coeffs is the key of its coefficients (see Engine.Family).
	Coeffs CoeffKey
	// Local: autocompress's own engine, run and measured in this process
	// (bench-serve); its coefficients are this machine's calibration.
	Local bool
	// FixedPrecision names the one precision it holds weights in ("" when
	// it has several).
	FixedPrecision string

	// Words is how the text speaks of it; Hints what to try when it does
	// not fit.
	Words Wording
	Hints Hints
	// Command builds the command that serves a child (DIR) with the
	// chosen settings.
	Command func(a ServeArgs) string
	// Align is the width granularity the search keeps for it.
	Align Align
}

// Defaults are an engine's settings where Options leave them at 0: the
// sequence limit and per-step token budget (the Big ones on GPUs of at
// least BigBytes), the memory fraction (the first tier whose MinBytes the
// device reaches) and, for llama.cpp, n_ubatch. SeqsFromClients: in a
// closed loop the sequence limit is the workload's clients (llama-server's
// -np as one starts it for them; engine.Serve's MaxBatch).
type Defaults struct {
	BigBytes                        int64
	MaxSeqs, MaxSeqsBig             int
	BatchedTokens, BatchedTokensBig int
	MemFraction                     []FractionTier
	MicroBatch                      int
	SeqsFromClients                 bool
}

// FractionTier is a default memory fraction for devices of at least
// MinBytes.
type FractionTier struct {
	MinBytes int64
	Fraction float64
}

// CoeffKey names an engine's coefficient family: Family, with the device
// backend appended when PerBackend ("llamacpp-cuda"), and HBM instead on
// HBM datacenter CUDA GPUs when set (see DatacenterHBM).
type CoeffKey struct {
	Family     string
	PerBackend bool
	HBM        string
}

// Wording is how the estimate's text names an engine's parts.
type Wording struct {
	// Memory heads the memory table ("Memory per GPU").
	Memory string
	// Overhead labels MemoryReport.OverheadBytes.
	Overhead string
	// Held says what the total held is, after "total held: the four terms
	// above" (pool engines: how the budget relates to it).
	Held string
	// Server names what schedules requests in the scheduling line.
	Server string
	// Limit names the sequence limit ("-np slots", "sequences in flight").
	Limit string
}

// Hints are what to try when a deployment does not fit: the memory plan's
// per-term hints (FitError.Hint) and the search's infeasibility hints.
type Hints struct {
	// Weights: the weights alone exceed the memory; Overhead: the fixed
	// terms leave no KV pool; KV: not one request's KV fits.
	Weights, Overhead, KV string
	// Unfit: even the smallest shape does not fit (search); Memory: the
	// memory budget binds; Latency: TTFT, TPOT or E2E bind; Throughput;
	// Together: every budget is reachable alone but not all at once.
	Unfit, Memory, Latency, Throughput, Together []Hint
}

// Align is the hidden and MLP width granularity the search keeps for an
// engine, ByPrecision overriding it for some precisions.
type Align struct {
	Hidden, MLP int
	ByPrecision map[string][2]int
}

// ServeArgs are the settings a serving command realises.
type ServeArgs struct {
	MaxModelLen, TP int
	MemFraction     float64 // 0: the engine's default
	MaxNumSeqs      int     // 0: the engine's default
	KVDType         string
	Precision       string
	Concurrency     int  // clients of the workload
	RemoteCode      bool // the checkpoint is DeciLM (needs remote code)
}

// Scheduler is how an engine schedules requests.
type Scheduler int

const (
	// PoolScheduler: continuous batching admitted by the KV pool's free
	// tokens (vLLM, SGLang, TensorRT-LLM).
	PoolScheduler Scheduler = iota
	// SlotScheduler: llama-server's -np slots on a shared context;
	// requests beyond the slots queue.
	SlotScheduler
	// ServeScheduler: engine.Serve's closed loop, every sequence in flight
	// in one step (nativeLoop).
	ServeScheduler
)

// stepRule is an engine's step-time model.
type stepRule int

const (
	// stepFitted: roofline terms × the coefficients.json family.
	stepFitted stepRule = iota
	// stepNative: the native engine's kernels (nativeTerms) × this
	// machine's native_coefficients.json.
	stepNative
)

// The search's infeasibility hints for the GPU engines.
var gpuHints = Hints{
	Unfit: []Hint{{Text: "a lower precision", Setting: SettingPrecision, Values: "q4_k_m, fp8 or nvfp4"}, {Text: "a shorter context", Setting: SettingContext},
		{Text: "fewer concurrent requests"}, {Text: "more tensor parallelism", Setting: SettingTP}, {Text: "a larger GPU"}},
	Memory: []Hint{{Text: "a lower precision", Setting: SettingPrecision, Values: "q4_k_m on llamacpp, fp8 or nvfp4 on the pool engines", Example: true},
		{Text: "a shorter context", Setting: SettingContext}, {Text: "fewer concurrent requests or slots"},
		{Text: "a lower KV-cache type", Setting: SettingKVDType, Values: "fp8 or q8_0"}, {Text: "allow more layers removed"}},
	Latency:    words("a lower precision", "lower concurrency", "shorter prompts or outputs", "a faster GPU or more tensor parallelism"),
	Throughput: words("a lower precision", "more concurrency", "a faster GPU or more tensor parallelism"),
	Together:   words("relax one of them", "a lower precision", "a shorter context or fewer concurrent requests"),
}

// poolHints are the memory plan's hints of the pool engines; the KV hint
// is theirs alike.
const (
	poolWeightsHint = "use a lower precision or a smaller model"
	poolKVHint      = "lower the context limit (shorter prompts or outputs), use an fp8 KV cache or a smaller model"
)

// The pool engines' KV types.
var (
	poolKVRefused = map[string]string{"q8_0": "KV type q8_0 is llama.cpp-only", "q4_0": "KV type q4_0 is llama.cpp-only"}
	poolKVValid   = []string{"auto", "bf16", "fp16", "fp8"}
	hfPrecisionAs = map[string]string{"f16": "fp16"}
)

var poolWords = Wording{Memory: "Memory per GPU", Overhead: "engine + CUDA overhead", Limit: "engine limit"}

// vLLM V1 defaults (vllm/engine/arg_utils.py): API server on ≥70 GiB GPUs
// 8192 batched tokens and 1024 sequences; smaller GPUs 2048 and 256.
// SGLang (server_args.py): chunked_prefill_size 8192 on large GPUs, 2048
// below; mem_fraction_static grows with memory (≈0.85–0.88 on 80–192 GB
// parts). trtllm-serve: max_batch_size 2048, max_num_tokens 8192,
// KvCacheConfig(free_gpu_memory_fraction=0.9). llama-server: -np slots,
// n_batch 2048 tokens gathered per iteration (one decode token per
// generating slot, then prompt tokens of the slots processing prompts),
// computed in n_ubatch 512 passes.
const bigGPU = 70 << 30

// engineTable is the one table of serving engines.
var engineTable = map[Engine]*EngineSpec{
	VLLM: {
		Name: VLLM, Backends: []hardware.Backend{hardware.CUDA},
		Pool: true, ShardsTP: true, QuantConfig: true, DefaultPrecision: "bf16", PrecisionAs: hfPrecisionAs,
		KVRefused: poolKVRefused, KVValid: poolKVValid,
		Defaults: Defaults{BigBytes: bigGPU, MaxSeqs: 256, MaxSeqsBig: 1024, BatchedTokens: 2048, BatchedTokensBig: 8192,
			MemFraction: []FractionTier{{0, 0.9}}},
		// vLLM and SGLang allocate KV blocks as tokens are produced (and
		// preempt or retract when the pool runs out), so a running request
		// holds its prompt and, averaged over its life, half its output.
		OutputReserve: 0.5,
		memory: memoryRule{kind: memProfiled, ActDense: vllmActDense, ActMoE: vllmActMoE, ActTokens: 8192,
			NonTorchTP1: vllmNonTorchTP1, NonTorchNVLink: vllmNonTorchNVLink, NonTorchPCIe: vllmNonTorchPCIe, Graphs: vllmGraphs,
			Block: 16, HybridPages: true},
		Sched: PoolScheduler, step: stepFitted,
		Coeffs: CoeffKey{Family: "vllm"},
		Words:  poolWords,
		Hints:  withPlan(gpuHints, poolWeightsHint, "raise gpu_memory_utilization or lower max_num_batched_tokens", poolKVHint),
		Command: poolCommand(poolServer{launch: "vllm serve", context: "--max-model-len", tp: "--tensor-parallel-size",
			memFraction: "--gpu-memory-utilization", maxSeqs: "--max-num-seqs", kvFP8: "fp8"}),
		Align: Align{Hidden: 256, MLP: 256},
	},
	SGLang: {
		Name: SGLang, Backends: []hardware.Backend{hardware.CUDA},
		Pool: true, ShardsTP: true, QuantConfig: true, DefaultPrecision: "bf16", PrecisionAs: hfPrecisionAs,
		KVRefused: poolKVRefused, KVValid: poolKVValid,
		Defaults: Defaults{BigBytes: bigGPU, MaxSeqs: 1024, MaxSeqsBig: 1024, BatchedTokens: 2048, BatchedTokensBig: 8192,
			MemFraction: []FractionTier{{120 << 30, 0.88}, {60 << 30, 0.85}, {0, 0.80}}},
		OutputReserve: 0.5,
		memory: memoryRule{kind: memStatic, ActCoef: sglActCoef, MoEFactor: 2, Margin: 1.15, Floor: 90 << 20, Graphs: sglangGraphs,
			Block: 1},
		Sched: PoolScheduler, step: stepFitted,
		Coeffs: CoeffKey{Family: "sglang"},
		Words:  poolWords,
		Hints:  withPlan(gpuHints, poolWeightsHint, "lower mem_fraction_static or chunked_prefill_size", poolKVHint),
		Command: poolCommand(poolServer{launch: "python -m sglang.launch_server --model-path", context: "--context-length", tp: "--tp",
			memFraction: "--mem-fraction-static", maxSeqs: "--max-running-requests", kvFP8: "fp8_e4m3"}),
		Align: Align{Hidden: 256, MLP: 256},
	},
	TRTLLM: {
		Name: TRTLLM, Aliases: []string{"tensorrt-llm", "trt-llm", "tensorrt_llm"}, Backends: []hardware.Backend{hardware.CUDA},
		Pool: true, ShardsTP: true, QuantConfig: true, DefaultPrecision: "bf16", PrecisionAs: hfPrecisionAs,
		// TensorRT-LLM has no weight-only fallback for FP8 (SM89+: Ada,
		// Hopper, Blackwell) nor for NVFP4 (Blackwell). vLLM and SGLang run
		// FP8 and FP4 weights on older GPUs with weight-only (Marlin-style)
		// kernels, which the estimator prices as such (WeightOnly).
		TensorCoreOnly: map[string]bool{"fp8": true, "fp8-block": true, "nvfp4": true},
		KVRefused:      poolKVRefused, KVValid: poolKVValid,
		Defaults: Defaults{BigBytes: bigGPU, MaxSeqs: 2048, MaxSeqsBig: 2048, BatchedTokens: 8192, BatchedTokensBig: 8192,
			MemFraction: []FractionTier{{0, 0.9}}},
		// TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT)
		// reserves a request's whole length when it admits it.
		OutputReserve: 1,
		memory: memoryRule{kind: memFree, ActCoef: trtActCoef, MoEFactor: 2, Margin: 1, Floor: 70 << 20, Runtime: trtRuntimeOther,
			Block: 32},
		Sched: PoolScheduler, step: stepFitted,
		Coeffs:  CoeffKey{Family: "trtllm"},
		Words:   poolWords,
		Hints:   withPlan(gpuHints, poolWeightsHint, poolWeightsHint, poolKVHint),
		Command: trtllmCommand,
		Align:   Align{Hidden: 256, MLP: 256},
	},
	LlamaCPP: {
		Name: LlamaCPP, Aliases: []string{"llama.cpp", "llama-cpp", "ollama"},
		Backends: []hardware.Backend{hardware.CUDA, hardware.Metal, hardware.CPU},
		// A checkpoint in MXFP4 (gpt-oss) is served from its GGUF, whose
		// experts stay MXFP4 (precision mxfp4_moe).
		GGUF: true, DefaultPrecision: "f16", PrecisionAs: map[string]string{"bf16": "f16", "fp16": "f16", "mxfp4": "mxfp4_moe"},
		ConfigPrecisionAs: map[string]string{"mxfp4": "mxfp4_moe"},
		KVRefused:         map[string]string{"fp8": "llamacpp has no fp8 KV cache"}, KVValid: []string{"auto", "f16", "q8_0", "q4_0"},
		KVAs: map[string]string{"bf16": "f16"},
		Defaults: Defaults{MaxSeqs: 1, MaxSeqsBig: 1, BatchedTokens: 2048, BatchedTokensBig: 2048,
			MemFraction: []FractionTier{{0, 1}}, MicroBatch: ubatchLlama, SeqsFromClients: true},
		OutputReserve: 0.5,
		memory:        memoryRule{kind: memExact, Pad: 256},
		Sched:         SlotScheduler, step: stepFitted,
		// llama.cpp on CUDA has two GPU classes (a documented rule, not
		// per-GPU factors): HBM datacenter parts (DatacenterHBM) use
		// "llamacpp-cuda@2024", fitted on Argonne's 2024 runs on
		// A100/H100/GH200, the only llama.cpp measurements on that class
		// (≈62 % of HBM bandwidth plus ≈3 ms per token; costmodel.md §5.4
		// reports the same class far below consumer cards); consumer and
		// workstation GDDR cards use "llamacpp-cuda", the §5.4 priors of
		// current builds on RTX 4090/3090/4080.
		Coeffs: CoeffKey{Family: "llamacpp", PerBackend: true, HBM: "llamacpp-cuda@2024"},
		Words:  Wording{Memory: "Memory per GPU", Overhead: "engine + CUDA overhead", Server: "llama-server", Limit: "slots"},
		Hints: withPlan(gpuHints, "use a smaller GGUF type (e.g. q4_k_m) or a smaller model; llama.cpp would offload layers to the CPU", "",
			"lower the context or the number of slots, use -ctk/-ctv q8_0, or a smaller GGUF type; otherwise llama.cpp offloads layers to the CPU and the speed estimate does not apply"),
		Command: llamacppCommand,
		// GGUF's 256-weight super-blocks for k-quants, 32-weight blocks
		// (and some slack) for q4_0/q8_0/f16 rows.
		Align: Align{Hidden: 64, MLP: 64, ByPrecision: map[string][2]int{"q4_k_m": {256, 256}, "q5_k_m": {256, 256}, "q6_k": {256, 256}}},
	},
	Native: {
		Name: Native, Backends: []hardware.Backend{hardware.CPU},
		FixedPrecision: "f32",
		// resolveNative holds its defaults; in a closed loop the sequence
		// limit is the clients.
		Defaults:      Defaults{SeqsFromClients: true},
		OutputReserve: 0.5,
		memory:        memoryRule{kind: memNative},
		Sched:         ServeScheduler, step: stepNative, resolve: resolveNative,
		Coeffs: CoeffKey{Family: "native", PerBackend: true},
		Local:  true,
		Words: Wording{Memory: "Memory of the process", Overhead: "process + run garbage", Server: "native engine, engine.Serve", Limit: "sequences in flight",
			Held: "the process's peak resident memory (bench-serve's VmHWM): the weights as the checkpoint stores them (bf16 read in place), float32 KV cache, step buffers, the garbage of a run and the process"},
		Hints: Hints{
			Weights: nativeFitHint, Overhead: nativeFitHint, KV: nativeFitHint,
			Unfit: []Hint{{Text: "a smaller parent (the native engine holds every weight in float32 and has no quantized kernels)"},
				{Text: "a shorter context", Setting: SettingContext}, {Text: "fewer concurrent requests"}, {Text: "a machine with more memory"}},
			Memory: []Hint{{Text: "a shorter context", Setting: SettingContext},
				{Text: "fewer concurrent requests or sequences in flight", Setting: SettingMaxNumSeqs},
				{Text: "allow more layers removed"}, {Text: "a machine with more memory"}},
			Latency:    words("lower concurrency", "shorter prompts or outputs", "a faster machine"),
			Throughput: words("more concurrency", "a faster machine"),
			Together:   words("relax one of them", "a shorter context or fewer concurrent requests"),
		},
		Command: nativeCommand,
		// It pads nothing and runs any width: 32 for the SIMD kernels.
		Align: Align{Hidden: 16, MLP: 32},
	},
}

// nativeFitHint is the native engine's memory hint: it has one precision
// and no KV types to trade.
const nativeFitHint = "the native engine holds the checkpoint's weights as stored (bf16 in place) and computes in float32; use a smaller model, fewer clients or shorter requests"

func withPlan(h Hints, weights, overhead, kv string) Hints {
	h.Weights, h.Overhead, h.KV = weights, overhead, kv
	return h
}

// poolServer is how a pool engine's server (vLLM, SGLang) spells the
// flags that realise the chosen settings; the rest (--kv-cache-dtype,
// --quantization fp8, --trust-remote-code) they spell alike.
type poolServer struct {
	launch                            string // the command up to the model directory
	context, tp, memFraction, maxSeqs string
	kvFP8                             string // --kv-cache-dtype's value for FP8
}

func poolCommand(f poolServer) func(ServeArgs) string {
	return func(a ServeArgs) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s DIR %s %d %s %d", f.launch, f.context, a.MaxModelLen, f.tp, a.TP)
		if a.MemFraction > 0 {
			fmt.Fprintf(&b, " %s %g", f.memFraction, a.MemFraction)
		}
		if a.MaxNumSeqs > 0 {
			fmt.Fprintf(&b, " %s %d", f.maxSeqs, a.MaxNumSeqs)
		}
		if a.KVDType == "fp8" {
			b.WriteString(" --kv-cache-dtype " + f.kvFP8)
		}
		if a.Precision == "fp8" {
			b.WriteString(" --quantization fp8")
		}
		if a.RemoteCode {
			b.WriteString(" --trust-remote-code")
		}
		return b.String()
	}
}

func trtllmCommand(a ServeArgs) string {
	var b strings.Builder
	fmt.Fprintf(&b, "trtllm-serve DIR --max_seq_len %d --tp_size %d", a.MaxModelLen, a.TP)
	if a.MaxNumSeqs > 0 {
		fmt.Fprintf(&b, " --max_batch_size %d", a.MaxNumSeqs)
	}
	if a.MemFraction > 0 {
		fmt.Fprintf(&b, " --kv_cache_free_gpu_memory_fraction %g", a.MemFraction)
	}
	if a.RemoteCode {
		b.WriteString(" --trust_remote_code")
	}
	return b.String()
}

func llamacppCommand(a ServeArgs) string {
	var b strings.Builder
	q := "F16"
	if a.Precision != "" {
		q = strings.ToUpper(a.Precision)
	}
	slots := max(a.MaxNumSeqs, 1)
	if a.MaxNumSeqs == 0 {
		slots = max(a.Concurrency, 1)
	}
	fmt.Fprintf(&b, "python convert_hf_to_gguf.py DIR --outfile child-f16.gguf")
	file := "child-f16.gguf"
	if q != "F16" {
		file = "child-" + q + ".gguf"
		fmt.Fprintf(&b, " && llama-quantize child-f16.gguf %s %s", file, q)
	}
	// -c is the context of all slots together.
	fmt.Fprintf(&b, " && llama-server -m %s -c %d -np %d -ngl 99", file, a.MaxModelLen*slots, slots)
	if k := a.KVDType; k == "q8_0" || k == "q4_0" {
		fmt.Fprintf(&b, " -fa on -ctk %s -ctv %s", k, k)
	}
	return b.String()
}

func nativeCommand(a ServeArgs) string {
	s := fmt.Sprintf("autocompress bench-serve --model DIR --concurrency %d --context %d", max(a.Concurrency, 1), a.MaxModelLen)
	if a.MaxNumSeqs > 0 {
		s += fmt.Sprintf(" --max-num-seqs %d", a.MaxNumSeqs)
	}
	return s
}

// Engines returns the engine names, sorted.
func Engines() []string { return sortedKeys(engineTable) }

// LookupEngine parses an engine name: its table name or one of its
// Aliases ("TensorRT-LLM", "llama.cpp" and "ollama" are accepted
// spellings).
func LookupEngine(name string) (Engine, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for e, s := range engineTable {
		if n == string(e) || slices.Contains(s.Aliases, n) {
			return e, nil
		}
	}
	return "", &UnknownError{Kind: "engine", Name: name, Valid: Engines()}
}

// LookupSpec returns an engine's table entry; an engine not in the table
// is an *UnknownError, never another engine's rules. Entries are shared:
// read them, never modify them.
func LookupSpec(e Engine) (*EngineSpec, error) {
	s, ok := engineTable[e]
	if !ok {
		return nil, &UnknownError{Kind: "engine", Name: string(e), Valid: Engines()}
	}
	return s, nil
}

// Spec returns the engine's table entry and whether it has one.
func (e Engine) Spec() (*EngineSpec, bool) {
	s, ok := engineTable[e]
	return s, ok
}

// Pool reports whether the engine pre-allocates a KV pool from a budget
// (vLLM, SGLang, TRT-LLM) rather than allocating exactly its context
// (llama.cpp, the native engine); false for an engine not in the table.
func (e Engine) Pool() bool {
	s, ok := engineTable[e]
	return ok && s.Pool
}

// Local reports whether the engine is autocompress's own, run and measured
// in this process (EngineSpec.Local); false for an engine not in the
// table.
func (e Engine) Local() bool {
	s, ok := engineTable[e]
	return ok && s.Local
}

// Family returns the coefficient family on hw (see CoeffKey): the engine,
// plus the backend for llama.cpp ("llamacpp-cuda", "llamacpp-metal",
// "llamacpp-cpu") and the native engine, and "llamacpp-cuda@2024" for
// llama.cpp on HBM datacenter GPUs; "" for an engine not in the table.
func (e Engine) Family(hw *hardware.GPU) string {
	s, ok := engineTable[e]
	if !ok {
		return ""
	}
	return s.Coeffs.family(hw)
}

func (k CoeffKey) family(hw *hardware.GPU) string {
	switch {
	case k.HBM != "" && hw.Backend == hardware.CUDA && DatacenterHBM(hw):
		return k.HBM
	case k.PerBackend:
		return k.Family + "-" + string(hw.Backend)
	}
	return k.Family
}

// AlignFor returns the hidden and MLP width granularity of precision on
// the engine.
func (s *EngineSpec) AlignFor(precision string) (hidden, mlp int) {
	if a, ok := s.Align.ByPrecision[precision]; ok {
		return a[0], a[1]
	}
	return s.Align.Hidden, s.Align.MLP
}

// Runs reports whether the engine runs on hw's backend.
func (s *EngineSpec) Runs(hw *hardware.GPU) bool {
	for _, b := range s.Backends {
		if b == hw.Backend {
			return true
		}
	}
	return false
}

// EnginesFor lists the engines that run on hw's backend, sorted.
func EnginesFor(hw *hardware.GPU) []string {
	var out []string
	for e, s := range engineTable {
		if s.Runs(hw) {
			out = append(out, string(e))
		}
	}
	sort.Strings(out)
	return out
}

// CheckEngine reports an engine not in the table, or one that does not
// run on hw's backend, with the engines that do.
func CheckEngine(eng Engine, hw *hardware.GPU) error {
	s, ok := engineTable[eng]
	if !ok {
		return &UnsupportedError{Flag: "engine", Msg: fmt.Sprintf("unknown engine %q", string(eng)), Valid: Engines()}
	}
	if s.Runs(hw) {
		return nil
	}
	return &UnsupportedError{Flag: "engine",
		Msg:   string(eng) + " does not run on " + hw.Name + " (a " + string(hw.Backend) + " device)",
		Valid: EnginesFor(hw)}
}
