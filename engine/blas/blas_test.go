package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// refGemm is the textbook triple loop in float64.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			old := float64(0)
			if beta != 0 {
				old = float64(beta) * float64(c[i*ldc+j])
			}
			c[i*ldc+j] = float32(float64(alpha)*s + old)
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

type gemmFunc func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

func backends() map[string]gemmFunc {
	return map[string]gemmFunc{
		"Sgemm(" + Backend() + ")":       Sgemm,
		"SgemmSerial(" + Backend() + ")": SgemmSerial,
		"SgemmGo(1 thread)": func(ta, tb bool, m, n, k int, al float32, a []float32, lda int, b []float32, ldb int, be float32, c []float32, ldc int) {
			SgemmGo(1, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc)
		},
		"SgemmGo(portable kernel)": func(ta, tb bool, m, n, k int, al float32, a []float32, lda int, b []float32, ldb int, be float32, c []float32, ldc int) {
			prev := mode
			setMode(modeGo)
			defer setMode(prev)
			SgemmGo(2, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc)
		},
		"SgemmGo(AVX2 kernel)": func(ta, tb bool, m, n, k int, al float32, a []float32, lda int, b []float32, ldb int, be float32, c []float32, ldc int) {
			prev := mode
			if prev == modeGo {
				SgemmGo(2, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc) // no AVX2 here: portable
				return
			}
			setMode(modeAVX2)
			defer setMode(prev)
			SgemmGo(2, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc)
		},
		"SgemmGo(3 threads)": func(ta, tb bool, m, n, k int, al float32, a []float32, lda int, b []float32, ldb int, be float32, c []float32, ldc int) {
			SgemmGo(3, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc)
		},
	}
}

func TestSgemmAgainstReference(t *testing.T) {
	shapes := [][3]int{
		{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {3, 5, 0}, {7, 13, 17}, {4, 4, 4},
		{4, 77, 300}, {3, 130, 9}, {2, 7, 64}, {33, 65, 129}, {67, 259, 300}, {130, 3, 513}, {2, 300, 5}, {7, 2100, 20},
	}
	if !testing.Short() {
		shapes = append(shapes, [3]int{257, 261, 263})
	}
	coefs := [][2]float32{{1, 0}, {1, 1}, {0.5, -2}, {-1.5, 0.25}, {0, 3}}
	r := rand.New(rand.NewPCG(1, 2))
	for name, f := range backends() {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, ab := range coefs {
						// Leading dimensions larger than the rows, to test strides.
						lda, ldb, ldc := k+3, n+1, n+2
						ar, br := m, k
						if ta {
							lda, ar = m+2, k
						}
						if tb {
							ldb, br = k+5, n
						}
						a := randSlice(r, ar*lda)
						b := randSlice(r, br*ldb)
						c := randSlice(r, m*ldc)
						if ab[1] == 0 {
							for i := range c {
								c[i] = float32(math.NaN()) // beta=0 must not read C
							}
						}
						want := append([]float32(nil), c...)
						refGemm(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], want, ldc)
						f(ta, tb, m, n, k, ab[0], a, lda, b, ldb, ab[1], c, ldc)
						tol := 1e-5 * float64(k+1)
						for i := 0; i < m; i++ {
							for j := 0; j < ldc; j++ {
								got, w := c[i*ldc+j], want[i*ldc+j]
								if j >= n { // padding must be untouched
									if !(got == w || (got != got && w != w)) {
										t.Fatalf("%s m=%d n=%d k=%d ta=%v tb=%v: wrote padding C[%d,%d]", name, m, n, k, ta, tb, i, j)
									}
									continue
								}
								if math.Abs(float64(got-w)) > tol*(1+math.Abs(float64(w))) || got != got {
									t.Fatalf("%s m=%d n=%d k=%d ta=%v tb=%v alpha=%v beta=%v: C[%d,%d]=%v want %v", name, m, n, k, ta, tb, ab[0], ab[1], i, j, got, w)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestSgemmPanicsOnShortSlice(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a too-short A")
		}
	}()
	Sgemm(false, false, 4, 4, 4, 1, make([]float32, 15), 4, make([]float32, 16), 4, 0, make([]float32, 16), 4)
}

func ExampleSgemm() {
	// C (2×2) = A (2×3) · Bᵀ where B is stored 2×3.
	a := []float32{1, 2, 3, 4, 5, 6}
	b := []float32{1, 0, 1, 0, 1, 0}
	c := make([]float32, 4)
	Sgemm(false, true, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2)
	fmt.Println(c)
	// Output: [4 2 10 5]
}

// peak measures GFLOP/s of f on an n×n×n product (best of a few runs).
func peak(f gemmFunc, m, n, k int) float64 {
	r := rand.New(rand.NewPCG(3, 4))
	a, b, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
	f(false, true, m, n, k, 1, a, k, b, k, 0, c, n) // warm-up
	best := time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		t0 := time.Now()
		f(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
		best = min(best, time.Since(t0))
	}
	return 2 * float64(m) * float64(n) * float64(k) / best.Seconds() / 1e9
}

// BenchmarkSgemmPeak reports the sgemm rate of the compiled backend and of the
// pure-Go kernel on a 1024³ NT product (the engine's forward shape) and the
// ratio between them.
func BenchmarkSgemmPeak(b *testing.B) {
	for b.Loop() {
		main := peak(Sgemm, 1024, 1024, 1024)
		pure := peak(func(ta, tb bool, m, n, k int, al float32, a []float32, lda int, bb []float32, ldb int, be float32, c []float32, ldc int) {
			SgemmGo(0, ta, tb, m, n, k, al, a, lda, bb, ldb, be, c, ldc)
		}, 1024, 1024, 1024)
		b.ReportMetric(main, "GFLOP/s")
		b.ReportMetric(pure, "go-GFLOP/s")
		b.Logf("sgemm 1024³ NT on %d cores: %s %.1f GFLOP/s (%d threads); pure Go %.1f GFLOP/s = %.2f× of %s",
			runtime.NumCPU(), Backend(), main, Threads(), pure, pure/main, Backend())
	}
}

func TestExpShiftSum(t *testing.T) {
	for _, asm := range []bool{true, false} {
		prev := useAsm
		useAsm = asm && prev
		x := make([]float32, 37)
		for i := range x {
			x[i] = float32(i)*0.7 - 12
		}
		orig := append([]float32(nil), x...)
		sum := ExpShiftSum(x, 3)
		useAsm = prev
		var want float64
		for i, v := range orig {
			e := math.Exp(float64(v - 3))
			want += e
			if math.Abs(float64(x[i])-e) > 3e-7*e {
				t.Fatalf("asm=%v: x[%d] = %v, want %v", asm, i, x[i], e)
			}
		}
		if math.Abs(float64(sum)-want) > 1e-6*want {
			t.Fatalf("asm=%v: sum %v, want %v", asm, sum, want)
		}
	}
}

func TestSigmoidSiLUMul(t *testing.T) {
	for _, asm := range []bool{true, false} {
		prev := useAsm
		useAsm = asm && prev
		g := make([]float32, 29)
		u := make([]float32, 29)
		for i := range g {
			g[i], u[i] = float32(i)*0.9-13, float32(i%5)-2
		}
		s, h := make([]float32, 29), make([]float32, 29)
		Sigmoid(s, g)
		SiLUMul(h, g, u)
		useAsm = prev
		for i := range g {
			want := 1 / (1 + math.Exp(-float64(g[i])))
			if math.Abs(float64(s[i])-want) > 3e-7*want {
				t.Fatalf("asm=%v: Sigmoid(%v) = %v, want %v", asm, g[i], s[i], want)
			}
			if w := float64(g[i]) * float64(u[i]) * want; math.Abs(float64(h[i])-w) > 1e-6*math.Abs(w)+1e-12 {
				t.Fatalf("asm=%v: SiLUMul = %v, want %v", asm, h[i], w)
			}
		}
	}
}

func TestMaxScale(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 33, 100} {
		x := make([]float32, n)
		want := float32(math.Inf(-1))
		for i := range x {
			x[i] = float32((i*37)%23) - 11
			want = max(want, x[i])
		}
		if got := Max(x); got != want {
			t.Errorf("Max of %d: %v, want %v", n, got, want)
		}
		y := append([]float32(nil), x...)
		Scale(-0.5, y)
		for i := range y {
			if y[i] != -0.5*x[i] {
				t.Fatalf("Scale of %d: y[%d] = %v, want %v", n, i, y[i], -0.5*x[i])
			}
		}
	}
}

// TestMulScale: the AVX2 path is bit-identical to the scalar loop, also
// in place, for every tail length.
func TestMulScale(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 31, 256, 259} {
		x, w := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], w[i] = float32(i%13)*0.37-2, float32(i%7)*0.11+0.5
		}
		out := make([]float32, n)
		MulScale(out, 0.731, x, w)
		inPlace := append([]float32(nil), x...)
		MulScale(inPlace, 0.731, inPlace, w)
		for i := range x {
			want := x[i] * 0.731 * w[i]
			if out[i] != want || inPlace[i] != want {
				t.Fatalf("n=%d i=%d: %v (in place %v), want %v", n, i, out[i], inPlace[i], want)
			}
		}
		y := append([]float32(nil), w...)
		Axpy(1, x, y)
		var d float64
		for i := range x {
			if y[i] != w[i]+x[i] {
				t.Fatalf("Axpy n=%d i=%d: %v, want %v", n, i, y[i], w[i]+x[i])
			}
			d += float64(x[i]) * float64(w[i])
		}
		if got := Dot(x, w); math.Abs(float64(got)-d) > 1e-4*(1+math.Abs(d)) {
			t.Fatalf("Dot n=%d: %v, want %v", n, got, d)
		}
	}
}

// BenchmarkGemvCacheCliff streams one-row products (m 1, k 192, B
// transposed: a decode step's product) over weight matrices of 0.19 to
// 64 MiB on one thread and reports GB/s and the ratio to the smallest
// matrix's rate in the same run: the drop past the last-level cache share
// that estimate/nativecal/ACCURACY.md ("The cache cliff") describes.
//
//	go test -run XXX -bench GemvCacheCliff -count 2 ./engine/blas/
func BenchmarkGemvCacheCliff(b *testing.B) {
	const k = 192
	first := 0.0
	for _, kib := range []int{192, 1 << 10, 4 << 10, 6 << 10, 8 << 10, 10 << 10, 12 << 10, 16 << 10, 24 << 10, 64 << 10} {
		n := kib << 10 / 4 / k
		a := make([]float32, k)
		w := make([]float32, n*k)
		for i := range w {
			w[i] = float32(i%7) * 0.1 // touched: untouched pages all map to one zero page
		}
		c := make([]float32, n)
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			for b.Loop() {
				SgemmSerial(false, true, 1, n, k, 1, a, k, w, k, 0, c, n)
			}
			rate := float64(n*k*4) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate/1e9, "GB/s")
			if first == 0 {
				first = rate
			}
			b.ReportMetric(rate/first, "x-smallest")
		})
	}
}
