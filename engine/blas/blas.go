// Package blas provides the single-precision matrix multiply (sgemm) that the
// engine is built on, with two interchangeable backends:
//
//   - "openblas": cblas_sgemm from OpenBLAS through cgo, selected by the
//     build tag "openblas" (go build -tags openblas; needs libopenblas-dev).
//     OpenBLAS runs single-threaded and Go splits each product into row or
//     column blocks across GOMAXPROCS goroutines, so OpenBLAS threads never
//     compete with the engine's own goroutines;
//   - "go": a pure-Go, cache-blocked, packed kernel (Goto's scheme) that
//     runs on all cores with goroutines, with an AVX-512 (12×32) or
//     AVX2/FMA (6×16) assembly micro-kernel on amd64 CPUs that have them
//     (internal/avx2; the portable Go kernel elsewhere), chosen at start-up.
//     It always builds, also with CGO_ENABLED=0, and measured 0.97–1.17×
//     OpenBLAS on a 1024³ product on the 2-core AVX-512 development machine
//     (BenchmarkSgemmPeak).
//
// Products with at most four rows (decoding) skip packing in both backends
// and use AVX2 dot-product and axpy kernels. The package also has the few
// vector kernels the engine's softmax and SwiGLU need (ExpShiftSum,
// Sigmoid, SiLUMul).
//
// Both compute, in row-major storage,
//
//	C = alpha·op(A)·op(B) + beta·C
//
// where op(X) is X or Xᵀ, op(A) is m×k, op(B) is k×n and C is m×n. As in the
// reference BLAS, beta == 0 overwrites C without reading it (NaNs in C do not
// propagate).
//
// Shape errors (a leading dimension smaller than the row length, a slice too
// short for its matrix) are programming errors, not input errors: Sgemm
// panics with a message naming the argument, like gonum's blas does. Callers
// validate shapes once when they build their buffers.
package blas

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

var forceGo atomic.Bool

// ForceGo routes Sgemm to the pure-Go kernel (on) or back to the compiled-in
// backend (off), so one binary can measure both; it returns the previous
// setting. Backend() keeps reporting the compiled-in backend.
func ForceGo(on bool) bool { return forceGo.Swap(on) }

// Backend returns the name of the compiled-in sgemm backend: "openblas" or "go".
func Backend() string { return backendName }

// Threads returns the number of threads the backend uses for one large call.
func Threads() int { return threads() }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices; see
// the package documentation. op(A) is m×k (A is stored m×k with row stride
// lda, or k×m when transA), op(B) is k×n (B stored k×n with stride ldb, or
// n×k when transB), C is m×n with stride ldc.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if done(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	if forceGo.Load() {
		goSgemm(runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmSerial is Sgemm on the calling goroutine only (one core), for many
// small independent products run from parallel goroutines, such as the
// per-head products of attention.
func SgemmSerial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if done(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	if forceGo.Load() {
		goSgemm(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	serial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmGo is the pure-Go backend, callable directly whatever Backend()
// reports (tests compare the backends with each other; the engine uses it
// for many small independent products run in parallel goroutines).
// threads ≤ 0 means runtime.GOMAXPROCS(0).
func SgemmGo(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if done(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	goSgemm(threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// done checks the arguments of an sgemm call and completes the calls that
// need no product (an empty C; or k = 0 or alpha = 0, where C = beta·C). It
// reports whether the call is finished.
func done(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	checkArgs(transA, transB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 || alpha == 0 {
		scaleC(m, n, beta, c, ldc)
		return true
	}
	return false
}

func checkArgs(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("blas: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	checkMat("A", a, ar, ac, lda)
	checkMat("B", b, br, bc, ldb)
	checkMat("C", c, m, n, ldc)
}

func checkMat(name string, x []float32, rows, cols, ld int) {
	if ld < max(cols, 1) {
		panic(fmt.Sprintf("blas: ld%s=%d smaller than the %d columns of %s", name, ld, cols, name))
	}
	if rows == 0 || cols == 0 {
		return
	}
	if need := (rows-1)*ld + cols; len(x) < need {
		panic(fmt.Sprintf("blas: %s has %d elements, a %dx%d matrix with stride %d needs %d", name, len(x), rows, cols, ld, need))
	}
}

// scaleC sets C = beta·C (beta == 0 writes zeros).
func scaleC(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
