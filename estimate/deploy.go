package estimate

import (
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
	if c.r.prec.ExpertsOnly && !m.HasMoE() {
		return &UnsupportedError{Flag: "precision",
			Msg:   "precision " + c.r.prec.Name + " quantizes MoE experts only and " + orName(m) + " has no MoE layers",
			Valid: precisionsFor(c.r.spec, c.hw, false)}
	}
	if c.r.spec.ShardsTP {
		return m.CheckTP(c.r.tp)
	}
	return nil
}

func orName(m *architecture.Model) string {
	if m.Name != "" {
		return m.Name
	}
	return "the model"
}

// checkPrecision reports a precision the engine cannot run on hw.
func checkPrecision(sp *EngineSpec, hw *hardware.GPU, p *Precision) error {
	if precisionRuns(sp, hw, p) {
		return nil
	}
	return &UnsupportedError{Flag: "precision",
		Msg:   string(sp.Name) + " runs " + p.Name + " only on GPUs with " + strings.ToUpper(p.Compute) + " tensor cores, which " + hw.Name + " lacks",
		Valid: precisionsFor(sp, hw, true)}
}

// precisionRuns reports whether the engine has kernels for p on hw (see
// EngineSpec.TensorCoreOnly).
func precisionRuns(sp *EngineSpec, hw *hardware.GPU, p *Precision) bool {
	return !sp.TensorCoreOnly[p.Name] || hw.PeakFLOPS(p.Compute) != hw.BF16FLOPS
}

// precisionsFor lists the precisions the engine serves on hw (the
// experts-only ones only when withExperts): its one precision when it has
// a FixedPrecision, else those of its format family (EngineSpec.GGUF).
func precisionsFor(sp *EngineSpec, hw *hardware.GPU, withExperts bool) []string {
	if sp.FixedPrecision != "" {
		return []string{sp.FixedPrecision}
	}
	var out []string
	for _, n := range Precisions() {
		p := precisions[n]
		if p.GGUF != sp.GGUF {
			continue
		}
		if p.ExpertsOnly && !withExperts {
			continue
		}
		if !precisionRuns(sp, hw, &p) {
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
	sp, ok := eng.Spec()
	if !ok {
		return 0, maxTP
	}
	for t := max(o.TP, 1) + 1; t <= maxTP; t++ {
		if sp.ShardsTP && len(m.TPViolations(t)) > 0 {
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
