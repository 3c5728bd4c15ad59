package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// randHalf returns n random values of kind k and their float32 values.
func randHalf(r *rand.Rand, kind HalfKind, n int) ([]uint16, []float32) {
	h := make([]uint16, n)
	f := make([]float32, n)
	for i := range h {
		v := float32(r.NormFloat64())
		if kind == BF16 {
			h[i] = uint16(math.Float32bits(v) >> 16)
		} else {
			h[i] = float16.Fromfloat32(v).Bits()
		}
	}
	kind.ToFloat32(f, h)
	return h, f
}

func TestHalfToFloat32(t *testing.T) {
	// Exact values of a few bit patterns of each kind.
	cases := []struct {
		kind HalfKind
		bits uint16
		want float32
	}{
		{BF16, 0x3f80, 1}, {BF16, 0xc000, -2}, {BF16, 0x0000, 0}, {BF16, 0x7f80, float32(math.Inf(1))},
		{F16, 0x3c00, 1}, {F16, 0xc000, -2}, {F16, 0x0001, 5.9604645e-08}, {F16, 0x7bff, 65504},
	}
	for _, c := range cases {
		var got [1]float32
		c.kind.ToFloat32(got[:], []uint16{c.bits})
		if got[0] != c.want {
			t.Errorf("%v %#04x = %v, want %v", c.kind, c.bits, got[0], c.want)
		}
	}
}

// TestSgemmHalfBitExact: with the pure-Go backend the half-weight product
// equals, bit for bit, the float32 product on the weights converted first,
// for shapes that cross every tile and column-group boundary, with each
// micro-kernel. (OpenBLAS's sum order depends on the columns around an
// element, so a tile's product differs in the last bits from the whole
// matrix's: TestSgemmHalfOpenBLAS bounds that difference instead.)
func TestSgemmHalfBitExact(t *testing.T) {
	defer ForceGo(ForceGo(true))
	r := rand.New(rand.NewPCG(7, 8))
	shapes := [][3]int{{1, 1, 1}, {1, 37, 19}, {3, 100, 64}, {4, 129, 300}, {5, 33, 17}, {17, 200, 130}, {64, 300, 1100}, {100, 70, 4096}, {2, 1030, 4096}}
	modes := map[string]kernelMode{"default": mode, "portable": modeGo}
	if mode == modeAVX512 {
		modes["AVX2"] = modeAVX2
	}
	for name, md := range modes {
		prev := mode
		setMode(md)
		for _, kind := range []HalfKind{BF16, F16} {
			for _, s := range shapes {
				m, n, k := s[0], s[1], s[2]
				for _, beta := range []float32{0, 1} {
					a := randSlice(r, m*k)
					bh, bf := randHalf(r, kind, n*k)
					c0 := randSlice(r, m*n)
					want := append([]float32(nil), c0...)
					got := append([]float32(nil), c0...)
					Sgemm(false, true, m, n, k, 1, a, k, bf, k, beta, want, n)
					SgemmHalf(m, n, k, a, k, bh, kind, k, beta, got, n)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s kernel, %v, m=%d n=%d k=%d beta=%v: C[%d] = %v, float32 path %v", name, kind, m, n, k, beta, i, got[i], want[i])
						}
					}
				}
			}
		}
		setMode(prev)
	}
}

// TestSgemmHalfOpenBLAS: with the compiled-in backend (OpenBLAS under the
// openblas tag) the half-weight product matches the float32 product to
// float32 rounding.
func TestSgemmHalfOpenBLAS(t *testing.T) {
	if Backend() != "openblas" {
		t.Skip("built without -tags openblas: TestSgemmHalfBitExact covers the Go backend")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range [][3]int{{1, 37, 19}, {2, 1030, 4096}, {17, 200, 130}, {64, 300, 1100}} {
		m, n, k := s[0], s[1], s[2]
		a := randSlice(r, m*k)
		bh, bf := randHalf(r, BF16, n*k)
		want, got := make([]float32, m*n), make([]float32, m*n)
		Sgemm(false, true, m, n, k, 1, a, k, bf, k, 0, want, n)
		SgemmHalf(m, n, k, a, k, bh, BF16, k, 0, got, n)
		// The sums of k products of unit normals: float32 rounding of
		// either order is within a few ulps of sqrt(k).
		tol := 1e-5 * math.Sqrt(float64(k))
		for i := range want {
			if d := math.Abs(float64(want[i] - got[i])); d > tol*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("m=%d n=%d k=%d: C[%d] = %v, float32 path %v (|diff| %.3g > %.3g)", m, n, k, i, got[i], want[i], d, tol)
			}
		}
	}
}

func TestSgemmHalfStrides(t *testing.T) {
	// A, B and C inside larger matrices: B with stride ldb > k.
	r := rand.New(rand.NewPCG(9, 10))
	m, n, k, lda, ldb, ldc := 7, 40, 33, 40, 50, 45
	a := randSlice(r, m*lda)
	bh, bf := randHalf(r, BF16, n*ldb)
	want, got := make([]float32, m*ldc), make([]float32, m*ldc)
	refGemm(false, true, m, n, k, 1, a, lda, bf, ldb, 0, want, ldc)
	SgemmHalf(m, n, k, a, lda, bh, BF16, ldb, 0, got, ldc)
	for i := range want {
		if d := math.Abs(float64(want[i] - got[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("C[%d] = %v, reference %v", i, got[i], want[i])
		}
	}
}

func TestSgemmHalfPanicsOnShortB(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a B too short")
		}
	}()
	SgemmHalf(2, 3, 4, make([]float32, 8), 4, make([]uint16, 11), BF16, 4, 0, make([]float32, 6), 3)
}

// TestBF16ToFloat32Kernels: the vector widening equals the scalar one for
// every length around the vector widths.
func TestBF16ToFloat32Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 80 {
		src := make([]uint16, n)
		for i := range src {
			src[i] = uint16(r.Uint32())
		}
		got := make([]float32, n)
		BF16.ToFloat32(got, src)
		for i, h := range src {
			if want := math.Float32bits(math.Float32frombits(uint32(h) << 16)); math.Float32bits(got[i]) != want {
				t.Fatalf("n=%d: element %d of %#04x is %#08x, want %#08x", n, i, h, math.Float32bits(got[i]), want)
			}
		}
	}
}
