package blas

import (
	"math"

	"github.com/autocompress/autocompress/engine/blas/internal/avx2"
)

// ExpShiftSum sets x[i] = exp(x[i] − shift) and returns Σ x[i], the core of
// a softmax. It uses the AVX2 kernel where available (relative error
// < 2e-7, inputs clamped to [−87.3, 88.4] after the shift) and math.Exp
// otherwise.
func ExpShiftSum(x []float32, shift float32) float32 {
	var sum float32
	head := 0
	if useAsm && len(x) >= 8 {
		head = len(x) &^ 7
		sum = avx2.ExpSum(&x[0], head, shift)
	}
	for i := head; i < len(x); i++ {
		e := float32(math.Exp(float64(x[i] - shift)))
		x[i] = e
		sum += e
	}
	return sum
}
