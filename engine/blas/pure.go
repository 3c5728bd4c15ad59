//go:build !(cgo && openblas)

package blas

import "runtime"

const backendName = "go"

func threads() int { return runtime.GOMAXPROCS(0) }

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	goSgemm(runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func serial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	goSgemm(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
