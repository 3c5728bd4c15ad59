package blas

import "sync"

type gemmKernel func(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)

// split runs kernel on up to p disjoint blocks of C in parallel goroutines:
// row blocks when C is tall enough, column blocks otherwise. Products
// under splitWork multiply-adds run in the calling goroutine.
func split(p int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, kernel gemmKernel) {
	const splitWork = 1 << 18
	if p <= 1 || m*n*k < splitWork || (m < 2*p && n < 16*p) {
		kernel(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	var wg sync.WaitGroup
	if m >= 8*p || m >= n {
		// Row blocks (multiples of 8 rows).
		chunk := ((m+p-1)/p + 7) &^ 7
		for i0 := 0; i0 < m; i0 += chunk {
			mm := min(chunk, m-i0)
			ao := i0 * lda
			if transA {
				ao = i0
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				kernel(transA, transB, mm, n, k, alpha, a[ao:], lda, b, ldb, beta, c[i0*ldc:], ldc)
			}()
		}
	} else {
		// Column blocks (multiples of 16 columns).
		chunk := ((n+p-1)/p + 15) &^ 15
		for j0 := 0; j0 < n; j0 += chunk {
			nn := min(chunk, n-j0)
			bo := j0
			if transB {
				bo = j0 * ldb
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				kernel(transA, transB, m, nn, k, alpha, a, lda, b[bo:], ldb, beta, c[j0:], ldc)
			}()
		}
	}
	wg.Wait()
}
