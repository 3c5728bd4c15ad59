package estimate

import (
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// CheckModel reports a model this deployment cannot load: a TP degree its
// shape cannot be split over, for the engines that shard every layer over
// the TP group (vLLM, SGLang, TensorRT-LLM; the rule is
// architecture.Model.TPViolations, the one "autocompress validate" applies).
//
// It also refuses a precision the model has no tensors for: mxfp4
// quantizes only the routed experts (gpt-oss's checkpoints; vLLM, SGLang
// and TensorRT-LLM load MXFP4 for MoE layers only), so a dense model
// cannot be served in it.
func (c *Compiled) CheckModel(m *architecture.Model) error {
	if c.r.prec.ExpertsOnly && !hasMoE(m) {
		return &UnsupportedError{Flag: "precision",
			Msg:   "precision " + c.r.prec.Name + " quantizes MoE experts only and " + orName(m) + " has no MoE layers",
			Valid: precisionsFor(c.r.eng, c.hw, false)}
	}
	if c.r.eng.Pool() {
		return m.CheckTP(c.r.tp)
	}
	return nil
}

func hasMoE(m *architecture.Model) bool {
	for _, l := range m.Layers {
		if l.MoE != nil {
			return true
		}
	}
	return false
}

func orName(m *architecture.Model) string {
	if m.Name != "" {
		return m.Name
	}
	return "the model"
}

// engineBackends lists the device backends each engine runs on, as the
// estimator models them: vLLM, SGLang and TensorRT-LLM are CUDA servers
// (their CPU and Apple ports are not what the coefficients describe),
// llama.cpp runs on CUDA, Metal and CPUs, and the native engine is a CPU
// engine.
var engineBackends = map[Engine][]hardware.Backend{
	VLLM:     {hardware.CUDA},
	SGLang:   {hardware.CUDA},
	TRTLLM:   {hardware.CUDA},
	LlamaCPP: {hardware.CUDA, hardware.Metal, hardware.CPU},
	Native:   {hardware.CPU},
}

// tensorCoreOnly lists, per engine, the precisions it runs only on GPUs
// whose tensor cores compute that type: TensorRT-LLM has no weight-only
// fallback for FP8 (SM89+: Ada, Hopper, Blackwell) nor for NVFP4
// (Blackwell). vLLM and SGLang run FP8 and FP4 weights on older GPUs with
// weight-only (Marlin-style) kernels, which the estimator prices as such
// (WeightOnly).
var tensorCoreOnly = map[Engine]map[string]bool{
	TRTLLM: {"fp8": true, "fp8-block": true, "nvfp4": true},
}

// CheckEngine reports an engine that does not run on hw's backend, with
// the engines that do.
func CheckEngine(eng Engine, hw *hardware.GPU) error {
	for _, b := range engineBackends[eng] {
		if b == hw.Backend {
			return nil
		}
	}
	return &UnsupportedError{Flag: "engine",
		Msg:   string(eng) + " does not run on " + hw.Name + " (a " + string(hw.Backend) + " device)",
		Valid: EnginesFor(hw)}
}

// EnginesFor lists the engines that run on hw's backend, sorted.
func EnginesFor(hw *hardware.GPU) []string {
	var out []string
	for e, bs := range engineBackends {
		for _, b := range bs {
			if b == hw.Backend {
				out = append(out, string(e))
			}
		}
	}
	sort.Strings(out)
	return out
}

// checkPrecision reports a precision the engine cannot run on hw.
func checkPrecision(eng Engine, hw *hardware.GPU, p *Precision) error {
	if precisionRuns(eng, hw, p) {
		return nil
	}
	return &UnsupportedError{Flag: "precision",
		Msg:   string(eng) + " runs " + p.Name + " only on GPUs with " + strings.ToUpper(p.Compute) + " tensor cores, which " + hw.Name + " lacks",
		Valid: precisionsFor(eng, hw, true)}
}

// precisionRuns reports whether eng has kernels for p on hw.
func precisionRuns(eng Engine, hw *hardware.GPU, p *Precision) bool {
	return !tensorCoreOnly[eng][p.Name] || hw.PeakFLOPS(p.Compute) != hw.BF16FLOPS
}

// precisionsFor lists the precisions eng serves on hw (the experts-only
// ones only when withExperts).
func precisionsFor(eng Engine, hw *hardware.GPU, withExperts bool) []string {
	var out []string
	for _, n := range Precisions() {
		p := precisions[n]
		if p.GGUF == eng.Pool() { // GGUF formats are llama.cpp's (and the native engine's)
			continue
		}
		if p.ExpertsOnly && !withExperts {
			continue
		}
		if !precisionRuns(eng, hw, &p) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// FitTP returns the smallest TP degree above o.TP at which m fits on hw:
// at most the node's GPUs (o.GPUs, else hw.GPUsPerNode) and a degree the
// model's shape can be split over. It returns 0 when none does, and the
// largest degree it considered.
func FitTP(m *architecture.Model, hw *hardware.GPU, eng Engine, o Options, w *workload.Workload) (tp, maxTP int) {
	maxTP = o.GPUs
	if maxTP <= 0 {
		maxTP = max(hw.GPUsPerNode, 1)
	}
	for t := max(o.TP, 1) + 1; t <= maxTP; t++ {
		if eng.Pool() && len(m.TPViolations(t)) > 0 {
			continue
		}
		o2 := o
		o2.TP = t
		c, err := Compile(hw, eng, o2, w, nil)
		if err != nil {
			continue
		}
		var s Summary
		c.Summarize(&s, m)
		if _, ok := c.Memory(&s); ok {
			return t, maxTP
		}
	}
	return 0, maxTP
}
