//go:build cgo && openblas

package blas

// #cgo CFLAGS: -I/usr/include/x86_64-linux-gnu/openblas-pthread -I/usr/include/openblas
// #cgo LDFLAGS: -lopenblas
// #include <cblas.h>
import "C"

import "runtime"

const backendName = "openblas"

func init() {
	// OpenBLAS runs single-threaded and Go splits each product across
	// GOMAXPROCS goroutines (see split). Threads OpenBLAS would own busy-wait
	// for a while after every call and steal the cores from the engine's
	// elementwise goroutines; with one thread per goroutine nothing is
	// oversubscribed, and small products (attention heads) run in parallel
	// through SgemmSerial.
	C.openblas_set_num_threads(1)
}

func threads() int { return runtime.GOMAXPROCS(0) }

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m <= smallM && useAsm {
		// A few rows (decoding): the AVX2 dot-product path is faster than
		// OpenBLAS's packed kernel here.
		smallSgemm(runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	split(runtime.GOMAXPROCS(0), transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, cblas)
}

func serial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m <= smallM && useAsm {
		smallSgemm(1, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	cblas(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func cblas(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, ta, tb, C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(&a[0]), C.blasint(lda),
		(*C.float)(&b[0]), C.blasint(ldb),
		C.float(beta), (*C.float)(&c[0]), C.blasint(ldc))
}
