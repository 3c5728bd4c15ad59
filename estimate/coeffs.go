package estimate

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/hardware"
)

// Coeffs are the fitted efficiencies and overheads of one engine family
// (costmodel.md §4.1). Multipliers are dimensionless (1 = the roofline term
// at peak); overheads are in seconds.
type Coeffs struct {
	Comp      float64 `json:"comp"`       // × FLOPs/peak (1/MFU)
	Weight    float64 `json:"weight"`     // × weight bytes/bandwidth
	KV        float64 `json:"kv"`         // × decode KV bytes/bandwidth
	State     float64 `json:"state"`      // × recurrent-state bytes/bandwidth
	TP        float64 `json:"tp"`         // × all-reduce bytes/link bandwidth
	TPLatency float64 `json:"tp_latency"` // s per all-reduce
	Layer     float64 `json:"layer"`      // s per layer per step
	Step      float64 `json:"step"`       // s per step
	Req       float64 `json:"req"`        // s per request in the batch per step
	MoE       float64 `json:"moe"`        // s per MoE layer per step
	Alpha0    float64 `json:"alpha0"`     // s per request, added to TTFT (ingestion, scheduling, detokenisation)
	// Queue scales the wait of a new prompt behind other prompts' prefill
	// (M/D/1 wait ρ/(2(1−ρ)) × own prefill time, ρ = prefill share of step time).
	Queue float64 `json:"queue"`
	// CompLow multiplies the linear-layer compute term when GEMMs run in FP8
	// or FP4 (their achieved share of the doubled peak is lower than BF16's),
	// and llama.cpp's GEMM term for block-quantized GGUF weights.
	CompLow float64 `json:"comp_low"`
	// Ctx is the decode-attention latency per context token per attention
	// layer of the mean sequence (s): the occupancy-bound critical path of
	// paged-attention kernels, which the KV-bytes term misses at small batch.
	Ctx float64 `json:"ctx"`
	// Burst scales the wait of a closed-loop request behind the prompts of
	// the clients that arrive with it: Burst × (C−1)/2 × one prompt's prefill
	// time (1 = every client in lock-step, 0 = perfectly staggered).
	Burst float64 `json:"burst"`
	// Quant is the dequantization cost of block-quantized GGUF weights
	// (q4_0 … q8_0): each graph pass unpacks every weight once, costing
	// Quant × (linear FLOPs of one token) ÷ peak FLOPS. It is what makes
	// llama.cpp's bandwidth efficiency quantization-specific (costmodel.md
	// §5.4) and larger on GPUs with little ALU per byte (Apple). 0 = none.
	// It is a prior, not fitted: no fitted row uses a quantized GGUF type.
	Quant float64 `json:"quant,omitempty"`
	// GEMM is llama.cpp's 1/MFU for the linear layers of prompt tokens
	// (GGUF weights), at the peak its GEMM kernels reach (GGMLPeak: the
	// FP16-accumulate tensor rate for F16 on CUDA, INT8 for block-quantized
	// weights, the ALU rate on Metal); block-quantized GEMMs cost CompLow ×
	// more. Decode tokens keep Comp on the BF16 rate (the matrix-vector
	// price the decode priors were derived with). 0 = Comp for every token.
	GEMM float64 `json:"gemm,omitempty"`
	// Block multiplies the weight-streaming and linear-compute terms of
	// block-scaled FP8 weights (fp8-block: one scale per 128×128 tile, as
	// DeepSeek-style checkpoints ship) over per-tensor FP8: their GEMM and
	// fused-MoE kernels apply scales per tile and, in some engines, run on
	// slower kernels. 1 = as fast as per-tensor FP8; 0 reads as 1.
	Block float64 `json:"block,omitempty"`
	// Dequant multiplies the weight-streaming and linear-compute terms of
	// weight-only kernels: weights narrower than 16 bits on a GPU without
	// tensor cores for their type (FP4 before Blackwell, FP8 on Ampere) and
	// W4A16 formats (AWQ, GPTQ), which unpack every weight to BF16 inside
	// the GEMM. 1 = as fast as native kernels; 0 reads as 1.
	Dequant float64 `json:"dequant,omitempty"`
	// GDDR multiplies the memory-traffic terms (weights, KV cache, recurrent
	// state) on consumer GPUs (GPUClass "consumer": GeForce cards, whose
	// GDDR6X/GDDR7 reaches less of its peak than the HBM of the datacenter
	// GPUs the pool engines' families are fitted on); GDDRGPUs overrides it
	// per catalog GPU. calibrate sets both from the published consumer
	// serving rows of the family's engine (groundtruth.FitConsumer: one
	// constant over each GPU's measured decode bandwidth efficiency;
	// validate-estimator holds each source out in turn). 0 reads as 1: no
	// consumer rows for the family.
	GDDR     float64            `json:"gddr,omitempty"`
	GDDRGPUs map[string]float64 `json:"gddr_gpus,omitempty"`
	// FirstSteps is how many decode steps a new request's first token
	// waits beyond its own prefill: engines that schedule one step ahead
	// (TRT-LLM's overlap scheduler, vLLM's async scheduling) return the
	// token computed in a step only after the next one is launched.
	FirstSteps float64 `json:"first_steps,omitempty"`
	// AlphaTok is the front end's time per prompt token before the engine
	// sees a request (tokenization, request validation), added to TTFT.
	AlphaTok float64 `json:"alpha_tok,omitempty"`

	// Validation figures written by calibrate: held-out median APE (fractions).
	ErrTTFT       float64 `json:"err_ttft,omitempty"`
	ErrTPOT       float64 `json:"err_tpot,omitempty"`
	ErrThroughput float64 `json:"err_throughput,omitempty"`
	// The 90th percentiles of the same held-out errors.
	ErrTTFTP90       float64 `json:"err_ttft_p90,omitempty"`
	ErrTPOTP90       float64 `json:"err_tpot_p90,omitempty"`
	ErrThroughputP90 float64 `json:"err_throughput_p90,omitempty"`
	// EngineVersion notes the engine versions the data came from; Rows how many rows were fitted.
	EngineVersion string `json:"engine_version,omitempty"`
	Rows          int    `json:"rows,omitempty"`
	Source        string `json:"source,omitempty"`
	// Where and when the fitted rows were measured, as the rows record it:
	// the catalog names of their GPUs and the range of their dates
	// ("2025-10-29 to 2026-04-21"; a year where a source gives no day).
	// The error band is about those GPUs at that time (Band).
	GPUs     []string `json:"gpus,omitempty"`
	Measured string   `json:"measured,omitempty"`
	// Host is the native engine's calibration host (NativeCoeffs.Host),
	// filled in by Compiled.Coeffs; never in a coefficient file.
	Host *hardware.Host `json:"-"`
}

// CoeffFile is the JSON document embedded in the binary.
type CoeffFile struct {
	Comment  string            `json:"comment"`
	Command  string            `json:"command"`
	Families map[string]Coeffs `json:"families"`
}

//go:embed coefficients.json
var embeddedCoeffs []byte

var defaultCoeffs = mustCoeffs(embeddedCoeffs)

//go:embed priors.json
var embeddedPriors []byte

var priorCoeffs = mustCoeffs(embeddedPriors)

// PriorCoeffs returns the fixed starting values of calibration (priors.json),
// so that refitting does not depend on the previously fitted file.
func PriorCoeffs() *CoeffFile { return priorCoeffs }

func mustCoeffs(b []byte) *CoeffFile {
	f, err := ParseCoeffs(b)
	if err != nil {
		panic("estimate: embedded coefficients.json: " + err.Error())
	}
	return f
}

// ParseCoeffs reads a coefficient file and checks every value.
func ParseCoeffs(b []byte) (*CoeffFile, error) {
	var f CoeffFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("coefficient file: %w", err)
	}
	if len(f.Families) == 0 {
		return nil, fmt.Errorf("coefficient file: no families")
	}
	for name, c := range f.Families {
		if c.CompLow == 0 {
			c.CompLow = 1
		}
		if c.Block == 0 {
			c.Block = 1
		}
		if c.Dequant == 0 {
			c.Dequant = 1
		}
		f.Families[name] = c
		vec := c.vector()
		vals := append(vec[:], c.GEMM, c.Quant, c.GDDR)
		for _, v := range c.GDDRGPUs {
			vals = append(vals, v)
		}
		for _, v := range vals {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("coefficient file: family %s has an invalid value %g", name, v)
			}
		}
	}
	return &f, nil
}

// DefaultCoeffs returns the embedded coefficient file.
func DefaultCoeffs() *CoeffFile { return defaultCoeffs }

// Family returns the coefficients for a family ("vllm", "llamacpp-metal", ...),
// falling back to the nearest fitted family.
func (f *CoeffFile) Family(name string) (Coeffs, string) {
	if c, ok := f.Families[name]; ok {
		return c, name
	}
	for _, fb := range fallbacks[name] {
		if c, ok := f.Families[fb]; ok {
			return c, fb
		}
	}
	names := make([]string, 0, len(f.Families))
	for n := range f.Families {
		names = append(names, n)
	}
	sort.Strings(names)
	return f.Families[names[0]], names[0]
}

var fallbacks = map[string][]string{
	"llamacpp-metal": {"llamacpp-cuda"},
	"llamacpp-cpu":   {"native-cpu", "llamacpp-cuda"},
	"native-cpu":     {"llamacpp-cpu", "llamacpp-cuda"},
	"native-cuda":    {"llamacpp-cuda"},
	"native-metal":   {"llamacpp-metal", "llamacpp-cuda"},
	"sglang":         {"vllm"},
}

// The fitted coefficients as a vector, in the order of CoeffNames.
func (c *Coeffs) vector() [NumCoeffs]float64 {
	return [NumCoeffs]float64{c.Comp, c.Weight, c.KV, c.State, c.TP, c.TPLatency, c.Layer, c.Step, c.Req, c.MoE, c.Alpha0, c.Queue, c.CompLow, c.Ctx, c.Burst, c.Block, c.Dequant, c.FirstSteps, c.AlphaTok}
}

func (c *Coeffs) setVector(v [NumCoeffs]float64) {
	c.Comp, c.Weight, c.KV, c.State, c.TP, c.TPLatency, c.Layer, c.Step, c.Req, c.MoE, c.Alpha0, c.Queue, c.CompLow, c.Ctx, c.Burst, c.Block, c.Dequant, c.FirstSteps, c.AlphaTok =
		v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[17], v[18]
}

// NumCoeffs is the length of the coefficient vector.
const NumCoeffs = 19

// CoeffNames names the entries of the coefficient vector.
var CoeffNames = [NumCoeffs]string{"comp", "weight", "kv", "state", "tp", "tp_latency", "layer", "step", "req", "moe", "alpha0", "queue", "comp_low", "ctx", "burst", "block", "dequant", "first_steps", "alpha_tok"}

// GDDRFactor returns the memory-traffic factor of hw under c: GDDRGPUs's
// entry for hw, else GDDR, on consumer GPUs; 1 elsewhere or when unset.
func (c *Coeffs) GDDRFactor(hw *hardware.GPU) float64 {
	if GPUClass(hw) != "consumer" {
		return 1
	}
	f := c.GDDR
	if v, ok := c.GDDRGPUs[hw.Name]; ok && v > 0 {
		f = v
	}
	if f <= 0 {
		return 1
	}
	return f
}

// Vector returns the coefficients in CoeffNames order.
func (c Coeffs) Vector() [NumCoeffs]float64 { return c.vector() }

// WithVector returns c with the coefficient values replaced.
func (c Coeffs) WithVector(v [NumCoeffs]float64) Coeffs { c.setVector(v); return c }
