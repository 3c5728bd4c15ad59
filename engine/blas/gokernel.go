package blas

import (
	"sync"
	"sync/atomic"
)

// Blocking of the pure-Go kernel. C is cut into tiles of mc×nc processed by
// one goroutine each; for every kc-slice of the inner dimension the tile's
// A rows and B columns are packed into contiguous panels of mr rows and nr
// columns (zero-padded at the edges), and a register-blocked mr×nr
// micro-kernel walks the panels. kc×nc floats of packed B (64 KiB) stay in
// L2, a kc×mr panel of A (4 KiB) in L1.
const (
	mr = 4
	nr = 4
	mc = 64
	nc = 256
	kc = 256
	// Below this many multiply-adds one goroutine does the whole product.
	serialWork = 1 << 16
)

type packBufs struct {
	a [mc * kc]float32
	b [nc * kc]float32
}

var bufPool = sync.Pool{New: func() any { return new(packBufs) }}

func goSgemm(threads int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	scaleC(m, n, beta, c, ldc)
	tm := (m + mc - 1) / mc
	tn := (n + nc - 1) / nc
	tiles := tm * tn
	if threads > tiles {
		threads = tiles
	}
	tile := func(t int, buf *packBufs) {
		i0 := (t / tn) * mc
		j0 := (t % tn) * nc
		mm := min(mc, m-i0)
		nn := min(nc, n-j0)
		for p0 := 0; p0 < k; p0 += kc {
			kk := min(kc, k-p0)
			packA(transA, a, lda, i0, mm, p0, kk, buf.a[:])
			packB(transB, b, ldb, p0, kk, j0, nn, buf.b[:])
			macro(mm, nn, kk, alpha, buf.a[:], buf.b[:], c[i0*ldc+j0:], ldc)
		}
	}
	if threads <= 1 || m*n*k <= serialWork {
		buf := bufPool.Get().(*packBufs)
		for t := 0; t < tiles; t++ {
			tile(t, buf)
		}
		bufPool.Put(buf)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bufPool.Get().(*packBufs)
			defer bufPool.Put(buf)
			for {
				t := int(next.Add(1) - 1)
				if t >= tiles {
					return
				}
				tile(t, buf)
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
		if rows < mr {
			clear(d)
		}
		for r := 0; r < rows; r++ {
			i := i0 + ip + r
			if !trans {
				src := a[i*lda+p0 : i*lda+p0+kk]
				for p, v := range src {
					d[p*mr+r] = v
				}
			} else {
				for p := 0; p < kk; p++ {
					d[p*mr+r] = a[(p0+p)*lda+i]
				}
			}
		}
	}
}

// packB writes op(B)[p0:p0+kk, j0:j0+nn] as panels of nr columns:
// dst[panel·kk·nr + p·nr + c] = op(B)[p0+p, j0+panel·nr+c], zero past nn.
func packB(trans bool, b []float32, ldb, p0, kk, j0, nn int, dst []float32) {
	for jp := 0; jp < nn; jp += nr {
		d := dst[jp*kk : jp*kk+kk*nr]
		cols := min(nr, nn-jp)
		if cols < nr {
			clear(d)
		}
		if !trans {
			for p := 0; p < kk; p++ {
				src := b[(p0+p)*ldb+j0+jp : (p0+p)*ldb+j0+jp+cols]
				copy(d[p*nr:p*nr+cols], src)
			}
			continue
		}
		for cc := 0; cc < cols; cc++ {
			j := j0 + jp + cc
			src := b[j*ldb+p0 : j*ldb+p0+kk]
			for p, v := range src {
				d[p*nr+cc] = v
			}
		}
	}
}

// macro multiplies the packed mm×kk A block by the packed kk×nn B block and
// adds alpha times the product into C (stride ldc).
func macro(mm, nn, kk int, alpha float32, pa, pb []float32, c []float32, ldc int) {
	var acc [mr * nr]float32
	for jp := 0; jp < nn; jp += nr {
		bp := pb[jp*kk : jp*kk+kk*nr]
		cols := min(nr, nn-jp)
		for ip := 0; ip < mm; ip += mr {
			ap := pa[ip*kk : ip*kk+kk*mr]
			kernel(kk, ap, bp, &acc)
			rows := min(mr, mm-ip)
			for r := 0; r < rows; r++ {
				crow := c[(ip+r)*ldc+jp : (ip+r)*ldc+jp+cols]
				for cc := range crow {
					crow[cc] += alpha * acc[r*nr+cc]
				}
			}
		}
	}
}

// kernel computes the 4×4 product of a kk×4 A panel and a kk×4 B panel in
// sixteen scalar accumulators.
func kernel(kk int, a, b []float32, out *[mr * nr]float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	a = a[:kk*mr]
	b = b[:kk*nr]
	for p := 0; p+mr <= len(a) && p+nr <= len(b); p += 4 {
		aa := a[p : p+4 : p+4]
		bb := b[p : p+4 : p+4]
		a0, a1, a2, a3 := aa[0], aa[1], aa[2], aa[3]
		b0, b1, b2, b3 := bb[0], bb[1], bb[2], bb[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	*out = [mr * nr]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
}
