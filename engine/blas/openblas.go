//go:build cgo && openblas

package blas

// #cgo CFLAGS: -I/usr/include/x86_64-linux-gnu/openblas-pthread -I/usr/include/openblas
// #cgo LDFLAGS: -lopenblas
// #include <cblas.h>
import "C"

import (
	"os"
	"runtime"
	"strconv"
)

const backendName = "openblas"

func init() {
	// One OpenBLAS thread per core unless the user chose otherwise, so that
	// OpenBLAS and the engine's goroutines (which run between GEMM calls,
	// never during one) do not oversubscribe the machine.
	if n, err := strconv.Atoi(os.Getenv("OPENBLAS_NUM_THREADS")); err == nil && n > 0 {
		C.openblas_set_num_threads(C.int(n))
		return
	}
	C.openblas_set_num_threads(C.int(runtime.NumCPU()))
}

func threads() int { return int(C.openblas_get_num_threads()) }

func sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
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
