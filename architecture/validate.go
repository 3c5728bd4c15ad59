package architecture

import (
	"errors"
	"fmt"
	"math"
)

// Validate checks that m is internally consistent and every number is in
// its range before anything sizes, counts or indexes by it: positive widths
// within the sanity limits, query heads divisible by KV heads, Mamba heads
// divisible by groups, top-k within the expert count, at most one of MLP
// and MoE and nothing beside a Mamba mixer in a layer, positions, windows,
// token ids and rope parameters within theirs. It returns a
// *ValidationError (joined when several).
func (m *Model) Validate() error {
	var errs []error
	bad := func(layer int, format string, a ...any) {
		errs = append(errs, &ValidationError{Layer: layer, Msg: fmt.Sprintf(format, a...)})
	}
	if m.MaxPositions < 0 || m.MaxPositions > maxPositions {
		bad(-1, "max positions %d, want 0 (unknown)..%d", m.MaxPositions, maxPositions)
	}
	if m.BOS < -1 || m.BOS >= maxVocab {
		bad(-1, "BOS token id %d, want -1 (none) or 0..%d", m.BOS, maxVocab-1)
	}
	for _, id := range m.EOS {
		if id < 0 || id >= maxVocab {
			bad(-1, "EOS token id %d, want 0..%d", id, maxVocab-1)
			break
		}
	}
	if r := m.Rope; r.Theta < 0 {
		bad(-1, "rope theta %g, want a positive number (0: the default)", r.Theta)
	}
	if s := m.Rope.Scaling; s != nil {
		if !finite(s.Factor) || !finite(s.LowFreqFactor) || !finite(s.HighFreqFactor) || s.Factor < 0 || s.LowFreqFactor < 0 || s.HighFreqFactor < 0 {
			bad(-1, "rope scaling factor %g, low %g, high %g: want finite numbers >= 0", s.Factor, s.LowFreqFactor, s.HighFreqFactor)
		}
		if s.OriginalMaxPositions < 0 || s.OriginalMaxPositions > maxPositions {
			bad(-1, "rope scaling original max positions %d, want 0..%d", s.OriginalMaxPositions, maxPositions)
		}
	}
	if m.Hidden <= 0 || m.Hidden > maxWidth {
		bad(-1, "hidden size %d, want 1..%d", m.Hidden, maxWidth)
	}
	if m.Vocab <= 0 || m.Vocab > maxVocab {
		bad(-1, "vocabulary size %d, want 1..%d", m.Vocab, maxVocab)
	}
	if len(m.Layers) == 0 || len(m.Layers) > maxLayers {
		bad(-1, "%d layers, want 1..%d", len(m.Layers), maxLayers)
	}
	if !(m.NormEps >= 0) || math.IsInf(m.NormEps, 0) {
		bad(-1, "norm epsilon %g, want a finite number >= 0", m.NormEps)
	}
	if r := m.Rope; !finite(r.Theta) || !finite(r.PartialFactor) || r.PartialFactor < 0 || r.PartialFactor > 1 {
		bad(-1, "rope theta %g / partial rotary factor %g, want finite numbers and a factor in 0..1", r.Theta, r.PartialFactor)
	}
	if m.Norm != RMSNorm && m.Norm != LayerNorm {
		bad(-1, "unknown norm kind %q", m.Norm)
	}
	experts := 0
	for i, l := range m.Layers {
		if l.MoE != nil {
			experts += l.MoE.Experts
			if experts > maxExpertBlocks {
				bad(i, "more than %d routed experts over all layers", maxExpertBlocks)
				break
			}
		}
		if a := l.Attention; a != nil {
			switch {
			case a.Heads <= 0 || a.Heads > maxHeads:
				bad(i, "attention heads %d, want 1..%d", a.Heads, maxHeads)
			case a.KVHeads <= 0 || a.KVHeads > a.Heads:
				bad(i, "KV heads %d, want 1..%d (query heads)", a.KVHeads, a.Heads)
			case a.Heads%a.KVHeads != 0:
				bad(i, "query heads %d not divisible by KV heads %d", a.Heads, a.KVHeads)
			}
			if a.HeadDim <= 0 || a.HeadDim > maxWidth {
				bad(i, "head_dim %d, want 1..%d", a.HeadDim, maxWidth)
			}
			if a.SlidingWindow < 0 || a.SlidingWindow > maxPositions {
				bad(i, "sliding window %d, want 0 (none)..%d", a.SlidingWindow, maxPositions)
			}
		}
		if x := l.MLP; x != nil && (x.Width <= 0 || x.Width > maxWidth) {
			bad(i, "MLP width %d, want 1..%d", x.Width, maxWidth)
		}
		if x := l.Mamba; x != nil {
			switch {
			case x.Heads <= 0 || x.HeadDim <= 0 || x.Heads > maxWidth || x.HeadDim > maxWidth || x.Heads*x.HeadDim > maxWidth:
				bad(i, "Mamba heads %d × head_dim %d, want positive and at most %d wide", x.Heads, x.HeadDim, maxWidth)
			case x.Groups <= 0 || x.Heads%x.Groups != 0:
				bad(i, "Mamba heads %d not divisible by n_groups %d", x.Heads, x.Groups)
			}
			if x.StateSize <= 0 || x.StateSize > maxWidth {
				bad(i, "Mamba state size %d, want 1..%d", x.StateSize, maxWidth)
			}
			if x.ConvKernel <= 0 || x.ConvKernel > 1<<10 {
				bad(i, "Mamba conv kernel %d, want 1..1024", x.ConvKernel)
			}
			if x.ChunkSize < 0 || x.ChunkSize > maxPositions {
				bad(i, "Mamba chunk size %d, want 0 (the default)..%d", x.ChunkSize, maxPositions)
			}
			if l.Attention != nil || l.MLP != nil || l.MoE != nil {
				bad(i, "a Mamba layer cannot also have attention, MLP or MoE")
			}
		}
		if x := l.MoE; x != nil {
			if x.Experts <= 0 || x.Experts > maxExperts {
				bad(i, "%d experts, want 1..%d", x.Experts, maxExperts)
			}
			if x.TopK <= 0 || x.TopK > x.Experts {
				bad(i, "top-k %d, want 1..%d (experts)", x.TopK, x.Experts)
			}
			if x.ExpertWidth <= 0 || x.ExpertWidth > maxWidth {
				bad(i, "expert width %d, want 1..%d", x.ExpertWidth, maxWidth)
			}
			if x.SharedWidth < 0 || x.SharedWidth > maxWidth {
				bad(i, "shared expert width %d, want 0..%d", x.SharedWidth, maxWidth)
			}
			if x.LatentSize < 0 || x.LatentSize > maxWidth {
				bad(i, "latent size %d, want 0..%d", x.LatentSize, maxWidth)
			}
			if l.MLP != nil {
				bad(i, "a layer cannot have both an MLP and a MoE block")
			}
		}
	}
	if len(errs) == 0 {
		// Reject sizes whose counts would overflow int64 (in float64, which
		// cannot overflow here).
		var total float64
		m.walkTensors(&TensorList{visit: func(t TensorSpec, repeat int64) {
			n := float64(repeat)
			for _, d := range t.Shape {
				n *= float64(d)
			}
			total += n
		}})
		if total > maxParams {
			bad(-1, "%.3g parameters, more than %.0g", total, float64(maxParams))
		}
	}
	return errors.Join(errs...)
}

func finite(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// checkRange records on f that the integer at key is out of lo..hi, and
// reports whether it is in range: a config reader calls it on a count
// before it sizes anything by it.
func checkRange(f *fields, key string, v, lo, hi int) bool {
	ok := v >= lo && v <= hi
	f.check(ok, key, "want %d..%d, got %d", lo, hi, v)
	return ok
}

// Uniform reports whether every sub-block of a kind has the same shape in
// every layer that has one (sliding windows excepted: native formats express
// them per layer) and, outside Nemotron-H, whether every layer has attention
// and a feed-forward block (MLP or MoE). A uniform model can be written in
// its native config format; a non-uniform Llama-family model needs DeciLM.
func (m *Model) Uniform() bool {
	var att *Attention
	var mlp *MLP
	var mamba *Mamba
	var moe *MoE
	for _, l := range m.Layers {
		if !familyOf(m.Arch).Hybrid && (l.Attention == nil || (l.MLP == nil && l.MoE == nil)) {
			return false
		}
		if l.Attention != nil {
			a := *l.Attention
			a.SlidingWindow = 0
			if att == nil {
				att = &a
			} else if *att != a {
				return false
			}
		}
		if !same(&mlp, l.MLP) || !same(&mamba, l.Mamba) || !same(&moe, l.MoE) {
			return false
		}
	}
	return true
}

// same records the first non-nil block in *first and reports whether b equals it.
func same[T comparable](first **T, b *T) bool {
	if b == nil {
		return true
	}
	if *first == nil {
		*first = b
		return true
	}
	return **first == *b
}
