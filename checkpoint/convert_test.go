package checkpoint

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// halfRef decodes an IEEE binary16 value from its definition, independently
// of the table the package uses.
func halfRef(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 31:
		if m == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

func TestF16ToFloat32Exhaustive(t *testing.T) {
	src := make([]byte, 2<<16)
	for i := range 1 << 16 {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(i))
	}
	dst := make([]float32, 1<<16)
	if n := F16ToFloat32(dst, src); n != 1<<16 {
		t.Fatalf("converted %d", n)
	}
	for i, got := range dst {
		want := halfRef(uint16(i))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("%#04x: got %v, want NaN", i, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("%#04x: got %v, want %v", i, got, want)
		}
	}
}

// TestFloat32ToF16RoundsToNearestEven checks every pair of adjacent positive
// halves: both round-trip, the exact midpoint goes to the even one, and the
// float32 values just either side of the midpoint go to the nearer one.
func TestFloat32ToF16RoundsToNearestEven(t *testing.T) {
	enc := func(f float32) uint16 {
		var b [2]byte
		Float32ToF16(b[:], []float32{f})
		return binary.LittleEndian.Uint16(b[:])
	}
	for h := uint16(0); h < 0x7bff; h++ { // up to the largest finite half
		a, b := float32(halfRef(h)), float32(halfRef(h+1))
		mid := float32((float64(a) + float64(b)) / 2)
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		if got := enc(a); got != h {
			t.Fatalf("encode(%v) = %#04x, want %#04x", a, got, h)
		}
		if got := enc(mid); got != even {
			t.Fatalf("encode(midpoint %v of %#04x,%#04x) = %#04x, want even %#04x", mid, h, h+1, got, even)
		}
		if got := enc(math.Nextafter32(mid, 0)); got != h {
			t.Fatalf("just below midpoint of %#04x: got %#04x", h, got)
		}
		if got := enc(math.Nextafter32(mid, 1e9)); got != h+1 {
			t.Fatalf("just above midpoint of %#04x: got %#04x", h, got)
		}
	}
	if got := enc(70000); got != 0x7c00 {
		t.Errorf("70000 -> %#04x, want +Inf", got)
	}
	if got := enc(-1); got != 0xbc00 {
		t.Errorf("-1 -> %#04x", got)
	}
}

func TestFloat32ToBF16RoundsToNearestEven(t *testing.T) {
	enc := func(f float32) uint16 {
		var b [2]byte
		Float32ToBF16(b[:], []float32{f})
		return binary.LittleEndian.Uint16(b[:])
	}
	for h := uint32(0); h < 0x7f7f; h++ {
		for _, sign := range []uint32{0, 0x8000} {
			lo := (h | sign) << 16
			mid := lo | 0x8000
			even := uint16(h | sign)
			if h&1 == 1 {
				even++
			}
			if got := enc(math.Float32frombits(lo)); got != uint16(h|sign) {
				t.Fatalf("round trip %#04x -> %#04x", h|sign, got)
			}
			if got := enc(math.Float32frombits(mid)); got != even {
				t.Fatalf("midpoint %#08x -> %#04x, want %#04x", mid, got, even)
			}
			if got := enc(math.Float32frombits(mid - 1)); got != uint16(h|sign) {
				t.Fatalf("below midpoint %#08x -> %#04x", mid-1, got)
			}
			if got := enc(math.Float32frombits(mid + 1)); got != uint16(h|sign)+1 {
				t.Fatalf("above midpoint %#08x -> %#04x", mid+1, got)
			}
		}
	}
	special := []struct {
		in   float32
		want uint16
	}{
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		{math.MaxFloat32, 0x7f80}, // rounds up to infinity
		{1, 0x3f80},
		{-2, 0xc000},
		{0, 0},
	}
	for _, s := range special {
		if got := enc(s.in); got != s.want {
			t.Errorf("%v -> %#04x, want %#04x", s.in, got, s.want)
		}
	}
	for _, nan := range []uint32{0x7f800001, 0x7fc00000, 0xff800001, 0x7f80ffff} {
		got := enc(math.Float32frombits(nan))
		if got&0x7f80 != 0x7f80 || got&0x7f == 0 {
			t.Errorf("NaN %#08x -> %#04x, not a NaN", nan, got)
		}
	}
}

func TestFP8Decoding(t *testing.T) {
	e4m3 := []struct {
		b    byte
		want float64
	}{
		{0x00, 0}, {0x01, math.Ldexp(1, -9)}, {0x07, 7 * math.Ldexp(1, -9)}, {0x08, math.Ldexp(1, -6)},
		{0x38, 1}, {0x40, 2}, {0x3c, 1.5}, {0x7e, 448}, {0xfe, -448}, {0xb8, -1},
	}
	for _, c := range e4m3 {
		got, err := ToFloat32(F8E4M3, []byte{c.b})
		if err != nil || float64(got[0]) != c.want {
			t.Errorf("E4M3 %#02x = %v, %v; want %v", c.b, got, err, c.want)
		}
	}
	for _, nan := range []byte{0x7f, 0xff} {
		got, _ := ToFloat32(F8E4M3, []byte{nan})
		if !math.IsNaN(float64(got[0])) {
			t.Errorf("E4M3 %#02x = %v, want NaN", nan, got[0])
		}
	}
	prev := float32(-1)
	for b := range 0x7f { // strictly increasing over the non-negative codes
		v := e4m3Table[b]
		if !(v > prev) {
			t.Fatalf("E4M3 %#02x = %v not above %v", b, v, prev)
		}
		prev = v
	}
	e5m2 := []struct {
		b    byte
		want float64
	}{
		{0x3c, 1}, {0x01, math.Ldexp(1, -16)}, {0x7b, 57344}, {0x7c, math.Inf(1)}, {0xfc, math.Inf(-1)}, {0xc0, -2},
	}
	for _, c := range e5m2 {
		got, _ := ToFloat32(F8E5M2, []byte{c.b})
		if float64(got[0]) != c.want {
			t.Errorf("E5M2 %#02x = %v, want %v", c.b, got[0], c.want)
		}
	}
	for b := range 256 { // E5M2 is the high byte of a binary16
		got := float64(e5m2Table[b])
		want := halfRef(uint16(b) << 8)
		if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("E5M2 %#02x = %v, want %v", b, got, want)
		}
	}
}

func TestConversionRoundTrips(t *testing.T) {
	vals := []float32{0, 1, -1, 0.5, 3.140625, -65504, 1e-3}
	for _, dt := range []DType{F32, F64, F16, BF16} {
		b, err := FromFloat32(dt, vals)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != len(vals)*dt.Size() {
			t.Fatalf("%s: %d bytes", dt, len(b))
		}
		got, err := ToFloat32(dt, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			tol := float64(0)
			switch dt {
			case F16:
				tol = math.Abs(float64(v)) * 1.0 / 2048
			case BF16:
				tol = math.Abs(float64(v)) * 1.0 / 256
			}
			if math.Abs(float64(got[i]-v)) > tol {
				t.Errorf("%s: %v -> %v", dt, v, got[i])
			}
		}
	}
	// Unaligned sources take the byte-by-byte path and must agree.
	b, _ := FromFloat32(F32, vals)
	odd := append([]byte{0}, b...)[1:]
	got := make([]float32, len(vals))
	F32ToFloat32(got, odd)
	for i := range vals {
		if got[i] != vals[i] {
			t.Fatalf("unaligned F32 %d: %v", i, got[i])
		}
	}
	hb, _ := FromFloat32(BF16, vals)
	oddh := append([]byte{0}, hb...)[1:]
	g1, g2 := make([]float32, len(vals)), make([]float32, len(vals))
	BF16ToFloat32(g1, hb)
	BF16ToFloat32(g2, oddh)
	F16ToFloat32(g1[:0], oddh) // zero-length destination converts nothing
	for i := range g1 {
		if g1[i] != g2[i] {
			t.Fatalf("unaligned BF16 %d", i)
		}
	}
}

func TestConversionErrors(t *testing.T) {
	if _, err := ToFloat32(I64, make([]byte, 8)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("ToFloat32(I64) err = %v, want ErrUnsupported", err)
	}
	if _, err := ToFloat32("X9", nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown dtype err = %v", err)
	}
	if err := DecodeFloat32(make([]float32, 2), F32, make([]byte, 7)); err == nil {
		t.Error("7 bytes of F32 accepted")
	}
	if _, err := FromFloat32(F8E4M3, []float32{1}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("FromFloat32(F8) err = %v", err)
	}
	if n := BF16ToFloat32(make([]float32, 10), make([]byte, 6)); n != 3 {
		t.Errorf("converted %d, want 3", n)
	}
}

func TestParseDType(t *testing.T) {
	for in, want := range map[string]DType{"BF16": BF16, "bfloat16": BF16, "torch.float16": F16, "float32": F32, "F8_E4M3": F8E4M3, "float8_e4m3fn": F8E4M3, "int64": I64,
		// the lower-case short names init --dtype documents
		"bf16": BF16, "f16": F16, "f32": F32, "f64": F64} {
		if got, err := ParseDType(in); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDType("float12"); err == nil {
		t.Error("float12 accepted")
	}
}
