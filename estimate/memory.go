package estimate

import (
	"fmt"
	"math"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/hardware"
)

// GiB is 2³⁰ bytes.
const GiB = 1 << 30

// MemoryReport is the per-GPU memory plan of one deployment. Byte figures
// are per GPU of the TP group.
type MemoryReport struct {
	Engine    Engine
	Precision string
	KVDType   string
	TP        int

	DeviceBytes float64 // memory the accelerator may allocate
	// BudgetBytes is what the engine reserves (vLLM: gpu_memory_utilization ×
	// total; SGLang: mem_fraction_static × total; TRT-LLM: everything it takes
	// including its KV pool; llama.cpp: exactly NeededBytes).
	BudgetBytes float64

	WeightsBytes    float64
	ActivationBytes float64 // peak activations / compute buffers
	OverheadBytes   float64 // CUDA context, non-torch, CUDA graphs, NCCL, runtime, output buffers
	KVPoolBytes     float64 // KV cache + recurrent state pool (llama.cpp: the context it allocates)

	KVBytesPerToken  float64 // full-attention KV per token (sliding-window layers capped separately)
	StateBytesPerSeq float64
	// KVCapacityTokens is how many tokens of KV the pool holds (llama.cpp: n_ctx).
	KVCapacityTokens float64
	// MaxModelLen is the per-request context used for MaxConcurrency.
	MaxModelLen int
	// MaxConcurrency is how many full-length requests run at once: those
	// that fit, capped by the engine's sequence limit (llama.cpp: its -np
	// slots, each holding its context in the KVCapacityTokens it allocates).
	MaxConcurrency int
	// MaxSlots is, for llama.cpp, how many slots of MaxModelLen tokens the
	// memory could hold if -np asked for them (0 for the pool engines, whose
	// MaxConcurrency already says it, and for the native engine, whose
	// MaxConcurrency is the sequences its memory could hold).
	MaxSlots int
	// InFlight is, for the native engine, the sequences in flight whose
	// KV the plan holds (min(clients, the sequence limit)); 0 for the others.
	InFlight     int
	MaxSeqs      int // the engine's sequence limit
	BudgetTokens int // per-step token budget
	MicroBatch   int // llama.cpp n_ubatch (0 for the pool engines)

	// NeededBytes is weights + activations + overhead + the KV and state of
	// MaxConcurrency full-length requests (llama.cpp: what it allocates).
	NeededBytes float64

	// Fits is false when a term does not fit; Fail then says which.
	Fits bool
	Fail FitError
}

// TotalBytes is the memory the deployment holds (the reserved budget plus the
// context outside it).
func (r *MemoryReport) TotalBytes() float64 {
	return r.WeightsBytes + r.ActivationBytes + r.OverheadBytes + r.KVPoolBytes
}

// FitError says which memory term does not fit and by how much.
type FitError struct {
	Engine Engine
	GPU    string
	Term   string  // "weights", "activations", "KV cache", ...
	Need   float64 // bytes the term needs
	Have   float64 // bytes available to it
	Hint   string
	// Tokens and Slots describe the request context for KV terms.
	Tokens, Slots int
	// FitsAtTP is the smallest larger TP degree at which the deployment
	// fits within the node's GPUs and the model's shape (see FitTP); 0 when
	// none does or it was not searched. MaxTP is the most GPUs that were
	// tried (0: not searched).
	FitsAtTP, MaxTP int
}

func (e *FitError) Error() string {
	term := e.Term
	if e.Tokens > 0 {
		term = fmt.Sprintf("%s (%d × %d tokens)", term, max(e.Slots, 1), e.Tokens)
	}
	s := fmt.Sprintf("does not fit on %s with %s: %s need %.2f GiB but only %.2f GiB is available (short by %.2f GiB)",
		e.GPU, e.Engine, term, e.Need/GiB, e.Have/GiB, (e.Need-e.Have)/GiB)
	switch {
	case e.FitsAtTP > 0:
		s += fmt.Sprintf("; it fits at --tp %d", e.FitsAtTP)
	case e.MaxTP > 1:
		s += fmt.Sprintf("; no larger TP up to the node's %d GPUs fits", e.MaxTP)
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Memory plans the memory of model m on hw with engine eng. Requests are
// assumed to need o.MaxModelLen tokens (4096 if unset).
func Memory(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options) (*MemoryReport, error) {
	r, err := resolve(eng, hw, &o, o.MaxModelLen)
	if err != nil {
		return nil, err
	}
	if r.spec.ShardsTP {
		if err := m.CheckTP(r.tp); err != nil {
			return nil, err
		}
	}
	var s Summary
	Summarize(&s, m, &r.prec, r.kv, r.stateBytes, r.tp)
	rep := &MemoryReport{}
	if !planMemory(rep, &s, hw, &r, float64(r.maxLen), r.maxSeqs) {
		f := rep.Fail
		return rep, &f
	}
	return rep, nil
}

// Engine constants (costmodel.md §3.4).
const (
	cudaContext = 0.6 * GiB // outside vLLM's budget: 79.18 GiB total vs 78.57 free on an H100
	// vLLM V1 (≥ 0.17) memory profiling, from the engines' own start-up logs
	// (estimate/groundtruth/testdata/kv_capacity.md; llm-d-planner's vLLM
	// 0.19 H100 sweep): non-torch memory 0.21–0.25 GiB at TP 1 and on PCIe
	// parts, 2.06–2.13 GiB at TP ≥ 2 over NVLink (NCCL's buffers); the
	// activation peak of the profiling run 1.9–2.2 GiB dense and 2.7 GiB MoE
	// at 8,192 batched tokens (it was 4.8–5.6 / 7.4 GiB before 0.17).
	vllmNonTorchTP1    = 0.25 * GiB
	vllmNonTorchNVLink = 2.1 * GiB
	vllmNonTorchPCIe   = 0.2 * GiB
	vllmGraphs         = 0.5 * GiB // CUDA-graph delta, −0.9…+1.0 GiB measured
	vllmActDense       = 2.0 * GiB // at 8192 batched tokens
	vllmActMoE         = 2.7 * GiB
	trtRuntimeOther    = 1.0 * GiB // runtime workspace beyond activations (AIC's 3.5 GiB is a safety margin)
	sglangGraphs       = 1.0 * GiB
	llamaCtxOverhead   = 0.5 * GiB // CUDA/Metal context and ggml metadata
	llamaSched         = 4 << 20
	ubatchLlama        = 512
)

var trtActCoef = [4]float64{11, 6.5, 5, 5}     // TP 1, 2, 4, ≥8 (AIConfigurator, Llama-like)
var sglActCoef = [4]float64{14, 8.5, 6.5, 6.5} // SGLang, +15 %
var ncclBytes = [4]float64{0, 342e6, 392e6, 392e6}

func tpIndex(tp int) int {
	switch {
	case tp <= 1:
		return 0
	case tp == 2:
		return 1
	case tp <= 4:
		return 2
	}
	return 3
}

// memKind names a memory rule: how an engine turns the device's memory
// into weights, activations, overheads and a KV pool (costmodel.md §3.4–3.5).
type memKind int

const (
	// memProfiled: a fraction of the device's memory is the budget; the
	// pool is what the profiled activations and overheads leave of it
	// (vLLM's determine_available_memory).
	memProfiled memKind = iota
	// memStatic: the static fraction of the memory free before loading,
	// less the weights, is the pool; activations and graphs must fit in
	// the rest (SGLang's profile_max_num_token).
	memStatic
	// memFree: a fraction of the memory free after loading weights,
	// activations and runtime is the pool (TensorRT-LLM's
	// free_gpu_memory_fraction).
	memFree
	// memExact: no pool; exactly the weights, the context of every slot and
	// the compute buffers (llama.cpp).
	memExact
	// memNative: the native engine's process (nativeMemory).
	memNative
)

// memoryRule is an engine's memory rule and its constants (the engine
// table holds one per engine; the constants each kind reads are named
// beside it).
type memoryRule struct {
	kind memKind
	// memProfiled: activations of ActDense (ActMoE for MoE models) at
	// ActTokens batched tokens, scaled by the batched tokens; non-torch
	// memory at TP 1, over NVLink and over PCIe; CUDA graphs (also
	// memStatic's).
	ActDense, ActMoE, ActTokens               float64
	NonTorchTP1, NonTorchNVLink, NonTorchPCIe float64
	Graphs                                    float64
	// memStatic, memFree: activations of max(2 × batched tokens × hidden ×
	// ActCoef[TP] (× MoEFactor for MoE) × Margin, Floor) bytes; memFree's
	// runtime workspace.
	ActCoef                           [4]float64
	MoEFactor, Margin, Floor, Runtime float64
	// Pool engines: KV pages of Block tokens; HybridPages: vLLM's hybrid
	// allocator (attention pages grown to hold a Mamba layer's state).
	Block       float64
	HybridPages bool
	// memExact: each slot's context is padded to Pad cells.
	Pad float64
}

// planMemory fills rep for a summary; requests need ctx tokens each, and
// slots is llama.cpp's -np (ignored by pool engines). It applies the
// engine's memory rule (EngineSpec.memory). It does not allocate; it
// returns false with rep.Fail set when the deployment does not fit.
func planMemory(rep *MemoryReport, s *Summary, hw *hardware.GPU, r *resolved, ctx float64, slots int) bool {
	*rep = MemoryReport{Engine: r.eng, Precision: r.prec.Name, KVDType: r.kv.Name, TP: r.tp,
		MaxSeqs: r.maxSeqs, BudgetTokens: r.budgetToks, MicroBatch: r.ubatch, MaxModelLen: int(ctx)}
	dev := float64(hw.UsableBytes())
	rep.DeviceBytes = dev
	rep.WeightsBytes = s.WeightBytes
	rep.KVBytesPerToken = s.KVBytes + s.SWAKVBytes
	rep.StateBytesPerSeq = s.StateBytes
	sp := r.spec
	rule := &sp.memory
	fit := func(term string, need, have float64, hint string) bool {
		return rep.fail(hw.Name, term, need, have, hint)
	}
	moe := s.MoELayers > 0
	ti := tpIndex(r.tp)
	var pool float64
	switch rule.kind {
	case memNative:
		nc := r.nat
		if nc == nil {
			f, _, _ := ActiveNativeCoeffs()
			c, _ := f.Machine(hw.Name)
			nc = &c
		}
		tok := r.natTokens
		if tok <= 0 {
			tok = ctx
		}
		return nativeMemory(rep, s, hw.Name, dev, r, nc, tok, slots)
	case memExact:
		return exactMemory(rep, s, hw.Name, dev, r, ctx, slots)
	case memProfiled:
		budget := r.memFraction * dev
		act := rule.ActDense
		if moe {
			act = rule.ActMoE
		}
		act *= float64(r.budgetToks) / rule.ActTokens
		nonTorch := rule.NonTorchTP1
		if r.tp > 1 {
			nonTorch = rule.NonTorchPCIe
			if hw.Link == hardware.NVLink {
				nonTorch = rule.NonTorchNVLink
			}
		}
		rep.BudgetBytes = budget
		rep.ActivationBytes = act
		rep.OverheadBytes = nonTorch + rule.Graphs + cudaContext
		if s.WeightBytes > budget {
			return fit("weights", s.WeightBytes, budget, sp.Hints.Weights)
		}
		pool = budget - s.WeightBytes - act - nonTorch - rule.Graphs
		if pool <= 0 {
			return fit("weights + activations + overhead", s.WeightBytes+act+nonTorch+rule.Graphs, budget, sp.Hints.Overhead)
		}
	case memStatic:
		budget := r.memFraction * dev
		act := rule.activations(s, r, ti, moe)
		rep.BudgetBytes = budget
		rep.ActivationBytes = act
		rep.OverheadBytes = rule.Graphs + cudaContext + ncclBytes[ti]
		if s.WeightBytes > budget {
			return fit("weights", s.WeightBytes, budget, sp.Hints.Weights)
		}
		if rest := dev - budget; act+rep.OverheadBytes > rest {
			return fit("activations + CUDA graphs", act+rep.OverheadBytes, rest, sp.Hints.Overhead)
		}
		// profile_max_num_token: rest = free after loading − free before
		// loading × (1 − mem_fraction_static), and the memory free before
		// loading already excludes the CUDA context and NCCL buffers.
		static := r.memFraction * (dev - cudaContext - ncclBytes[ti])
		pool = static - s.WeightBytes
		if pool <= 0 {
			return fit("weights", s.WeightBytes, static, sp.Hints.Weights)
		}
	case memFree:
		act := rule.activations(s, r, ti, moe)
		rep.ActivationBytes = act
		rep.OverheadBytes = cudaContext + ncclBytes[ti] + rule.Runtime
		free := dev - s.WeightBytes - act - rep.OverheadBytes
		if s.WeightBytes > dev {
			return fit("weights", s.WeightBytes, dev, sp.Hints.Weights)
		}
		if free <= 0 {
			return fit("weights + activations + runtime", s.WeightBytes+act+rep.OverheadBytes, dev, sp.Hints.Overhead)
		}
		pool = r.memFraction * free
		rep.BudgetBytes = s.WeightBytes + act + rep.OverheadBytes + pool
	}
	return poolCapacity(rep, s, hw.Name, r, pool, ctx)
}

// fail records that term does not fit on gpu and returns false.
func (rep *MemoryReport) fail(gpu, term string, need, have float64, hint string) bool {
	rep.Fail = FitError{Engine: rep.Engine, GPU: gpu, Term: term, Need: need, Have: have, Hint: hint}
	return false
}

// activations is AIConfigurator's activation heuristic (memStatic, memFree).
func (rule *memoryRule) activations(s *Summary, r *resolved, ti int, moe bool) float64 {
	c := rule.ActCoef[ti]
	if moe {
		c *= rule.MoEFactor
	}
	return max(2*float64(r.budgetToks)*float64(s.Hidden)*c*rule.Margin, rule.Floor)
}

// exactMemory is llama.cpp's exact allocation for slots × ctx (memExact).
func exactMemory(rep *MemoryReport, s *Summary, gpu string, dev float64, r *resolved, ctx float64, slots int) bool {
	rule, hints := &r.spec.memory, &r.spec.Hints
	n := float64(max(slots, 1))
	// llama.cpp pads each slot's context (n_ctx_seq) to a multiple of
	// 256 cells (separate per-slot caches, the default): -c 4096 -np 10
	// allocates 10 × 512 cells (llama-context.cpp; a published log in
	// estimate/groundtruth/testdata/kv_capacity.md).
	nctx := n * math.Ceil(ctx/rule.Pad) * rule.Pad
	ub := float64(min(r.budgetToks, or(r.ubatch, ubatchLlama)))
	compute := ub*float64(s.Vocab)*4 + ub*float64(4*s.Hidden+2*s.MaxFFN)*4 + ub*math.Min(nctx, 4096)*4 + llamaSched
	out := n * float64(s.Vocab) * 4
	rep.ActivationBytes = compute
	rep.OverheadBytes = llamaCtxOverhead + out
	fixed := s.WeightBytes + compute + rep.OverheadBytes
	if s.WeightBytes > dev {
		return rep.fail(gpu, "weights", s.WeightBytes, dev, hints.Weights)
	}
	// KV for the context as allocated: per-slot windowed layers hold the full
	// context in llama.cpp's unified cache unless SWA is enabled; count full.
	kv := (s.KVBytes+s.SWAKVBytes)*nctx + n*s.StateBytes
	rep.KVPoolBytes = kv
	rep.KVCapacityTokens = nctx
	rep.NeededBytes = fixed + kv
	rep.BudgetBytes = rep.NeededBytes
	perSlot := (s.KVBytes+s.SWAKVBytes)*ctx + s.StateBytes + float64(s.Vocab)*4
	if avail := dev - s.WeightBytes - compute - llamaCtxOverhead; perSlot > 0 && avail > 0 {
		rep.MaxSlots = int(avail / perSlot)
	}
	// What runs at once is the slots allocated (each holds its padded
	// context in KVCapacityTokens), not the slots memory could hold.
	rep.MaxConcurrency = min(int(n), rep.MaxSlots)
	if rep.NeededBytes > dev {
		rep.fail(gpu, "KV cache", kv, dev-fixed, hints.KV)
		rep.Fail.Tokens, rep.Fail.Slots = int(ctx), int(n)
		return false
	}
	rep.Fits = true
	return true
}

// poolCapacity fills a pool engine's KV capacity and concurrency from its
// pool: page-aligned tokens (vLLM 16-token blocks; TRT-LLM 32-token
// blocks; SGLang token-granular). Recurrent state takes one slot per
// running sequence before KV.
func poolCapacity(rep *MemoryReport, s *Summary, gpu string, r *resolved, pool, ctx float64) bool {
	rule := &r.spec.memory
	rep.KVPoolBytes = pool
	perReq := s.KVBytesPerSeq(ctx) + s.StateBytes
	block := rule.Block
	stateSeq := s.StateBytes
	if rule.HybridPages && s.StateBytes > 0 && s.MambaLayers > 0 && s.AttnLayers > 0 && s.KVBytes+s.SWAKVBytes > 0 {
		// vLLM hybrid allocator: the attention block grows (in 16-token steps)
		// until one attention page holds at least one Mamba layer's state,
		// and each Mamba page is padded to the attention page size.
		kvLayer := (s.KVBytes + s.SWAKVBytes) / float64(s.AttnLayers)
		stLayer := s.StateBytes / float64(s.MambaLayers)
		block = rule.Block * math.Ceil(stLayer/(kvLayer*rule.Block))
		stateSeq = float64(s.MambaLayers) * block * kvLayer
		rep.StateBytesPerSeq = stateSeq
		perReq = s.KVBytesPerSeq(ctx) + stateSeq
	}
	statePool := 0.0
	if stateSeq > 0 {
		statePool = math.Min(float64(r.maxSeqs)*stateSeq, pool/2)
	}
	perTok := s.KVBytes + s.SWAKVBytes
	if perTok > 0 {
		rep.KVCapacityTokens = math.Floor((pool-statePool)/(perTok*block)) * block
	} else {
		rep.KVCapacityTokens = math.Inf(1)
	}
	if perReq > 0 {
		// Full-length requests, each a whole number of blocks.
		blocksPerReq := math.Ceil(ctx / block)
		reqBytes := s.KVBytesPerSeq(blocksPerReq*block) + stateSeq
		rep.MaxConcurrency = int(math.Min(float64(r.maxSeqs), math.Floor(pool/reqBytes)))
	} else {
		rep.MaxConcurrency = r.maxSeqs
	}
	if rep.MaxConcurrency < 1 {
		rep.fail(gpu, "KV cache", perReq, pool, r.spec.Hints.KV)
		rep.Fail.Tokens, rep.Fail.Slots = int(ctx), 1
		return false
	}
	rep.NeededBytes = s.WeightBytes + rep.ActivationBytes + rep.OverheadBytes + float64(rep.MaxConcurrency)*perReq
	rep.Fits = true
	return true
}
