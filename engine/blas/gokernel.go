package blas

import (
	"sync"
	"sync/atomic"

	"github.com/autocompress/autocompress/engine/blas/internal/avx2"
)

// useAsm selects the assembly micro-kernel; tests switch it off to check
// the portable one.
var useAsm = avx2.Available

// Blocking of the pure-Go kernel (Goto's scheme). For every nc-wide
// column block and kc-deep slice of the inner dimension, op(B) is packed
// once into panels of nr columns (kc×nc floats, shared by all goroutines);
// then the goroutines take mc-row blocks of A, pack each into panels of mr
// rows (kc×mc, private, L2-sized) and run an mr×nr micro-kernel over every
// (A panel, B panel) pair: an AVX2/FMA assembly kernel (twelve 8-wide
// accumulators, adding straight into C) on amd64 CPUs that have it, plain
// Go otherwise. Edges are zero-padded.
const (
	mr = 6
	nr = 16
	mc = 96
	nc = 2048
	kc = 256
	// Below this many multiply-adds one goroutine does the whole product.
	serialWork = 1 << 16
)

var (
	bPool = sync.Pool{New: func() any { b := make([]float32, nc*kc); return &b }}
	aPool = sync.Pool{New: func() any { a := make([]float32, mc*kc); return &a }}
)

func goSgemm(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m <= smallM {
		smallSgemm(threads, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// beta == 0: the first k-slice stores into C instead of adding, so C
	// is never cleared or read.
	if beta != 0 {
		scaleC(m, n, beta, c, ldc)
	}
	if m*n*k <= serialWork {
		threads = 1
	}
	pb := bPool.Get().(*[]float32)
	defer bPool.Put(pb)
	for j0 := 0; j0 < n; j0 += nc {
		nn := min(nc, n-j0)
		for p0 := 0; p0 < k; p0 += kc {
			kk := min(kc, k-p0)
			// Pack B's panels, split across the goroutines.
			panels := (nn + nr - 1) / nr
			parallel(threads, panels, func(lo, hi int) {
				for pn := lo; pn < hi; pn++ {
					packB(transB, b, ldb, p0, kk, j0+pn*nr, min(nr, nn-pn*nr), (*pb)[pn*nr*kk:])
				}
			})
			// Row blocks of A.
			blocks := (m + mc - 1) / mc
			parallel(threads, blocks, func(lo, hi int) {
				pa := aPool.Get().(*[]float32)
				defer aPool.Put(pa)
				for blk := lo; blk < hi; blk++ {
					i0 := blk * mc
					mm := min(mc, m-i0)
					packA(transA, a, lda, i0, mm, p0, kk, *pa)
					macro(mm, nn, kk, alpha, *pa, *pb, c[i0*ldc+j0:], ldc, beta == 0 && p0 == 0)
				}
			})
		}
	}
}

// parallel runs fn over [0, n) split into at most threads contiguous
// ranges, one goroutine each (inline when one suffices).
func parallel(threads, n int, fn func(lo, hi int)) {
	if threads > n {
		threads = n
	}
	if threads <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	// Work stealing in units of one item keeps the cores balanced when
	// items differ (edge blocks) or a core is busy elsewhere.
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i, i+1)
			}
		}()
	}
	wg.Wait()
}

// packA writes op(A)[i0:i0+mm, p0:p0+kk] as panels of mr rows:
// dst[panel·kk·mr + p·mr + r] = op(A)[i0+panel·mr+r, p0+p], zero past mm.
func packA(trans bool, a []float32, lda, i0, mm, p0, kk int, dst []float32) {
	for ip := 0; ip < mm; ip += mr {
		d := dst[ip*kk : ip*kk+kk*mr]
		rows := min(mr, mm-ip)
		i := i0 + ip
		switch {
		case rows == mr && !trans:
			// Six row streams in, one sequential stream out.
			r0 := a[i*lda+p0 : i*lda+p0+kk]
			r1 := a[(i+1)*lda+p0 : (i+1)*lda+p0+kk]
			r2 := a[(i+2)*lda+p0 : (i+2)*lda+p0+kk]
			r3 := a[(i+3)*lda+p0 : (i+3)*lda+p0+kk]
			r4 := a[(i+4)*lda+p0 : (i+4)*lda+p0+kk]
			r5 := a[(i+5)*lda+p0 : (i+5)*lda+p0+kk]
			for p := range r0 {
				o := d[p*mr : p*mr+mr : p*mr+mr]
				o[0], o[1], o[2], o[3], o[4], o[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
		case trans && rows == mr:
			// op(A) rows are columns of A: each p gives six contiguous values.
			for p := 0; p < kk; p++ {
				off := (p0+p)*lda + i
				src := a[off : off+mr : off+mr]
				o := d[p*mr : p*mr+mr : p*mr+mr]
				o[0], o[1], o[2], o[3], o[4], o[5] = src[0], src[1], src[2], src[3], src[4], src[5]
			}
		case trans:
			clear(d)
			for p := 0; p < kk; p++ {
				copy(d[p*mr:p*mr+rows], a[(p0+p)*lda+i:(p0+p)*lda+i+rows])
			}
		default:
			clear(d)
			for r := 0; r < rows; r++ {
				src := a[(i+r)*lda+p0 : (i+r)*lda+p0+kk]
				for p, v := range src {
					d[p*mr+r] = v
				}
			}
		}
	}
}

// packB writes the panel op(B)[p0:p0+kk, j0:j0+cols] (cols ≤ nr) as
// dst[p·nr + c], zero-padding columns past cols.
func packB(trans bool, b []float32, ldb, p0, kk, j0, cols int, dst []float32) {
	d := dst[:kk*nr]
	if cols < nr {
		clear(d)
	}
	if !trans {
		if cols == nr {
			for p := 0; p < kk; p++ {
				off := (p0+p)*ldb + j0
				src := b[off : off+nr : off+nr]
				o := d[p*nr : p*nr+nr : p*nr+nr]
				for c := range o {
					o[c] = src[c]
				}
			}
			return
		}
		for p := 0; p < kk; p++ {
			copy(d[p*nr:p*nr+cols], b[(p0+p)*ldb+j0:(p0+p)*ldb+j0+cols])
		}
		return
	}
	for cc := 0; cc < cols; cc++ {
		src := b[(j0+cc)*ldb+p0 : (j0+cc)*ldb+p0+kk]
		for p, v := range src {
			d[p*nr+cc] = v
		}
	}
}

// macro multiplies the packed mm×kk A block by the packed kk×nn B block and
// adds alpha times the product into C (stride ldc), or stores it when store.
func macro(mm, nn, kk int, alpha float32, pa, pb []float32, c []float32, ldc int, store bool) {
	var acc [mr * nr]float32
	for jp := 0; jp < nn; jp += nr {
		bp := pb[jp*kk : jp*kk+kk*nr]
		cols := min(nr, nn-jp)
		for ip := 0; ip < mm; ip += mr {
			ap := pa[ip*kk : ip*kk+kk*mr]
			rows := min(mr, mm-ip)
			if useAsm && rows == mr && cols == nr {
				_ = c[(ip+mr-1)*ldc+jp+nr-1]
				if store {
					avx2.Kernel6x16Store(kk, &ap[0], &bp[0], &c[ip*ldc+jp], ldc, alpha)
				} else {
					avx2.Kernel6x16Acc(kk, &ap[0], &bp[0], &c[ip*ldc+jp], ldc, alpha)
				}
				continue
			}
			kernel(kk, ap, bp, &acc)
			for r := 0; r < rows; r++ {
				crow := c[(ip+r)*ldc+jp : (ip+r)*ldc+jp+cols]
				if store {
					for cc := range crow {
						crow[cc] = alpha * acc[r*nr+cc]
					}
					continue
				}
				for cc := range crow {
					crow[cc] += alpha * acc[r*nr+cc]
				}
			}
		}
	}
}

// kernel computes the mr×nr product of a kk×mr A panel and a kk×nr B panel.
func kernel(kk int, a, b []float32, out *[mr * nr]float32) {
	if useAsm {
		_ = a[kk*mr-1]
		_ = b[kk*nr-1]
		avx2.Kernel6x16(kk, &a[0], &b[0], &out[0])
		return
	}
	genericKernel(kk, a, b, out)
}

// genericKernel is the portable micro-kernel: one row of A against the B
// panel at a time, accumulating in out.
func genericKernel(kk int, a, b []float32, out *[mr * nr]float32) {
	*out = [mr * nr]float32{}
	a = a[:kk*mr]
	b = b[:kk*nr]
	for p := 0; p < kk; p++ {
		bp := b[p*nr : p*nr+nr : p*nr+nr]
		for r := 0; r < mr; r++ {
			av := a[p*mr+r]
			o := out[r*nr : r*nr+nr : r*nr+nr]
			for c, bv := range bp {
				o[c] += av * bv
			}
		}
	}
}
