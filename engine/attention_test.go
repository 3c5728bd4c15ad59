package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// naiveAttention is a float64 reference: out[b,t,h,:] = Σ_j p_j v[b,j,g,:]
// with p = softmax over allowed keys j of q·k/√hd.
func naiveAttention(q, k, v []float64, s attnShape) []float64 {
	T, hd, qd, kd := s.T, s.hd, s.qd(), s.kd()
	out := make([]float64, s.B*T*qd)
	group := s.heads / s.kvH
	for b := 0; b < s.B; b++ {
		for h := 0; h < s.heads; h++ {
			g := h / group
			for i := 0; i < T; i++ {
				sc := make([]float64, T)
				mx := math.Inf(-1)
				for j := 0; j < T; j++ {
					if !s.allowed(i, j) {
						continue
					}
					var d float64
					for e := 0; e < hd; e++ {
						d += q[(b*T+i)*qd+h*hd+e] * k[(b*T+j)*kd+g*hd+e]
					}
					sc[j] = d / math.Sqrt(float64(hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := 0; j < T; j++ {
					if s.allowed(i, j) {
						sc[j] = math.Exp(sc[j] - mx)
						sum += sc[j]
					}
				}
				for j := 0; j < T; j++ {
					if !s.allowed(i, j) {
						continue
					}
					for e := 0; e < hd; e++ {
						out[(b*T+i)*qd+h*hd+e] += sc[j] / sum * v[(b*T+j)*kd+g*hd+e]
					}
				}
			}
		}
	}
	return out
}

func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestAttentionAgainstNaive checks the blocked attention (several 64-row
// blocks, with and without a sliding window) against a float64 reference,
// and its backward against finite differences of that reference.
func TestAttentionAgainstNaive(t *testing.T) {
	T := 150
	if testing.Short() {
		T = 70
	}
	for _, window := range []int{0, 50} {
		s := attnShape{B: 2, T: T, heads: 4, kvH: 2, hd: 8, window: window}
		r := rand.New(rand.NewPCG(uint64(window), 1))
		q := randSlice(r, s.B*T*s.qd())
		k := randSlice(r, s.B*T*s.kd())
		v := randSlice(r, s.B*T*s.kd())
		dout := randSlice(r, s.B*T*s.qd())
		out := make([]float32, len(q))
		attentionForward(out, q, k, v, s)
		want := naiveAttention(to64(q), to64(k), to64(v), s)
		for i := range out {
			if math.Abs(float64(out[i])-want[i]) > 2e-5 {
				t.Fatalf("window %d: out[%d] = %v, reference %v", window, i, out[i], want[i])
			}
		}
		dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
		attentionBackward(dq, dk, dv, dout, q, k, v, s)
		// L = Σ dout·out; check sampled gradient entries by central
		// differences of the float64 reference.
		loss := func(q, k, v []float64) float64 {
			o := naiveAttention(q, k, v, s)
			var l float64
			for i := range o {
				l += o[i] * float64(dout[i])
			}
			return l
		}
		q64, k64, v64 := to64(q), to64(k), to64(v)
		for _, c := range []struct {
			name string
			x    []float64
			g    []float32
		}{{"dq", q64, dq}, {"dk", k64, dk}, {"dv", v64, dv}} {
			for n := 0; n < 6; n++ {
				i := r.IntN(len(c.x))
				if n == 0 {
					i = len(c.x) - 1 // last position: sees the most keys
				}
				orig := c.x[i]
				const h = 1e-5
				c.x[i] = orig + h
				lp := loss(q64, k64, v64)
				c.x[i] = orig - h
				lm := loss(q64, k64, v64)
				c.x[i] = orig
				fd := (lp - lm) / (2 * h)
				if math.Abs(float64(c.g[i])-fd) > 1e-4*(1+math.Abs(fd)) {
					t.Errorf("window %d: %s[%d] = %v, finite difference %v", window, c.name, i, c.g[i], fd)
				}
			}
		}
	}
}
