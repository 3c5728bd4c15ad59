package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/architecture"
)

// This file holds the mixture-of-experts feed-forward block, forward only:
// a router (Experts × hidden, no bias) scores every token, each token is
// sent to its top-k experts, and the block's output is the routing-weighted
// sum of those experts' gated MLPs. The routing rule is the family's
// (architecture.RouterRule), as transformers computes it:
//
//   - Mixtral (models/mixtral/modeling_mixtral.py, MixtralSparseMoeBlock.forward):
//     softmax over every expert in float32, top-k, the k weights divided by
//     their sum;
//   - Qwen3-MoE (models/qwen3_moe/modeling_qwen3_moe.py,
//     Qwen3MoeSparseMoeBlock.forward): the same, divided by the sum only
//     when config.json's norm_topk_prob is true (Qwen3MoeConfig's default
//     is false);
//   - gpt-oss (top-k of the logits, then softmax over the k; clamped
//     SwiGLU experts with biases) is not run: checkMoE refuses it.
//
// Each expert's tokens are gathered into one batch so that its three
// products are GEMMs (bf16 weights read in place like every other matrix),
// and the experts' outputs are added into the block's output in expert
// order, as Qwen3MoeSparseMoeBlock.forward's index_add_ loop does. Backward
// is not implemented (ErrMoEBackward): training or distilling a Qwen3-MoE
// or Mixtral model goes through the PyTorch reference trainer (package
// torchref, trainer/acmoe.py), whose logits equal this forward's.

// moeDims are the widths and rule of one MoE block.
type moeDims struct {
	experts, topK, width int
	act                  activation
	rule                 architecture.RouterRule
}

// expertParams are one routed expert's slab views; expertMats its matrices.
type expertParams struct{ gate, up, down []float32 }
type expertMats struct{ gate, up, down matrix }

// ErrMoEBackward is returned by the backward passes of a model with
// mixture-of-experts layers.
var ErrMoEBackward = errors.New("engine: backward through mixture-of-experts layers is not implemented (the native engine runs them forward only: importance, proxy, eval, serving); training or distilling a Qwen3-MoE or Mixtral model goes through the PyTorch reference trainer (engine torch)")

// checkMoE validates an MoE block against what the engine runs.
func checkMoE(a *architecture.Model, x *architecture.MoE) (*moeDims, error) {
	rule := a.MoERouter()
	switch {
	case rule.TopKFirst:
		return nil, errors.New("mixture of experts routed top-k before softmax (gpt-oss)")
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

// route picks the top-k experts of each row of logits (N, E) by d's rule,
// writing their indices and weights into r.
func route(r *Routing, logits []float32, N int, d *moeDims) {
	E, k := d.experts, d.topK
	parallelFor(N, 16, func(lo, hi int) {
		p := make([]float32, E)
		for i := lo; i < hi; i++ {
			row := logits[i*E : (i+1)*E]
			// softmax(router_logits, dim=1, dtype=torch.float)
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

// moeForward sets out (N, H) to the MoE block's output on x (N, H), the
// post-attention-normed hidden state, and returns the routing it used and
// the router logits (N, experts).
func moeForward(out, x []float32, d *moeDims, wm layerMats, N, H int) (*Routing, []float32) {
	E, k, W := d.experts, d.topK, d.width
	logits := make([]float32, N*E)
	linearForward(logits, x, wm.router, nil, N, H, E)
	r := &Routing{NumExperts: E, TopK: k, Experts: make([]int32, N*k), Weights: make([]float32, N*k), OutputNorms: make([]float32, N*k)}
	route(r, logits, N, d)
	// Group the (row, slot) pairs by expert, in row order.
	count := make([]int, E+1)
	for _, e := range r.Experts {
		count[e+1]++
	}
	most := 0
	for e := range E {
		most = max(most, count[e+1])
		count[e+1] += count[e]
	}
	slots := make([]int, N*k) // slot indices (row·k + t), grouped by expert
	next := append([]int(nil), count[:E]...)
	for s, e := range r.Experts {
		slots[next[e]] = s
		next[e]++
	}
	xb, yb := make([]float32, most*H), make([]float32, most*H)
	gb, ub, hb := make([]float32, most*W), make([]float32, most*W), make([]float32, most*W)
	clear(out)
	for e := range E {
		group := slots[count[e]:count[e+1]]
		n := len(group)
		if n == 0 {
			continue
		}
		for j, s := range group {
			row := s / k
			copy(xb[j*H:(j+1)*H], x[row*H:(row+1)*H])
		}
		em := wm.experts[e]
		linearForward(gb[:n*W], xb[:n*H], em.gate, nil, n, H, W)
		linearForward(ub[:n*W], xb[:n*H], em.up, nil, n, H, W)
		activationForward(hb[:n*W], gb[:n*W], ub[:n*W], n, W, d.act)
		linearForward(yb[:n*H], hb[:n*W], em.down, nil, n, W, H)
		for j, s := range group {
			row := s / k
			y, o := yb[j*H:(j+1)*H], out[row*H:(row+1)*H]
			w := r.Weights[s]
			var ss float64
			for c, v := range y {
				o[c] += w * v
				ss += float64(v) * float64(v)
			}
			r.OutputNorms[s] = float32(math.Sqrt(ss))
		}
	}
	return r, logits
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

// hasMoE reports whether any layer is a mixture of experts.
func (m *Model) hasMoE() bool {
	for _, d := range m.dims {
		if d.moe != nil {
			return true
		}
	}
	return false
}

// CheckTrain is Check for training and distillation: it also refuses the
// layers the engine runs forward only (mixture of experts), with an
// *UnsupportedError naming the first.
func CheckTrain(a *architecture.Model) error {
	dims, err := checkArch(a)
	if err != nil {
		return err
	}
	for i, d := range dims {
		if d.mamba != nil {
			return &UnsupportedError{Layer: i, Feature: "training through Mamba2 mixers (the native engine runs them forward only: importance, eval, the proxy, serving; training or distilling a hybrid model goes through the PyTorch reference trainer)"}
		}
		if d.moe != nil {
			return &UnsupportedError{Layer: i, Feature: "training through mixture-of-experts layers (the native engine runs them forward only: importance, eval, the proxy, serving; training or distilling a Qwen3-MoE or Mixtral model goes through the PyTorch reference trainer)"}
		}
	}
	return nil
}
