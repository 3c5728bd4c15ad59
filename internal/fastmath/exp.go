// Package fastmath holds float32 elementary functions that the engine's
// and the distillation loss's inner loops share.
package fastmath

import "math"

// Exp returns e^x in float32 with a relative error below 2e-7 (Cephes
// expf: range reduction by ln 2 and a degree-6 polynomial), about 4× faster
// than math.Exp. It returns 0 below −87.3 and +Inf above 88.7.
func Exp(x float32) float32 {
	switch {
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	case x != x:
		return x
	}
	t := x * 1.442695041
	if t < 0 {
		t -= 0.5
	} else {
		t += 0.5
	}
	ni := int32(t) // round to nearest
	n := float32(ni)
	r := x - n*0.693359375
	r -= n * -2.12194440e-4
	z := r * r
	p := ((((1.9875691500e-4*r+1.3981999507e-3)*r+8.3334519073e-3)*r+4.1665795894e-2)*r+1.6666665459e-1)*r + 5.0000001201e-1
	p = p*z + r + 1
	if ni > 0 { // 2^ni = 2·2^(ni−1) keeps ni = 128 finite
		return 2 * p * math.Float32frombits(uint32(ni+126)<<23)
	}
	return p * math.Float32frombits(uint32(ni+127)<<23)
}
