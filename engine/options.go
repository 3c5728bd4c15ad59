package engine

import (
	"fmt"
	"math"
)

// Validate reports the first invalid option as an *InputError. Generate
// calls it; there are no defaults to fill (EOS nil means the model's, which
// only the model knows).
func (o *GenerateOptions) Validate() error {
	switch {
	case o.MaxTokens <= 0:
		return &InputError{fmt.Sprintf("generate: max tokens %d must be positive", o.MaxTokens)}
	case !(o.Greedy || o.Temperature == 0) && (o.Temperature < 0 || math.IsNaN(o.Temperature)):
		return &InputError{fmt.Sprintf("generate: temperature %v must be ≥ 0", o.Temperature)}
	case o.TopP < 0 || o.TopP > 1 || math.IsNaN(o.TopP):
		return &InputError{fmt.Sprintf("generate: top-p %v must be in [0, 1]", o.TopP)}
	}
	return nil
}

// Default sequence limit and prompt-token budget of Serve.
const (
	defaultServeBatch   = 256
	defaultServePrefill = 512
)

// EnsureDefaults fills the unset (zero) fields and returns o: MaxBatch
// becomes Concurrency (a closed loop) or 256, PrefillTokens 512.
// Concurrency keeps 0, which means the requests' arrival times.
func (o *ServeOptions) EnsureDefaults() *ServeOptions {
	if o.MaxBatch == 0 {
		o.MaxBatch = o.Concurrency
		if o.MaxBatch == 0 {
			o.MaxBatch = defaultServeBatch
		}
	}
	if o.PrefillTokens == 0 {
		o.PrefillTokens = defaultServePrefill
	}
	return o
}

// Validate reports the first invalid option as an *InputError (after
// EnsureDefaults).
func (o *ServeOptions) Validate() error {
	switch {
	case o.Concurrency < 0:
		return &InputError{fmt.Sprintf("serve: concurrency %d: want >= 0 (0: the requests' arrival times)", o.Concurrency)}
	case o.MaxBatch < 1:
		return &InputError{fmt.Sprintf("serve: max batch %d: want at least 1 sequence", o.MaxBatch)}
	case o.PrefillTokens < 1:
		return &InputError{fmt.Sprintf("serve: prefill tokens %d: want at least 1 per step", o.PrefillTokens)}
	}
	return nil
}
