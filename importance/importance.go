// Package importance scores the structure of a model by its activations on
// calibration text, as Minitron does (method.md §2, NVIDIA ModelOpt
// mcore_minitron): hidden channels, attention heads, MLP neurons and whole
// layers. The pruner keeps the highest-scoring units.
//
// # Aggregation
//
// For every observed activation x of one forward call over B packed
// sequences of T tokens:
//
//	m[b, c] = mean_t |x[b, t, c]|      (mean over the sequence)
//	A[c]   += Σ_b m[b, c]²             (sum of squares over the batch and calls)
//	s[c]    = sqrt(A[c])               (L2 over all calibration sequences)
//
// i.e. mean over tokens, L2 over samples. Per dimension:
//
//   - hidden channels: one accumulator per norm site (the outputs of
//     input_layernorm and post_attention_layernorm of every layer);
//     hidden[c] = Σ_sites s_site[c];
//   - MLP neurons: s over act(gate)·up, the input of down_proj;
//   - attention heads: s per channel of the attention output before o_proj,
//     viewed [heads, head_dim]; a head's score is the L2 norm over its
//     head_dim channels. Heads are ranked within their KV group
//     (HeadOrder), because KV groups are not pruned;
//   - Mamba2 heads (Nemotron-H): the same over the mixer's out_proj input
//     (the gated-normed scan output, engine.SiteMambaHeads), viewed
//     [heads, head_dim], and ranked within their n_groups group
//     (MambaHeadOrder): group-aware as Minitron-SSM (Taghibakhshi et al.,
//     arXiv 2504.11409), which prunes the same number of heads in every
//     group so that the grouped B, C and gated norm keep their layout;
//   - layers: block influence BI_l = mean_{b,t} (1 − cos(x_in, x_out)) over
//     the hidden states entering and leaving layer l (a mean over every
//     calibration token, so it does not depend on the batch size), and the
//     increase of the calibration loss when layer l alone is skipped (an
//     identity);
//   - sub-blocks: the same two scores for the attention and the MLP of each
//     layer alone: the influence 1 − cos between the residual stream before
//     and after the sub-block (x_in and x_mid for attention, x_mid and
//     x_out for the MLP, where x_mid = x_in + attention), and the loss
//     increase when only that sub-block (with its norm) is skipped, which is
//     what a child with that sub-block removed (DeciLM no_op) computes.
//
// # Cost
//
// One calibration pass over every row gives all the activation scores,
// every token's loss (engine.TokenLosses) and caches each layer's input. A
// skip loss reruns only the layers from the skipped one on
// (engine.ForwardLossFrom, the same losses as a whole pass with that skip)
// and is the mean over the scored tokens of the difference between each
// token's loss with the skip and its loss in the calibration pass: the two
// are paired token by token, so what the tokens share cancels. Scoring
// every row (no budget: the exhaustive scores) costs 1 + Σ_passes
// ForwardFLOPsFrom(layer)/ForwardFLOPs equivalent forward passes, about
// half of the 1 + 3·L whole passes.
//
// With a pass budget (Options.Passes) that does not afford every row, the
// skip losses are scored on whole sequences, the first k of ScoreOrder
// (spread over the set), in two rounds, and each is a regression estimate
// of the mean over every calibration token rather than over the scored
// ones:
//
//	skip_j = ȳ_j − β·(x̄_j − μ_j)
//
// where y is a scored token's paired loss difference, x its first-order
// estimate −⟨g, Δ_j⟩ (g the gradient of the token's loss with respect to the
// last layer's output, engine.FinalGradients; Δ_j what the skipped layer or
// sub-block adds to the residual stream, as if nothing after it changed),
// x̄_j and ȳ_j their means over the scored tokens, μ_j the mean of x over
// every calibration token, and β the least-squares slope of y on x pooled
// over the skips of one kind (layers, attention, MLP). x costs one
// transposed LM-head product over every token (engine.FinalGradientFLOPs,
// counted in the budget) and corrects most of the sampling noise of a few
// sequences. Round one scores every skip on the k sequences the budget
// affords (SkipScope); round two spends what is left on the sequences after
// them, for the neighbours (in one ordering, by the round-one estimates)
// whose difference is least certain relative to its spread (allocate), at
// most k+1 more sequences each, whose layer inputs the calibration pass
// caches ((k+1) × T × layers × hidden float32, and a covariate per skip and
// token).
// Scores.Passes records what a computation cost, SkipSequences and
// SkipTokens round one's sequences and their length, SkipRegression and
// Budget how the skips were estimated.
//
// Measured by TestBudgetOrderings (-budget; dev VM 2-core AMD EPYC, under
// load from other sessions), a budget of 4 passes against the exhaustive
// scores on 64 validation sequences of 128 tokens: the embedded parent
// (8 layers, exhaustive 16.5 passes) 4.00 passes, 11 of 64 sequences in
// round one, Spearman ρ of the layer, attention and MLP skip-loss
// orderings 0.976 / 0.976 / 1.000; a 16-layer model trained here (2.0M
// parameters, exhaustive 30.5 passes) 4.00 passes, 6 of 64 sequences,
// ρ 0.953 / 0.962 / 0.959. The exhaustive scores' own split-half ρ (32
// sequences against the other 32) is 0.976 / 0.905 / 0.952 on the parent
// and 0.932 / 0.935 / 0.956 on the 16-layer model: near the sampling noise
// of this data, and the margins over 0.95 are thin.
//
// # Storage and reuse
//
// Scores are a safetensors file (float32 tensors "hidden", "layer_bi",
// "layer_skip_loss", "attn_bi", "mlp_bi", "attn_skip_loss",
// "mlp_skip_loss", "layers.N.heads", "layers.N.head_channels",
// "layers.N.neurons") with provenance in __metadata__: the model hash, the
// calibration-data hash, sequence length, sequences, tokens, the base loss,
// the sequences the skip losses were scored on, the equivalent passes and
// the format version. Load reads it back; Matches tells whether a file
// can be reused for a (model, data) pair without a new pass.
//
// # Experts
//
// Routed experts of MoE layers are ranked by ExpertScores, a file of their
// own in the same safetensors-with-provenance style (format
// "autocompress-expert-scores"; its kind says what was measured: REAP's
// router-weighted activation norm, routing frequency, or the structural
// prior). The native engine does not run MoE layers, so Compute does not
// produce them: StructuralExperts computes the prior from the weights (the
// router row norm times the expert's weight norm), and REAP or frequency
// scores computed elsewhere are read with LoadExperts.
//
// Version 1 files (before sub-block scores) still load: their sub-block
// scores are NaN, and their layer_bi is a sum over forward calls rather
// than a mean (the same ranking of layers, scaled by the number of calls);
// Matches refuses them, so a cache of version 1 is recomputed. Version 2
// files (skip losses as a difference of mean losses, under a budget on
// prefixes of the sequences) load too, and Matches refuses them: version
// 3's skip losses are paired per-token differences and, under a budget,
// the regression estimates of Cost.
package importance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// Version is the format version written to __metadata__.
const Version = "3"

// Scores are the importance statistics of one model on one calibration set.
// Every per-layer quantity is indexed by layer; a layer without attention
// (or MLP) has nil Heads (or Neurons).
type Scores struct {
	Hidden []float64 // [hidden]: Σ over norm sites of the per-site L2

	Heads        [][]float64 // [layer][heads]: L2 over head_dim of HeadChannels
	HeadChannels [][]float64 // [layer][heads·head_dim]
	KVHeads      []int       // [layer]: KV heads (groups), 0 without attention
	Neurons      [][]float64 // [layer][ffn]
	// MambaHeads and MambaHeadChannels are a Mamba2 layer's head scores
	// (L2 over head_dim of its channel scores) and channel scores
	// [heads·head_dim]; nil for other layers and in files written before
	// they were scored.
	MambaHeads, MambaHeadChannels [][]float64

	LayerBI       []float64 // [layer]: mean over tokens of 1 − cos(in, out)
	LayerSkipLoss []float64 // [layer]: loss(layer skipped) − base loss; NaN if not measured

	// Sub-block scores, NaN for a layer without that sub-block (or, for the
	// skip losses, when not measured).
	AttnBI       []float64 // [layer]: mean over tokens of 1 − cos(in, mid)
	MLPBI        []float64 // [layer]: mean over tokens of 1 − cos(mid, out)
	AttnSkipLoss []float64 // [layer]: loss(attention of l skipped) − base loss
	MLPSkipLoss  []float64 // [layer]: loss(MLP of l skipped) − base loss

	BaseLoss float64 // mean cross-entropy of the full model (nats/token)

	// SkipSequences is the number of calibration sequences the skip
	// losses were measured on (Scored, or under a pass budget round one's
	// first of ScoreOrder; round two adds some for some skips), SkipTokens
	// the positions of each (its first ones; SeqLen for whole sequences,
	// as Compute now always scores); Passes what the whole computation
	// cost in equivalent forward passes over all Sequences (0 when
	// unknown: a file written before they were recorded).
	SkipSequences int
	SkipTokens    int
	Passes        float64
	// SkipRegression tells that the skip losses are regression estimates
	// (a pass budget that scores fewer than every sequence: see Cost);
	// Budget is the pass budget asked for (Options.Passes; 0: none).
	SkipRegression bool
	Budget         float64

	ModelHash string
	DataHash  string
	SeqLen    int
	Sequences int
	Tokens    int64
	Version   string
}

// Options configures Compute.
type Options struct {
	// Batch is the number of sequences per forward pass (0: the default,
	// 8). The scores do not depend on it.
	Batch int
	// NoSkipLoss turns off the skip-loss passes. By default Compute measures
	// the loss increase of skipping each layer, and each layer's attention
	// and MLP alone: up to three more passes over SkipRows rows per layer.
	NoSkipLoss bool
	// NoSubBlockSkipLoss keeps the layer skip loss but leaves out the two
	// sub-block skip passes per layer.
	NoSubBlockSkipLoss bool
	// SkipRows limits the rows used for the skip-loss passes (0 = all, or
	// what Passes allows): SkipRows calibration sequences spread evenly
	// over the set (Scored).
	SkipRows int
	// Passes is a budget for the whole computation in equivalent forward
	// passes over all rows (0: none). A budget that does not afford every
	// row scores the skip losses as regression estimates from as many whole
	// sequences as it affords (at least one): see Cost and SkipScope.
	// Every other score uses all rows. It cannot be combined with SkipRows.
	Passes float64
	// Progress receives every forward pass (stage "importance", unit "seq"):
	// the sequences run so far of the total Compute will run (calibration
	// plus skip-loss passes); nil = none.
	Progress progress.Func
}

// EnsureDefaults fills the unset (zero) fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Batch == 0 {
		o.Batch = 8
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.Batch < 1:
		return fmt.Errorf("importance: batch %d: want at least 1 sequence per forward pass", o.Batch)
	case o.SkipRows < 0:
		return fmt.Errorf("importance: skip rows %d: want >= 0 (0: all)", o.SkipRows)
	case o.Passes != 0 && !(o.Passes >= 1 && o.Passes <= 1e9):
		return fmt.Errorf("importance: pass budget %g: want 0 (none) or at least 1 (the calibration pass itself)", o.Passes)
	case o.Passes != 0 && o.SkipRows != 0:
		return fmt.Errorf("importance: a pass budget (%g) and a number of skip rows (%d) both given: give one", o.Passes, o.SkipRows)
	}
	return nil
}

// accum is the Minitron accumulator for one site.
type accum struct {
	a []float64 // Σ_b m[b,c]²
	m []float64 // scratch: Σ_t |x| of one sequence
}

func newAccum(n int) *accum { return &accum{a: make([]float64, n), m: make([]float64, n)} }

// add folds one (B·T, width) activation into the accumulator.
func (ac *accum) add(x []float32, B, T, width int) {
	for b := 0; b < B; b++ {
		clear(ac.m)
		for t := 0; t < T; t++ {
			row := x[(b*T+t)*width : (b*T+t+1)*width]
			for c, v := range row {
				ac.m[c] += math.Abs(float64(v))
			}
		}
		for c := range ac.m {
			mean := ac.m[c] / float64(T)
			ac.a[c] += mean * mean
		}
	}
}

func (ac *accum) sqrt() []float64 {
	out := make([]float64, len(ac.a))
	for i, v := range ac.a {
		out[i] = math.Sqrt(v)
	}
	return out
}

// collector is the engine.Observer that accumulates every site.
type collector struct {
	hidden  []*accum // per norm site, in observation order
	heads   []*accum
	neurons []*accum
	mamba   []*accum
	// Σ over token rows of 1 − cos for the layer, its attention and its
	// MLP, and the rows counted.
	bi, attnBI, mlpBI []float64
	rows              []int64
	in, mid           [][]float32 // layer input and mid residual of the current call, per layer
	out               []float32   // the last layer's output of the current call
}

func (c *collector) Observe(a *engine.Activation) {
	l := a.Layer
	switch a.Site {
	case engine.SiteAttnNorm, engine.SiteMLPNorm:
		i := 2*l + int(boolInt(a.Site == engine.SiteMLPNorm))
		if c.hidden[i] == nil {
			c.hidden[i] = newAccum(a.Width)
		}
		c.hidden[i].add(a.Data, a.B, a.T, a.Width)
	case engine.SiteAttnHeads:
		if c.heads[l] == nil {
			c.heads[l] = newAccum(a.Width)
		}
		c.heads[l].add(a.Data, a.B, a.T, a.Width)
	case engine.SiteMambaHeads:
		if c.mamba[l] == nil {
			c.mamba[l] = newAccum(a.Width)
		}
		c.mamba[l].add(a.Data, a.B, a.T, a.Width)
	case engine.SiteMLPAct:
		if c.neurons[l] == nil {
			c.neurons[l] = newAccum(a.Width)
		}
		c.neurons[l].add(a.Data, a.B, a.T, a.Width)
	case engine.SiteLayerInput:
		c.in[l] = append(c.in[l][:0], a.Data...)
		c.mid[l] = c.mid[l][:0]
	case engine.SiteAttnResidual:
		c.mid[l] = append(c.mid[l][:0], a.Data...)
	case engine.SiteLayerOutput:
		if l == len(c.in)-1 {
			c.out = append(c.out[:0], a.Data...)
		}
		n := int64(a.B * a.T)
		c.rows[l] += n
		c.bi[l] += float64(n) - sumCosine(c.in[l], a.Data, a.Width)
		if len(c.mid[l]) == len(a.Data) {
			c.attnBI[l] += float64(n) - sumCosine(c.in[l], c.mid[l], a.Width)
			c.mlpBI[l] += float64(n) - sumCosine(c.mid[l], a.Data, a.Width)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// meanCosine returns the mean over rows of cos(x_row, y_row); a zero row
// pair counts as cosine 1 (no change).
func meanCosine(x, y []float32, width int) float64 {
	return sumCosine(x, y, width) / float64(len(x)/width)
}

// sumCosine returns the sum over rows of cos(x_row, y_row); a zero row
// counts as cosine 1 (no change).
func sumCosine(x, y []float32, width int) float64 {
	rows := len(x) / width
	var s float64
	for r := 0; r < rows; r++ {
		a, b := x[r*width:(r+1)*width], y[r*width:(r+1)*width]
		var dot, na, nb float64
		for i := range a {
			dot += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		if na == 0 || nb == 0 {
			s++
			continue
		}
		s += dot / math.Sqrt(na*nb)
	}
	return s
}

// Compute runs m over rows (packed sequences of T+1 token ids: inputs
// row[:T], targets row[1:]) and returns its importance scores. ModelHash is
// left for the caller to set; DataHash is dataset.HashRows(rows). It stops with
// ctx.Err() between forward passes when ctx is cancelled, and reports
// progress through o.Progress. The model's skips are cleared on return.
func Compute(ctx context.Context, m *engine.Model, rows [][]int32, o Options) (*Scores, error) {
	if len(rows) == 0 {
		return nil, errors.New("importance: no calibration sequences")
	}
	T := len(rows[0]) - 1
	if T < 1 {
		return nil, fmt.Errorf("importance: calibration rows of %d tokens; want at least 2", len(rows[0]))
	}
	for i, r := range rows {
		if len(r) != T+1 {
			return nil, fmt.Errorf("importance: row %d has %d tokens, row 0 has %d", i, len(r), T+1)
		}
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	arch := m.Arch()
	L := arch.NumLayers()
	c := &collector{hidden: make([]*accum, 2*L), heads: make([]*accum, L), neurons: make([]*accum, L), mamba: make([]*accum, L),
		bi: make([]float64, L), attnBI: make([]float64, L), mlpBI: make([]float64, L), rows: make([]int64, L),
		in: make([][]float32, L), mid: make([][]float32, L)}
	passes := skipPasses(m, o)
	K, Tk := o.SkipScope(m, len(rows), T)
	if len(passes) == 0 {
		K, Tk = 0, 0
	}
	full := m.ForwardFLOPs(len(rows), T)
	// Under a budget that does not afford every sequence, the skip losses
	// are regression estimates (Cost), round one on the first K of
	// ScoreOrder.
	regression := o.regression(K, len(rows)) && len(passes) > 0
	scored := o.scoredRows(K, len(rows))
	total := int64(len(rows)) + int64(len(passes)*K)
	// Round two of a regression estimate: what the budget leaves after
	// round one (every pass on K sequences) goes to the passes whose order
	// is least certain, on the sequences after round one's in ScoreOrder,
	// cached from the calibration pass.
	var rc *rowCache
	var left float64
	if regression {
		left = (o.Passes-1)*full - m.FinalGradientFLOPs(len(rows), T) - float64(K)*perRowFLOPs(m, passes, Tk)
		cheapest := math.Inf(1)
		for _, p := range passes {
			cheapest = min(cheapest, m.ForwardFLOPsFrom(p.layer, 1, Tk))
		}
		// At most K+1 more sequences (round two's steps are K/2): the cache
		// holds ≤ (K+1) × T × layers × hidden float32 layer inputs.
		more := min(len(rows), K+int(max(0, math.Floor(left/cheapest))), 2*K+1)
		rc = newRowCache(ScoreOrder(len(rows)), K, more, len(rows), L, len(passes), Tk, arch.Hidden)
		total += int64(max(0, left/(perRowFLOPs(m, passes, Tk)/float64(len(passes)))))
	}
	pr := progress.Start(o.Progress, progress.Event{Stage: "importance", Total: total, Unit: "seq"})
	// Forward passes only, with one set of layer buffers whatever the depth.
	defer m.SetInference(m.Inference())
	m.SetInference(true)
	defer func() {
		m.SetObserver(nil)
		m.SetSkip()
		m.SetSkipBlock(engine.BlockAttention)
		m.SetSkipBlock(engine.BlockMLP)
	}()
	sk := newSkipScorer(m, passes, Tk, regression, pr)
	var sb streamBatch
	H := arch.Hidden
	var base float64
	var n int
	var tl []float64
	var grad []float32
	var gradFLOPs float64
	var cov [][]float64 // per pass: the current call's first-order loss change per token
	if regression {
		cov = make([][]float64, len(passes))
	}
	in := make([]int32, 0, o.Batch*T)
	tg := make([]int32, 0, o.Batch*T)
	for i := 0; i < len(rows); i += o.Batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		part := rows[i:min(i+o.Batch, len(rows))]
		in, tg = in[:0], tg[:0]
		for _, r := range part {
			in = append(in, r[:T]...)
			tg = append(tg, r[1:]...)
		}
		m.SetObserver(c)
		l, err := m.ForwardLoss(in, tg, len(part), T)
		m.SetObserver(nil)
		if err == nil {
			tl, err = m.TokenLosses(tl[:0])
		}
		if err == nil && regression {
			grad, err = m.FinalGradients(grad[:0])
			gradFLOPs += m.FinalGradientFLOPs(len(part), T)
		}
		if err != nil {
			return nil, fmt.Errorf("importance: sequences %d..%d: %w", i, i+len(part)-1, err)
		}
		base += float64(l) * float64(len(part)*T)
		n += len(part) * T
		pr.Add(int64(len(part)))
		if len(passes) == 0 {
			continue
		}
		// Every token's first-order loss change, per pass (the covariate).
		if regression {
			firstOrder(cov, sk.mu, passes, c, grad, len(part)*T, H)
		}
		// The collector holds every layer's input of this pass: the scored
		// rows' first Tk positions are gathered into batches scored at
		// once, and round two's cached.
		for r := range part {
			if rc != nil {
				rc.put(i+r, r, T, c.in, tg, tl, cov)
			}
			if !scored[i+r] {
				continue
			}
			sb.add(c.in, tg[r*T:r*T+Tk], tl[r*T:r*T+Tk], cov, r*T*H, (r*T+Tk)*H, H)
			if sb.rows == o.Batch {
				if err := sb.flush(ctx, sk); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := sb.flush(ctx, sk); err != nil {
		return nil, err
	}
	for j := range sk.mu {
		sk.mu[j] /= float64(n)
	}
	if rc != nil {
		if err := roundTwo(ctx, sk, rc, orderings(m, passes, o), K, o.Batch, left); err != nil {
			return nil, err
		}
	}
	cost := full + sk.flops + gradFLOPs
	base /= float64(n)
	nan := func() []float64 {
		v := make([]float64, L)
		for i := range v {
			v[i] = math.NaN()
		}
		return v
	}
	s := &Scores{
		Hidden: make([]float64, arch.Hidden), Heads: make([][]float64, L), HeadChannels: make([][]float64, L),
		KVHeads: make([]int, L), Neurons: make([][]float64, L), MambaHeads: make([][]float64, L), MambaHeadChannels: make([][]float64, L), LayerBI: make([]float64, L), LayerSkipLoss: nan(),
		AttnBI: nan(), MLPBI: nan(), AttnSkipLoss: nan(), MLPSkipLoss: nan(),
		BaseLoss: base, DataHash: dataset.HashRows(rows), SeqLen: T, Sequences: len(rows),
		Tokens: int64(len(rows) * T), Version: Version, SkipSequences: K, SkipTokens: Tk, Passes: cost / full, Budget: o.Passes, SkipRegression: regression,
	}
	for _, h := range c.hidden {
		if h == nil {
			continue
		}
		for i, v := range h.sqrt() {
			s.Hidden[i] += v
		}
	}
	for l, layer := range arch.Layers {
		if n := float64(c.rows[l]); n > 0 {
			s.LayerBI[l] = c.bi[l] / n
			if layer.Attention != nil {
				s.AttnBI[l] = c.attnBI[l] / n
			}
			if layer.MLP != nil {
				s.MLPBI[l] = c.mlpBI[l] / n
			}
		}
		if at := layer.Attention; at != nil && c.heads[l] != nil {
			ch := c.heads[l].sqrt()
			s.HeadChannels[l] = ch
			s.KVHeads[l] = at.KVHeads
			s.Heads[l] = make([]float64, at.Heads)
			for h := 0; h < at.Heads; h++ {
				var q float64
				for _, v := range ch[h*at.HeadDim : (h+1)*at.HeadDim] {
					q += v * v
				}
				s.Heads[l][h] = math.Sqrt(q)
			}
		}
		if c.neurons[l] != nil {
			s.Neurons[l] = c.neurons[l].sqrt()
		}
		if x := layer.Mamba; x != nil && c.mamba[l] != nil {
			s.MambaHeadChannels[l] = c.mamba[l].sqrt()
			s.MambaHeads[l] = headNorms(s.MambaHeadChannels[l], x.Heads, x.HeadDim)
		}
	}
	if len(passes) == 0 {
		return s, nil
	}
	for j, p := range passes {
		d := sk.loss(j)
		layer := arch.Layers[p.layer]
		switch {
		case !p.sub:
			s.LayerSkipLoss[p.layer] = d
			// A layer with one sub-block: skipping it is skipping the layer.
			if layer.MLP == nil && layer.Attention != nil && !o.NoSubBlockSkipLoss {
				s.AttnSkipLoss[p.layer] = d
			}
			if layer.Attention == nil && layer.MLP != nil && !o.NoSubBlockSkipLoss {
				s.MLPSkipLoss[p.layer] = d
			}
		case p.block == engine.BlockAttention:
			s.AttnSkipLoss[p.layer] = d
		default:
			s.MLPSkipLoss[p.layer] = d
		}
	}
	return s, nil
}

// meanLoss is the token-weighted mean cross-entropy over rows.
func meanLoss(ctx context.Context, m *engine.Model, rows [][]int32, batch int, pr *progress.Task) (float64, error) {
	T := len(rows[0]) - 1
	var sum float64
	var n int
	in := make([]int32, 0, batch*T)
	tg := make([]int32, 0, batch*T)
	for i := 0; i < len(rows); i += batch {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		part := rows[i:min(i+batch, len(rows))]
		in, tg = in[:0], tg[:0]
		for _, r := range part {
			in = append(in, r[:T]...)
			tg = append(tg, r[1:]...)
		}
		l, err := m.ForwardLoss(in, tg, len(part), T)
		if err != nil {
			return 0, fmt.Errorf("importance: sequences %d..%d: %w", i, i+len(part)-1, err)
		}
		sum += float64(l) * float64(len(part)*T)
		n += len(part) * T
		pr.Add(int64(len(part)))
	}
	return sum / float64(n), nil
}

// HashModelDir returns the SHA-256 (hex) of a checkpoint directory's
// config.json and every *.safetensors file (names, lengths and contents,
// config.json first, then the weights in sorted order; checkpoint.HashFiles):
// the model key of a score cache.
func HashModelDir(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil {
		return "", err
	}
	names := []string{"config.json"}
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	sort.Strings(names[1:])
	h, err := checkpoint.HashFiles(os.DirFS(dir), names)
	if err != nil {
		return "", fmt.Errorf("importance: hashing model: %w", err)
	}
	return h, nil
}

// Matches reports whether the scores were computed for this model and data.
func (s *Scores) Matches(modelHash, dataHash string) bool {
	return s != nil && s.Version == Version && s.ModelHash == modelHash && s.DataHash == dataHash
}

// HeadOrder returns layer l's query heads grouped by KV group, each group's
// heads sorted by decreasing score (ties by index): order[g] lists the head
// indices of group g, most important first. Heads h·G/Heads..: head h
// belongs to group h / (Heads/KVHeads), as in grouped-query attention.
func (s *Scores) HeadOrder(l int) [][]int {
	if l < 0 || l >= len(s.Heads) || s.Heads[l] == nil || s.KVHeads[l] == 0 {
		return nil
	}
	heads := s.Heads[l]
	per := len(heads) / s.KVHeads[l]
	out := make([][]int, s.KVHeads[l])
	for g := range out {
		idx := make([]int, per)
		for i := range idx {
			idx[i] = g*per + i
		}
		sort.SliceStable(idx, func(a, b int) bool { return heads[idx[a]] > heads[idx[b]] })
		out[g] = idx
	}
	return out
}

// MambaHeadOrder returns, for Mamba layer l with groups groups (n_groups),
// the head indices of each group, most important first: head h belongs to
// group h / (heads/groups), as in the Mamba2 mixer. Nil when the layer has
// no Mamba head scores or groups does not divide them.
func (s *Scores) MambaHeadOrder(l, groups int) [][]int {
	if l < 0 || l >= len(s.MambaHeads) || s.MambaHeads[l] == nil || groups <= 0 || len(s.MambaHeads[l])%groups != 0 {
		return nil
	}
	heads := s.MambaHeads[l]
	per := len(heads) / groups
	out := make([][]int, groups)
	for g := range out {
		for _, j := range Ranking(heads[g*per : (g+1)*per]) {
			out[g] = append(out[g], g*per+j)
		}
	}
	return out
}

// MambaChannelScores returns, for Mamba layer l of heads heads, the score
// of each of the head_dim channel positions: the L2 norm over the heads of
// that channel's score (MambaHeadChannels viewed [heads, head_dim]), since
// a head_dim cut keeps the same channels in every head (the mixer's heads
// share one head_dim). Nil when the layer has no channel scores or heads
// does not divide them.
func (s *Scores) MambaChannelScores(l, heads int) []float64 {
	if l < 0 || l >= len(s.MambaHeadChannels) || s.MambaHeadChannels[l] == nil || heads <= 0 || len(s.MambaHeadChannels[l])%heads != 0 {
		return nil
	}
	ch := s.MambaHeadChannels[l]
	hd := len(ch) / heads
	out := make([]float64, hd)
	for h := range heads {
		for j, v := range ch[h*hd : (h+1)*hd] {
			out[j] += v * v
		}
	}
	for j := range out {
		out[j] = math.Sqrt(out[j])
	}
	return out
}

// headNorms is the L2 norm over each head's head_dim channel scores.
func headNorms(ch []float64, heads, hd int) []float64 {
	out := make([]float64, heads)
	for h := range out {
		var q float64
		for _, v := range ch[h*hd : (h+1)*hd] {
			q += v * v
		}
		out[h] = math.Sqrt(q)
	}
	return out
}

// Ranking returns the indices of v sorted by decreasing score (ties by
// index): the order in which a pruner keeps units.
func Ranking(v []float64) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
	return idx
}

// LeastImportant returns the indices of the n lowest scores of v, least
// important first (ties: the higher index first, the reverse of Ranking);
// NaN scores are left out. All of them when n ≥ the number of scores.
func LeastImportant(v []float64, n int) []int {
	idx := make([]int, 0, len(v))
	for i, x := range v {
		if !math.IsNaN(x) {
			idx = append(idx, i)
		}
	}
	// The reverse of Ranking: ascending score, ties by descending index.
	sort.Slice(idx, func(a, b int) bool {
		if v[idx[a]] != v[idx[b]] {
			return v[idx[a]] < v[idx[b]]
		}
		return idx[a] > idx[b]
	})
	return idx[:min(max(n, 0), len(idx))]
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// Save writes the scores as a safetensors file (atomically).
func (s *Scores) Save(path string) error {
	type tensor struct {
		name string
		data []float64
	}
	ts := []tensor{{"hidden", s.Hidden}, {"layer_bi", s.LayerBI}, {"layer_skip_loss", s.LayerSkipLoss}}
	for _, t := range []tensor{{"attn_bi", s.AttnBI}, {"mlp_bi", s.MLPBI}, {"attn_skip_loss", s.AttnSkipLoss}, {"mlp_skip_loss", s.MLPSkipLoss}} {
		if t.data != nil {
			ts = append(ts, t)
		}
	}
	for l := range s.Heads {
		if s.Heads[l] != nil {
			ts = append(ts, tensor{fmt.Sprintf("layers.%d.heads", l), s.Heads[l]},
				tensor{fmt.Sprintf("layers.%d.head_channels", l), s.HeadChannels[l]})
		}
		if s.Neurons[l] != nil {
			ts = append(ts, tensor{fmt.Sprintf("layers.%d.neurons", l), s.Neurons[l]})
		}
		if l < len(s.MambaHeads) && s.MambaHeads[l] != nil {
			ts = append(ts, tensor{fmt.Sprintf("layers.%d.mamba_heads", l), s.MambaHeads[l]},
				tensor{fmt.Sprintf("layers.%d.mamba_head_channels", l), s.MambaHeadChannels[l]})
		}
	}
	specs := make([]checkpoint.TensorSpec, len(ts))
	for i, t := range ts {
		specs[i] = checkpoint.TensorSpec{Name: t.name, DType: checkpoint.F32, Shape: []int64{int64(len(t.data))}}
	}
	kv := make([]string, len(s.KVHeads))
	for i, k := range s.KVHeads {
		kv[i] = strconv.Itoa(k)
	}
	meta := map[string]string{
		"format": "autocompress-importance", "version": s.Version, "model_hash": s.ModelHash, "data_hash": s.DataHash,
		"seq_len": strconv.Itoa(s.SeqLen), "sequences": strconv.Itoa(s.Sequences), "tokens": strconv.FormatInt(s.Tokens, 10),
		"base_loss": strconv.FormatFloat(s.BaseLoss, 'g', -1, 64), "layers": strconv.Itoa(len(s.LayerBI)),
		"kv_heads":       strings.Join(kv, ","),
		"skip_sequences": strconv.Itoa(s.SkipSequences), "skip_tokens": strconv.Itoa(s.SkipTokens), "equivalent_passes": strconv.FormatFloat(s.Passes, 'g', -1, 64),
		"pass_budget": strconv.FormatFloat(s.Budget, 'g', -1, 64), "skip_regression": strconv.FormatBool(s.SkipRegression),
		"aggregation": "mean over tokens, L2 over sequences (Minitron); hidden = sum over norm sites; heads, mamba_heads = L2 over head_dim; layer_bi = mean over tokens of 1-cos(in,out); attn_bi, mlp_bi = the same across each sub-block (in to mid, mid to out); *_skip_loss = mean over the scored tokens of loss(skip) - loss(base) on the same token (skip_regression: its regression estimate on the first-order change over every token); NaN = absent or not measured",
	}
	w, err := checkpoint.Create(path, specs, meta)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := w.WriteFloat32(t.name, f32(t.data)); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// FormatError reports a scores file that is not what Save writes.
type FormatError struct {
	Path string
	Msg  string
}

func (e *FormatError) Error() string { return "importance: " + e.Path + ": " + e.Msg }

// Load reads scores written by Save.
func Load(path string) (*Scores, error) {
	r, err := checkpoint.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	md := r.Metadata()
	bad := func(f string, a ...any) error { return &FormatError{Path: path, Msg: fmt.Sprintf(f, a...)} }
	if md["format"] != "autocompress-importance" {
		return nil, bad("not an importance file (metadata format %q)", md["format"])
	}
	s := &Scores{ModelHash: md["model_hash"], DataHash: md["data_hash"], Version: md["version"]}
	atoi := func(k string) (int, error) {
		v, err := strconv.Atoi(md[k])
		if err != nil || v < 0 {
			return 0, bad("metadata %s = %q is not a count", k, md[k])
		}
		return v, nil
	}
	L, err := atoi("layers")
	if err != nil {
		return nil, err
	}
	if s.SeqLen, err = atoi("seq_len"); err != nil {
		return nil, err
	}
	if s.Sequences, err = atoi("sequences"); err != nil {
		return nil, err
	}
	tok, err := atoi("tokens")
	if err != nil {
		return nil, err
	}
	s.Tokens = int64(tok)
	if s.BaseLoss, err = strconv.ParseFloat(md["base_loss"], 64); err != nil {
		return nil, bad("metadata base_loss = %q", md["base_loss"])
	}
	// Recorded since the pass budget: files before it scored every
	// sequence (or a number they did not record) at an unrecorded cost.
	s.SkipSequences, s.SkipTokens = s.Sequences, s.SeqLen
	if _, ok := md["skip_sequences"]; ok {
		if s.SkipSequences, err = atoi("skip_sequences"); err != nil {
			return nil, err
		}
	}
	if _, ok := md["skip_tokens"]; ok {
		if s.SkipTokens, err = atoi("skip_tokens"); err != nil {
			return nil, err
		}
	}
	if v, ok := md["equivalent_passes"]; ok {
		if s.Passes, err = strconv.ParseFloat(v, 64); err != nil || s.Passes < 0 {
			return nil, bad("metadata equivalent_passes = %q", v)
		}
	}
	if v, ok := md["pass_budget"]; ok {
		if s.Budget, err = strconv.ParseFloat(v, 64); err != nil || s.Budget < 0 {
			return nil, bad("metadata pass_budget = %q", v)
		}
	}
	if v, ok := md["skip_regression"]; ok {
		if s.SkipRegression, err = strconv.ParseBool(v); err != nil {
			return nil, bad("metadata skip_regression = %q", v)
		}
	}
	kv := strings.Split(md["kv_heads"], ",")
	if len(kv) != L {
		return nil, bad("kv_heads lists %d layers, want %d", len(kv), L)
	}
	s.KVHeads = make([]int, L)
	for i, k := range kv {
		if s.KVHeads[i], err = strconv.Atoi(k); err != nil {
			return nil, bad("kv_heads[%d] = %q", i, k)
		}
	}
	get := func(name string, want int) ([]float64, error) {
		info, ok := r.Tensor(name)
		if !ok {
			return nil, nil
		}
		if len(info.Shape) != 1 || (want >= 0 && info.Shape[0] != int64(want)) {
			return nil, bad("tensor %s has shape %v, want [%d]", name, info.Shape, want)
		}
		v, err := r.Float32(name)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, nil
	}
	if s.Hidden, err = get("hidden", -1); err != nil {
		return nil, err
	}
	if s.Hidden == nil {
		return nil, bad("no hidden tensor")
	}
	if s.LayerBI, err = get("layer_bi", L); err != nil {
		return nil, err
	}
	if s.LayerSkipLoss, err = get("layer_skip_loss", L); err != nil {
		return nil, err
	}
	if s.LayerBI == nil || s.LayerSkipLoss == nil {
		return nil, bad("missing layer_bi or layer_skip_loss")
	}
	// Sub-block scores (version 2); absent in version 1 files: NaN.
	for _, t := range []struct {
		name string
		dst  *[]float64
	}{{"attn_bi", &s.AttnBI}, {"mlp_bi", &s.MLPBI}, {"attn_skip_loss", &s.AttnSkipLoss}, {"mlp_skip_loss", &s.MLPSkipLoss}} {
		if *t.dst, err = get(t.name, L); err != nil {
			return nil, err
		}
		if *t.dst == nil {
			*t.dst = make([]float64, L)
			for i := range *t.dst {
				(*t.dst)[i] = math.NaN()
			}
		}
	}
	s.Heads, s.HeadChannels, s.Neurons = make([][]float64, L), make([][]float64, L), make([][]float64, L)
	s.MambaHeads, s.MambaHeadChannels = make([][]float64, L), make([][]float64, L)
	for l := 0; l < L; l++ {
		if s.MambaHeads[l], err = get(fmt.Sprintf("layers.%d.mamba_heads", l), -1); err != nil {
			return nil, err
		}
		if s.MambaHeadChannels[l], err = get(fmt.Sprintf("layers.%d.mamba_head_channels", l), -1); err != nil {
			return nil, err
		}
		if h := s.MambaHeads[l]; (h == nil) != (s.MambaHeadChannels[l] == nil) || h != nil && (len(h) == 0 || len(s.MambaHeadChannels[l])%len(h) != 0) {
			return nil, bad("layer %d: %d Mamba heads and %d Mamba head channels do not fit", l, len(h), len(s.MambaHeadChannels[l]))
		}
		if s.Heads[l], err = get(fmt.Sprintf("layers.%d.heads", l), -1); err != nil {
			return nil, err
		}
		if s.HeadChannels[l], err = get(fmt.Sprintf("layers.%d.head_channels", l), -1); err != nil {
			return nil, err
		}
		if s.Neurons[l], err = get(fmt.Sprintf("layers.%d.neurons", l), -1); err != nil {
			return nil, err
		}
		if h := s.Heads[l]; h != nil {
			if s.KVHeads[l] <= 0 || len(h)%s.KVHeads[l] != 0 || len(s.HeadChannels[l])%len(h) != 0 {
				return nil, bad("layer %d: %d heads, %d KV heads, %d head channels do not fit", l, len(h), s.KVHeads[l], len(s.HeadChannels[l]))
			}
		}
	}
	return s, nil
}
