package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/x448/float16"
)

// littleEndian is true on little-endian machines, where F32 data can be
// copied without byte swapping.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f16Table maps every IEEE half-precision bit pattern to its float32 value.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
}()

// e4m3Table and e5m2Table map every 8-bit float to its float32 value.
var e4m3Table, e5m2Table = func() (a, b [256]float32) {
	for i := range 256 {
		a[i] = decodeE4M3(uint8(i))
		// E5M2 is the upper byte of an IEEE half.
		b[i] = float16.Frombits(uint16(i) << 8).Float32()
	}
	return
}()

// decodeE4M3 decodes the OCP FP8 E4M3 "fn" format: 1 sign bit, 4 exponent
// bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN.
func decodeE4M3(b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	exp := int(b>>3) & 0xf
	man := int(b & 7)
	switch {
	case exp == 0xf && man == 7:
		return float32(math.NaN())
	case exp == 0:
		return sign * float32(math.Ldexp(float64(man)/8, -6))
	}
	return sign * float32(math.Ldexp(1+float64(man)/8, exp-7))
}

// BF16ToFloat32 converts bfloat16 values (little-endian, 2 bytes each) from
// src into dst and returns the number converted: min(len(dst), len(src)/2).
func BF16ToFloat32(dst []float32, src []byte) int {
	n := min(len(dst), len(src)/2)
	dst, src = dst[:n], src[:2*n]
	if u, ok := u16View(src); ok {
		for i, v := range u {
			dst[i] = math.Float32frombits(uint32(v) << 16)
		}
		return n
	}
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
	return n
}

// F16ToFloat32 converts IEEE half-precision values (little-endian, 2 bytes
// each) from src into dst and returns the number converted.
func F16ToFloat32(dst []float32, src []byte) int {
	n := min(len(dst), len(src)/2)
	dst, src = dst[:n], src[:2*n]
	t := f16Table
	if u, ok := u16View(src); ok {
		for i, v := range u {
			dst[i] = t[v]
		}
		return n
	}
	for i := range dst {
		dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
	}
	return n
}

// F32ToFloat32 converts little-endian float32 values from src into dst and
// returns the number converted.
func F32ToFloat32(dst []float32, src []byte) int {
	n := min(len(dst), len(src)/4)
	if n == 0 {
		return 0
	}
	dst, src = dst[:n], src[:4*n]
	if littleEndian && uintptr(unsafe.Pointer(&src[0]))%4 == 0 {
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), n))
		return n
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return n
}

// Float32ToBF16 converts src to bfloat16 (little-endian) in dst, rounding to
// nearest with ties to even; NaNs stay NaN. It returns the number converted:
// min(len(dst)/2, len(src)).
func Float32ToBF16(dst []byte, src []float32) int {
	n := min(len(dst)/2, len(src))
	for i, f := range src[:n] {
		binary.LittleEndian.PutUint16(dst[2*i:], bf16Bits(f))
	}
	return n
}

func bf16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep sign, force a quiet mantissa bit
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// Float32ToF16 converts src to IEEE half precision (little-endian) in dst,
// rounding to nearest with ties to even; values beyond ±65504 become ±Inf.
// It returns the number converted.
func Float32ToF16(dst []byte, src []float32) int {
	n := min(len(dst)/2, len(src))
	for i, f := range src[:n] {
		binary.LittleEndian.PutUint16(dst[2*i:], float16.Fromfloat32(f).Bits())
	}
	return n
}

// u16View returns b as a []uint16 without copying when the machine is
// little-endian and b is 2-byte aligned.
func u16View(b []byte) ([]uint16, bool) {
	if !littleEndian || len(b) < 2 || uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), true
}

// DecodeFloat32 converts the raw data src of dtype dt into dst, which must
// hold exactly len(src)/dt.Size() elements. Float dtypes (F64, F32, F16,
// BF16, F8_E4M3, F8_E5M2) are supported; others return ErrUnsupported.
func DecodeFloat32(dst []float32, dt DType, src []byte) error {
	sz := dt.Size()
	if sz == 0 {
		return fmt.Errorf("checkpoint: convert to float32: unknown dtype %q: %w", dt, ErrUnsupported)
	}
	if len(src)%sz != 0 || len(dst) != len(src)/sz {
		return fmt.Errorf("checkpoint: convert %s to float32: %d bytes hold %d.%d elements, destination holds %d",
			dt, len(src), len(src)/sz, len(src)%sz, len(dst))
	}
	switch dt {
	case F32:
		F32ToFloat32(dst, src)
	case BF16:
		BF16ToFloat32(dst, src)
	case F16:
		F16ToFloat32(dst, src)
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case F8E4M3:
		for i, b := range src {
			dst[i] = e4m3Table[b]
		}
	case F8E5M2:
		for i, b := range src {
			dst[i] = e5m2Table[b]
		}
	default:
		return fmt.Errorf("checkpoint: convert %s to float32: %w (only F64, F32, F16, BF16, F8_E4M3 and F8_E5M2 are floating point)", dt, ErrUnsupported)
	}
	return nil
}

// ToFloat32 converts raw data of dtype dt into a new []float32.
func ToFloat32(dt DType, src []byte) ([]float32, error) {
	sz := dt.Size()
	if sz == 0 {
		return nil, fmt.Errorf("checkpoint: convert to float32: unknown dtype %q: %w", dt, ErrUnsupported)
	}
	if !dt.IsFloat() {
		return nil, fmt.Errorf("checkpoint: convert %s to float32: %w (only F64, F32, F16, BF16, F8_E4M3 and F8_E5M2 are floating point)", dt, ErrUnsupported)
	}
	dst := make([]float32, len(src)/sz)
	if err := DecodeFloat32(dst, dt, src); err != nil {
		return nil, err
	}
	return dst, nil
}

// FromFloat32 encodes src as dtype dt (F32, F16, BF16 or F64), rounding to
// nearest even where the target is narrower.
func FromFloat32(dt DType, src []float32) ([]byte, error) {
	dst := make([]byte, len(src)*dt.Size())
	if err := EncodeFloat32(dst, dt, src); err != nil {
		return nil, err
	}
	return dst, nil
}

// EncodeFloat32 is FromFloat32 into a caller-provided buffer of exactly
// len(src)*dt.Size() bytes.
func EncodeFloat32(dst []byte, dt DType, src []float32) error {
	sz := dt.Size()
	if sz == 0 {
		return fmt.Errorf("checkpoint: convert float32 to %q: unknown dtype: %w", dt, ErrUnsupported)
	}
	if len(dst) != len(src)*sz {
		return fmt.Errorf("checkpoint: convert float32 to %s: %d elements need %d bytes, destination holds %d", dt, len(src), len(src)*sz, len(dst))
	}
	switch dt {
	case F32:
		if littleEndian && len(src) > 0 && uintptr(unsafe.Pointer(&dst[0]))%4 == 0 {
			copy(unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), len(src)), src)
			return nil
		}
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	case BF16:
		Float32ToBF16(dst, src)
	case F16:
		Float32ToF16(dst, src)
	case F64:
		for i, f := range src {
			binary.LittleEndian.PutUint64(dst[8*i:], math.Float64bits(float64(f)))
		}
	default:
		return fmt.Errorf("checkpoint: convert float32 to %s: %w (write F32, F16, BF16 or F64)", dt, ErrUnsupported)
	}
	return nil
}
