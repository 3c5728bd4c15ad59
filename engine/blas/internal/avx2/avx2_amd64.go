// Package avx2 holds the assembly kernels of the pure-Go sgemm: the AVX2/FMA
// 6×16 and AVX-512 12×32 micro-kernels, dot/axpy kernels for products of a
// few rows, and vector exp, sigmoid and SwiGLU. It is a separate package
// because Go assembly cannot live in a package that uses cgo (the OpenBLAS
// backend).
package avx2

// Kernel6x16 sets out[r·16+c] = Σ_{p<kk} a[p·6+r]·b[p·16+c] for r < 6,
// c < 16: a is a packed kk×6 panel, b a packed kk×16 panel, out 96 floats.
// Callers must check Available first and pass buffers of that size.
//
//go:noescape
func Kernel6x16(kk int, a, b, out *float32)

// Kernel6x16Acc computes the same product and adds alpha times it into the
// 6×16 block of C at c with row stride ldc (elements).
//
//go:noescape
func Kernel6x16Acc(kk int, a, b, c *float32, ldc int, alpha float32)

// Kernel6x16Store computes the same product and stores alpha times it into
// the 6×16 block of C at c (row stride ldc), without reading C.
//
//go:noescape
func Kernel6x16Store(kk int, a, b, c *float32, ldc int, alpha float32)

// Dot returns Σ x[i]·y[i] over the first n − n%8 elements; the caller adds
// the last n%8 products.
//
//go:noescape
func Dot(x, y *float32, n int) float32

// Dot4 sets out[r] = Σ x[i]·br[i] for r = 0..3 over the first n − n%8
// elements; the caller adds the tails. out has 4 elements.
//
//go:noescape
func Dot4(x, b0, b1, b2, b3 *float32, n int, out *float32)

// BF16ToF32 sets dst[i] to the float32 whose upper half is src[i] (bfloat16
// widened exactly) for the first n − n%8 elements; the caller does the
// tail.
//
//go:noescape
func BF16ToF32(dst *float32, src *uint16, n int)

// Axpy sets y[i] += alpha·x[i] over the first n − n%8 elements; the caller
// does the last n%8.
//
//go:noescape
func Axpy(alpha float32, x, y *float32, n int)

// ExpSum sets x[i] = exp(x[i] − shift) for the first n − n%8 elements and
// returns their sum; the caller does the last n%8. Relative error < 2e-7;
// results below e^−87.3 are clamped to about 1.2e-38, above e^88.4 to
// about 2.6e38.
//
//go:noescape
func ExpSum(x *float32, n int, shift float32) float32

// Sigmoid sets dst[i] = 1/(1+exp(−src[i])) for the first n − n%8
// elements; the caller does the tail.
//
//go:noescape
func Sigmoid(dst, src *float32, n int)

// SiLUMul sets h[i] = gate[i]·up[i]/(1+exp(−gate[i])) (SwiGLU) for the first
// n − n%8 elements; the caller does the tail.
//
//go:noescape
func SiLUMul(h, gate, up *float32, n int)

// Kernel12x32Acc is the AVX-512 micro-kernel: it adds alpha times the
// product of a packed kk×12 A panel and a packed kk×32 B panel into the
// 12×32 block of C at c (row stride ldc). Callers check Has512 first.
//
//go:noescape
func Kernel12x32Acc(kk int, a, b, c *float32, ldc int, alpha float32)

// Kernel12x32Store is Kernel12x32Acc storing instead of adding (C not read).
//
//go:noescape
func Kernel12x32Store(kk int, a, b, c *float32, ldc int, alpha float32)

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// Available reports whether the CPU and the OS support AVX2 and FMA3.
var Available = detect()

// Has512 reports whether AVX-512F is usable too (CPU and OS ZMM state).
var Has512 = Available && detect512()

func detect512() bool {
	_, b7, _, _ := cpuid(7, 0)
	if b7&(1<<16) == 0 { // AVX512F
		return false
	}
	xcr0, _ := xgetbv()
	return xcr0&0xe6 == 0xe6 // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
}

func detect() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if c1&fma == 0 || c1&osxsave == 0 || c1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // XMM and YMM state enabled by the OS
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0
}

// Max returns the largest of the first n − n%8 elements (n ≥ 8); the
// caller does the tail. A NaN input may or may not be returned.
//
//go:noescape
func Max(x *float32, n int) float32

// Scale sets x[i] *= alpha over the first n − n%8 elements; the caller does
// the tail.
//
//go:noescape
func Scale(alpha float32, x *float32, n int)

// MulScale sets out[i] = (x[i]·alpha)·w[i] over the first n − n%8
// elements; the caller does the tail. out may alias x.
//
//go:noescape
func MulScale(alpha float32, x, w, out *float32, n int)
