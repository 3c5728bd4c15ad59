package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine/blas"
)

// This file holds the mixture-of-experts feed-forward block, forward and
// backward: a router (Experts × hidden; a bias in gpt-oss) scores every token, each
// token is sent to its top-k experts, and the block's output is the
// routing-weighted sum of those experts' gated MLPs. The routing rule is the
// family's (architecture.RouterRule), as transformers computes it:
//
//   - Mixtral (models/mixtral/modeling_mixtral.py, MixtralSparseMoeBlock.forward):
//     softmax over every expert in float32, top-k, the k weights divided by
//     their sum;
//   - Qwen3-MoE (models/qwen3_moe/modeling_qwen3_moe.py,
//     Qwen3MoeSparseMoeBlock.forward): the same, divided by the sum only
//     when config.json's norm_topk_prob is true (Qwen3MoeConfig's default
//     is false);
//   - gpt-oss (models/gpt_oss/modeling_gpt_oss.py, GptOssTopKRouter.forward):
//     the router has a bias; top-k of its logits, then softmax over the k
//     (no renormalisation). Its experts are stacked (GptOssExperts):
//     gate_up_proj [E, hidden, 2·width] with gate and up interleaved
//     (gate = columns 0, 2, 4, …; up = 1, 3, 5, …) and a bias, the clamped
//     SwiGLU (gate ≤ limit, |up| ≤ limit, (up + 1)·gate·σ(alpha·gate)),
//     down_proj [E, width, hidden] with a bias (gptOssExperts). Forward
//     only: its backward is refused (CheckTrain, ErrGptOssBackward).
//
// Each expert's tokens are gathered into one batch so that its three
// products are GEMMs (bf16 weights read in place like every other matrix),
// and the experts' outputs are added into the block's output in expert
// order, as Qwen3MoeSparseMoeBlock.forward's index_add_ loop does.
//
// The backward pass (moeBackward) is what autograd computes through those
// forward functions: per expert, the gathered rows' three products run
// backward as GEMMs and their input gradients are scatter-added into the
// block input's; the gradient of each routing weight is the dot product of
// the output gradient with that expert's (unweighted) output, and it
// reaches the router logits through the optional renormalisation (the sum
// is not detached there: its gradient is taken) and the softmax, at the
// selected experts only — torch.topk's selection is piecewise constant, so
// no gradient reaches an unselected probability (its logit still receives
// one through the softmax's normalisation). No auxiliary load-balancing loss is
// added: transformers adds router_aux_loss_coef × load_balancing_loss_func
// only when output_router_logits is set (Qwen3MoeForCausalLM.forward,
// MixtralForCausalLM.forward), and the engine's losses (cross-entropy,
// distillation KL) are the logits' alone. A model whose matrices are read
// in place (LoadOptions.Mapped) has no backward (ErrMapped), MoE or not.
// moeDims are the widths and rule of one MoE block.
type moeDims struct {
	experts, topK, width int
	act                  activation
	rule                 architecture.RouterRule
	// gptOss: top-k-then-softmax routing with a router bias and stacked,
	// biased, clamped-SwiGLU experts; alpha and limit are the SwiGLU's
	// (config.json swiglu_alpha, swiglu_limit).
	gptOss       bool
	alpha, limit float32
}

// stackedExperts are gpt-oss's fused expert tensors (slab views):
// gateUp [E, hidden, 2·width], gateUpB [E, 2·width], down [E, width,
// hidden], downB [E, hidden].
type stackedExperts struct{ gateUp, gateUpB, down, downB []float32 }

// bindStacked binds slab view t of one of gpt-oss's stacked expert tensors.
func bindStacked(lp *layerParams, s TensorSpec, t []float32) {
	switch s.kind {
	case "expert_gate_up":
		lp.stacked.gateUp = t
	case "expert_gate_up_bias":
		lp.stacked.gateUpB = t
	case "expert_down":
		lp.stacked.down = t
	case "expert_down_bias":
		lp.stacked.downB = t
	}
}

// isStacked reports whether s is one of gpt-oss's stacked expert matrices
// ([E, in, out]: stored input-major, applied as x·W).
func (s TensorSpec) isStacked() bool {
	return len(s.Shape) == 3 && s.expert < 0 && (s.kind == "expert_gate_up" || s.kind == "expert_down")
}

// ErrGptOssBackward is returned by the backward passes of a gpt-oss model.
var ErrGptOssBackward = errors.New("engine: backward through gpt-oss (attention sinks, top-k-then-softmax routing, clamped SwiGLU experts) is not implemented (the native engine runs it forward only: importance, proxy, eval, serving); training or distilling gpt-oss goes through the PyTorch reference trainer (engine torch)")

// expertParams are one routed expert's slab views; expertMats its matrices.
type expertParams struct{ gate, up, down []float32 }
type expertMats struct{ gate, up, down matrix }

// checkMoE validates an MoE block against what the engine runs.
func checkMoE(a *architecture.Model, x *architecture.MoE) (*moeDims, error) {
	rule := a.MoERouter()
	if rule.TopKFirst {
		return checkGptOssMoE(x, rule)
	}
	switch {
	case x.Experts <= 0 || x.TopK <= 0 || x.TopK > x.Experts:
		return nil, fmt.Errorf("mixture of experts with %d experts and top-k %d (want 1 ≤ top-k ≤ experts)", x.Experts, x.TopK)
	case x.ExpertWidth <= 0:
		return nil, fmt.Errorf("mixture of experts with expert width %d", x.ExpertWidth)
	case !x.Gated:
		return nil, errors.New("mixture of experts with ungated experts")
	case x.RouterBias || x.ExpertBias:
		return nil, errors.New("mixture of experts with router or expert biases")
	case x.SharedWidth != 0:
		return nil, errors.New("mixture of experts with shared experts")
	case x.LatentSize != 0:
		return nil, errors.New("latent mixture of experts (moe_latent_size)")
	case x.RouterCorrection:
		return nil, errors.New("mixture of experts with sigmoid routing and e_score_correction_bias")
	}
	act, ok := parseActivation(x.Activation)
	if !ok {
		return nil, fmt.Errorf("expert activation %q (supported: silu, gelu, relu, relu2)", x.Activation)
	}
	return &moeDims{experts: x.Experts, topK: x.TopK, width: x.ExpertWidth, act: act, rule: rule}, nil
}

// checkGptOssMoE validates a gpt-oss MoE block (top-k-then-softmax
// routing): a biased router and stacked, biased, gated experts, no shared
// expert, its SwiGLU clamped by x.SwiGLUAlpha and x.SwiGLULimit (package
// architecture reads them from config.json with GptOssExperts' defaults).
func checkGptOssMoE(x *architecture.MoE, rule architecture.RouterRule) (*moeDims, error) {
	switch {
	case x.Experts <= 0 || x.TopK <= 0 || x.TopK > x.Experts:
		return nil, fmt.Errorf("mixture of experts with %d experts and top-k %d (want 1 ≤ top-k ≤ experts)", x.Experts, x.TopK)
	case x.ExpertWidth <= 0:
		return nil, fmt.Errorf("mixture of experts with expert width %d", x.ExpertWidth)
	case !x.Gated || !x.RouterBias || !x.ExpertBias:
		return nil, errors.New("gpt-oss mixture of experts without its gated experts, router bias and expert biases")
	case x.SharedWidth != 0 || x.LatentSize != 0 || x.RouterCorrection:
		return nil, errors.New("gpt-oss mixture of experts with shared, latent or sigmoid-corrected experts")
	}
	alpha, limit := x.SwiGLUAlpha, x.SwiGLULimit
	if !(limit > 0) || math.IsInf(limit, 0) || !(alpha > 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("gpt-oss swiglu_alpha %v, swiglu_limit %v (want positive finite numbers)", alpha, limit)
	}
	return &moeDims{experts: x.Experts, topK: x.TopK, width: x.ExpertWidth, act: actSiLU, rule: rule,
		gptOss: true, alpha: float32(alpha), limit: float32(limit)}, nil
}

// bindExpert binds slab view t of a per-expert tensor s.
func bindExpert(lp *layerParams, s TensorSpec, t []float32) {
	for len(lp.experts) <= s.expert {
		lp.experts = append(lp.experts, expertParams{})
	}
	x := &lp.experts[s.expert]
	switch s.kind {
	case "expert_gate":
		x.gate = t
	case "expert_up":
		x.up = t
	case "expert_down":
		x.down = t
	}
}

// mapExpert sets matrix w of a per-expert tensor s in lm (n experts).
func mapExpert(lm *layerMats, n int, s TensorSpec, w matrix) {
	if lm.experts == nil {
		lm.experts = make([]expertMats, n)
	}
	x := &lm.experts[s.expert]
	switch s.kind {
	case "expert_gate":
		x.gate = w
	case "expert_up":
		x.up = w
	case "expert_down":
		x.down = w
	}
}

// Routing is what an MoE block did with the rows of one forward pass
// (Activation.Routing at SiteMoERouting): row i went to experts
// Experts[i·TopK : (i+1)·TopK], whose outputs were weighted by the
// matching Weights, and OutputNorms holds the L2 norm of each of those
// experts' outputs (before weighting).
type Routing struct {
	NumExperts, TopK     int
	Experts              []int32
	Weights, OutputNorms []float32
}

// routerSoftmax sets p (E) to softmax(row) in float32, as
// softmax(router_logits, dim=1, dtype=torch.float) does; route and
// moeBackward share it so that the backward pass sees the forward's
// probabilities bit for bit.
func routerSoftmax(p, row []float32) {
	mx := row[0]
	for _, v := range row {
		mx = max(mx, v)
	}
	var sum float32
	for j, v := range row {
		p[j] = float32(math.Exp(float64(v - mx)))
		sum += p[j]
	}
	for j := range p {
		p[j] /= sum
	}
}

// route picks the top-k experts of each row of logits (N, E) by d's rule,
// writing their indices and weights into r.
func route(r *Routing, logits []float32, N int, d *moeDims) {
	E, k := d.experts, d.topK
	if d.rule.TopKFirst {
		routeTopKFirst(r, logits, N, E, k)
		return
	}
	parallelFor(N, 16, func(lo, hi int) {
		p := make([]float32, E)
		for i := lo; i < hi; i++ {
			routerSoftmax(p, logits[i*E:(i+1)*E])
			// torch.topk: the k largest, largest first (ties: lower index).
			idx, w := r.Experts[i*k:(i+1)*k], r.Weights[i*k:(i+1)*k]
			var tot float32
			for t := range k {
				best := -1
				for j, v := range p {
					if v >= 0 && (best < 0 || v > p[best]) {
						best = j
					}
				}
				idx[t], w[t] = int32(best), p[best]
				tot += p[best]
				p[best] = -1 // taken
			}
			if d.rule.Renormalize {
				for t := range w {
					w[t] /= tot
				}
			}
		}
	})
}

// routeTopKFirst is gpt-oss's routing (GptOssTopKRouter.forward): the k
// largest logits of each row (torch.topk: largest first, ties to the lower
// index), and the softmax of those k in float32 as the weights.
func routeTopKFirst(r *Routing, logits []float32, N, E, k int) {
	parallelFor(N, 16, func(lo, hi int) {
		taken := make([]bool, E)
		v := make([]float32, k)
		for i := lo; i < hi; i++ {
			row := logits[i*E : (i+1)*E]
			clear(taken)
			idx, w := r.Experts[i*k:(i+1)*k], r.Weights[i*k:(i+1)*k]
			for t := range k {
				best := -1
				for j, x := range row {
					if !taken[j] && (best < 0 || x > row[best]) {
						best = j
					}
				}
				taken[best] = true
				idx[t], v[t] = int32(best), row[best]
			}
			routerSoftmax(w, v)
		}
	})
}

// moeSaved is what an MoE block's forward pass keeps for its backward pass
// (training mode; nil in inference mode): the router logits and routing,
// the (row, slot) pairs grouped by expert, and every routed pair's gate and
// up products and activation, (N·k, width), in that grouped order.
type moeSaved struct {
	logits      []float32
	r           *Routing
	slots       []int // slot indices (row·k + t), grouped by expert, in row order
	count       []int // expert e's slots are slots[count[e]:count[e+1]]
	gate, up, h []float32
}

// newMoESaved allocates the saved activations of one MoE block for N rows.
func newMoESaved(d *moeDims, N int) *moeSaved {
	n := N * d.topK * d.width
	return &moeSaved{slots: make([]int, N*d.topK), count: make([]int, d.experts+1),
		gate: make([]float32, n), up: make([]float32, n), h: make([]float32, n)}
}

// groupSlots fills slots and count (E+1) with the (row, slot) pairs of r
// grouped by expert, in row order, and returns the largest group.
func groupSlots(slots, count []int, r *Routing, E int) int {
	clear(count)
	for _, e := range r.Experts {
		count[e+1]++
	}
	most := 0
	for e := range E {
		most = max(most, count[e+1])
		count[e+1] += count[e]
	}
	next := append([]int(nil), count[:E]...)
	for s, e := range r.Experts {
		slots[next[e]] = s
		next[e]++
	}
	return most
}

// moeForward sets out (N, H) to the MoE block's output on x (N, H), the
// post-attention-normed hidden state, and returns the routing it used and
// the router logits (N, experts). With save (training mode) it keeps what
// moeBackward needs there.
func moeForward(out, x []float32, d *moeDims, wm layerMats, w *layerParams, N, H int, save *moeSaved) (*Routing, []float32) {
	E, k, W := d.experts, d.topK, d.width
	logits := make([]float32, N*E)
	linearForward(logits, x, wm.router, w.routerB, N, H, E)
	if d.gptOss {
		save = nil // forward only (ErrGptOssBackward)
	}
	r := &Routing{NumExperts: E, TopK: k, Experts: make([]int32, N*k), Weights: make([]float32, N*k), OutputNorms: make([]float32, N*k)}
	route(r, logits, N, d)
	var slots, count []int
	if save != nil {
		save.logits, save.r = logits, r
		slots, count = save.slots, save.count
	} else {
		slots, count = make([]int, N*k), make([]int, E+1)
	}
	most := groupSlots(slots, count, r, E)
	xb, yb := make([]float32, most*H), make([]float32, most*H)
	var gb, ub, hb []float32
	if save == nil {
		gb, ub, hb = make([]float32, most*W), make([]float32, most*W), make([]float32, most*W)
		if d.gptOss {
			gb = make([]float32, most*2*W) // the fused gate_up product
		}
	}
	clear(out)
	for e := range E {
		c0, c1 := count[e], count[e+1]
		group := slots[c0:c1]
		n := len(group)
		if n == 0 {
			continue
		}
		if save != nil {
			gb, ub, hb = save.gate[c0*W:c1*W], save.up[c0*W:c1*W], save.h[c0*W:c1*W]
		}
		for j, s := range group {
			row := s / k
			copy(xb[j*H:(j+1)*H], x[row*H:(row+1)*H])
		}
		if d.gptOss {
			gptOssExpert(yb[:n*H], xb[:n*H], hb[:n*W], gb, d, wm, w, e, n, H)
		} else {
			em := wm.experts[e]
			linearForward(gb[:n*W], xb[:n*H], em.gate, nil, n, H, W)
			linearForward(ub[:n*W], xb[:n*H], em.up, nil, n, H, W)
			activationForward(hb[:n*W], gb[:n*W], ub[:n*W], n, W, d.act)
			linearForward(yb[:n*H], hb[:n*W], em.down, nil, n, W, H)
		}
		for j, s := range group {
			row := s / k
			y, o := yb[j*H:(j+1)*H], out[row*H:(row+1)*H]
			rho := r.Weights[s]
			var ss float64
			for c, v := range y {
				o[c] += rho * v
				ss += float64(v) * float64(v)
			}
			r.OutputNorms[s] = float32(math.Sqrt(ss))
		}
	}
	return r, logits
}

// gptOssExpert sets y (n, H) to stacked expert e's output on the gathered
// rows xb (n, H), as GptOssExperts.forward computes it: gu = xb·gate_up[e]
// + gate_up_bias[e] into gu (n, 2·W), gate = gu[:, 0::2] clamped to ≤
// limit, up = gu[:, 1::2] clamped to [−limit, limit], h = (up + 1)·gate·
// σ(alpha·gate) into h (n, W), y = h·down[e] + down_bias[e].
func gptOssExpert(y, xb, h, gu []float32, d *moeDims, wm layerMats, w *layerParams, e, n, H int) {
	W := d.width
	gu = gu[:n*2*W]
	// gate_up[e] is (H, 2W) row-major: x·G is mulT of a matrix stored
	// (out = H, in = 2W).
	wm.gateUp.sub(e*H*2*W, H*2*W).mulT(gu, xb, n, 2*W, H)
	addBias(gu, w.stacked.gateUpB[e*2*W:(e+1)*2*W], n, 2*W)
	alpha, limit := d.alpha, d.limit
	parallelFor(n, 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g, o := gu[i*2*W:(i+1)*2*W], h[i*W:(i+1)*W]
			for j := range o {
				gate, up := min(g[2*j], limit), min(max(g[2*j+1], -limit), limit)
				o[j] = (up + 1) * (gate / (1 + expf(-gate*alpha)))
			}
		}
	})
	wm.downS.sub(e*W*H, W*H).mulT(y, h, n, H, W)
	addBias(y, w.stacked.downB[e*H:(e+1)*H], n, H)
}

// moeBackBufs are the backward scratch of the MoE blocks, sized for the
// widest (shared by every layer).
type moeBackBufs struct {
	xb, dyb, dxb []float32 // gathered rows, (N, H)
	dh, dg, du   []float32 // (N, width)
	dlogits      []float32 // (N, experts)
	dw           []float32 // ∂loss/∂routing weight, (N·k)
}

// newMoEBackBufs allocates the MoE backward scratch for the MoE blocks of
// dims at N rows, or returns nil when there are none.
func newMoEBackBufs(dims []layerDims, N, H int) *moeBackBufs {
	var E, k, W int
	for _, d := range dims {
		if x := d.moe; x != nil {
			E, k, W = max(E, x.experts), max(k, x.topK), max(W, x.width)
		}
	}
	if E == 0 {
		return nil
	}
	return &moeBackBufs{xb: make([]float32, N*H), dyb: make([]float32, N*H), dxb: make([]float32, N*H),
		dh: make([]float32, N*W), dg: make([]float32, N*W), du: make([]float32, N*W),
		dlogits: make([]float32, N*E), dw: make([]float32, N*k)}
}

// moeBackward is the backward pass of moeForward: given dout (N, H), the
// gradient of the block's output, it sets dx (N, H) to the gradient of the
// block's input x (overwritten: through the experts and the router) and
// accumulates the router's and every routed expert's weight gradients into
// g; w are the float32 parameters, s what the forward pass saved.
func moeBackward(dx []float32, g *layerParams, dout, x []float32, w *layerParams, d *moeDims, s *moeSaved, b *moeBackBufs, N, H int) {
	E, k, W := d.experts, d.topK, d.width
	r := s.r
	clear(dx)
	dw := b.dw[:N*k]
	for e := range E {
		c0, c1 := s.count[e], s.count[e+1]
		group := s.slots[c0:c1]
		n := len(group)
		if n == 0 {
			continue
		}
		xb, dyb, dxb := b.xb[:n*H], b.dyb[:n*H], b.dxb[:n*H]
		dh, dg, du := b.dh[:n*W], b.dg[:n*W], b.du[:n*W]
		gate, up, h := s.gate[c0*W:c1*W], s.up[c0*W:c1*W], s.h[c0*W:c1*W]
		parallelFor(n, 16, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				row := group[j] / k
				copy(xb[j*H:(j+1)*H], x[row*H:(row+1)*H])
				copy(dyb[j*H:(j+1)*H], dout[row*H:(row+1)*H])
			}
		})
		ew, eg := &w.experts[e], &g.experts[e]
		// y = h·downᵀ is weighted by the routing weight ρ: ∂loss/∂ρ =
		// dout·y = (dout·down)·h, and y's own gradient is ρ·dout.
		blas.Sgemm(false, false, n, W, H, 1, dyb, H, ew.down, W, 0, dh, W)
		parallelFor(n, 16, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				sl := group[j]
				rho := r.Weights[sl]
				dhj := dh[j*W : (j+1)*W]
				dw[sl] = blas.Dot(dhj, h[j*W:(j+1)*W])
				blas.Scale(rho, dhj)
				blas.Scale(rho, dyb[j*H:(j+1)*H])
			}
		})
		blas.Sgemm(true, false, H, W, n, 1, dyb, H, h, W, 1, eg.down, W)
		activationBackward(dg, du, dh, gate, up, n, W, d.act)
		linearBackward(dxb, eg.up, nil, du, xb, ew.up, n, H, W, false)
		linearBackward(dxb, eg.gate, nil, dg, xb, ew.gate, n, H, W, true)
		// index_add_'s backward: the rows of a group are distinct.
		parallelFor(n, 16, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				row := group[j] / k
				blas.Axpy(1, dxb[j*H:(j+1)*H], dx[row*H:(row+1)*H])
			}
		})
	}
	// The router: renormalisation, then softmax, at the selected experts.
	dl := b.dlogits[:N*E]
	parallelFor(N, 16, func(lo, hi int) {
		p := make([]float32, E)
		for i := lo; i < hi; i++ {
			routerSoftmax(p, s.logits[i*E:(i+1)*E])
			idx, rw, dwi := r.Experts[i*k:(i+1)*k], r.Weights[i*k:(i+1)*k], dw[i*k:(i+1)*k]
			dp := dl[i*E : (i+1)*E] // ∂loss/∂p first, then ∂loss/∂logit
			clear(dp)
			if d.rule.Renormalize {
				// ρ_t = p_t / Σ_S p: ∂loss/∂p_j = (∂ρ_j − Σ_t ∂ρ_t·ρ_t) / Σ_S p.
				var tot, dot float32
				for t, e := range idx {
					tot += p[e]
					dot += dwi[t] * rw[t]
				}
				for t, e := range idx {
					dp[e] = (dwi[t] - dot) / tot
				}
			} else {
				for t, e := range idx {
					dp[e] = dwi[t]
				}
			}
			// softmax: ∂logit_j = p_j (∂p_j − Σ_i p_i ∂p_i).
			var dot float32
			for j, v := range dp {
				dot += p[j] * v
			}
			for j := range dp {
				dp[j] = p[j] * (dp[j] - dot)
			}
		}
	})
	linearBackward(dx, g.router, nil, dl, x, w.router, N, H, E, true)
}

// ExpertStats accumulates per-expert routing statistics over forward
// passes: it is an Observer of SiteMoERouting (other sites are ignored).
// For every MoE layer and routed expert it counts the rows routed to the
// expert and sums gate weight × L2 norm of the expert's output over them,
// from which REAP's saliency (Lasby et al., "REAP the Experts": the mean
// over the tokens routed to the expert of g·‖f‖) and the routing
// frequency follow.
type ExpertStats struct {
	// Rows[l] is the number of rows layer l routed (0 for a layer without
	// MoE).
	Rows []int64
	// Counts[l][e] is the number of rows routed to expert e of layer l,
	// and GateNorm[l][e] the sum over them of gate weight × ‖output‖;
	// nil for a layer without MoE.
	Counts   [][]int64
	GateNorm [][]float64
}

// NewExpertStats returns empty statistics for a model with layers layers.
func NewExpertStats(layers int) *ExpertStats {
	return &ExpertStats{Rows: make([]int64, layers), Counts: make([][]int64, layers), GateNorm: make([][]float64, layers)}
}

// Observe adds one SiteMoERouting observation.
func (s *ExpertStats) Observe(a *Activation) {
	r := a.Routing
	if a.Site != SiteMoERouting || r == nil || a.Layer < 0 || a.Layer >= len(s.Rows) {
		return
	}
	l := a.Layer
	if s.Counts[l] == nil {
		s.Counts[l], s.GateNorm[l] = make([]int64, r.NumExperts), make([]float64, r.NumExperts)
	}
	s.Rows[l] += int64(len(r.Experts) / r.TopK)
	for i, e := range r.Experts {
		s.Counts[l][e]++
		s.GateNorm[l][e] += float64(r.Weights[i]) * float64(r.OutputNorms[i])
	}
}

// REAP returns layer l's per-expert REAP saliency: GateNorm / Counts (0
// for an expert no row reached), or nil for a layer without MoE.
func (s *ExpertStats) REAP(l int) []float64 {
	if s.Counts[l] == nil {
		return nil
	}
	out := make([]float64, len(s.Counts[l]))
	for e, c := range s.Counts[l] {
		if c > 0 {
			out[e] = s.GateNorm[l][e] / float64(c)
		}
	}
	return out
}

// Frequency returns layer l's per-expert share of routed rows (Counts /
// Rows), or nil for a layer without MoE.
func (s *ExpertStats) Frequency(l int) []float64 {
	if s.Counts[l] == nil {
		return nil
	}
	out := make([]float64, len(s.Counts[l]))
	for e, c := range s.Counts[l] {
		if s.Rows[l] > 0 {
			out[e] = float64(c) / float64(s.Rows[l])
		}
	}
	return out
}

// CheckTrain is Check for training and distillation: it also refuses the
// layers the engine runs forward only (Mamba2 mixers; gpt-oss's sink
// attention and its MoE blocks), with an *UnsupportedError naming the
// first. Mixtral's and Qwen3-MoE's mixture-of-experts layers train
// (moeBackward).
func CheckTrain(a *architecture.Model) error {
	dims, err := checkArch(a)
	if err != nil {
		return err
	}
	for i, d := range dims {
		if d.mamba != nil {
			return &UnsupportedError{Layer: i, Feature: "training through Mamba2 mixers (the native engine runs them forward only: importance, eval, the proxy, serving; training or distilling a hybrid model goes through the PyTorch reference trainer)"}
		}
		if d.sinks || (d.moe != nil && d.moe.gptOss) {
			return &UnsupportedError{Layer: i, Feature: "training through gpt-oss layers (attention sinks, top-k-then-softmax routing, clamped SwiGLU experts: the native engine runs them forward only: importance, eval, the proxy, serving; training or distilling gpt-oss goes through the PyTorch reference trainer, engine torch)"}
		}
	}
	return nil
}
