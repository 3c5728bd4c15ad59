package parallel

import (
	"runtime"
	"sync"
	"testing"
)

// TestFor: every index is visited exactly once, in contiguous chunks of at
// least grain (but the last), no more chunks than cores, and nothing for
// n ≤ 0.
func TestFor(t *testing.T) {
	for _, tc := range []struct{ n, grain int }{{0, 1}, {-3, 1}, {1, 1}, {7, 1}, {100, 16}, {100, 0}, {1000, 3}, {5, 100}} {
		var mu sync.Mutex
		seen := make([]int, max(tc.n, 0))
		chunks := 0
		For(tc.n, tc.grain, func(lo, hi int) {
			mu.Lock()
			defer mu.Unlock()
			chunks++
			if hi <= lo {
				t.Errorf("n %d grain %d: empty chunk [%d, %d)", tc.n, tc.grain, lo, hi)
			}
			if hi-lo < tc.grain && hi != tc.n {
				t.Errorf("n %d grain %d: chunk [%d, %d) below the grain", tc.n, tc.grain, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n %d grain %d: index %d visited %d times", tc.n, tc.grain, i, c)
			}
		}
		if chunks > runtime.GOMAXPROCS(0) && tc.n > 0 {
			t.Errorf("n %d: %d chunks on %d cores", tc.n, chunks, runtime.GOMAXPROCS(0))
		}
	}
}
