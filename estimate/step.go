package estimate

import (
	"math"

	"github.com/autocompress/autocompress/hardware"
)

// stepModel prices one engine iteration: roofline basis terms per GPU ×
// fitted coefficients, plus per-layer, per-step and per-request overheads
// (costmodel.md §4.1). It holds a pointer to the Summary, so the caller
// keeps that alive and unchanged.
type stepModel struct {
	s        *Summary
	co       Coeffs
	peak     float64 // FLOP/s of the linear layers' compute dtype
	peakAttn float64 // FLOP/s of attention (BF16)
	linMul   float64 // Comp × (CompLow for FP8/FP4 GEMMs) × (Block for fp8-block) × (Dequant for weight-only kernels)
	wMul     float64 // Weight × (Block for fp8-block) × (Dequant for weight-only kernels)
	// dequant is the ALU time to unpack block-quantized GGUF weights once
	// (Quant × linear FLOPs of one token ÷ peak): llama.cpp's matrix-vector
	// kernels dequantize every weight on each pass, so it is paid per pass,
	// not per token.
	dequant float64
	// ubatch is llama.cpp's n_ubatch: a step of more tokens runs as
	// ⌈tokens/ubatch⌉ graph passes, each streaming the weights and paying
	// the per-layer and per-step overheads once; 0 = one pass per step.
	ubatch float64
	// gemmPerPeak prices the linear FLOPs of prompt tokens under GGUF
	// weights (llama.cpp's GEMM kernels, not the matrix-vector ones decode
	// runs): GEMM (× CompLow when block-quantized) ÷ GGMLPeak; 0 = not
	// GGUF or no GEMM coefficient (linPerPeak for every token).
	gemmPerPeak float64
	bw          float64 // bytes/s
	link        float64 // bytes/s per direction
	tp          float64

	// Constants of terms, computed once per model (terms is called a
	// handful of times per candidate in the search's inner loop).
	linPerPeak  float64 // linMul ÷ peak
	attnPerPeak float64 // Comp ÷ peakAttn
	wPerBW      float64 // wMul ÷ bandwidth
	kvPerBW     float64 // KV ÷ bandwidth
	statePerSeq float64 // State × 2 × state bytes ÷ bandwidth
	commPerTok  float64 // TP × all-reduce bytes × ring factor ÷ link
	commFixed   float64 // TPLatency × all-reduces
	fixed       float64 // Layer × layers + Step + MoE × MoE layers
	denseStream float64 // weight bytes a step streams when there are no experts (else 0)

	// native: the native engine's step model replaces all of the above.
	native bool
	nat    nativeTerms
}

func newStepModel(s *Summary, hw *hardware.GPU, p *Precision, co Coeffs) stepModel {
	link := hw.LinkBps
	if link <= 0 {
		link = 32e9
	}
	m := stepModel{s: s, co: co, peak: hw.PeakFLOPS(p.Compute), peakAttn: hw.BF16FLOPS, bw: hw.BandwidthBps, link: link, tp: float64(max(s.TP, 1))}
	m.bw /= co.GDDRFactor(hw)
	m.linMul = co.Comp
	if m.peak > hw.BF16FLOPS {
		m.linMul *= co.CompLow
	}
	m.wMul = co.Weight
	if p.Block && co.Block > 0 {
		m.linMul *= co.Block
		m.wMul *= co.Block
	}
	if WeightOnly(p, hw) && co.Dequant > 0 {
		m.linMul *= co.Dequant
		m.wMul *= co.Dequant
	}
	if p.GGUF && p.Name != "f16" && co.Quant > 0 && m.peak > 0 {
		m.dequant = co.Quant * s.LinearFLOPs / m.peak
	}
	m.linPerPeak = m.linMul / m.peak
	if p.GGUF && co.GEMM > 0 {
		peak, quantized := GGMLPeak(hw, p)
		g := co.GEMM
		if quantized && co.CompLow > 0 {
			g *= co.CompLow
		}
		m.gemmPerPeak = g / peak
	}
	m.attnPerPeak = co.Comp / m.peakAttn
	m.wPerBW = m.wMul / m.bw
	m.kvPerBW = co.KV / m.bw
	m.statePerSeq = co.State * 2 * s.StateBytes / m.bw
	if s.AllReduces > 0 {
		m.commPerTok = co.TP * s.ARBytes * (2 * (m.tp - 1) / m.tp) / m.link
		m.commFixed = co.TPLatency * float64(s.AllReduces)
	}
	m.fixed = co.Layer*float64(s.Layers) + co.Step + co.MoE*float64(s.MoELayers)
	if s.nMoE == 0 {
		m.denseStream = s.StreamedBytes(1)
	}
	return m
}

// GGMLPeak returns the matrix-product rate llama.cpp's GEMM kernels for
// GGUF precision p run at on hw, and whether p is block-quantized (its
// GEMMs are then priced at the family's GEMM × CompLow):
//
//   - CUDA, F16: cuBLAS with CUBLAS_COMPUTE_16F, the FP16-accumulate tensor
//     rate (GeForce: twice the FP32-accumulate rate PyTorch engines get);
//   - CUDA, block-quantized: the INT8 tensor rate (current builds' MMQ
//     kernels multiply int8-packed weights and activations with mma; the
//     2023–24 builds dequantized to F16 for cuBLAS above 32 tokens, on
//     GeForce at half the INT8 rate, which CompLow absorbs);
//   - Metal: simdgroup matrix products in FP16, at the FP32 ALU rate the
//     catalog carries for Apple GPUs; quantized tiles are unpacked on the
//     same ALUs (CompLow).
//
// A device without the figure falls back to its BF16 rate.
func GGMLPeak(hw *hardware.GPU, p *Precision) (peak float64, quantized bool) {
	quantized = p.GGUF && p.Name != "f16"
	peak = hw.BF16FLOPS
	if hw.Backend != hardware.CUDA {
		return peak, quantized
	}
	switch {
	case quantized && hw.INT8FLOPS > 0:
		peak = hw.INT8FLOPS
	case !quantized && hw.FP16AccFLOPS > hw.BF16FLOPS:
		peak = hw.FP16AccFLOPS
	}
	return peak, quantized
}

// WeightOnly reports whether p runs as a weight-only kernel on hw: weights
// narrower than 16 bits whose type hw has no tensor cores for (FP4 before
// Blackwell, FP8 on Ampere), or a W4A16 format; the GEMM unpacks every
// weight to BF16. GGUF formats have their own dequantization term.
func WeightOnly(p *Precision, hw *hardware.GPU) bool {
	return !p.GGUF && p.LinearBPW < 15 && hw.PeakFLOPS(p.Compute) == hw.BF16FLOPS
}

// Batch describes the work of one step.
type Batch struct {
	Decode     float64 // sequences decoding one token
	DecodeCtx  float64 // sum of their context lengths
	Prefill    float64 // prefill tokens (all chunks together)
	PrefillAtt float64 // Σ over chunks of chunk·(offset + (chunk+1)/2): causal attention pairs
	PrefillSeq float64 // sequences with a prefill chunk in this step
	// PrefillDone is the number of prefill chunks that finish a prompt (and
	// so compute logits); defaults to PrefillSeq when zero.
	PrefillDone float64
}

// decodeOnly returns b without its prefill work.
func (b Batch) decodeOnly() Batch {
	b.Prefill, b.PrefillAtt, b.PrefillSeq, b.PrefillDone = 0, 0, 0, 0
	return b
}

// Terms is the breakdown of one step time, in seconds.
type Terms struct {
	Compute, Weights, KV, State, Comm, Overhead float64
}

// Total returns the step time.
func (t Terms) Total() float64 {
	return t.Compute + t.Weights + t.KV + t.State + t.Comm + t.Overhead
}

// terms evaluates the basis terms × coefficients for one step.
func (m *stepModel) terms(b Batch) Terms {
	if m.native {
		return m.nat.terms(m.s, b)
	}
	s := m.s
	c := &m.co
	tokens := b.Decode + b.Prefill
	sampled := b.Decode + b.PrefillSeq
	if b.PrefillDone > 0 {
		sampled = b.Decode + b.PrefillDone
	}
	swaCtx := b.DecodeCtx
	if s.Window > 0 {
		swaCtx = min(b.DecodeCtx, b.Decode*float64(s.Window))
	}
	// Attention FLOPs: prefill pairs (sliding-window layers use the same pairs,
	// an over-count only for prompts longer than the window) plus decode reads.
	linear := s.LinearFLOPs*tokens + s.HeadFLOPs*sampled
	attn := s.ScanFLOPs*b.Prefill + s.AttnFLOPs*(b.PrefillAtt+b.DecodeCtx) + s.SWAFLOPs*(b.PrefillAtt+swaCtx)
	var t Terms
	t.Compute = m.linPerPeak*linear + m.attnPerPeak*attn
	if m.gemmPerPeak > 0 {
		// Prompt tokens run through GEMMs at the kernels' own peak; decode
		// tokens keep the matrix-vector price the decode priors were
		// derived with. Linear in the batch, so a step mixture is priced
		// as its mean.
		t.Compute += (m.gemmPerPeak - m.linPerPeak) * s.LinearFLOPs * b.Prefill
	}
	if s.nMoE == 0 {
		t.Weights = m.wPerBW * m.denseStream
	} else {
		t.Weights = m.wPerBW * s.StreamedBytes(tokens)
	}
	t.KV = m.kvPerBW * (s.KVBytes*b.DecodeCtx + s.SWAKVBytes*swaCtx)
	if b.Decode > 0 && c.Ctx > 0 {
		mean := b.DecodeCtx / b.Decode
		full := float64(s.AttnLayers)
		if s.Window > 0 && s.SWAKVBytes > 0 {
			// windowed layers see at most Window tokens
			nSWA := full * s.SWAKVBytes / (s.SWAKVBytes + s.KVBytes)
			t.KV += c.Ctx * ((full-nSWA)*mean + nSWA*min(mean, float64(s.Window)))
		} else {
			t.KV += c.Ctx * full * mean
		}
	}
	t.State = m.statePerSeq * b.Decode
	if s.AllReduces > 0 && tokens > 0 {
		t.Comm = m.commPerTok*tokens + m.commFixed
	}
	t.Overhead = m.fixed + c.Req*(b.Decode+b.PrefillSeq)
	if m.ubatch > 0 || m.dequant > 0 {
		m.llamaPasses(&t, tokens)
	}
	return t
}

// llamaPasses applies llama.cpp's micro-batching to t: a step of more than
// n_ubatch tokens runs as ⌈tokens/n_ubatch⌉ graph passes, each streaming
// the weights, unpacking quantized ones and paying the per-layer and
// per-step overheads once.
func (m *stepModel) llamaPasses(t *Terms, tokens float64) {
	if tokens <= 0 {
		return
	}
	s, c := m.s, &m.co
	passes := 1.0
	if m.ubatch > 0 && tokens > m.ubatch {
		passes = math.Ceil(tokens / m.ubatch)
		t.Weights = m.wMul * passes * s.StreamedBytes(tokens/passes) / m.bw
		t.Overhead += (passes - 1) * (c.Layer*float64(s.Layers) + c.Step + c.MoE*float64(s.MoELayers))
	}
	t.Compute += m.dequant * passes
}

func (m *stepModel) time(b Batch) float64 { return m.terms(b).Total() }

// mixed prices the mean of a step population in which a share q of the
// steps carries all of b's prefill work (chunks q⁻¹ times the mean) and the
// rest decode only. q ≥ 1 (or no prefill) is the mean step itself.
func (m *stepModel) mixed(b Batch, q float64) Terms {
	if q >= 1 || b.Prefill <= 0 || q <= 0 || (m.s.nMoE == 0 && m.ubatch == 0 && m.dequant == 0) {
		// Every term is linear in the batch (no experts, no llama.cpp
		// passes): the mixture is the mean step.
		return m.terms(b)
	}
	pre := b
	pre.Prefill /= q
	pre.PrefillAtt /= q
	pre.PrefillSeq /= q
	pre.PrefillDone /= q
	return blendTerms(m.terms(b.decodeOnly()), m.terms(pre), q)
}

// blendTerms returns (1−f)·a + f·b, term by term.
func blendTerms(a, b Terms, f float64) Terms {
	mix := func(x, y float64) float64 { return (1-f)*x + f*y }
	return Terms{
		Compute:  mix(a.Compute, b.Compute),
		Weights:  mix(a.Weights, b.Weights),
		KV:       mix(a.KV, b.KV),
		State:    mix(a.State, b.State),
		Comm:     mix(a.Comm, b.Comm),
		Overhead: mix(a.Overhead, b.Overhead),
	}
}

// stepModel returns the step model of s under c's GPU, precision,
// coefficients and (llama.cpp) micro-batch.
func (c *Compiled) stepModel(s *Summary) stepModel {
	m := newStepModel(s, c.hw, &c.r.prec, c.co)
	m.ubatch = float64(c.r.ubatch)
	if c.r.spec.step == stepNative {
		m.native, m.nat = true, newNativeTerms(s, &c.nat)
	}
	return m
}
