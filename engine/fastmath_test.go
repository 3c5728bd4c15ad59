package engine

import (
	"math"
	"testing"
	"time"
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

// BenchmarkFastMath reports the table sigmoid and the polynomial expf
// against math.Exp, measured in the same run, as speed-ups.
func BenchmarkFastMath(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%200)*0.1 - 10
	}
	measure := func(f func(v float32) float32) float64 {
		best := math.Inf(1)
		for range 5 {
			var s float32
			t0 := time.Now()
			for range 50 {
				for _, v := range x {
					s += f(v)
				}
			}
			best = min(best, time.Since(t0).Seconds())
			sink = s
		}
		return best / (50 * float64(len(x))) * 1e9
	}
	for b.Loop() {
		ref := measure(func(v float32) float32 { return float32(1 / (1 + math.Exp(-float64(v)))) })
		tab := measure(sigmoid)
		ex := measure(func(v float32) float32 { return float32(math.Exp(float64(v))) })
		poly := measure(expf)
		b.ReportMetric(ref/tab, "sigmoid-speedup")
		b.ReportMetric(ex/poly, "expf-speedup")
		b.Logf("sigmoid: math.Exp form %.2f ns, table %.2f ns (%.1f×); exp: math.Exp %.2f ns, expf %.2f ns (%.1f×)", ref, tab, ref/tab, ex, poly, ex/poly)
	}
}

var sink float32
