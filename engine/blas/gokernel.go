package blas

import (
	"sync"
	"sync/atomic"

	"github.com/autocompress/autocompress/engine/blas/internal/avx2"
)

// kernelMode selects the micro-kernel of the pure-Go sgemm.
type kernelMode int

const (
	modeGo     kernelMode = iota // portable Go, 6×16
	modeAVX2                     // AVX2/FMA assembly, 6×16
	modeAVX512                   // AVX-512 assembly, 12×32
)

var (
	mode kernelMode
	// mr×nr is the register block of the current kernel: A is packed in
	// panels of mr rows, B in panels of nr columns.
	mr, nr int
	// useAsm enables the AVX2 vector kernels (small products, exp, sigmoid);
	// tests switch it off to check the portable code.
	useAsm bool
)

func init() {
	switch {
	case avx2.Has512:
		setMode(modeAVX512)
	case avx2.Available:
		setMode(modeAVX2)
	default:
		setMode(modeGo)
	}
}

// setMode switches the micro-kernel (tests use it to check each one).
func setMode(m kernelMode) {
	mode = m
	mr, nr = 6, 16
	if m == modeAVX512 {
		mr, nr = 12, 32
	}
	useAsm = m != modeGo
}

// Blocking of the pure-Go kernel (Goto's scheme). For every nc-wide
// column block and kc-deep slice of the inner dimension, op(B) is packed
// once into panels of nr columns (kc×nc floats, shared by all goroutines);
// then the goroutines take mc-row blocks of A, pack each into panels of mr
// rows (kc×mc, private, L2-sized) and run an mr×nr micro-kernel over every
// (A panel, B panel) pair, adding straight into C: an AVX-512 kernel
// (twenty-four 16-wide accumulators, 12×32) or an AVX2/FMA kernel (twelve
// 8-wide accumulators, 6×16) on amd64 CPUs that have them, plain Go
// otherwise. Edges are zero-padded. mc and nc are multiples of every mr
// and nr.
const (
	mc = 96
	nc = 2048
	kc = 256
	// Below this many multiply-adds one goroutine does the whole product.
	serialWork = 1 << 16
)

var (
	bPool = bufList{size: nc * kc}
	aPool = bufList{size: mc * kc}
)

// bufList keeps packing buffers of one size for reuse. Unlike a sync.Pool it
// is not emptied by garbage collection, so a long run (training, a serving
// benchmark) does not reallocate megabytes of packing buffers after every
// GC cycle — which would itself trigger the next cycle.
type bufList struct {
	mu   sync.Mutex
	size int
	free []*[]float32
}

// Get returns a buffer of size float32s (contents undefined).
func (l *bufList) Get() *[]float32 {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	b := make([]float32, l.size)
	return &b
}

// Put gives a buffer back; at most 64 are kept.
func (l *bufList) Put(b *[]float32) {
	l.mu.Lock()
	if len(l.free) < 64 {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}

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
	pb := bPool.Get()
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
			if blocks == 1 && threads > 1 && panels > 1 && teamOn.Load() {
				// One block (decoding a few sequences): pack it once and
				// split its column panels across the threads instead. Every
				// tile is computed as the whole block would compute it.
				pa := aPool.Get()
				packA(transA, a, lda, 0, m, p0, kk, *pa)
				tiles := func(lo, hi int) {
					macro(m, min(hi*nr, nn)-lo*nr, kk, alpha, *pa, (*pb)[lo*nr*kk:], c[j0+lo*nr:], ldc, beta == 0 && p0 == 0)
				}
				if !crew.run(min(threads, panels), panels, tiles) {
					tiles(0, panels) // as before the team
				}
				aPool.Put(pa)
				continue
			}
			parallel(threads, blocks, func(lo, hi int) {
				pa := aPool.Get()
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
	if crew.run(threads, n, fn) {
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
			// Six row streams in at a time, sequential stream out.
			for r0 := 0; r0 < mr; r0 += 6 {
				row := func(r int) []float32 { return a[(i+r0+r)*lda+p0 : (i+r0+r)*lda+p0+kk] }
				pack6(d, r0, row(0), row(1), row(2), row(3), row(4), row(5))
			}
		case rows == mr && trans:
			// op(A) rows are columns of A: each p gives mr contiguous values.
			for p := 0; p < kk; p++ {
				off := (p0+p)*lda + i
				src := a[off : off+mr : off+mr]
				o := d[p*mr : p*mr+mr : p*mr+mr]
				for r, v := range src {
					o[r] = v
				}
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

// pack6 interleaves six equally long rows into d: d[p·mr + off + r] = r_r[p].
func pack6(d []float32, off int, r0, r1, r2, r3, r4, r5 []float32) {
	n := len(r0)
	r1, r2, r3, r4, r5 = r1[:n], r2[:n], r3[:n], r4[:n], r5[:n]
	step := mr
	for p := 0; p < n; p++ {
		o := d[p*step+off : p*step+off+6 : p*step+off+6]
		o[0], o[1], o[2], o[3], o[4], o[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
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
	var tmp [12 * 32]float32
	acc := tmp[:mr*nr]
	for jp := 0; jp < nn; jp += nr {
		bp := pb[jp*kk : jp*kk+kk*nr]
		cols := min(nr, nn-jp)
		for ip := 0; ip < mm; ip += mr {
			ap := pa[ip*kk : ip*kk+kk*mr]
			rows := min(mr, mm-ip)
			if mode != modeGo && rows == mr && cols == nr {
				_ = c[(ip+mr-1)*ldc+jp+nr-1]
				fullKernel(kk, ap, bp, &c[ip*ldc+jp], ldc, alpha, store)
				continue
			}
			// Edge tile: the product into a temporary block, then the
			// rows×cols corner into C.
			if mode != modeGo {
				fullKernel(kk, ap, bp, &acc[0], nr, 1, true)
			} else {
				genericKernel(kk, ap, bp, acc)
			}
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

// fullKernel runs the assembly kernel of the current mode on one mr×nr
// block of C at c: C = alpha·A·B (store) or C += alpha·A·B.
func fullKernel(kk int, a, b []float32, c *float32, ldc int, alpha float32, store bool) {
	_ = a[kk*mr-1]
	_ = b[kk*nr-1]
	switch {
	case mode == modeAVX512 && store:
		avx2.Kernel12x32Store(kk, &a[0], &b[0], c, ldc, alpha)
	case mode == modeAVX512:
		avx2.Kernel12x32Acc(kk, &a[0], &b[0], c, ldc, alpha)
	case store:
		avx2.Kernel6x16Store(kk, &a[0], &b[0], c, ldc, alpha)
	default:
		avx2.Kernel6x16Acc(kk, &a[0], &b[0], c, ldc, alpha)
	}
}

// genericKernel is the portable micro-kernel: out (mr×nr) = A panel ·
// B panel, one row of A against the B panel at a time.
func genericKernel(kk int, a, b []float32, out []float32) {
	clear(out)
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
