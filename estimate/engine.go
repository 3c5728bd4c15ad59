package estimate

import (
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/hardware"
)

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
	spec        *EngineSpec // eng's entry of the engine table
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
	natISL    float64 // prompt tokens per request (the MemWork term)
	natSteps  float64 // garbage basis: steps of a bench-serve run (requests/slots × (output + 1)) × √slots
	natSlots  int     // sequences in flight: min(clients, --max-num-seqs), the clients when unset
}

func resolve(eng Engine, hw *hardware.GPU, o *Options, maxLen int) (resolved, error) {
	r := resolved{eng: eng, tp: max(o.TP, 1), maxLen: maxLen}
	if err := CheckEngine(eng, hw); err != nil {
		return r, err
	}
	sp := engineTable[eng]
	if sp.resolve != nil {
		r, err := sp.resolve(*o, maxLen)
		r.eng, r.spec = eng, sp
		return r, err
	}
	r.spec = sp
	if err := o.Validate(); err != nil {
		return r, err
	}
	pn := o.Precision
	if pn == "" {
		pn = sp.DefaultPrecision
	}
	p, err := LookupPrecision(pn)
	if err != nil {
		return r, err
	}
	if p.GGUF != sp.GGUF {
		as, ok := sp.PrecisionAs[p.Name]
		if !ok {
			msg := "precision " + p.Name + " is a GGUF format, which " + string(eng) + " does not serve"
			if sp.GGUF {
				msg = "precision " + p.Name + " is not a GGUF format; " + string(eng) + " serves GGUF formats"
			}
			return r, &UnsupportedError{Flag: "precision", Msg: msg, Valid: precisionsFor(sp, hw, true)}
		}
		p, _ = LookupPrecision(as)
	}
	if err := checkPrecision(sp, hw, &p); err != nil {
		return r, err
	}
	r.prec = p
	kv, err := LookupKVType(o.KVDType)
	if err != nil {
		return r, err
	}
	if msg, ok := sp.KVRefused[kv.Name]; ok {
		return r, &UnsupportedError{Flag: "kv-dtype", Msg: msg, Valid: sp.KVValid}
	}
	if as, ok := sp.KVAs[kv.Name]; ok {
		kv = kvTypes[as]
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
	d := &sp.Defaults
	big := hw.MemoryBytes >= d.BigBytes
	r.maxSeqs = or(o.MaxNumSeqs, pick(big, d.MaxSeqsBig, d.MaxSeqs))
	r.budgetToks = or(o.MaxBatchedTokens, pick(big, d.BatchedTokensBig, d.BatchedTokens))
	r.memFraction = orf(o.MemFraction, d.fraction(hw.MemoryBytes))
	if d.MicroBatch > 0 {
		r.ubatch = min(or(o.MicroBatch, d.MicroBatch), r.budgetToks)
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

// fraction is the default memory fraction of a device of mem bytes.
func (d *Defaults) fraction(mem int64) float64 {
	for _, t := range d.MemFraction {
		if mem >= t.MinBytes {
			return t.Fraction
		}
	}
	return 0
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

func sortedKeys[M ~map[K]V, K ~string, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, string(k))
	}
	sort.Strings(out)
	return out
}
