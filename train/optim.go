// Package train trains models on the native engine: AdamW with decoupled
// weight decay, linear warm-up and cosine decay, global gradient-norm
// clipping, a deterministic data order, periodic evaluation on held-out
// rows, and resumable checkpoints. The loss is a seam (Loss; FromLogits for
// losses on the logits, such as distillation): cross-entropy by default.
//
// # Determinism and resuming
//
// Everything that decides the next step is in the checkpoint: the
// parameters, both AdamW moments, the step, and the data position (epoch and
// index into that epoch's permutation, which is derived from the seed and the
// epoch alone). Resuming from a checkpoint therefore continues
// bit-identically to an uninterrupted run with the same options (the engine
// is deterministic for a fixed thread split; see TestResumeBitIdentical).
//
// # Checkpoint format
//
// One file, written to a temporary name, synced and renamed: the magic
// "ACTRAIN1", a little-endian uint64 header length, a JSON header (State),
// then the parameters, the first and the second AdamW moments as
// little-endian float32, and a CRC-32 (IEEE) of everything before it.
package train

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Schedule is a learning-rate schedule: linear warm-up from 0 to Peak over
// Warmup steps, then cosine decay to Min at step Total (constant Min after).
type Schedule struct {
	Peak, Min     float64
	Warmup, Total int
}

// LR returns the learning rate for step (0-based).
func (s Schedule) LR(step int) float64 {
	if step < s.Warmup {
		return s.Peak * float64(step+1) / float64(s.Warmup)
	}
	if step >= s.Total || s.Total <= s.Warmup {
		return s.Min
	}
	p := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	return s.Min + 0.5*(s.Peak-s.Min)*(1+math.Cos(math.Pi*p))
}

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter): for every
// parameter p with gradient g at step t (1-based),
//
//	m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
//	p -= lr · ( m/(1−β1ᵗ) / (sqrt(v/(1−β2ᵗ)) + ε) + λ·p )
//
// with λ = 0 where Decay is false (norm weights and biases).
type AdamW struct {
	Beta1, Beta2, Eps, WeightDecay float64
	// M and V are the moment slabs, the same layout as the parameters.
	M, V []float32
	// Exempt are the ranges of parameters that are not decayed, sorted and
	// disjoint: a few per layer, where a flag per parameter would cost a
	// byte each (a gigabyte for a 1B student).
	Exempt []Range
	// T is the number of steps taken.
	T int
}

// NoDecay reports whether a parameter named name is exempt from weight
// decay: norm weights (…norm.weight, …layernorm.weight, q_norm/k_norm) and
// biases.
func NoDecay(name string) bool {
	return strings.HasSuffix(name, ".bias") || strings.HasSuffix(name, "norm.weight")
}

// Span is a named range of a parameter slab.
type Span struct {
	Name        string
	Offset, Len int
}

// Range is the parameters [Lo, Hi) of a slab.
type Range struct{ Lo, Hi int }

// NewAdamW returns an optimiser for n parameters; spans name the ranges that
// NoDecay exempts (ranges not covered are decayed).
func NewAdamW(n int, spans []Span, beta1, beta2, eps, wd float64) *AdamW {
	o := &AdamW{Beta1: beta1, Beta2: beta2, Eps: eps, WeightDecay: wd,
		M: make([]float32, n), V: make([]float32, n)}
	var ex []Range
	for _, s := range spans {
		lo, hi := max(s.Offset, 0), min(s.Offset+s.Len, n)
		if NoDecay(s.Name) && lo < hi {
			ex = append(ex, Range{lo, hi})
		}
	}
	sort.Slice(ex, func(i, j int) bool { return ex[i].Lo < ex[j].Lo })
	for _, r := range ex { // merge overlapping and adjacent ranges
		if k := len(o.Exempt) - 1; k >= 0 && r.Lo <= o.Exempt[k].Hi {
			o.Exempt[k].Hi = max(o.Exempt[k].Hi, r.Hi)
			continue
		}
		o.Exempt = append(o.Exempt, r)
	}
	return o
}

// Step applies one update with learning rate lr.
func (o *AdamW) Step(params, grads []float32, lr float64) error {
	if len(params) != len(o.M) || len(grads) != len(o.M) {
		return fmt.Errorf("train: AdamW over %d values given %d parameters and %d gradients", len(o.M), len(params), len(grads))
	}
	o.T++
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	c1 := float32(1 / (1 - math.Pow(o.Beta1, float64(o.T))))
	c2 := float32(1 / (1 - math.Pow(o.Beta2, float64(o.T))))
	eps, lr32, wd := float32(o.Eps), float32(lr), float32(o.WeightDecay)
	update := func(lo, hi int, decay bool) {
		for i := lo; i < hi; i++ {
			g := grads[i]
			m := b1*o.M[i] + (1-b1)*g
			v := b2*o.V[i] + (1-b2)*g*g
			o.M[i], o.V[i] = m, v
			u := m * c1 / (float32(math.Sqrt(float64(v*c2))) + eps)
			if decay {
				u += wd * params[i]
			}
			params[i] -= lr32 * u
		}
	}
	pos := 0
	for _, r := range o.Exempt {
		update(pos, r.Lo, true)
		update(r.Lo, r.Hi, false)
		pos = r.Hi
	}
	update(pos, len(grads), true)
	return nil
}

// ClipGradNorm scales grads so that their global L2 norm is at most max
// (max <= 0 disables clipping) and returns the norm before clipping. A
// non-finite norm is returned unchanged and the gradients are left alone.
func ClipGradNorm(grads []float32, max float64) float64 {
	var s float64
	for _, g := range grads {
		s += float64(g) * float64(g)
	}
	n := math.Sqrt(s)
	if max > 0 && n > max && !math.IsInf(n, 0) && !math.IsNaN(n) {
		f := float32(max / n)
		for i := range grads {
			grads[i] *= f
		}
	}
	return n
}
