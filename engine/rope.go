package engine

import (
	"math"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// ropeTable holds cos/sin of position·inv_freq for positions [0, n), half =
// rot/2 frequencies per position.
type ropeTable struct {
	half     int
	invFreq  []float64
	cos, sin []float32
	n        int
}

// newRopeTable computes the inverse frequencies of HF's rotary embedding for
// a head of hd dims: 1/θ^(2i/rot) for the rot = partial·hd rotated dims, with
// "linear" (divide by factor) or "llama3" (frequency-dependent) scaling.
func newRopeTable(a *architecture.Model, hd int) *ropeTable {
	rot := rotDim(a, hd)
	theta := a.Rope.Theta
	if theta <= 0 {
		theta = 10000
	}
	t := &ropeTable{half: rot / 2, invFreq: make([]float64, rot/2)}
	for i := range t.invFreq {
		t.invFreq[i] = 1 / math.Pow(theta, float64(2*i)/float64(rot))
	}
	if s := a.Rope.Scaling; s != nil && s.Factor > 0 {
		switch strings.ToLower(s.Type) {
		case "linear":
			for i := range t.invFreq {
				t.invFreq[i] /= s.Factor
			}
		case "llama3":
			low, high := s.LowFreqFactor, s.HighFreqFactor
			old := float64(s.OriginalMaxPositions)
			if low <= 0 {
				low = 1
			}
			if high <= 0 {
				high = 4
			}
			if old <= 0 {
				old = 8192
			}
			lowWave, highWave := old/low, old/high
			for i, f := range t.invFreq {
				wave := 2 * math.Pi / f
				switch {
				case wave < highWave:
				case wave > lowWave:
					t.invFreq[i] = f / s.Factor
				default:
					smooth := (old/wave - low) / (high - low)
					t.invFreq[i] = (1-smooth)*f/s.Factor + smooth*f
				}
			}
		}
	}
	return t
}

// ensure extends the table to at least n positions.
func (t *ropeTable) ensure(n int) {
	if n <= t.n {
		return
	}
	n = max(n, 2*t.n, 64)
	cos := make([]float32, n*t.half)
	sin := make([]float32, n*t.half)
	copy(cos, t.cos)
	copy(sin, t.sin)
	for p := t.n; p < n; p++ {
		for i, f := range t.invFreq {
			// HF computes the angle in float32: keep that rounding.
			ang := float32(p) * float32(f)
			cos[p*t.half+i] = float32(math.Cos(float64(ang)))
			sin[p*t.half+i] = float32(math.Sin(float64(ang)))
		}
	}
	t.cos, t.sin, t.n = cos, sin, n
}
