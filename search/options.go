package search

import (
	"errors"
	"fmt"
	"math"
)

// Ptr returns a pointer to v, for the pointer fields of the options (where
// a pointer to 0 means 0 and nil the default).
func Ptr[T any](v T) *T { return &v }

// EnsureDefaults fills the unset fields and returns o: TopK 10,
// CloseFraction 0.03 (nil; a pointer to 0 measures only ties with the
// best), MaxEvaluations 4000.
func (o *Options) EnsureDefaults() *Options {
	if o.TopK == 0 {
		o.TopK = 10
	}
	if o.CloseFraction == nil {
		o.CloseFraction = Ptr(0.03)
	}
	if o.MaxEvaluations == 0 {
		o.MaxEvaluations = 4000
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.GPU == nil || o.Workload == nil:
		return errors.New("search: a GPU and a workload are needed")
	case o.CloseFraction == nil:
		return errors.New("search: options not completed: call EnsureDefaults before Validate")
	case o.TopK < 1:
		return fmt.Errorf("search: top-k %d: want at least 1 candidate", o.TopK)
	case *o.CloseFraction < 0 || math.IsNaN(*o.CloseFraction):
		return fmt.Errorf("search: close fraction %g: want >= 0", *o.CloseFraction)
	case o.MaxEvaluations < 1:
		return fmt.Errorf("search: max evaluations %d: want at least 1", o.MaxEvaluations)
	}
	return nil
}

// EnsureDefaults fills the unset fields and returns o: TP 1, MinWidth 0.25
// (0.6, Minitron's, in the uniform space), MaxDepth 0.5 (nil; 0 in the
// uniform space; a pointer to 0 removes no layer).
func (o *SpaceOptions) EnsureDefaults() *SpaceOptions {
	if o.TP == 0 {
		o.TP = 1
	}
	if o.MinWidth == 0 {
		o.MinWidth = 0.25
		if o.Uniform {
			o.MinWidth = 0.6 // Minitron's max_width_pruning 0.40
		}
	}
	if o.MaxDepth == nil {
		o.MaxDepth = Ptr(0.5)
		if o.Uniform {
			o.MaxDepth = Ptr(0.0)
		}
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *SpaceOptions) Validate() error {
	switch {
	case o.MaxDepth == nil:
		return errors.New("search: space options not completed: call EnsureDefaults before Validate")
	case o.TP < 1:
		return fmt.Errorf("search: tensor-parallel size %d: want at least 1", o.TP)
	case !(o.MinWidth > 0 && o.MinWidth <= 1):
		return fmt.Errorf("search: min width %g: want a fraction in (0, 1]", o.MinWidth)
	case !(*o.MaxDepth >= 0 && *o.MaxDepth < 1):
		return fmt.Errorf("search: max depth %g: want a fraction in [0, 1)", *o.MaxDepth)
	case o.Uniform && *o.MaxDepth > 0:
		return fmt.Errorf("search: max depth %g: the uniform space keeps every layer", *o.MaxDepth)
	case o.MaxNumSeqs < 0:
		return fmt.Errorf("search: max sequences %d: want >= 0 (0: searched)", o.MaxNumSeqs)
	case !(o.MemFraction >= 0 && o.MemFraction <= 1):
		return fmt.Errorf("search: memory fraction %g: want [0, 1] (0: searched)", o.MemFraction)
	case o.Concurrency < 0 || o.MaxMemory < 0 || o.DeviceBytes < 0:
		return fmt.Errorf("search: concurrency %d, max memory %g, device bytes %g: none may be negative", o.Concurrency, o.MaxMemory, o.DeviceBytes)
	}
	return nil
}

// EnsureDefaults fills the unset (zero) fields and returns o: batch 8,
// sequence length 128, learning rate 1e-3, temperature 1, and KD weight 1
// when both weights are 0.
func (o *TrainOptions) EnsureDefaults() *TrainOptions {
	if o.Batch == 0 {
		o.Batch = 8
	}
	if o.SeqLen == 0 {
		o.SeqLen = 128
	}
	if o.LR == 0 {
		o.LR = 1e-3
	}
	if o.Temperature == 0 {
		o.Temperature = 1
	}
	if o.KDWeight == 0 && o.CEWeight == 0 {
		o.KDWeight = 1
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *TrainOptions) Validate() error {
	switch {
	case o.Tokens < 0:
		return fmt.Errorf("trained proxy: tokens %d: want >= 0 (0: untrained)", o.Tokens)
	case o.Batch < 1 || o.SeqLen < 1:
		return fmt.Errorf("trained proxy: batch %d × sequence length %d: both must be positive", o.Batch, o.SeqLen)
	case !(o.LR > 0):
		return fmt.Errorf("trained proxy: learning rate %g: want > 0", o.LR)
	case !(o.Temperature > 0):
		return fmt.Errorf("trained proxy: temperature %g: want > 0", o.Temperature)
	case o.KDWeight < 0 || o.CEWeight < 0:
		return fmt.Errorf("trained proxy: KD weight %g, CE weight %g: want >= 0", o.KDWeight, o.CEWeight)
	case o.CacheK < 0:
		return fmt.Errorf("trained proxy: cache k %d: want >= 0 (0: no cache)", o.CacheK)
	}
	return nil
}
