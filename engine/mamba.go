package engine

import (
	"math"

	"github.com/autocompress/autocompress/engine/blas"
)

// This file holds the Mamba2 mixer of Nemotron-H, forward only, as
// transformers computes it without the CUDA kernels
// (models/nemotron_h/modeling_nemotron_h.py, NemotronHMamba2Mixer.torch_forward,
// and the gated norm Zamba2RMSNormGated.forward it uses):
//
//	z, xBC, dt = split(in_proj(x), [d_inner, d_inner + 2·G·N, heads])
//	xBC        = silu(causal depthwise conv1d(xBC) + conv bias)
//	x, B, C    = split(xBC, [d_inner, G·N, G·N])
//	dt         = max(softplus(dt + dt_bias), time_step_min);  A = −exp(A_log)
//	per head h (group g = h / (heads/G)), over time:
//	    state  = exp(dt·A)·state + dt·x_h ⊗ B_g        (head_dim × N)
//	    y_h    = state · C_g + D·x_h
//	y          = rmsnorm per group of d_inner/G (y · silu(z)) · norm.weight
//	out        = out_proj(y)
//
// The scan is the sequential recurrence (the chunked SSD of torch_forward
// computes the same sums in another order). It is not yet bound to a
// model's layers: the engine still refuses Nemotron-H (its family also
// needs attention without RoPE and sigmoid-routed MoE with shared experts);
// this is the mixer, checked against torch_forward on random weights
// (TestMamba2MixerTorch).

// mambaDims are the widths of one Mamba2 mixer.
type mambaDims struct {
	heads, headDim, state, groups, conv int
	eps, dtMin                          float32
}

func (d mambaDims) dInner() int  { return d.heads * d.headDim }
func (d mambaDims) convDim() int { return d.dInner() + 2*d.groups*d.state }
func (d mambaDims) projDim() int { return d.dInner() + d.convDim() + d.heads }

// mambaWeights are one mixer's tensors in HF layout: in_proj (projDim,
// hidden), conv1d (convDim, 1, conv) and its bias (or nil), dt_bias, A_log
// and D (heads), norm (d_inner), out_proj (hidden, d_inner); inB and outB
// the projections' biases or nil.
type mambaWeights struct {
	in, inB, conv, convB, dtBias, aLog, d, norm, out, outB []float32
}

// mamba2Forward sets out (B·T, H) to the mixer's output on x (B·T, H).
func mamba2Forward(out, x []float32, B, T, H int, d mambaDims, w mambaWeights) {
	N, P, di, cd := B*T, d.projDim(), d.dInner(), d.convDim()
	proj := make([]float32, N*P)
	linearForward(proj, x, f32mat(w.in), w.inB, N, H, P)
	y := make([]float32, N*di)
	perGroup := d.heads / d.groups
	parallelFor(B*d.heads, 1, func(lo, hi int) {
		conv := make([]float32, T*(d.headDim+2*d.state))
		st := make([]float32, d.headDim*d.state)
		for task := lo; task < hi; task++ {
			b, h := task/d.heads, task%d.heads
			g := h / perGroup
			// The channels this head reads: its x, and its group's B and C.
			chans := make([]int, 0, d.headDim+2*d.state)
			for p := range d.headDim {
				chans = append(chans, h*d.headDim+p)
			}
			for n := range d.state {
				chans = append(chans, di+g*d.state+n)
			}
			for n := range d.state {
				chans = append(chans, di+d.groups*d.state+g*d.state+n)
			}
			W := len(chans)
			for t := range T {
				for j, c := range chans {
					var s float32
					if w.convB != nil {
						s = w.convB[c]
					}
					for k := range d.conv {
						if src := t + k - (d.conv - 1); src >= 0 {
							s += w.conv[c*d.conv+k] * proj[(b*T+src)*P+di+c]
						}
					}
					conv[t*W+j] = s * sigmoid(s)
				}
			}
			a := -float32(math.Exp(float64(w.aLog[h])))
			clear(st)
			for t := range T {
				row := (b*T + t) * P
				dt := softplus(proj[row+di+cd+h] + w.dtBias[h])
				dt = max(dt, d.dtMin)
				dA := float32(math.Exp(float64(dt * a)))
				xs := conv[t*W : t*W+d.headDim]
				bs := conv[t*W+d.headDim : t*W+d.headDim+d.state]
				cs := conv[t*W+d.headDim+d.state : (t+1)*W]
				yo := y[(b*T+t)*di+h*d.headDim:]
				for p, xp := range xs {
					sp := st[p*d.state : (p+1)*d.state]
					var acc float32
					for n := range sp {
						sp[n] = sp[n]*dA + dt*bs[n]*xp
						acc += sp[n] * cs[n]
					}
					yo[p] = acc + w.d[h]*xp
				}
			}
		}
	})
	// Gated RMSNorm over groups of d_inner/G channels.
	gs := di / d.groups
	parallelFor(N, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v, z := y[i*di:(i+1)*di], proj[i*P:i*P+di]
			for c := range v {
				v[c] *= z[c] * sigmoid(z[c])
			}
			for g := range d.groups {
				u := v[g*gs : (g+1)*gs]
				r := 1 / float32(math.Sqrt(float64(blas.Dot(u, u)/float32(gs)+d.eps)))
				for c := range u {
					u[c] *= r * w.norm[g*gs+c]
				}
			}
		}
	})
	linearForward(out, y, f32mat(w.out), w.outB, N, di, H)
}

// softplus is torch's softplus (beta 1, threshold 20).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
