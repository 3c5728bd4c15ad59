package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestTeamBitExact checks that products split across threads by the team
// (columns of a few-row product; column panels of a single row block) give
// bit for bit what one thread gives, and what the pre-team path gives, for
// decode-like shapes (the parent's 192-wide layers, GQA, the vocabulary
// head) with and without transposes, beta 0, 1 and other.
type shape struct{ m, n, k int }

func TestTeamBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 12))
	var shapes []shape
	for _, m := range []int{1, 2, 3, 4, 5, 8, 13, 96} {
		for _, nk := range [][2]int{{192, 192}, {48, 192}, {512, 192}, {192, 512}, {4096, 192}, {200, 37}, {1000, 100}} {
			shapes = append(shapes, shape{m, nk[0], nk[1]})
		}
	}
	modes := []kernelMode{mode}
	if mode != modeGo && !testing.Short() {
		modes = append(modes, modeGo)
	}
	prev := mode
	defer setMode(prev)
	for _, md := range modes {
		setMode(md)
		teamBitExact(t, r, md, shapes)
	}
}

func teamBitExact(t *testing.T, r *rand.Rand, md kernelMode, shapes []shape) {
	for _, s := range shapes {
		for _, tr := range [][2]bool{{false, true}, {false, false}, {true, true}, {true, false}} {
			for _, beta := range []float32{0, 1, 0.5} {
				transA, transB := tr[0], tr[1]
				lda, ldb := s.k+3, s.k+1
				if transA {
					lda = s.m + 2
				}
				if !transB {
					ldb = s.n + 5
				}
				ldc := s.n + 7
				ar, br := s.m, s.k
				if transA {
					ar = s.k
				}
				if transB {
					br = s.n
				}
				a, b := randSlice(r, ar*lda), randSlice(r, br*ldb)
				c0 := randSlice(r, s.m*ldc)
				want := append([]float32(nil), c0...)
				SgemmGo(1, transA, transB, s.m, s.n, s.k, 0.75, a, lda, b, ldb, beta, want, ldc)
				for _, team := range []bool{true, false} {
					was := SetTeam(team)
					for _, threads := range []int{2, 3} {
						got := append([]float32(nil), c0...)
						SgemmGo(threads, transA, transB, s.m, s.n, s.k, 0.75, a, lda, b, ldb, beta, got, ldc)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("kernel %d m=%d n=%d k=%d transA=%v transB=%v beta=%v team=%v threads=%d: C[%d] = %v, one thread gives %v",
									md, s.m, s.n, s.k, transA, transB, beta, team, threads, i, got[i], want[i])
							}
						}
					}
					SetTeam(was)
				}
			}
		}
	}
}

// TestTeamSplits checks that the team really runs items on a helper and
// that decode products are above smallSerialWork (a test of bit-exactness
// that never split would pass vacuously).
func TestTeamSplits(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS ≥ 2 to split a product")
	}
	defer SetTeam(SetTeam(true))
	crew.backoff.Store(0) // a stall in an earlier test must not refuse this run
	var mu sync.Mutex
	seen := map[int]bool{}
	two := make(chan struct{}) // closed once items ran on two goroutines
	backstop := time.Now().Add(30 * time.Second)
	ok := crew.run(2, 64, func(lo, hi int) {
		mu.Lock()
		if id := goid(); !seen[id] {
			if seen[id] = true; len(seen) == 2 {
				close(two)
			}
		}
		mu.Unlock()
		// Hold every item until a second goroutine has taken one, so that
		// a helper gets its chance however slowly a loaded machine
		// schedules it; the backstop only ends a team that never splits.
		select {
		case <-two:
		case <-time.After(time.Until(backstop)):
		}
	})
	if !ok {
		t.Fatal("team busy with nothing else running")
	}
	if len(seen) < 2 {
		t.Errorf("64 items ran on %d goroutine(s) in 30 s, want the caller and a helper", len(seen))
	}
	// The parent's smallest split decode product (one row, 192×192).
	if 1*192*192 <= smallSerialWork {
		t.Errorf("a 1×192×192 product is under smallSerialWork %d: decoding would not split", smallSerialWork)
	}
}

// goid returns the current goroutine's id (from its stack header).
func goid() int {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	var id int
	fmt.Sscanf(string(buf[:n]), "goroutine %d", &id)
	return id
}

// TestTeamParksAndIsBounded checks that an idle team burns no core (every
// helper parks within its spin time) and that many products start no new
// goroutines (helpers are reused, not leaked).
func TestTeamParksAndIsBounded(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS ≥ 2 for helpers")
	}
	defer SetTeam(SetTeam(true))
	r := rand.New(rand.NewPCG(1, 2))
	a, b, c := randSlice(r, 4*192), randSlice(r, 4096*192), make([]float32, 4*4096)
	SgemmGo(0, false, true, 4, 4096, 192, 1, a, 192, b, 192, 0, c, 4096)
	before := runtime.NumGoroutine()
	for range 2000 {
		SgemmGo(0, false, true, 4, 4096, 192, 1, a, 192, b, 192, 0, c, 4096)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after 2000 products, %d before", after, before)
	}
	// Parking takes the spin time once a helper runs; the deadline is only a
	// backstop for a loaded machine that leaves a helper unscheduled.
	const backstop = 30 * time.Second
	deadline := time.Now().Add(backstop)
	for {
		parked, all := crew.parked()
		if all == 0 {
			t.Fatal("no helpers started")
		}
		if parked == all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d helpers still spinning %v after the last product (spin limit %v)", all-parked, all, backstop, teamSpin)
		}
		time.Sleep(time.Millisecond)
	}
	// A product after parking still completes (the wake-up path).
	want := append([]float32(nil), c...)
	SgemmGo(0, false, true, 4, 4096, 192, 1, a, 192, b, 192, 0, c, 4096)
	for i := range c {
		if c[i] != want[i] {
			t.Fatalf("product after parking differs at %d", i)
		}
	}
}

// BenchmarkTeamSmall times decode-sized products (one to eight rows of the
// parent's layers) on one thread and split by the team, in the same run,
// to place smallSerialWork: the team pays where "team" beats "serial".
// The weights stay in cache here, unlike in a decoding step.
func BenchmarkTeamSmall(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, s := range []shape{{1, 48, 192}, {1, 96, 192}, {1, 192, 192}, {1, 512, 192}, {1, 192, 512}, {4, 192, 192}, {4, 512, 192}, {8, 192, 192}, {8, 512, 192}} {
		a, w, c := randSlice(r, s.m*s.k), randSlice(r, s.n*s.k), make([]float32, s.m*s.n)
		for _, threads := range []int{1, 2} {
			name := "serial"
			if threads > 1 {
				name = "team"
			}
			b.Run(fmt.Sprintf("%dx%dx%d/%s", s.m, s.n, s.k, name), func(b *testing.B) {
				if threads > runtime.GOMAXPROCS(0) {
					b.Skip("needs GOMAXPROCS ≥ 2")
				}
				defer SetTeam(SetTeam(threads > 1))
				defer func(w int) { smallSerialWork = w }(smallSerialWork)
				smallSerialWork = 0
				crew.backoff.Store(0)
				_, stalls0 := TeamStats()
				for b.Loop() {
					SgemmGo(threads, false, true, s.m, s.n, s.k, 1, a, s.k, w, s.k, 0, c, s.n)
				}
				_, stalls := TeamStats()
				b.ReportMetric(float64(stalls-stalls0), "stalls")
			})
		}
	}
}
