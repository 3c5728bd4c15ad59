package blas

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/autocompress/autocompress/engine/blas/internal/avx2"
	"github.com/x448/float16"
)

// HalfKind is a 16-bit floating-point format of weights as a checkpoint
// stores them.
type HalfKind uint8

// The 16-bit formats SgemmHalf reads.
const (
	BF16 HalfKind = iota + 1 // bfloat16: the upper 16 bits of a float32
	F16                      // IEEE 754 half precision
)

func (k HalfKind) String() string {
	switch k {
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	}
	return fmt.Sprintf("HalfKind(%d)", uint8(k))
}

// f16Table maps every IEEE half bit pattern to its float32 value (256 KiB,
// built on first use).
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
})

// ToFloat32 converts src (values of kind k) into dst, exactly: every bf16
// and f16 value is a float32. len(dst) must be at least len(src).
func (k HalfKind) ToFloat32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	switch k {
	case BF16:
		head := 0
		if useAsm && len(src) >= 8 {
			head = len(src) &^ 7
			avx2.BF16ToF32(&dst[0], &src[0], head)
		}
		for i := head; i < len(src); i++ {
			dst[i] = math.Float32frombits(uint32(src[i]) << 16)
		}
	case F16:
		t := f16Table()
		for i, h := range src {
			dst[i] = t[h]
		}
	default:
		panic(fmt.Sprintf("blas: %v is not a half-precision kind", k))
	}
}

// Tile sizes of SgemmHalf, in float32s of converted B. A product of many
// rows converts a large tile (so that packing A again for every tile costs
// little beside the tile's products) with all cores, then runs the float32
// product on it; a product of a few rows (decoding) gives each core its own
// tiles, small enough to stay in its L2 cache between the conversion and
// the dot products.
const (
	halfTileLarge = 1 << 20 // 4 MiB
	halfTileSmall = 1 << 14 // 64 KiB
)

var halfPool struct {
	mu   sync.Mutex
	free []*[]float32
}

func getHalfBuf(n int) *[]float32 {
	halfPool.mu.Lock()
	var p *[]float32
	if k := len(halfPool.free); k > 0 {
		p = halfPool.free[k-1]
		halfPool.free = halfPool.free[:k-1]
	}
	halfPool.mu.Unlock()
	if p == nil {
		p = new([]float32)
	}
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

func putHalfBuf(p *[]float32) {
	halfPool.mu.Lock()
	if len(halfPool.free) < 16 {
		halfPool.free = append(halfPool.free, p)
	}
	halfPool.mu.Unlock()
}

// halfTileRows returns the rows of B per tile: a multiple of 16 (so that
// every tile starts where the float32 kernels start a column group) and at
// least 16.
func halfTileRows(budget, k int) int {
	return max(16, (budget/max(k, 1))&^15)
}

// SgemmHalf computes C = A·Bᵀ + beta·C where A is m×k float32 (stride lda),
// B is n×k in a 16-bit format (stride ldb: a weight matrix in HuggingFace
// [out, in] layout as a checkpoint stores it) and C is m×n (stride ldc).
//
// B is converted to float32 one tile of rows at a time into a scratch
// buffer, and each tile's columns of C are computed by the float32 product
// (Sgemm's backend); accumulation is in float32 as in Sgemm. With the
// pure-Go backend the result is bit-identical to Sgemm(false, true, ...) on
// B converted to float32 beforehand: the Go kernel computes every element
// of C the same way whatever the columns around it (TestSgemmHalfBitExact).
// Memory beyond the operands is one tile (at most 4 MiB, or 16 rows of B)
// per core.
func SgemmHalf(m, n, k int, a []float32, lda int, b []uint16, kind HalfKind, ldb int, beta float32, c []float32, ldc int) {
	checkMat("A", a, m, k, lda)
	checkHalf(b, n, k, ldb)
	checkMat("C", c, m, n, ldc)
	if kind != BF16 && kind != F16 {
		panic(fmt.Sprintf("blas: %v is not a half-precision kind", kind))
	}
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		scaleC(m, n, beta, c, ldc)
		return
	}
	threads := runtime.GOMAXPROCS(0)
	convert := func(dst []float32, j0, rows int) {
		for r := 0; r < rows; r++ {
			kind.ToFloat32(dst[r*k:(r+1)*k], b[(j0+r)*ldb:(j0+r)*ldb+k])
		}
	}
	if m <= smallM {
		// Each core converts and multiplies its own tiles.
		nb := halfTileRows(halfTileSmall, k)
		tiles := (n + nb - 1) / nb
		parallel(min(threads, tiles), tiles, func(lo, hi int) {
			buf := getHalfBuf(nb * k)
			defer putHalfBuf(buf)
			for t := lo; t < hi; t++ {
				j0 := t * nb
				nn := min(nb, n-j0)
				convert(*buf, j0, nn)
				SgemmSerial(false, true, m, nn, k, 1, a, lda, *buf, k, beta, c[j0:], ldc)
			}
		})
		return
	}
	nb := halfTileRows(halfTileLarge, k)
	buf := getHalfBuf(min(nb, n) * k)
	defer putHalfBuf(buf)
	for j0 := 0; j0 < n; j0 += nb {
		nn := min(nb, n-j0)
		tile := (*buf)[:nn*k]
		parallel(threads, (nn+15)/16, func(lo, hi int) {
			for r := lo * 16; r < min(hi*16, nn); r++ {
				kind.ToFloat32(tile[r*k:(r+1)*k], b[(j0+r)*ldb:(j0+r)*ldb+k])
			}
		})
		Sgemm(false, true, m, nn, k, 1, a, lda, tile, k, beta, c[j0:], ldc)
	}
}

func checkHalf(b []uint16, rows, cols, ld int) {
	if ld < max(cols, 1) {
		panic(fmt.Sprintf("blas: ldB=%d smaller than the %d columns of B", ld, cols))
	}
	if rows == 0 || cols == 0 {
		return
	}
	if need := (rows-1)*ld + cols; len(b) < need {
		panic(fmt.Sprintf("blas: B has %d elements, a %dx%d matrix with stride %d needs %d", len(b), rows, cols, ld, need))
	}
}
