package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine/blas"
)

// This file holds the Mamba2 mixer of Nemotron-H, forward only, as
// transformers computes it without the CUDA kernels
// (models/nemotron_h/modeling_nemotron_h.py, NemotronHMamba2Mixer.torch_forward,
// and the gated norm MambaRMSNormGated.forward it uses, norm_before_gate
// False):
//
//	z, xBC, dt = split(in_proj(x), [d_inner, d_inner + 2·G·N, heads])
//	xBC        = silu(causal depthwise conv1d(xBC) + conv bias)
//	x, B, C    = split(xBC, [d_inner, G·N, G·N])
//	dt         = clamp(softplus(dt + dt_bias), time_step_limit);  A = −exp(A_log)
//	per head h (group g = h / (heads/G)), over time:
//	    state  = exp(dt·A)·state + dt·x_h ⊗ B_g        (head_dim × N)
//	    y_h    = state · C_g + D·x_h
//	y          = rmsnorm per group of d_inner/G (y · silu(z)) · norm.weight
//	out        = out_proj(y)
//
// The scan is the sequential recurrence (the chunked SSD of torch_forward
// computes the same sums in another order). Decoding carries, per sequence
// and Mamba layer, the same two states as torch_forward's cached branch
// (cache_position > 0): the last conv_kernel−1 inputs of the convolution
// (conv_states) and the SSM state (ssm_states, heads × head_dim × N). A
// prompt scanned from zero states and then continued one token at a time
// computes exactly what one pass over the whole sequence computes
// (TestMambaDecodeMatchesPrefill). Training through the mixer is for the
// PyTorch reference trainer (CheckTrain): its backward is not here.

// mambaDims are the widths of one Mamba2 mixer.
type mambaDims struct {
	heads, headDim, state, groups, conv int
	eps, dtMin                          float32
}

func (d mambaDims) dInner() int  { return d.heads * d.headDim }
func (d mambaDims) convDim() int { return d.dInner() + 2*d.groups*d.state }
func (d mambaDims) projDim() int { return d.dInner() + d.convDim() + d.heads }

// stateFloats is the recurrent state of one sequence: conv_kernel−1 conv
// inputs and the SSM state.
func (d mambaDims) stateFloats() int {
	return (d.conv-1)*d.convDim() + d.heads*d.headDim*d.state
}

// checkMamba derives a Mamba layer's widths, or says what the engine
// cannot run.
func checkMamba(x *architecture.Mamba, eps float32) (*mambaDims, error) {
	if x.Heads <= 0 || x.HeadDim <= 0 || x.StateSize <= 0 || x.Groups <= 0 || x.ConvKernel <= 0 {
		return nil, fmt.Errorf("Mamba2 mixer with %d heads, head_dim %d, state %d, %d groups, conv kernel %d (all must be positive)", x.Heads, x.HeadDim, x.StateSize, x.Groups, x.ConvKernel)
	}
	if x.Heads%x.Groups != 0 {
		return nil, fmt.Errorf("Mamba2 mixer with %d heads in %d groups (heads must be a multiple of n_groups)", x.Heads, x.Groups)
	}
	// time_step_limit defaults to (0, inf) in NemotronHConfig: the clamp
	// only keeps dt ≥ 0, which softplus already is.
	return &mambaDims{heads: x.Heads, headDim: x.HeadDim, state: x.StateSize, groups: x.Groups, conv: x.ConvKernel, eps: eps}, nil
}

// mambaWeights are one mixer's tensors in HF layout: in_proj (projDim,
// hidden), conv1d (convDim, 1, conv) and its bias (or nil), dt_bias, A_log
// and D (heads), norm (d_inner), out_proj (hidden, d_inner); inB and outB
// the projections' biases or nil.
type mambaWeights struct {
	in, inB, conv, convB, dtBias, aLog, d, norm, out, outB []float32
}

// bindMamba binds a Mamba tensor of kind s.kind to its view t.
func bindMamba(lp *layerParams, kind string, t []float32) bool {
	w := &lp.mamba
	switch kind {
	case "mamba_in":
		w.in = t
	case "mamba_in_bias":
		w.inB = t
	case "mamba_conv":
		w.conv = t
	case "mamba_conv_bias":
		w.convB = t
	case "mamba_dt_bias":
		w.dtBias = t
	case "mamba_a_log":
		w.aLog = t
	case "mamba_d":
		w.d = t
	case "mamba_norm":
		w.norm = t
	case "mamba_out":
		w.out = t
	case "mamba_out_bias":
		w.outB = t
	default:
		return false
	}
	return true
}

// mambaSeq is one sequence of a mixer call: rows row..row+n−1 of the
// batch, in time order, continuing from conv (conv_kernel−1 rows of
// convDim: the last convolution inputs before row, oldest first) and ssm
// (heads × head_dim × state). Nil states start from zeros and are not kept;
// non-nil ones are read and then replaced by the states after the last row.
type mambaSeq struct {
	row, n    int
	conv, ssm []float32
}

// mambaBufs are the scratch of a mixer call: proj (R, projDim) and y (R,
// d_inner), the out_proj input (gated-normed scan output).
type mambaBufs struct{ proj, y []float32 }

// mamba2Forward sets out (B·T, H) to the mixer's output on x (B·T, H), each
// of the B rows of T tokens a sequence from zero states.
func mamba2Forward(out, x []float32, B, T, H int, d mambaDims, w mambaWeights) {
	seqs := make([]mambaSeq, B)
	for b := range seqs {
		seqs[b] = mambaSeq{row: b * T, n: T}
	}
	bufs := mambaBufs{proj: make([]float32, B*T*d.projDim()), y: make([]float32, B*T*d.dInner())}
	mamba2Mix(out, x, H, d, w, seqs, bufs)
}

// mamba2Mix sets out (R, H) to the mixer's output on x (R, H), R the rows
// of seqs; bufs.y holds the out_proj input afterwards.
func mamba2Mix(out, x []float32, H int, d mambaDims, w mambaWeights, seqs []mambaSeq, bufs mambaBufs) {
	R := 0
	for _, s := range seqs {
		R = max(R, s.row+s.n)
	}
	P, di, cd, K := d.projDim(), d.dInner(), d.convDim(), d.conv
	proj, y := bufs.proj[:R*P], bufs.y[:R*di]
	linearForward(proj, x, f32mat(w.in), w.inB, R, H, P)
	perGroup := d.heads / d.groups
	// input returns convolution input channel c at time j of sequence s
	// (j < 0: from its conv state, or 0).
	input := func(s *mambaSeq, j, c int) float32 {
		if j >= 0 {
			return proj[(s.row+j)*P+di+c]
		}
		if s.conv == nil || j < -(K-1) {
			return 0
		}
		return s.conv[(K-1+j)*cd+c]
	}
	work := R * di * d.state
	grain := 1
	if work < 1<<16 {
		grain = len(seqs) * d.heads
	}
	parallelFor(len(seqs)*d.heads, grain, func(lo, hi int) {
		W := d.headDim + 2*d.state
		var conv, local []float32
		chans := make([]int, W)
		for task := lo; task < hi; task++ {
			s, h := &seqs[task/d.heads], task%d.heads
			g := h / perGroup
			// The channels this head reads: its x, and its group's B and C.
			for p := range d.headDim {
				chans[p] = h*d.headDim + p
			}
			for n := range d.state {
				chans[d.headDim+n] = di + g*d.state + n
				chans[d.headDim+d.state+n] = di + d.groups*d.state + g*d.state + n
			}
			conv = grow(conv, s.n*W)
			for t := range s.n {
				for j, c := range chans {
					var v float32
					if w.convB != nil {
						v = w.convB[c]
					}
					for k := range K {
						v += w.conv[c*K+k] * input(s, t+k-(K-1), c)
					}
					conv[t*W+j] = v * sigmoid(v)
				}
			}
			hs := d.headDim * d.state
			var st []float32
			if s.ssm != nil {
				st = s.ssm[h*hs : (h+1)*hs]
			} else {
				local = grow(local, hs)
				st = local
				clear(st)
			}
			a := -float32(math.Exp(float64(w.aLog[h])))
			for t := range s.n {
				row := (s.row + t) * P
				dt := max(softplus(proj[row+di+cd+h]+w.dtBias[h]), d.dtMin)
				dA := float32(math.Exp(float64(dt * a)))
				xs := conv[t*W : t*W+d.headDim]
				bs := conv[t*W+d.headDim : t*W+d.headDim+d.state]
				cs := conv[t*W+d.headDim+d.state : (t+1)*W]
				yo := y[(s.row+t)*di+h*d.headDim:]
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
	// The new conv states: the last K−1 inputs of each sequence (read
	// before any is overwritten: a short step shifts the old state).
	if K > 1 {
		var next []float32
		for i := range seqs {
			s := &seqs[i]
			if s.conv == nil {
				continue
			}
			next = grow(next, (K-1)*cd)
			for q := range K - 1 {
				for c := range cd {
					next[q*cd+c] = input(s, s.n-(K-1)+q, c)
				}
			}
			copy(s.conv, next)
		}
	}
	// Gated RMSNorm over groups of d_inner/G channels.
	gs := di / d.groups
	parallelFor(R, 16, func(lo, hi int) {
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
	linearForward(out, y, f32mat(w.out), w.outB, R, di, H)
}

// mambaFLOPs counts one mixer's forward FLOPs on N rows: in_proj and
// out_proj, the depthwise convolution, and the scan (per state entry a
// decay, an input and an output multiply-add).
func mambaFLOPs(d *mambaDims, N, H float64) float64 {
	f := 2 * N * H * float64(d.projDim()+d.dInner())
	f += 2 * N * float64(d.convDim()*d.conv)
	f += 6 * N * float64(d.dInner()*d.state)
	return f
}

// ErrMambaBackward is returned by the backward passes of a model with
// Mamba2 mixers.
var ErrMambaBackward = errors.New("engine: backward through Mamba2 mixers is not implemented (the native engine runs them forward only: importance, proxy, eval, serving); training or distilling a hybrid model goes through the PyTorch reference trainer (distill.engine torch)")

// hasMamba reports whether any layer is a Mamba2 mixer.
func (m *Model) hasMamba() bool {
	for _, d := range m.dims {
		if d.mamba != nil {
			return true
		}
	}
	return false
}

// forwardOnly is the error of a backward pass through layers the engine
// runs forward only, or nil.
func (m *Model) forwardOnly() error {
	if m.hasMamba() {
		return ErrMambaBackward
	}
	for _, d := range m.dims {
		if d.sinks || (d.moe != nil && d.moe.gptOss) {
			return ErrGptOssBackward
		}
	}
	return nil
}

// softplus is torch's softplus (beta 1, threshold 20).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
