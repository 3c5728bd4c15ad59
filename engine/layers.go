package engine

import (
	"math"

	"github.com/autocompress/autocompress/engine/blas"
)

// This file holds one forward/backward function pair per layer kind, over
// flat row-major []float32. Backward functions ACCUMULATE (+=) into the
// gradients of their parameters and inputs unless stated otherwise.

// embeddingForward: out (N,C) = table[tokens[i]] for each row; table is (V,C).
func embeddingForward(out []float32, table matrix, tokens []int32, C int) {
	parallelFor(len(tokens), 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			table.row(out[i*C:(i+1)*C], int(tokens[i]), C)
		}
	})
}

// embeddingBackward: dtable[tokens[i]] += dout[i] (serial: tokens repeat).
func embeddingBackward(dtable, dout []float32, tokens []int32, C int) {
	for i, t := range tokens {
		row := dtable[int(t)*C : (int(t)+1)*C]
		d := dout[i*C : (i+1)*C]
		for j := range row {
			row[j] += d[j]
		}
	}
}

// rmsnormForward: out (N,C) = x·rstd·w with rstd (N) = 1/sqrt(mean(x²)+eps);
// x is (N,C), w is (C).
func rmsnormForward(out, rstd, x, w []float32, N, C int, eps float32) {
	parallelFor(N, 32, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi := x[i*C : (i+1)*C]
			ss := blas.Dot(xi, xi)
			r := 1 / float32(math.Sqrt(float64(ss/float32(C)+eps)))
			rstd[i] = r
			blas.MulScale(out[i*C:(i+1)*C], r, xi, w)
		}
	})
}

// rmsnormBackward: dx (N,C) += ∂/∂x, dw (C) += Σ_i dout·x·rstd; needs the
// forward's input x and rstd. dx may not alias dout.
func rmsnormBackward(dx, dw, dout, x, w, rstd []float32, N, C int) {
	// dx: rows are independent.
	parallelFor(N, 32, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi, di, dxi := x[i*C:(i+1)*C], dout[i*C:(i+1)*C], dx[i*C:(i+1)*C]
			r := rstd[i]
			var dot float32 // Σ_j w·dout·xhat
			for j := range xi {
				dot += w[j] * di[j] * xi[j] * r
			}
			dot /= float32(C)
			for j := range xi {
				xh := xi[j] * r
				dxi[j] += r * (w[j]*di[j] - xh*dot)
			}
		}
	})
	// dw: reduce over rows, parallel over columns.
	parallelFor(C, 64, func(lo, hi int) {
		for i := 0; i < N; i++ {
			xi, di := x[i*C:(i+1)*C], dout[i*C:(i+1)*C]
			r := rstd[i]
			for j := lo; j < hi; j++ {
				dw[j] += di[j] * xi[j] * r
			}
		}
	})
}

// linearForward: y (N,out) = x (N,in) · Wᵀ + b, with W (out,in) in HF layout
// and b (out) or nil.
func linearForward(y, x []float32, w matrix, b []float32, N, in, out int) {
	w.mul(y, x, N, in, out)
	if b != nil {
		addBias(y, b, N, out)
	}
}

func addBias(y, b []float32, N, out int) {
	parallelFor(N, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			yi := y[i*out : (i+1)*out]
			for j := range yi {
				yi[j] += b[j]
			}
		}
	})
}

// linearBackward: dx (N,in) (+)= dy·W (accumulates when accum, else
// overwrites; dx nil skips it), dW (out,in) += dyᵀ·x, db (out) += Σ_rows dy.
func linearBackward(dx, dw, db, dy, x, w []float32, N, in, out int, accum bool) {
	if dx != nil {
		beta := float32(0)
		if accum {
			beta = 1
		}
		blas.Sgemm(false, false, N, in, out, 1, dy, out, w, in, beta, dx, in)
	}
	blas.Sgemm(true, false, out, in, N, 1, dy, out, x, in, 1, dw, in)
	if db != nil {
		parallelFor(out, 64, func(lo, hi int) {
			for i := 0; i < N; i++ {
				di := dy[i*out : (i+1)*out]
				for j := lo; j < hi; j++ {
					db[j] += di[j]
				}
			}
		})
	}
}

// ropeApply rotates x (N, heads·hd) in place by the angles of positions
// pos[row] (rotate_half convention, first rot dims of each head); sign -1
// applies the inverse rotation, which is the backward pass of RoPE.
func ropeApply(x []float32, N, heads, hd int, tab *ropeTable, pos func(row int) int, sign float32) {
	half := tab.half
	if half == 0 {
		return
	}
	width := heads * hd
	parallelFor(N, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := pos(i)
			cs := tab.cos[p*half : (p+1)*half]
			sn := tab.sin[p*half : (p+1)*half]
			for h := 0; h < heads; h++ {
				v := x[i*width+h*hd : i*width+h*hd+2*half]
				a, b := v[:half], v[half:2*half]
				for j := range a {
					c, s := cs[j], sign*sn[j]
					x1, x2 := a[j], b[j]
					a[j] = x1*c - x2*s
					b[j] = x2*c + x1*s
				}
			}
		}
	})
}

// ropeForward rotates x (N, heads·hd) in place by the angles of the
// positions pos(row).
func ropeForward(x []float32, N, heads, hd int, tab *ropeTable, pos func(row int) int) {
	ropeApply(x, N, heads, hd, tab, pos, 1)
}

// ropeBackward turns dy into dx in place: the gradient of the rotation is
// its transpose, the inverse rotation (times YaRN's attention factor,
// which the table's cos and sin carry).
func ropeBackward(dx []float32, N, heads, hd int, tab *ropeTable, pos func(row int) int) {
	ropeApply(dx, N, heads, hd, tab, pos, -1)
}

// activationForward: h (N,F) = act(gate)·up for gated MLPs, act(up) otherwise
// (gate nil).
func activationForward(h, gate, up []float32, N, F int, act activation) {
	parallelFor(N, 8, func(lo, hi int) {
		hh, uu := h[lo*F:hi*F], up[lo*F:hi*F]
		switch {
		case gate != nil && act == actSiLU: // SwiGLU, the common case
			blas.SiLUMul(hh, gate[lo*F:hi*F], uu)
		case gate != nil:
			gg := gate[lo*F : hi*F]
			for i, g := range gg {
				hh[i] = actF(g, act) * uu[i]
			}
		default:
			for i, u := range uu {
				hh[i] = actF(u, act)
			}
		}
	})
}

// activationBackward: dgate (N,F) = dh·act'(gate)·up, dup = dh·act(gate)
// (non-gated: dup = dh·act'(up)); both overwritten.
func activationBackward(dgate, dup, dh, gate, up []float32, N, F int, act activation) {
	parallelFor(N, 8, func(lo, hi int) {
		dd, du, uu := dh[lo*F:hi*F], dup[lo*F:hi*F], up[lo*F:hi*F]
		switch {
		case gate != nil && act == actSiLU:
			gg, dg := gate[lo*F:hi*F], dgate[lo*F:hi*F]
			blas.Sigmoid(dg, gg) // dg holds σ(g) until overwritten below
			for i, g := range gg {
				sg := dg[i]
				dg[i] = dd[i] * sg * (1 + g*(1-sg)) * uu[i]
				du[i] = dd[i] * g * sg
			}
		case gate != nil:
			gg, dg := gate[lo*F:hi*F], dgate[lo*F:hi*F]
			for i, g := range gg {
				dg[i] = dd[i] * actDeriv(g, act) * uu[i]
				du[i] = dd[i] * actF(g, act)
			}
		default:
			for i, u := range uu {
				du[i] = dd[i] * actDeriv(u, act)
			}
		}
	})
}

const geluC = 0.7978845608028654 // sqrt(2/π)

func actF(x float32, act activation) float32 {
	switch act {
	case actGELUTanh:
		t := float32(math.Tanh(geluC * float64(x+0.044715*x*x*x)))
		return 0.5 * x * (1 + t)
	case actReLU2:
		if x < 0 {
			return 0
		}
		return x * x
	case actReLU:
		return max(x, 0)
	}
	return x * sigmoid(x)
}

func actDeriv(x float32, act activation) float32 {
	switch act {
	case actGELUTanh:
		u := geluC * float64(x+0.044715*x*x*x)
		t := math.Tanh(u)
		du := geluC * (1 + 3*0.044715*float64(x)*float64(x))
		return float32(0.5*(1+t) + 0.5*float64(x)*(1-t*t)*du)
	case actReLU2:
		if x < 0 {
			return 0
		}
		return 2 * x
	case actReLU:
		if x < 0 {
			return 0
		}
		return 1
	}
	s := sigmoid(x)
	return s * (1 + x*(1-s))
}

// attnShape describes one causal self-attention call.
type attnShape struct {
	B, T, heads, kvH, hd int
	window               int // 0 = full causal
	// sinks are the per-head sink logits (gpt-oss; nil: none), forward
	// only: attentionBackward does not take their gradient.
	sinks []float32
}

func (s attnShape) qd() int { return s.heads * s.hd }
func (s attnShape) kd() int { return s.kvH * s.hd }

// allowed reports whether query position i may attend to key position j.
func (s attnShape) allowed(i, j int) bool {
	return j <= i && (s.window <= 0 || i-j < s.window)
}

// attnBlock is the number of query rows whose scores are computed at once:
// row block [r0, r1) only sees keys [k0, r1), so the causal upper triangle
// is mostly skipped, and scratch stays attnBlock×T per goroutine.
const attnBlock = 64

// keyStart is the first key position visible to any query in [r0, r1).
func (s attnShape) keyStart(r0 int) int {
	if s.window > 0 {
		return max(0, r0-s.window+1)
	}
	return 0
}

// attnProbs writes the masked softmax probabilities of query rows [r0, r1)
// of head (b, h) against keys [k0, r1) into P ((r1−r0) × (r1−k0)).
func attnProbs(P, q, k []float32, s attnShape, b, h, r0, r1, k0 int, scale float32) {
	T, hd, qd, kd := s.T, s.hd, s.qd(), s.kd()
	g := h / (s.heads / s.kvH)
	nk := r1 - k0
	blas.SgemmSerial(false, true, r1-r0, nk, hd, scale, q[(b*T+r0)*qd+h*hd:], qd, k[(b*T+k0)*kd+g*hd:], kd, 0, P, nk)
	for i := 0; i < r1-r0; i++ {
		softmaxRow(P[i*nk:(i+1)*nk], r0+i-k0, s, h)
	}
}

// attentionForward: out (B·T, heads·hd) = softmax(q·kᵀ/√hd + causal mask)·v
// per batch row and head, with query head h reading kv head h/(heads/kvH);
// q is (B·T, heads·hd), k and v (B·T, kvH·hd). The probabilities are not
// kept: attentionBackward recomputes them, so memory does not grow with T².
func attentionForward(out, q, k, v []float32, s attnShape) {
	T, hd, qd, kd := s.T, s.hd, s.qd(), s.kd()
	group := s.heads / s.kvH
	scale := float32(1 / math.Sqrt(float64(hd)))
	// One task per (batch row, head), each on one core.
	parallelFor(s.B*s.heads, 1, func(lo, hi int) {
		buf := getScratch(attnBlock * T)
		defer putScratch(buf)
		P := *buf
		for task := lo; task < hi; task++ {
			b, h := task/s.heads, task%s.heads
			g := h / group
			for r0 := 0; r0 < T; r0 += attnBlock {
				r1 := min(r0+attnBlock, T)
				k0 := s.keyStart(r0)
				attnProbs(P, q, k, s, b, h, r0, r1, k0, scale)
				blas.SgemmSerial(false, false, r1-r0, hd, r1-k0, 1, P, r1-k0, v[(b*T+k0)*kd+g*hd:], kd, 0, out[(b*T+r0)*qd+h*hd:], qd)
			}
		}
	})
}

// attentionBackward: given dout (B·T, heads·hd), sets dq (overwrite) and
// accumulates dk, dv (B·T, kvH·hd; callers zero them first).
func attentionBackward(dq, dk, dv, dout, q, k, v []float32, s attnShape) {
	T, hd, qd, kd := s.T, s.hd, s.qd(), s.kd()
	group := s.heads / s.kvH
	scale := float32(1 / math.Sqrt(float64(hd)))
	// One task per (batch row, kv head): the query heads of a group add
	// into the same dK, dV, so they run in sequence within the task.
	parallelFor(s.B*s.kvH, 1, func(lo, hi int) {
		pb, dpb := getScratch(attnBlock*T), getScratch(attnBlock*T)
		defer putScratch(pb)
		defer putScratch(dpb)
		P, dP := *pb, *dpb
		for task := lo; task < hi; task++ {
			b, g := task/s.kvH, task%s.kvH
			for h := g * group; h < (g+1)*group; h++ {
				for r0 := 0; r0 < T; r0 += attnBlock {
					r1 := min(r0+attnBlock, T)
					k0 := s.keyStart(r0)
					n, nk := r1-r0, r1-k0
					qo, ko := (b*T+r0)*qd+h*hd, (b*T+k0)*kd+g*hd
					attnProbs(P, q, k, s, b, h, r0, r1, k0, scale)
					// dV += Pᵀ·dO ; dP = dO·Vᵀ
					blas.SgemmSerial(true, false, nk, hd, n, 1, P, nk, dout[qo:], qd, 1, dv[ko:], kd)
					blas.SgemmSerial(false, true, n, nk, hd, 1, dout[qo:], qd, v[ko:], kd, 0, dP, nk)
					// dS = P ∘ (dP − rowsum(P∘dP))
					for i := 0; i < n; i++ {
						p, d := P[i*nk:(i+1)*nk], dP[i*nk:(i+1)*nk]
						var dot float32
						for j, pj := range p {
							dot += pj * d[j]
						}
						for j, pj := range p {
							d[j] = pj * (d[j] - dot)
						}
					}
					// dQ = scale·dS·K ; dK += scale·dSᵀ·Q
					blas.SgemmSerial(false, false, n, hd, nk, scale, dP, nk, k[ko:], kd, 0, dq[qo:], qd)
					blas.SgemmSerial(true, false, nk, hd, n, scale, dP, nk, q[qo:], qd, 1, dk[ko:], kd)
				}
			}
		}
	})
}

// crossEntropyForward returns the sum of −log softmax(logits)[target] over
// rows with target ≥ 0 and their count; logits is (N,V). lse (N) receives
// each row's log-sum-exp for the backward pass.
func crossEntropyForward(lse, logits []float32, targets []int32, partial []float64, N, V int) (sum float64, count int) {
	parallelFor(N, 4, func(lo, hi int) {
		buf := getScratch(V)
		defer putScratch(buf)
		tmp := *buf
		for i := lo; i < hi; i++ {
			t := targets[i]
			if t < 0 {
				partial[i] = math.NaN()
				continue
			}
			row := logits[i*V : (i+1)*V]
			l := blas.LogSumExp(tmp, row)
			lse[i] = float32(l)
			partial[i] = l - float64(row[t])
		}
	})
	for i, t := range targets[:N] {
		if t >= 0 {
			sum += partial[i]
			count++
		}
	}
	return sum, count
}

// crossEntropyBackward: dlogits (N,V) = scale·(softmax(logits) − onehot(target))
// (overwrites; rows with target < 0 get 0), with lse from the forward pass.
func crossEntropyBackward(dlogits, logits, lse []float32, targets []int32, N, V int, scale float32) {
	parallelFor(N, 4, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := dlogits[i*V : (i+1)*V]
			t := targets[i]
			if t < 0 {
				clear(d)
				continue
			}
			copy(d, logits[i*V:(i+1)*V])
			blas.ExpShiftSum(d, lse[i])
			for j := range d {
				d[j] *= scale
			}
			d[t] -= scale
		}
	})
}

// residualAdd: y (n) += x.
func residualAdd(y, x []float32) {
	parallelFor(len(y), 4096, func(lo, hi int) {
		blas.Axpy(1, x[lo:hi], y[lo:hi])
	})
}
