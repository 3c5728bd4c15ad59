package search

import (
	"fmt"
	"math"
	"slices"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/importance"
)

// Settings are the engine settings of one deployment that the search may
// choose: the weight precision, the KV-cache type, the sequence limit
// (llama.cpp: the slots -np) and the KV memory fraction of the pool
// engines. Zero values are the engine's defaults.
type Settings struct {
	Precision   string  `json:"precision"`
	KVDType     string  `json:"kv_dtype"`
	MaxNumSeqs  int     `json:"max_num_seqs,omitempty"`
	MemFraction float64 `json:"mem_fraction,omitempty"`
}

// SpaceOptions say what the search may change.
type SpaceOptions struct {
	// Engine is the engine the estimator prices; ServeOn the one the child
	// must load in (its rules restrict the shapes; default: Engine's).
	Engine  estimate.Engine
	ServeOn export.Capabilities
	// TP is the tensor-parallel degree (0: 1).
	TP int
	// Precisions and KVDTypes list the values allowed (default: the
	// engine's default only). Settings searched are their product with the
	// engine settings below.
	Precisions, KVDTypes []string
	// MaxNumSeqs and MemFraction fix those settings (0: searched).
	MaxNumSeqs  int
	MemFraction float64
	// Concurrency is the workload's (for the slot choices). MaxMemory is
	// the memory budget in bytes (0: none) and DeviceBytes the GPU's
	// memory: with both, a pool engine's memory fraction is searched,
	// including the fraction that fills the budget.
	Concurrency            int
	MaxMemory, DeviceBytes float64
	// KeepLayers lists parent layers that must not be removed.
	KeepLayers []int
	// Uniform restricts the space to Minitron++'s: the same widths in every
	// layer and every layer kept.
	Uniform bool
	// MinWidth is the smallest fraction of a width kept (0: the default,
	// 0.25 for autocompress, Minitron's 0.6 for the uniform space).
	MinWidth float64
	// MaxDepth is the largest fraction of layers removed (nil: 0.5, 0 in
	// the uniform space; a pointer to 0 removes no layer).
	MaxDepth *float64
}

// Space is the set of candidate shapes and settings for one parent and
// deployment. Every width list is sorted descending and starts with the
// parent's value, so the parent itself is always a candidate.
type Space struct {
	Parent  *architecture.Model
	Engine  estimate.Engine
	ServeOn export.Capabilities
	TP      int
	// PerLayer is true when the serve-on engine loads per-layer shapes
	// (DeciLM block_configs; Llama-family parents only).
	PerLayer bool
	// Hidden lists the hidden sizes; Heads the query-head counts (global:
	// every format has one num_attention_heads; a layer with k KV groups
	// keeps Heads/k queries in each, at most the parent's per group).
	Hidden, Heads []int
	// MLP lists the MLP widths (per layer when PerLayer, else uniform);
	// KVGroups the per-layer KV-group counts (PerLayer only; otherwise the
	// parent's count); Mamba the Mamba heads per layer (uniform); Experts
	// the routed experts every MoE layer keeps (uniform: no engine loads
	// per-layer expert counts).
	MLP, KVGroups, Mamba, Experts []int
	// MambaHeadDim lists the channels per Mamba head (uniform:
	// mamba_head_dim is global), Minitron-SSM's head-dimension pruning.
	MambaHeadDim []int
	// ExpertScores rank the experts Plan keeps (nil: the lowest indices,
	// and Notes say so); Execute sets them from the request or, for a
	// checkpoint, from the structural prior.
	ExpertScores *importance.ExpertScores
	// RemoveSubBlocks allows removing attention or MLP alone (PerLayer).
	RemoveSubBlocks bool
	// The serve-on engine's loader rules on per-layer (DeciLM) shapes
	// (export.Capabilities.DeciLMUniformKV, DeciLMFirstAttention,
	// DeciLMAttentionNeedsFFN), so that no candidate breaks them:
	// UniformKV makes the KV-group count one global choice (the same in
	// every attention block); KeepAttention marks the layers whose
	// attention stays (neither its attention nor the layer is removed);
	// AttentionNeedsMLP drops the options that remove a layer's MLP but
	// keep its attention.
	UniformKV         bool
	KeepAttention     []bool
	AttentionNeedsMLP bool
	// Removable marks layers that may be removed; MaxRemoved bounds how many.
	Removable  []bool
	MaxRemoved int
	Settings   []Settings
	// Align is the width granularity used for hidden and MLP widths.
	AlignHidden, AlignMLP int
	// Notes say, in words, what the space holds and why.
	Notes []string
}

// KeepLayersError is a kept layer (SettingKeepLayers) outside the parent.
type KeepLayersError struct{ Index, Layers int }

func (e *KeepLayersError) Error() string { return e.Spell(nil) }

// Spell returns the message with the setting spelled by spell.
func (e *KeepLayersError) Spell(spell func(name string) string) string {
	return fmt.Sprintf("%s: layer %d is out of range (the parent has layers 0 to %d)", Speller(spell).spell(SettingKeepLayers), e.Index, e.Layers-1)
}

func widths(parent, step int, minFrac float64, divisor int) []int {
	out := []int{parent}
	floor := int(float64(parent)*minFrac + 0.5)
	for w := (parent - 1) / step * step; w >= max(floor, step); w -= step {
		if divisor > 1 && w%divisor != 0 {
			continue
		}
		out = append(out, w)
	}
	return out
}

// coarse keeps at most n of the descending widths ws, evenly spaced, the
// first (the parent's) and the last always: a uniform space enumerates the
// product of its global lists, which a fine grid would make too large.
func coarse(ws []int, n int) []int {
	if len(ws) <= n {
		return ws
	}
	out := make([]int, 0, n)
	for i := range n {
		out = append(out, ws[i*(len(ws)-1)/(n-1)])
	}
	return out
}

func divisorsDesc(n int, keep func(int) bool) []int {
	var out []int
	for d := n; d >= 1; d-- {
		if n%d == 0 && keep(d) {
			out = append(out, d)
		}
	}
	return out
}

// NewSpace builds the search space for parent under o.
func NewSpace(parent *architecture.Model, o SpaceOptions) (*Space, error) {
	if len(parent.Layers) == 0 {
		return nil, fmt.Errorf("search: the parent has no layers")
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if o.ServeOn.Name == "" {
		c, ok := export.ForEngine(o.Engine)
		if !ok {
			return nil, fmt.Errorf("search: no load rules for engine %s", o.Engine)
		}
		o.ServeOn = c
	}
	sp := &Space{Parent: parent, Engine: o.Engine, ServeOn: o.ServeOn, TP: o.TP}
	n := len(parent.Layers)
	sp.Removable = make([]bool, n)
	for i := range sp.Removable {
		sp.Removable[i] = !o.Uniform
	}
	for _, k := range o.KeepLayers {
		if k < 0 || k >= n {
			return nil, &KeepLayersError{Index: k, Layers: n}
		}
		sp.Removable[k] = false
	}
	if w := o.ServeOn.EvenLayerWindows; w != nil && parent.Arch == w.Arch && !o.Uniform && n > 1 {
		lr := w.Rule
		// The engine windows a gpt-oss layer by its index: removing a layer
		// shifts the index of every layer after it, so only the last layer
		// can go without moving a kept layer's window (export's rule; the
		// per-layer menus cannot express removing layers in pairs).
		for i := range n - 1 {
			sp.Removable[i] = false
		}
		sp.Notes = append(sp.Notes, fmt.Sprintf("only the last layer may be removed: %s places %s's sliding windows by layer index, not layer_types, so removing any other layer moves the windows of the layers after it [%s]", o.ServeOn.Name, parent.Family().ModelType, lr.ID))
	}
	if !o.Uniform {
		sp.MaxRemoved = int(float64(n) * *o.MaxDepth)
		if len(o.KeepLayers) > 0 {
			sp.Notes = append(sp.Notes, fmt.Sprintf("layers %v are kept as asked; their sub-blocks are kept too", o.KeepLayers))
		}
		sp.Notes = append(sp.Notes, fmt.Sprintf("at most %d of %d layers removed (%.0f %%)", sp.MaxRemoved, n, 100**o.MaxDepth))
	} else {
		sp.Notes = append(sp.Notes, "Minitron++ space: the same widths in every layer, every layer kept, widths cut by at most 40 %")
	}
	precs := o.Precisions
	if len(precs) == 0 {
		precs = []string{""}
	}
	// The width granularity is the engine's (estimate.EngineSpec.Align):
	// tensor-core tiles on the GPU engines (Minitron's hidden 256; FFN 256,
	// also DeciLM's multiple), GGUF's super-blocks for llama.cpp's k-quants,
	// the SIMD width for the native engine. Per-layer widths are written as
	// DeciLM block_configs and are multiples of 256 whatever the engine.
	spec, err := estimate.LookupSpec(o.Engine)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	sp.AlignHidden, sp.AlignMLP = spec.AlignFor(precs[0])
	for _, p := range precs[1:] {
		h, m := spec.AlignFor(p)
		sp.AlignHidden, sp.AlignMLP = max(sp.AlignHidden, h), max(sp.AlignMLP, m)
	}
	if o.Uniform && sp.AlignHidden < 256 && parent.Hidden >= 2048 {
		// Minitron's granularity: hidden 256, FFN 512.
		sp.AlignHidden = 256
	}
	sp.PerLayer = !o.Uniform && o.ServeOn.PerLayer(parent)
	if tr := o.ServeOn.DeciLMTokenizer; !o.Uniform && !sp.PerLayer && tr != nil && parent.Family().DeciLMBlocks && parent.Vocab != tr.KeptVocab {
		sp.Notes = append(sp.Notes, fmt.Sprintf("no per-layer shapes: they are written as DeciLM block_configs, and %s's converter takes a DeciLM vocabulary other than %d only from a Llama BPE tokenizer with byte_fallback (this parent's vocabulary is %d) [%s]",
			o.ServeOn.Name, tr.KeptVocab, parent.Vocab, tr.ID))
	}
	mlpAlign := sp.AlignMLP
	if sp.PerLayer {
		mlpAlign = export.DeciLMFFNMultiple
	} else if o.Uniform && parent.Hidden >= 2048 {
		mlpAlign = 512
	}
	sp.Hidden = widths(parent.Hidden, sp.AlignHidden, o.MinWidth, 1)
	if !sp.PerLayer && !o.Uniform {
		sp.Hidden = coarse(sp.Hidden, 12)
	}
	var moe *architecture.MoE
	var attn *architecture.Attention
	var mlp *architecture.MLP
	var mamba *architecture.Mamba
	for i := range parent.Layers {
		l := &parent.Layers[i]
		if l.MoE != nil && moe == nil {
			moe = l.MoE
		}
		if l.Attention != nil && attn == nil {
			attn = l.Attention
		}
		if l.MLP != nil && (mlp == nil || l.MLP.Width > mlp.Width) {
			mlp = l.MLP
		}
		if l.Mamba != nil && mamba == nil {
			mamba = l.Mamba
		}
	}
	if attn != nil {
		hpg := attn.Heads / attn.KVHeads
		minHPG := max(1, int(float64(hpg)*o.MinWidth+0.5))
		for _, d := range divisorsDesc(hpg, func(d int) bool { return d >= minHPG && (d*attn.KVHeads)%o.TP == 0 }) {
			sp.Heads = append(sp.Heads, d*attn.KVHeads)
		}
		if len(sp.Heads) == 0 || sp.Heads[0] != attn.Heads {
			sp.Heads = append([]int{attn.Heads}, sp.Heads...)
		}
		sp.KVGroups = []int{attn.KVHeads}
		if sp.PerLayer {
			// Per-layer KV groups: powers-of-two ratios of the parent's count
			// (vLLM's KV page sizes must divide each other), divisible by TP
			// or replicating evenly over it.
			for k := attn.KVHeads / 2; k >= 1 && attn.KVHeads%k == 0; k /= 2 {
				if k%o.TP == 0 || o.TP%k == 0 {
					sp.KVGroups = append(sp.KVGroups, k)
				}
				if k%2 != 0 {
					break
				}
			}
			sp.RemoveSubBlocks = true
			sp.Notes = append(sp.Notes, fmt.Sprintf("per-layer MLP widths (multiples of %d), KV groups %v and removed attention or MLP sub-blocks: %s loads DeciLM block_configs",
				export.DeciLMFFNMultiple, sp.KVGroups, o.ServeOn.Name))
			if lr := o.ServeOn.DeciLMUniformKV; lr != nil {
				sp.UniformKV = true
				sp.Notes = append(sp.Notes, fmt.Sprintf("KV groups the same in every attention block, chosen from %v: %s refuses per-layer KV groups [%s]", sp.KVGroups, o.ServeOn.Name, lr.ID))
			}
			if lr := o.ServeOn.DeciLMFirstAttention; lr != nil {
				sp.KeepAttention = make([]bool, n)
				sp.KeepAttention[0] = true
				sp.Notes = append(sp.Notes, fmt.Sprintf("layer 0 keeps its attention and is not removed: %s fails on a first block without attention [%s]", o.ServeOn.Name, lr.ID))
			}
			if lr := o.ServeOn.DeciLMAttentionNeedsFFN; lr != nil {
				sp.AttentionNeedsMLP = true
				sp.Notes = append(sp.Notes, fmt.Sprintf("no layer loses its MLP but keeps its attention: %s would drop that attention's output [%s]", o.ServeOn.Name, lr.ID))
			}
		} else if !o.Uniform {
			sp.Notes = append(sp.Notes, fmt.Sprintf("uniform widths: %s loads no per-layer shapes for %s (only whole layers are removed)", o.ServeOn.Name, parent.Arch))
		}
		sp.Notes = append(sp.Notes, fmt.Sprintf("head_dim %d unchanged; query heads (global) from %v, kept equally in every KV group", attn.HeadDim, sp.Heads))
	}
	if mlp != nil {
		div := 1
		if o.TP > 1 {
			div = o.TP
		}
		sp.MLP = widths(mlp.Width, mlpAlign, o.MinWidth, div)
		if !sp.PerLayer && !o.Uniform {
			sp.MLP = coarse(sp.MLP, 12)
		}
	}
	if mamba != nil {
		step := mamba.Groups
		if o.TP > 1 {
			step = lcm(step, o.TP)
		}
		if o.Uniform {
			step = lcm(step, 8) // Minitron's mamba_num_heads granularity
		}
		sp.Mamba = widths(mamba.Heads, step, o.MinWidth, 1)
		if !o.Uniform {
			sp.Mamba = coarse(sp.Mamba, 6)
		}
		sp.Notes = append(sp.Notes, fmt.Sprintf("Mamba heads per layer (the same in every Mamba layer) from %d to %d in steps of %d", sp.Mamba[0], sp.Mamba[len(sp.Mamba)-1], step))
		sp.MambaHeadDim = widths(mamba.HeadDim, mambaHeadDimStep, o.MinWidth, 1)
		if !o.Uniform {
			sp.MambaHeadDim = coarse(sp.MambaHeadDim, 4)
		}
		sp.Notes = append(sp.Notes, fmt.Sprintf("Mamba head_dim (global) from %v", sp.MambaHeadDim))
	}
	if moe != nil {
		sp.Experts = expertCounts(moe, parent, o)
		sp.Notes = append(sp.Notes, fmt.Sprintf("routed experts from %d to %d, the same in every MoE layer (%s loads one num_experts; per-layer expert counts load nowhere); the top-k (%d), the expert width and the shared experts are kept",
			sp.Experts[0], sp.Experts[len(sp.Experts)-1], o.ServeOn.Name, moe.TopK))
	}
	sp.Settings = settingsFor(o, precs)
	return sp, nil
}

// mambaHeadDimStep is the granularity of Mamba head-dimension pruning
// (ModelOpt's Minitron searches mamba_head_dim in steps of 8: 64, 56, 48).
const mambaHeadDimStep = 8

// expertCounts lists the routed-expert counts of the space, descending
// from the parent's: steps of 1/16 of the parent's count (at least 1,
// multiples of 8 from 64 experts, and of the config's n_group for a
// grouped router), never fewer than the top-k or MinWidth of the parent's,
// and at least TP (vLLM's Qwen3MoeSparseMoeBlock refuses fewer experts
// than the TP size).
func expertCounts(x *architecture.MoE, parent *architecture.Model, o SpaceOptions) []int {
	step := max(1, x.Experts/16)
	if x.Experts >= 64 {
		step = max(8, step/8*8)
	}
	if g := rawInt(parent.Raw, "n_group"); g > 1 {
		step = lcm(step, g)
	}
	floor := max(x.TopK, int(float64(x.Experts)*o.MinWidth+0.5), o.TP, 1)
	out := []int{x.Experts}
	for n := (x.Experts - 1) / step * step; n >= floor; n -= step {
		out = append(out, n)
	}
	if !o.Uniform {
		out = coarse(out, 8)
	}
	return out
}

// rawInt reads an integer key of a config (0 when absent).
func rawInt(raw map[string]any, key string) int {
	switch v := raw[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	case interface{ Int64() (int64, error) }:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

func lcm(a, b int) int {
	g, x := a, b
	for x != 0 {
		g, x = x, g%x
	}
	return a / g * b
}

// settingsFor lists the engine settings to try: the precisions and KV types
// allowed, times the KV memory fraction of a pool engine when a memory
// budget is set (the fraction then decides the footprint), or llama.cpp's
// and the native engine's slot counts (each slot holds one context).
func settingsFor(o SpaceOptions, precs []string) []Settings {
	kvs := o.KVDTypes
	if len(kvs) == 0 {
		kvs = []string{""}
	}
	fracs := []float64{o.MemFraction}
	seqs := []int{o.MaxNumSeqs}
	if o.Engine.Pool() {
		if o.MemFraction == 0 && o.MaxMemory > 0 && o.DeviceBytes > 0 {
			// The pool takes fraction × device; the CUDA context (~0.6 GiB)
			// lies outside it. fill is the fraction that fills the budget.
			fill := math.Floor((o.MaxMemory-0.7*(1<<30))/o.DeviceBytes*1000) / 1000
			fracs = fracs[:0]
			for _, f := range []float64{fill, math.Round((fill-0.02)*1000) / 1000, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4, 0.3} {
				if f > 0.05 && f <= min(fill, 0.95) && !slices.Contains(fracs, f) {
					fracs = append(fracs, f)
				}
			}
			if len(fracs) == 0 {
				fracs = []float64{0.05}
			}
		}
	} else if o.MaxNumSeqs == 0 && o.Concurrency > 1 {
		seqs = seqs[:0]
		for s := o.Concurrency; s >= 1; s /= 2 {
			seqs = append(seqs, s)
		}
	}
	var out []Settings
	for _, p := range precs {
		for _, k := range kvs {
			for _, f := range fracs {
				for _, s := range seqs {
					out = append(out, Settings{Precision: p, KVDType: k, MaxNumSeqs: s, MemFraction: f})
				}
			}
		}
	}
	return out
}
