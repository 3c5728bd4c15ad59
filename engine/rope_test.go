package engine

import (
	"math"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// TestRopePartialAndScaling checks partial rotary (only the first
// partial·head_dim dims of each head turn, as rotate_half pairs (i, i+rot/2))
// and the llama3 frequency rule: wavelengths under
// original/high_freq_factor keep their frequency, those over
// original/low_freq_factor are divided by factor, and those between are
// interpolated.
func TestRopePartialAndScaling(t *testing.T) {
	a := &architecture.Model{Rope: architecture.Rope{Theta: 100, PartialFactor: 0.5}}
	tab := newRopeTable(a, 8) // rot 4: frequencies 1 and 1/10
	if tab.half != 2 || math.Abs(tab.invFreq[0]-1) > 1e-12 || math.Abs(tab.invFreq[1]-0.1) > 1e-12 {
		t.Fatalf("partial table: half %d inv_freq %v", tab.half, tab.invFreq)
	}
	tab.ensure(4)
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	ropeApply(x, 1, 1, 8, tab, func(int) int { return 3 }, 1)
	for i, f := range []float64{1, 0.1} {
		c, s := math.Cos(3*f), math.Sin(3*f)
		x1, x2 := float64(1+i), float64(3+i)
		if math.Abs(float64(x[i])-(x1*c-x2*s)) > 1e-6 || math.Abs(float64(x[i+2])-(x2*c+x1*s)) > 1e-6 {
			t.Fatalf("pair %d rotated to %v, %v", i, x[i], x[i+2])
		}
	}
	for i := 4; i < 8; i++ {
		if x[i] != float32(i+1) {
			t.Fatalf("pass-through dim %d changed to %v", i, x[i])
		}
	}
	// Inverse rotation restores the input.
	ropeApply(x, 1, 1, 8, tab, func(int) int { return 3 }, -1)
	for i := range x {
		if math.Abs(float64(x[i])-float64(i+1)) > 1e-6 {
			t.Fatalf("inverse rotation: x[%d] = %v", i, x[i])
		}
	}

	// llama3: θ = 10000, head_dim 64, factor 8, low 1, high 4, original 256
	// → high-frequency wavelengths < 64 kept, > 256 divided by 8.
	s := &architecture.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 256}
	plain := newRopeTable(&architecture.Model{Rope: architecture.Rope{Theta: 10000}}, 64)
	scaled := newRopeTable(&architecture.Model{Rope: architecture.Rope{Theta: 10000, Scaling: s}}, 64)
	var kept, divided, mixed int
	for i, f := range plain.invFreq {
		wave := 2 * math.Pi / f
		g := scaled.invFreq[i]
		switch {
		case wave < 64:
			kept++
			if g != f {
				t.Errorf("wavelength %.1f: %v, want unchanged %v", wave, g, f)
			}
		case wave > 256:
			divided++
			if math.Abs(g-f/8) > 1e-15 {
				t.Errorf("wavelength %.1f: %v, want %v/8", wave, g, f)
			}
		default:
			mixed++
			if !(g > f/8 && g < f) {
				t.Errorf("wavelength %.1f: %v not between %v/8 and %v", wave, g, f, f)
			}
		}
	}
	if kept == 0 || divided == 0 || mixed == 0 {
		t.Fatalf("test does not cover all three regimes: %d kept, %d divided, %d mixed", kept, divided, mixed)
	}
}
