package cli

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/workload"
)

// Numeric flags are declared with a range: a value outside it is refused
// when the flag is parsed (exit 2, the flag package's message naming the
// flag), never replaced by a default. A flag's default may lie outside
// its range (0 meaning "the engine's", for instance): only a value the user
// gives is checked. TestNumericFlagsRanged walks every command and keeps it so.

// Upper ends of the int flags, by what a flag counts: each far beyond any
// real use, and together small enough that the sums and products the
// commands form (prompt + output, steps × batch × sequence length) stay
// well inside an int.
const (
	maxTokens      = workload.MaxTokens      // a length in tokens (64Mi): --isl, --osl, --context, --seq-len, --max-tokens, --max-batched-tokens
	maxClients     = workload.MaxConcurrency // concurrent requests or sequences (65,536): --concurrency, --max-num-seqs
	maxRequests    = workload.MaxRequests    // requests of a run (~1M): --num-requests
	maxCount       = 1 << 20                 // rows, sequences, items, candidates, iterations (~1M)
	maxBatch       = 1 << 12                 // sequences per forward pass or optimiser step (4,096)
	maxSteps       = 1 << 24                 // optimiser steps and step intervals (~16.8M)
	maxTrainTokens = 1 << 50                 // training tokens (~10^15)
	maxGPUs        = 1 << 10                 // GPUs of a node or a TP group (1,024)
	maxThreads     = 1 << 12                 // compute threads (4,096)
	maxRepeats     = 1 << 10                 // measured or warm-up runs (1,024)
	maxWidth       = 1 << 22                 // a model width (architecture's limit): hidden channels, heads, MLP neurons
	maxLayers      = 1 << 12                 // layers of a model (architecture's limit)
	maxVocab       = 1 << 24                 // a vocabulary (architecture's limit): BPE merges, top-k logits
)

// intFlag is an int flag limited to [min, max].
type intFlag struct {
	p        *int
	min, max int
}

func (f *intFlag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f *intFlag) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("not an integer; want %s", f.want())
	}
	if int(v) < f.min || int(v) > f.max {
		return fmt.Errorf("out of range; want %s", f.want())
	}
	*f.p = int(v)
	return nil
}

func (f *intFlag) want() string {
	if f.min == math.MinInt {
		return fmt.Sprintf("an integer ≤ %d", f.max)
	}
	return fmt.Sprintf("an integer in [%d, %d]", f.min, f.max)
}

// intVar declares an int flag limited to [min, max] (max one of the bounds
// above).
func intVar(fs *flag.FlagSet, p *int, name string, value, min, max int, usage string) {
	*p = value
	f := &intFlag{p: p, min: min, max: max}
	fs.Var(f, name, withRange(usage, "N", strings.TrimPrefix(f.want(), "an integer ")))
}

// withRange appends the valid range to a flag's usage, naming the value
// (shown by -h as "-flag N") unless the usage already names it.
func withRange(usage, name, rng string) string {
	if strings.Contains(usage, "`") {
		return usage + " (" + rng + ")"
	}
	return usage + " (`" + name + "` " + rng + ")"
}

// intArg is intVar returning a new variable.
func intArg(fs *flag.FlagSet, name string, value, min, max int, usage string) *int {
	p := new(int)
	intVar(fs, p, name, value, min, max, usage)
	return p
}

// floatFlag is a finite float64 flag limited to its range; an open end
// excludes the bound itself.
type floatFlag struct {
	p                *float64
	min, max         float64
	minOpen, maxOpen bool
}

func (f *floatFlag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.p, 'g', -1, 64)
}

func (f *floatFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("not a finite number; want %s", f.want())
	}
	if v < f.min || v > f.max || (f.minOpen && v == f.min) || (f.maxOpen && v == f.max) {
		return fmt.Errorf("out of range; want %s", f.want())
	}
	*f.p = v
	return nil
}

func (f *floatFlag) want() string {
	lo, hi := "[", "]"
	if f.minOpen {
		lo = "("
	}
	if f.maxOpen {
		hi = ")"
	}
	num := func(x float64) string {
		if math.IsInf(x, 0) {
			if x > 0 {
				return "∞"
			}
			return "-∞"
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return "a number in " + lo + num(f.min) + ", " + num(f.max) + hi
}

// floatRange is the range of a float flag.
type floatRange struct {
	min, max         float64
	minOpen, maxOpen bool
}

// Common float ranges.
var (
	nonNegative = floatRange{min: 0, max: math.Inf(1), maxOpen: true}
	positive    = floatRange{min: 0, max: math.Inf(1), minOpen: true, maxOpen: true}
	fraction    = floatRange{min: 0, max: 1, minOpen: true} // (0, 1]
	anyFinite   = floatRange{min: math.Inf(-1), max: math.Inf(1), minOpen: true, maxOpen: true}
)

// floatVar declares a float64 flag limited to r.
func floatVar(fs *flag.FlagSet, p *float64, name string, value float64, r floatRange, usage string) {
	*p = value
	f := &floatFlag{p: p, min: r.min, max: r.max, minOpen: r.minOpen, maxOpen: r.maxOpen}
	fs.Var(f, name, withRange(usage, "X", strings.TrimPrefix(f.want(), "a number ")))
}

// floatArg is floatVar returning a new variable.
func floatArg(fs *flag.FlagSet, name string, value float64, r floatRange, usage string) *float64 {
	p := new(float64)
	floatVar(fs, p, name, value, r, usage)
	return p
}
