package fastmath

import (
	"math"
	"testing"
)

func TestExp(t *testing.T) {
	var worst float64
	for x := float32(-87); x < 88; x += 0.003117 {
		want := math.Exp(float64(x))
		worst = max(worst, math.Abs(float64(Exp(x))-want)/want)
	}
	if worst > 2e-7 {
		t.Fatalf("relative error %.3g > 2e-7", worst)
	}
	if Exp(-100) != 0 || !math.IsInf(float64(Exp(100)), 1) || Exp(float32(math.NaN())) == Exp(float32(math.NaN())) {
		t.Fatal("range ends or NaN wrong")
	}
}
