//go:build !amd64

// Package avx2 holds the assembly kernels of the pure-Go sgemm; on this
// architecture they are absent.
package avx2

// Available is false: no assembly kernel on this architecture.
const Available = false

// Has512 is false: no assembly kernel on this architecture.
const Has512 = false

// Kernel6x16 is never called where Available is false.
func Kernel6x16(kk int, a, b, out *float32) { panic("avx2: not available") }

// Kernel6x16Acc is never called where Available is false.
func Kernel6x16Acc(kk int, a, b, c *float32, ldc int, alpha float32) { panic("avx2: not available") }

// Kernel6x16Store is never called where Available is false.
func Kernel6x16Store(kk int, a, b, c *float32, ldc int, alpha float32) { panic("avx2: not available") }

// Dot is never called where Available is false.
func Dot(x, y *float32, n int) float32 { panic("avx2: not available") }

// BF16ToF32 is never called where Available is false.
func BF16ToF32(dst *float32, src *uint16, n int) { panic("avx2: not available") }

// Axpy is never called where Available is false.
func Axpy(alpha float32, x, y *float32, n int) { panic("avx2: not available") }

// ExpSum is never called where Available is false.
func ExpSum(x *float32, n int, shift float32) float32 { panic("avx2: not available") }

// Dot4 is never called where Available is false.
func Dot4(x, b0, b1, b2, b3 *float32, n int, out *float32) { panic("avx2: not available") }

// Sigmoid is never called where Available is false.
func Sigmoid(dst, src *float32, n int) { panic("avx2: not available") }

// SiLUMul is never called where Available is false.
func SiLUMul(h, gate, up *float32, n int) { panic("avx2: not available") }

// Kernel12x32Acc is never called where Has512 is false.
func Kernel12x32Acc(kk int, a, b, c *float32, ldc int, alpha float32) { panic("avx2: not available") }

// Kernel12x32Store is never called where Has512 is false.
func Kernel12x32Store(kk int, a, b, c *float32, ldc int, alpha float32) { panic("avx2: not available") }

// Max is not available on this architecture.
func Max(x *float32, n int) float32 { panic("avx2: not available") }

// Scale is not available on this architecture.
func Scale(alpha float32, x *float32, n int) { panic("avx2: not available") }

// MulScale is not available on this architecture.
func MulScale(alpha float32, x, w, out *float32, n int) { panic("avx2: not available") }
