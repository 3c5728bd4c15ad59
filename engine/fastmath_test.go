package engine

import (
	"math"
	"testing"
)

func TestExpf(t *testing.T) {
	var worst float64
	for x := float32(-87); x < 88; x += 0.001731 {
		want := math.Exp(float64(x))
		got := float64(expf(x))
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
	}
	if worst > 2e-7 {
		t.Fatalf("expf relative error %.3g > 2e-7", worst)
	}
	if expf(-100) != 0 || !math.IsInf(float64(expf(100)), 1) || expf(float32(math.Inf(-1))) != 0 {
		t.Fatal("expf range ends wrong")
	}
	t.Logf("expf max relative error %.3g", worst)
}

func FuzzExpf(f *testing.F) {
	f.Add(float32(0))
	f.Add(float32(-87.3))
	f.Add(float32(88.7))
	f.Fuzz(func(t *testing.T, x float32) {
		got, want := float64(expf(x)), math.Exp(float64(x))
		if x != x {
			if got == got {
				t.Fatalf("expf(NaN) = %v", got)
			}
			return
		}
		if want > math.MaxFloat32 || want < 1.2e-38 {
			return // overflow / subnormal range: clamped
		}
		if math.Abs(got-want) > 3e-7*want {
			t.Fatalf("expf(%v) = %v, want %v", x, got, want)
		}
	})
}

func BenchmarkExpf(b *testing.B) {
	var s float32
	for i := 0; b.Loop(); i++ {
		s += expf(float32(i&127) * -0.1)
	}
	_ = s
}

func BenchmarkMathExp(b *testing.B) {
	var s float64
	for i := 0; b.Loop(); i++ {
		s += math.Exp(float64(i&127) * -0.1)
	}
	_ = s
}

func TestSigmoid(t *testing.T) {
	var worst float64
	for x := float32(-30); x < 30; x += 0.000731 {
		want := 1 / (1 + math.Exp(-float64(x)))
		worst = max(worst, math.Abs(float64(sigmoid(x))-want))
	}
	if worst > 1e-6 {
		t.Fatalf("sigmoid absolute error %.3g > 1e-6", worst)
	}
	t.Logf("sigmoid max absolute error %.3g", worst)
}

func BenchmarkSigmoidTable(b *testing.B) {
	var s float32
	for i := 0; b.Loop(); i++ {
		s += sigmoid(float32(i&127) * -0.1)
	}
	_ = s
}

func BenchmarkSigmoidExp(b *testing.B) {
	var s float32
	for i := 0; b.Loop(); i++ {
		s += 1 / (1 + float32(math.Exp(float64(float32(i&127)*0.1))))
	}
	_ = s
}
