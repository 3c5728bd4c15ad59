// Package estimate predicts what serving a model costs on one deployment: a
// GPU (package hardware), a serving engine (vLLM, SGLang, TensorRT-LLM,
// llama.cpp or the native engine), a weight precision and a workload
// (package workload). Estimate prices one deployment; EstimateWith takes
// other coefficients and can skip the simulation; package estimate/scenarios
// prices a CSV file of deployments (estimate --scenarios).
//
// # Engines
//
// Every serving engine is one entry of the engine table (engines.go,
// EngineSpec): the devices it runs on, the precisions and KV types it
// takes, its defaults, its memory rule and scheduler, its coefficients'
// key, its serving command, how the text names its parts and what to try
// when it does not fit. Code elsewhere reads those facts and never tests
// an engine's name (TestNoEngineSwitches); an engine not in the table is
// an error. A new engine is one entry plus its coefficients
// (TestToyEngineIsOneEntry).
//
// # Memory
//
// Memory applies each engine's allocation rule (its entry's memory rule;
// costmodel.md §2–3):
// weights per tensor class at the deployed precision, KV cache per layer
// (GQA, sliding windows, TP replication of KV heads), Mamba state per
// sequence, activations, engine and CUDA overheads, then the KV capacity in
// tokens and the number of full-length requests that fit. A deployment that
// does not fit returns a *FitError naming the term and the shortfall.
//
// # Time
//
// One engine step costs roofline basis terms (FLOPs ÷ peak, weight and KV
// bytes ÷ bandwidth, state bytes, all-reduce bytes ÷ link) multiplied by a few
// coefficients fitted per engine family, plus per-layer, per-step and
// per-request overheads. Two predictors share that step model:
//
//   - Simulator: a continuous-batching simulation (chunked prefill, KV
//     capacity, FCFS admission; closed loop, Poisson or offline) giving mean
//     and p90 TTFT, TPOT and E2E and throughputs.
//   - Compiled.Price: an analytic steady state of the same model, with no
//     simulation and no allocation, for architecture search. In a closed
//     loop of c clients, TPOT is my decode step carrying the others' decodes
//     and their prefill chunks spread over my decode steps; TTFT is α0 + my
//     own prefill steps + half a step + an M/D/1 wait behind the others'
//     prefill (capped at the c−1 prompts a closed loop can hold) + a
//     lock-step burst term for clients that arrive together.
//
// # llama.cpp
//
// llama.cpp has three coefficient families: "llamacpp-cuda@2024" (fitted on
// Argonne's 2024 runs; used for HBM datacenter GPUs, see DatacenterHBM),
// and "llamacpp-cuda" and "llamacpp-metal" for GDDR cards and Apple silicon,
// priors derived from the batch-1 decode efficiencies of costmodel.md §5.4
// (a fixed cost per layer, a weight-streaming efficiency and a
// dequantization term for block-quantized GGUF weights that makes η
// quantization-specific). Both predictors model llama-server: -np slots on a
// shared context, requests beyond the slots queue, each iteration gathers
// one token per generating slot and then prompt tokens up to n_batch (2048),
// computed in n_ubatch (512) passes that each stream the weights once.
//
// # The native engine
//
// The native engine (package engine, "--engine native") is priced by its
// own rules (native.go): the weights as the checkpoint stores them (bf16
// read in place), a float32 KV cache, step buffers and a
// fitted process cost and garbage term for memory (as bench-serve's peak
// RSS); a step model linear in thirteen coefficients on the machine's
// measured sgemm rate, each step priced on its busiest thread as the
// engine's kernels split it (linear FLOPs on the serial dot-product path
// and on the packed path with its per-call fork and weight packing,
// attention FLOPs and tasks, weight bytes, elementwise width, per
// attention and per MLP sub-block, per step, per sequence); and
// engine.Serve's closed loop
// followed step by step. Its coefficients live in native_coefficients.json
// (embedded), fitted by "autocompress calibrate-native" on this machine
// (package estimate/nativecal); a local calibration at NativeCoeffsPath
// overrides them for estimate, search and the pipeline alike.
//
// The coefficients ship in coefficients.json (embedded) and are refitted by
// "autocompress calibrate" from public measurements (package
// estimate/groundtruth); "autocompress validate-estimator" reports the
// held-out error; estimate/ACCURACY.md records the protocol and the figures.
package estimate

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// Result is a full estimate.
type Result struct {
	Model    string
	GPU      string
	Engine   Engine
	Family   string // coefficient family used
	Workload string
	Memory   MemoryReport
	// Latency comes from the simulation; Analytic from the fast path.
	Latency  Latency
	Analytic Latency
	Params   struct{ Total, Active float64 }
	Coeffs   Coeffs
	// PrecisionFromConfig is set when the precision came from the
	// checkpoint's quantization_config (EstimateWith).
	PrecisionFromConfig bool
}

// Estimate prices m on hw with engine eng, options o and workload w: the
// memory plan, the simulated latency and the analytic one, with the
// embedded coefficients.
func Estimate(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options, w *workload.Workload) (*Result, error) {
	return EstimateWith(m, hw, eng, o, w, nil, false)
}

// EstimateWith is Estimate with the coefficients of cf (nil: the embedded
// ones) and, with analyticOnly, no simulation (Latency is then Analytic).
// An empty o.Precision on an engine with a KV pool takes what the
// checkpoint's quantization_config says (PrecisionFromConfig), else bf16;
// on llama.cpp an MXFP4 checkpoint (gpt-oss) is priced as its GGUF,
// mxfp4_moe (EngineSpec.ConfigPrecisionAs).
// A model that does not fit returns the memory plan with a *FitError; a
// --tp that does not split the model an *architecture.TPError.
func EstimateWith(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options, w *workload.Workload, cf *CoeffFile, analyticOnly bool) (*Result, error) {
	fromConfig := false
	if sp, ok := eng.Spec(); ok && (sp.QuantConfig || sp.ConfigPrecisionAs != nil) && o.Precision == "" {
		p, err := ConfigPrecision(m.Raw)
		if err != nil && sp.QuantConfig {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if !sp.QuantConfig {
			p = sp.ConfigPrecisionAs[p] // "" (the default) when not mapped, or unreadable
		}
		o.Precision, fromConfig = p, p != ""
	}
	var co *Coeffs
	if cf != nil {
		c, _ := cf.Family(eng.Family(hw))
		co = &c
	}
	c, err := Compile(hw, eng, o, w, co)
	if err != nil {
		return nil, err
	}
	if err := c.CheckModel(m); err != nil {
		return nil, err
	}
	var s Summary
	c.Summarize(&s, m)
	res := &Result{Model: m.Name, GPU: hw.Name, Engine: eng, Family: c.family, Workload: w.String(), Coeffs: c.Coeffs(),
		PrecisionFromConfig: fromConfig}
	res.Params.Total, res.Params.Active = s.TotalParams, s.ActiveParams
	ok := planMemory(&res.Memory, &s, hw, &c.r, c.ctx, c.r.maxSeqs)
	if !ok {
		f := res.Memory.Fail
		f.FitsAtTP, f.MaxTP = FitTP(m, hw, eng, o, w)
		return res, &f
	}
	p := c.PriceSummary(&s)
	res.Analytic = p.Latency
	if analyticOnly {
		res.Latency = p.Latency
		return res, nil
	}
	var sim Simulator
	l, err := c.Simulate(&sim, &s)
	if err != nil {
		return res, err
	}
	res.Latency = l
	return res, nil
}

// LatencyOf is Estimate's simulated latency alone.
func LatencyOf(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options, w *workload.Workload) (Latency, error) {
	r, err := Estimate(m, hw, eng, o, w)
	if err != nil {
		return Latency{}, err
	}
	return r.Latency, nil
}
