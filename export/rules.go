package export

import (
	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
)

// ForEngine returns the load rules of the serving engine that the estimator
// prices as e: the entry of the same name. The estimator's engine table
// (estimate.EngineSpec) and this one name the same engines, but for "hf"
// (transformers loads checkpoints; the estimator prices no such server):
// TestEveryEstimatorEngineHasRules and TestTablesNameTheSameEngines fail
// when an engine is added to one and not the other.
func ForEngine(e estimate.Engine) (Capabilities, bool) {
	if _, ok := e.Spec(); !ok {
		return Capabilities{}, false
	}
	c, ok := engines[string(e)]
	return c, ok
}

// Engine returns the estimator's engine of the same name, if the
// estimator prices it (ForEngine's inverse).
func (c Capabilities) Engine() (estimate.Engine, bool) {
	e := estimate.Engine(c.Name)
	if _, ok := e.Spec(); !ok {
		return "", false
	}
	return e, true
}

// Loads reports whether the engine loads a child of shape m, written in the
// format package architecture picks for it (its native class when uniform,
// DeciLM block_configs for per-layer Llama-family shapes), served at
// tensor-parallel degree tp (≤ 1: none). It applies exactly the shape rules
// ValidateModel and ValidateDir report (they share checkModel and checkTP),
// without building messages or reading files, so that a search can test
// candidates with it and can never propose a shape the validators refuse.
// Rules that need the written files (block_configs' raw fields, the
// remote-code files, the tensors) are not part of a shape and are checked
// only by ValidateDir.
func (c Capabilities) Loads(m *architecture.Model, tp int) bool {
	r := Report{quiet: true}
	checkModel(&r, m, c, nil)
	if r.failed == 0 {
		checkTP(&r, m, c, tp)
	}
	return r.failed == 0
}

// Check is Loads with the violations spelled out (the report ValidateModel
// gives, plus the TP rules).
func (c Capabilities) Check(m *architecture.Model, tp int) *Report {
	r := &Report{Engine: c.Name, Arch: m.Arch, Layers: len(m.Layers)}
	checkModel(r, m, c, m.Raw)
	checkTP(r, m, c, tp)
	return r
}

// PerLayer reports whether the engine loads per-layer shapes (FFN widths,
// KV groups, removed sub-blocks) for parent m: only through DeciLM
// block_configs, hence only for Llama-family layers. Where the engine's
// converter takes a DeciLM child's tokenizer only for one vocabulary size
// (DeciLMTokenizer), a parent of another is assumed to fail it: its
// tokenizer is not part of the shape (ValidateDir reads it).
func (c Capabilities) PerLayer(m *architecture.Model) bool {
	if !c.DeciLM {
		return false
	}
	if tr := c.DeciLMTokenizer; tr != nil && m.Vocab != tr.KeptVocab {
		return false
	}
	p := m
	for i := range p.Layers {
		if p.Layers[i].Mamba != nil || p.Layers[i].MoE != nil {
			return false
		}
	}
	if !p.Family().DeciLMBlocks {
		return false
	}
	for i := range p.Layers {
		if a := p.Layers[i].Attention; a != nil && (a.QKNorm || a.Sinks || a.SlidingWindow != 0 || a.QKVBias != a.OutBias) {
			return false
		}
		if x := p.Layers[i].MLP; x != nil && !x.Gated {
			return false
		}
	}
	return true
}
