package estimate

import (
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/hardware"
)

// Engine names a serving engine.
type Engine string

// Engines.
const (
	VLLM     Engine = "vllm"
	SGLang   Engine = "sglang"
	TRTLLM   Engine = "trtllm"
	LlamaCPP Engine = "llamacpp"
	// Native is autocompress's own CPU engine (package engine): float32
	// weights and KV cache, its own scheduler (see native.go).
	Native Engine = "native"
)

var engineAliases = map[string]Engine{
	"vllm": VLLM, "sglang": SGLang, "trtllm": TRTLLM, "tensorrt-llm": TRTLLM, "trt-llm": TRTLLM, "tensorrt_llm": TRTLLM,
	"llamacpp": LlamaCPP, "llama.cpp": LlamaCPP, "llama-cpp": LlamaCPP, "ollama": LlamaCPP, "native": Native,
}

// Engines returns the engine names.
func Engines() []string {
	return []string{string(LlamaCPP), string(Native), string(SGLang), string(TRTLLM), string(VLLM)}
}

// LookupEngine parses an engine name ("TensorRT-LLM", "llama.cpp" and
// "ollama" are accepted spellings).
func LookupEngine(name string) (Engine, error) {
	e, ok := engineAliases[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return "", &UnknownError{Kind: "engine", Name: name, Valid: Engines()}
	}
	return e, nil
}

// Pool reports whether the engine pre-allocates a KV pool from a budget
// (vLLM, SGLang, TRT-LLM) rather than allocating exactly its context (llama.cpp).
func (e Engine) Pool() bool { return e == VLLM || e == SGLang || e == TRTLLM }

// outputReserve is the share of a request's output tokens that counts
// against the KV pool while it runs, on average. TensorRT-LLM's default
// capacity scheduler (GUARANTEED_NO_EVICT) reserves a request's whole
// length when it admits it; vLLM and SGLang allocate KV blocks as tokens
// are produced (and preempt or retract when the pool runs out), so a
// running request holds its prompt and, averaged over its life, half its
// output.
func (e Engine) outputReserve() float64 {
	if e == TRTLLM {
		return 1
	}
	return 0.5
}

// Family returns the coefficient family: the engine, plus the backend for
// llama.cpp ("llamacpp-cuda", "llamacpp-metal", "llamacpp-cpu").
//
// llama.cpp on CUDA has two GPU classes (a documented rule, not per-GPU
// factors): HBM datacenter parts (DatacenterHBM) use "llamacpp-cuda@2024",
// fitted on Argonne's 2024 runs on A100/H100/GH200, the only llama.cpp
// measurements on that class (≈62 % of HBM bandwidth plus ≈3 ms per token;
// costmodel.md §5.4 reports the same class far below consumer cards);
// consumer and workstation GDDR cards use "llamacpp-cuda", the §5.4 priors
// of current builds on RTX 4090/3090/4080.
func (e Engine) Family(hw *hardware.GPU) string {
	switch e {
	case LlamaCPP:
		if hw.Backend == hardware.CUDA && DatacenterHBM(hw) {
			return "llamacpp-cuda@2024"
		}
		return "llamacpp-" + string(hw.Backend)
	case Native:
		return "native-" + string(hw.Backend)
	}
	return string(e)
}

// DatacenterHBM reports whether hw is an HBM datacenter GPU: an NVLink
// module (A100/H100/H200/B200/GH200/GB200 SXM) or a PCIe card with at least
// 1.9 TB/s and 64 GiB (H100 PCIe, A100 80GB PCIe). GDDR cards (GeForce, L4,
// L40S, RTX PRO) and unified-memory devices are not.
func DatacenterHBM(hw *hardware.GPU) bool {
	return hw.Link == hardware.NVLink || (hw.BandwidthBps >= 1.9e12 && hw.MemoryBytes >= 64<<30)
}

// Options are the deployment knobs; the zero value means the engine defaults.
type Options struct {
	// Precision of the weights (see Precisions); "" = bf16 (f16 for llama.cpp).
	Precision string
	// KVDType is the KV-cache type; "" or "auto" = model dtype (f16 in llama.cpp).
	KVDType string
	// TP is the tensor-parallel degree; 0 = 1.
	TP int
	// GPUs is the node's GPU count (hardware.Node.Count): TP ≤ GPUs ≤
	// hw.GPUsPerNode; 0 = TP (a node of exactly the GPUs the TP group uses).
	// One TP replica is priced; the count bounds TP and the advice of a
	// FitError.
	GPUs int
	// MaxModelLen is the per-request context limit; 0 = from the workload
	// (or 4096 when there is none).
	MaxModelLen int
	// MaxNumSeqs caps running requests (vLLM max_num_seqs, SGLang
	// max_running_requests, TRT-LLM max_batch_size, llama.cpp -np slots);
	// 0 = engine default (llama.cpp: the workload's concurrency).
	MaxNumSeqs int
	// MaxBatchedTokens is the per-step token budget (vLLM
	// max_num_batched_tokens, SGLang chunked_prefill_size, TRT-LLM
	// max_num_tokens, llama.cpp n_batch: the tokens one llama-server
	// iteration gathers from all slots); 0 = engine default (llama.cpp 2048).
	MaxBatchedTokens int
	// MicroBatch is llama.cpp's n_ubatch: a step of n_batch tokens runs as
	// ⌈tokens/n_ubatch⌉ graph passes, each streaming the weights once;
	// 0 = 512. Ignored by the pool engines.
	MicroBatch int
	// MemFraction is vLLM gpu_memory_utilization, SGLang mem_fraction_static
	// or TRT-LLM free_gpu_memory_fraction; 0 = engine default.
	MemFraction float64
	// StateDType is the recurrent-state element type: "" = fp32 (llama.cpp,
	// and the Mamba models that pin it), "bf16" for vLLM's auto on others.
	StateDType string
}

// Validate reports an option out of range (negative counts, a memory
// fraction outside (0, 1]); zero means the default and is valid. Options
// are never silently replaced by defaults.
func (o *Options) Validate() error {
	bad := func(flag, msg string) error { return &UnsupportedError{Flag: flag, Msg: msg} }
	switch {
	case o.TP < 0:
		return bad("tp", "TP "+itoa(o.TP)+" must be ≥ 1")
	case o.GPUs < 0:
		return bad("gpus", "GPU count "+itoa(o.GPUs)+" must be ≥ 1")
	case o.MaxModelLen < 0:
		return bad("context", "context limit "+itoa(o.MaxModelLen)+" must be ≥ 1")
	case o.MaxNumSeqs < 0:
		return bad("max-num-seqs", "max sequences "+itoa(o.MaxNumSeqs)+" must be ≥ 1")
	case o.MaxBatchedTokens < 0:
		return bad("max-batched-tokens", "batched tokens "+itoa(o.MaxBatchedTokens)+" must be ≥ 1")
	case o.MicroBatch < 0:
		return bad("micro-batch", "n_ubatch "+itoa(o.MicroBatch)+" must be ≥ 1")
	case !(o.MemFraction >= 0 && o.MemFraction <= 1):
		return bad("mem-fraction", "memory fraction "+strconv.FormatFloat(o.MemFraction, 'g', -1, 64)+" must be in (0, 1]")
	}
	return nil
}

// resolved holds Options with every default filled in.
type resolved struct {
	eng         Engine
	prec        Precision
	kv          KVType
	stateBytes  float64
	tp          int
	gpus        int // GPUs in the node: TP ≤ gpus ≤ hw.GPUsPerNode
	gpusSet     bool
	maxLen      int
	maxSeqs     int
	budgetToks  int
	ubatch      int // llama.cpp n_ubatch (0 for the pool engines)
	memFraction float64
	// native engine: its coefficients and the KV tokens a request holds
	// (mean prompt + output; 0 = the context).
	nat       *NativeCoeffs
	natTokens float64
	natSteps  float64 // garbage basis: steps of a bench-serve run (requests/slots × (output + 1)) × √slots
	natSlots  int     // sequences in flight: min(clients, --max-num-seqs), the clients when unset
}

func resolve(eng Engine, hw *hardware.GPU, o *Options, maxLen int) (resolved, error) {
	r := resolved{eng: eng, tp: max(o.TP, 1), maxLen: maxLen}
	if err := CheckEngine(eng, hw); err != nil {
		return r, err
	}
	if eng == Native {
		return resolveNative(o, maxLen)
	}
	if err := o.Validate(); err != nil {
		return r, err
	}
	pn := o.Precision
	if pn == "" {
		pn = "bf16"
		if !eng.Pool() {
			pn = "f16"
		}
	}
	p, err := LookupPrecision(pn)
	if err != nil {
		return r, err
	}
	if eng.Pool() && p.GGUF {
		if p.Name == "f16" {
			p, _ = LookupPrecision("fp16")
		} else {
			return r, &UnsupportedError{Flag: "precision", Msg: "precision " + p.Name + " is a GGUF format, which " + string(eng) + " does not serve", Valid: precisionsFor(eng, hw, true)}
		}
	}
	if !eng.Pool() && !p.GGUF {
		switch p.Name {
		case "bf16", "fp16":
			p, _ = LookupPrecision("f16")
		default:
			return r, &UnsupportedError{Flag: "precision", Msg: "precision " + p.Name + " is not a GGUF format; " + string(eng) + " serves GGUF formats", Valid: precisionsFor(eng, hw, true)}
		}
	}
	if err := checkPrecision(eng, hw, &p); err != nil {
		return r, err
	}
	r.prec = p
	kv, err := LookupKVType(o.KVDType)
	if err != nil {
		return r, err
	}
	if eng.Pool() && (kv.Name == "q8_0" || kv.Name == "q4_0") {
		return r, &UnsupportedError{Flag: "kv-dtype", Msg: "KV type " + kv.Name + " is llama.cpp-only", Valid: []string{"auto", "bf16", "fp16", "fp8"}}
	}
	if !eng.Pool() && kv.Name == "fp8" {
		return r, &UnsupportedError{Flag: "kv-dtype", Msg: string(eng) + " has no fp8 KV cache", Valid: []string{"auto", "f16", "q8_0", "q4_0"}}
	}
	if !eng.Pool() && kv.Name == "bf16" {
		kv = kvTypes["f16"]
	}
	r.kv = kv
	r.stateBytes = 4
	if o.StateDType == "bf16" || o.StateDType == "fp16" {
		r.stateBytes = 2
	}
	if r.maxLen <= 0 {
		r.maxLen = o.MaxModelLen
	}
	if r.maxLen <= 0 {
		r.maxLen = 4096
	}
	big := hw.MemoryBytes >= 70<<30
	r.maxSeqs, r.budgetToks, r.memFraction = o.MaxNumSeqs, o.MaxBatchedTokens, o.MemFraction
	switch eng {
	case VLLM:
		// vLLM V1 defaults (vllm/engine/arg_utils.py): API server on ≥70 GiB GPUs
		// 8192 batched tokens and 1024 sequences; smaller GPUs 2048 and 256.
		r.maxSeqs = or(r.maxSeqs, pick(big, 1024, 256))
		r.budgetToks = or(r.budgetToks, pick(big, 8192, 2048))
		r.memFraction = orf(r.memFraction, 0.9)
	case SGLang:
		// server_args.py: chunked_prefill_size 8192 on large GPUs, 2048 below;
		// mem_fraction_static grows with memory (≈0.85–0.88 on 80–192 GB parts).
		r.maxSeqs = or(r.maxSeqs, 1024)
		r.budgetToks = or(r.budgetToks, pick(big, 8192, 2048))
		switch gibs := hw.MemoryBytes >> 30; {
		case gibs >= 120:
			r.memFraction = orf(r.memFraction, 0.88)
		case gibs >= 60:
			r.memFraction = orf(r.memFraction, 0.85)
		default:
			r.memFraction = orf(r.memFraction, 0.80)
		}
	case TRTLLM:
		// trtllm-serve defaults: max_batch_size 2048, max_num_tokens 8192,
		// KvCacheConfig(free_gpu_memory_fraction=0.9).
		r.maxSeqs = or(r.maxSeqs, 2048)
		r.budgetToks = or(r.budgetToks, 8192)
		r.memFraction = orf(r.memFraction, 0.9)
	default:
		// llama-server: -np slots, n_batch 2048 tokens gathered per iteration
		// (one decode token per generating slot, then prompt tokens of the
		// slots processing prompts), computed in n_ubatch 512 passes.
		r.maxSeqs = or(r.maxSeqs, 1)
		r.budgetToks = or(r.budgetToks, 2048)
		r.ubatch = min(or(o.MicroBatch, ubatchLlama), r.budgetToks)
		r.memFraction = orf(r.memFraction, 1)
	}
	if r.maxSeqs < 1 || r.budgetToks < 1 || r.memFraction <= 0 || r.memFraction > 1 {
		return r, &UnsupportedError{Msg: "max sequences and batched tokens must be ≥ 1 and the memory fraction in (0, 1]"}
	}
	r.gpus, r.gpusSet = o.GPUs, o.GPUs > 0
	if o.GPUs < 0 {
		return r, &UnsupportedError{Flag: "gpus", Msg: "GPU count " + itoa(o.GPUs) + ": a node holds at least 1 GPU"}
	}
	if !r.gpusSet {
		r.gpus = r.tp
	}
	if err := hw.CheckCount(r.gpus); err != nil {
		if r.gpusSet {
			return r, &UnsupportedError{Flag: "gpus", Msg: err.Error()}
		}
		return r, &UnsupportedError{Flag: "tp", Msg: "TP " + itoa(r.tp) + " needs " + itoa(r.tp) + " GPUs but one " + hw.Name + " node holds at most " + itoa(max(hw.GPUsPerNode, 1))}
	}
	if r.tp > r.gpus {
		return r, &UnsupportedError{Flag: "tp", Msg: "TP " + itoa(r.tp) + " needs " + itoa(r.tp) + " GPUs but the node has " + itoa(r.gpus) + " (raise the GPU count or lower TP)"}
	}
	return r, nil
}

// UnsupportedError is a deployment the engine cannot run. Flag names the
// option at fault ("engine", "precision", "tp", "gpus", "kv-dtype", ...;
// "" when it is a combination) and Valid what it may be instead.
type UnsupportedError struct {
	Msg   string
	Flag  string
	Valid []string
}

func (e *UnsupportedError) Error() string {
	if len(e.Valid) == 0 {
		return e.Msg
	}
	return e.Msg + "; valid: " + strings.Join(e.Valid, ", ")
}

func or(v, d int) int {
	if v > 0 {
		return v
	}
	return d
}

func orf(v, d float64) float64 {
	if v > 0 {
		return v
	}
	return d
}

func pick(c bool, a, b int) int {
	if c {
		return a
	}
	return b
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = digits[i%10]
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
