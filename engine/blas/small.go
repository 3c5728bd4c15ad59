package blas

import "github.com/autocompress/autocompress/engine/blas/internal/avx2"

// smallM is the largest m handled without packing: for a few rows of C
// (decoding, GEMV-like products) packing B would cost as much as the
// product itself, so each C row is computed from dot products (B
// transposed: rows of B are contiguous) or row updates (B not transposed).
const smallM = 4

// smallSerialWork: products of a few rows (decoding) with at most this many
// multiply-adds run on one core. They are memory-bound (each weight read
// once); with the team's helpers spinning for work (team.go), handing half
// the columns to a second core costs well under a microsecond, so only the
// smallest products stay serial. legacySmallSerialWork is the limit that
// held with a fresh goroutine per product (serving a 5.8M-parameter model
// at batch 4, decoding was 20% slower on 2 threads than on 1 with 2²⁰, on
// par with 2²² and 2²³); SetTeam(false) restores it.
// (A variable only so that BenchmarkTeamSmall can split every size.)
var smallSerialWork = 1 << 14

const legacySmallSerialWork = 1 << 23

// dot returns Σ x[i]·y[i] (len(x) == len(y)).
func dot(x, y []float32) float32 {
	n := len(x)
	var s float32
	head := 0
	if useAsm && n >= 8 {
		head = n &^ 7
		s = avx2.Dot(&x[0], &y[0], head)
	}
	y = y[:n]
	for i := head; i < n; i++ {
		s += x[i] * y[i]
	}
	return s
}

// axpy sets y += alpha·x (len(x) == len(y)).
func axpy(alpha float32, x, y []float32) {
	n := len(x)
	head := 0
	if useAsm && n >= 8 {
		head = n &^ 7
		avx2.Axpy(alpha, &x[0], &y[0], head)
	}
	y = y[:n]
	for i := head; i < n; i++ {
		y[i] += alpha * x[i]
	}
}

// smallSgemm computes C = alpha·op(A)·op(B) + beta·C for m ≤ smallM,
// splitting the columns of C across threads.
func smallSgemm(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	// Rows of op(A), contiguous.
	var rowBuf [smallM][]float32 // on the stack: no allocation per call
	rows := rowBuf[:m]
	for i := range rows {
		if !transA {
			rows[i] = a[i*lda : i*lda+k]
			continue
		}
		r := make([]float32, k)
		for p := range r {
			r[p] = a[p*lda+i]
		}
		rows[i] = r
	}
	// Column blocks are multiples of 8 columns (AVX2 axpy) and of 4 (Dot4)
	// from column 0, so every column is computed exactly as the serial
	// path computes it; about four blocks per thread balance the cores.
	chunk, limit := (n/(4*max(threads, 1))+15)&^15, smallSerialWork
	chunk = min(max(chunk, 16), 64)
	if !teamOn.Load() {
		chunk, limit = 64, legacySmallSerialWork
	}
	blocks := (n + chunk - 1) / chunk
	if m*n*k <= limit {
		threads = 1
	}
	if threads <= 1 || blocks <= 1 {
		smallCols(transB, rows, 0, n, k, alpha, b, ldb, beta, c, ldc)
		return
	}
	rs := append([][]float32(nil), rows...) // shared with the goroutines
	cols := func(lo, hi int) {
		smallCols(transB, rs, lo*chunk, min(hi*chunk, n), k, alpha, b, ldb, beta, c, ldc)
	}
	if m*n*k > legacySmallSerialWork {
		parallel(threads, blocks, cols)
	} else if !crew.run(min(threads, blocks), blocks, cols) {
		// Fresh goroutines cost more than they give here.
		cols(0, blocks)
	}
}

// smallCols computes columns j0..j1-1 of C = alpha·A·op(B) + beta·C for the
// rows of A given.
func smallCols(transB bool, rows [][]float32, j0, j1, k int, alpha float32, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transB {
		// Each row of B is read once (and stays in L1) for all m rows;
		// with AVX2 four rows of B go through one pass over a row of A.
		j := j0
		if useAsm && k >= 8 {
			var out [4]float32
			head := k &^ 7
			for ; j+4 <= j1; j += 4 {
				b0, b1 := b[j*ldb:j*ldb+k], b[(j+1)*ldb:(j+1)*ldb+k]
				b2, b3 := b[(j+2)*ldb:(j+2)*ldb+k], b[(j+3)*ldb:(j+3)*ldb+k]
				for i, ar := range rows {
					avx2.Dot4(&ar[0], &b0[0], &b1[0], &b2[0], &b3[0], head, &out[0])
					for p := head; p < k; p++ {
						out[0] += ar[p] * b0[p]
						out[1] += ar[p] * b1[p]
						out[2] += ar[p] * b2[p]
						out[3] += ar[p] * b3[p]
					}
					cr := c[i*ldc+j : i*ldc+j+4 : i*ldc+j+4]
					for q, d := range out {
						if beta == 0 {
							cr[q] = alpha * d
						} else {
							cr[q] = beta*cr[q] + alpha*d
						}
					}
				}
			}
		}
		for ; j < j1; j++ {
			brow := b[j*ldb : j*ldb+k]
			for i, ar := range rows {
				d := alpha * dot(ar, brow)
				if beta == 0 {
					c[i*ldc+j] = d
				} else {
					c[i*ldc+j] = beta*c[i*ldc+j] + d
				}
			}
		}
		return
	}
	for i, ar := range rows {
		crow := c[i*ldc+j0 : i*ldc+j1]
		switch beta {
		case 0:
			clear(crow)
		case 1:
		default:
			for j := range crow {
				crow[j] *= beta
			}
		}
		for p, av := range ar {
			if av != 0 {
				axpy(alpha*av, b[p*ldb+j0:p*ldb+j1], crow)
			}
		}
	}
}
