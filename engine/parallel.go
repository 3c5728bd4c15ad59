package engine

import (
	"sync"

	"github.com/autocompress/autocompress/internal/parallel"
)

// parallelFor is parallel.For: the engine's kernels split their rows
// over the cores with it.
func parallelFor(n, grain int, fn func(lo, hi int)) { parallel.For(n, grain, fn) }

// scratch holds float32 work buffers of the parallel kernels (attention
// probabilities, log-softmax rows), so that a forward pass or a serving step
// does not allocate them anew: allocation in the inner loop makes the
// garbage collector run every few steps, which shows as run-to-run noise in
// timings. Unlike a sync.Pool it is not emptied by garbage collection.
var scratch struct {
	mu   sync.Mutex
	free []*[]float32
}

// getScratch returns a buffer of n float32s (contents undefined); give it
// back with putScratch.
func getScratch(n int) *[]float32 {
	scratch.mu.Lock()
	var p *[]float32
	if k := len(scratch.free); k > 0 {
		p = scratch.free[k-1]
		scratch.free = scratch.free[:k-1]
	}
	scratch.mu.Unlock()
	if p == nil {
		p = new([]float32)
	}
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

// putScratch gives a buffer back; at most 64 are kept.
func putScratch(p *[]float32) {
	scratch.mu.Lock()
	if len(scratch.free) < 64 {
		scratch.free = append(scratch.free, p)
	}
	scratch.mu.Unlock()
}

// parallelCopy is copy(dst, src) split across the cores: activation copies
// of a megabyte or more would otherwise run on one core while the other
// waits.
func parallelCopy(dst, src []float32) {
	n := min(len(dst), len(src))
	parallelFor(n, 1<<15, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}
