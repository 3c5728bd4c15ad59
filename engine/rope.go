package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// ropeTable holds cos/sin of position·inv_freq for positions [0, n), half =
// rot/2 frequencies per position.
type ropeTable struct {
	half    int
	invFreq []float64
	// scale multiplies cos and sin: YaRN's attention factor, else 1
	// (transformers' rotary embeddings: cos = emb.cos() ·
	// attention_scaling, in float32).
	scale    float32
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
	t := &ropeTable{half: rot / 2, invFreq: make([]float64, rot/2), scale: 1}
	for i := range t.invFreq {
		t.invFreq[i] = 1 / math.Pow(theta, float64(2*i)/float64(rot))
	}
	if y, _ := yarnOf(a); y != nil {
		t.scale = float32(y.apply(t.invFreq, theta, rot))
		return t
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
			cos[p*t.half+i] = float32(math.Cos(float64(ang))) * t.scale
			sin[p*t.half+i] = float32(math.Sin(float64(ang))) * t.scale
		}
	}
	t.cos, t.sin, t.n = cos, sin, n
}

// yarn are the constants of YaRN RoPE (rope_scaling type "yarn").
type yarn struct {
	factor, old          float64 // scaling factor, original_max_position_embeddings
	betaFast, betaSlow   float64
	truncate             bool
	attention            float64 // attention_factor; 0: derived
	mscale, mscaleAllDim float64
}

// yarnOf returns a's YaRN constants, nil when its RoPE is not YaRN, or an
// error for unusable ones. The defaults are _compute_yarn_parameters'
// (transformers modeling_rope_utils.py): factor max_position_embeddings /
// original when absent, original_max_position_embeddings
// max_position_embeddings when absent, beta_fast 32, beta_slow 1, truncate
// true — read as the reference trainer reads them (acmodel.py,
// _yarn_params), factor as given. A config without rope scaling (and no
// explicit rope_type "default") gets its family's default YaRN
// (architecture.YaRNRule.Default: GptOssConfig's).
func yarnOf(a *architecture.Model) (*yarn, error) {
	s := a.Rope.Scaling
	if s == nil {
		if s = a.Family().YaRN.Default; s == nil || explicitDefaultRope(a.Raw) {
			return nil, nil
		}
	}
	if strings.ToLower(s.Type) != "yarn" {
		return nil, nil
	}
	num := func(k string) (float64, bool) {
		return jsonFloat(s.Extra[k])
	}
	y := &yarn{factor: s.Factor, old: float64(s.OriginalMaxPositions), betaFast: 32, betaSlow: 1, truncate: true}
	if y.old <= 0 {
		y.old = float64(a.MaxPositions)
	}
	if y.old <= 0 {
		return nil, fmt.Errorf("rope_scaling yarn without original_max_position_embeddings or max_position_embeddings")
	}
	if y.factor == 0 {
		y.factor = float64(a.MaxPositions) / y.old
	}
	if !(y.factor > 0) || math.IsInf(y.factor, 0) {
		return nil, fmt.Errorf("rope_scaling yarn factor %v (want a positive finite number)", y.factor)
	}
	if v, ok := num("beta_fast"); ok && v != 0 {
		y.betaFast = v
	}
	if v, ok := num("beta_slow"); ok && v != 0 {
		y.betaSlow = v
	}
	if v, ok := s.Extra["truncate"].(bool); ok {
		y.truncate = v
	}
	y.attention, _ = num("attention_factor")
	y.mscale, _ = num("mscale")
	y.mscaleAllDim, _ = num("mscale_all_dim")
	for _, v := range []float64{y.betaFast, y.betaSlow, y.old} {
		if !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("rope_scaling yarn beta_fast %v, beta_slow %v, original positions %v (want positive finite numbers)", y.betaFast, y.betaSlow, y.old)
		}
	}
	for _, v := range []float64{y.attention, y.mscale, y.mscaleAllDim} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("rope_scaling yarn attention_factor %v, mscale %v, mscale_all_dim %v (want finite numbers)", y.attention, y.mscale, y.mscaleAllDim)
		}
	}
	return y, nil
}

// explicitDefaultRope reports whether config.json says its RoPE is
// unscaled (a non-empty rope_scaling such as {"rope_type": "default"}, or
// transformers 5's rope_parameters with a rope_type), which keeps
// GptOssConfig from filling in its YaRN (as acmodel.py's _rope reads it).
func explicitDefaultRope(raw map[string]any) bool {
	if s, ok := raw["rope_scaling"].(map[string]any); ok && len(s) > 0 {
		return true
	}
	p, ok := raw["rope_parameters"].(map[string]any)
	if !ok {
		return false
	}
	_, ok = p["rope_type"]
	return ok
}

// apply blends the inverse frequencies inv (rot/2, the unscaled
// base^(-2i/rot)) in place as _compute_yarn_parameters does (transformers
// modeling_rope_utils.py; find_correction_range, linear_ramp_factor):
//
//	corr(r) = rot · ln(old / (2π r)) / (2 ln base)
//	low, high = corr(beta_fast), corr(beta_slow)   floored / ceiled when truncate
//	low, high = max(low, 0), min(high, rot − 1)    (high += 0.001 when equal)
//	x_i = 1 − clamp((i − low) / (high − low), 0, 1)
//	inv_i = inv_i/factor · (1 − x_i) + inv_i · x_i
//
// and returns the attention factor: attention_factor when given, else
// get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) when both
// are set, else get_mscale(factor) = 0.1·ln(factor) + 1 (1 for factor ≤ 1).
func (y *yarn) apply(inv []float64, base float64, rot int) float64 {
	dim := float64(rot)
	corr := func(r float64) float64 { return dim * math.Log(y.old/(r*2*math.Pi)) / (2 * math.Log(base)) }
	low, high := corr(y.betaFast), corr(y.betaSlow)
	if y.truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = max(low, 0), min(high, dim-1)
	if low == high {
		high += 0.001
	}
	for i, f := range inv {
		x := 1 - min(max((float64(i)-low)/(high-low), 0), 1)
		inv[i] = f/y.factor*(1-x) + f*x
	}
	mscale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	switch {
	case y.attention != 0:
		return y.attention
	case y.mscale != 0 && y.mscaleAllDim != 0:
		return mscale(y.factor, y.mscale) / mscale(y.factor, y.mscaleAllDim)
	}
	return mscale(y.factor, 1)
}

// jsonFloat returns the number v of a parsed config.json (json.Number as
// package architecture keeps it, or float64, int), or false.
func jsonFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}
