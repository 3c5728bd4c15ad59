package blas

import (
	"math"

	"github.com/autocompress/autocompress/engine/blas/internal/avx2"
)

// LogSumExp returns log Σ exp(row), the normaliser of a log-softmax
// (log p_j = row_j − LogSumExp), leaving exp(row − max row) in tmp
// (len(row) or more; tmp[:len(row)] is written). It is the one log-softmax
// of the engine, the evaluation and the proxies.
func LogSumExp(tmp, row []float32) float64 {
	tmp = tmp[:len(row)]
	copy(tmp, row)
	mx := Max(tmp)
	return float64(mx) + math.Log(float64(ExpShiftSum(tmp, mx)))
}

// Softmax writes softmax(row) to p (len(row)) and returns log Σ exp(row)
// (as LogSumExp).
func Softmax(p, row []float32) float64 {
	p = p[:len(row)]
	copy(p, row)
	mx := Max(p)
	s := ExpShiftSum(p, mx)
	Scale(1/s, p)
	return float64(mx) + math.Log(float64(s))
}

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

// Sigmoid sets dst[i] = 1/(1+exp(−src[i])) (len(dst) == len(src)); AVX2
// where available (relative error < 2e-7), math.Exp otherwise.
func Sigmoid(dst, src []float32) {
	n := len(src)
	dst = dst[:n]
	head := 0
	if useAsm && n >= 8 {
		head = n &^ 7
		avx2.Sigmoid(&dst[0], &src[0], head)
	}
	for i := head; i < n; i++ {
		dst[i] = float32(1 / (1 + math.Exp(-float64(src[i]))))
	}
}

// SiLUMul sets h[i] = gate[i]·up[i]·sigmoid(gate[i]), the SwiGLU product
// (all of one length); AVX2 where available.
func SiLUMul(h, gate, up []float32) {
	n := len(gate)
	h, up = h[:n], up[:n]
	head := 0
	if useAsm && n >= 8 {
		head = n &^ 7
		avx2.SiLUMul(&h[0], &gate[0], &up[0], head)
	}
	for i := head; i < n; i++ {
		g := float64(gate[i])
		h[i] = float32(g * float64(up[i]) / (1 + math.Exp(-g)))
	}
}

// Max returns the largest element of x (−Inf for an empty x); AVX2 where
// available. With NaNs in x the result is unspecified.
func Max(x []float32) float32 {
	m := float32(math.Inf(-1))
	head := 0
	if useAsm && len(x) >= 8 {
		head = len(x) &^ 7
		m = avx2.Max(&x[0], head)
	}
	for _, v := range x[head:] {
		m = max(m, v)
	}
	return m
}

// Scale sets x[i] *= alpha; AVX2 where available.
func Scale(alpha float32, x []float32) {
	head := 0
	if useAsm && len(x) >= 8 {
		head = len(x) &^ 7
		avx2.Scale(alpha, &x[0], head)
	}
	for i := head; i < len(x); i++ {
		x[i] *= alpha
	}
}

// MulScale sets out[i] = (x[i]·alpha)·w[i] (all of len(x); out may alias
// x), the output of a norm layer; AVX2 where available, bit-identical to
// the scalar loop.
func MulScale(out []float32, alpha float32, x, w []float32) {
	n := len(x)
	out, w = out[:n], w[:n]
	head := 0
	if useAsm && n >= 8 {
		head = n &^ 7
		avx2.MulScale(alpha, &x[0], &w[0], &out[0], head)
	}
	for i := head; i < n; i++ {
		out[i] = x[i] * alpha * w[i]
	}
}

// Dot returns Σ x[i]·y[i] (len(y) ≥ len(x)); AVX2 where available.
func Dot(x, y []float32) float32 { return dot(x, y[:len(x)]) }

// Axpy sets y[i] += alpha·x[i] (len(y) ≥ len(x)); AVX2 where available.
func Axpy(alpha float32, x, y []float32) { axpy(alpha, x, y[:len(x)]) }
