// Package parallel runs a loop over [0, n) on every core: the one
// parallel-for of the engine, the distillation and the proxies (the GEMM's
// work-stealing crew in engine/blas is its own scheduler).
package parallel

import (
	"runtime"
	"sync"
)

// For splits [0, n) into at most GOMAXPROCS contiguous chunks of at least
// grain items (grain < 1 counts as 1) and runs fn on each chunk in its own
// goroutine, inline when one chunk suffices. It returns when every chunk is
// done. fn must not depend on how [0, n) is split.
func For(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if grain < 1 {
		grain = 1
	}
	if w := (n + grain - 1) / grain; w < workers {
		workers = w
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
