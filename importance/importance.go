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
// One calibration pass over every row gives all the activation scores and
// caches each layer's input. A skip loss then reruns only the layers from
// the skipped one on (engine.ForwardLossFrom, bit-identical to a whole
// pass with that skip), so scoring every row costs 1 + Σ_passes
// ForwardFLOPsFrom(layer)/ForwardFLOPs equivalent forward passes, about
// half of the 1 + 3·L whole passes. With a pass budget (Options.Passes) the
// skip losses are scored on the first quarter (at least 32 tokens) of as
// many rows spread evenly over the set as the budget allows (SkipScope,
// Scored), their layer inputs gathered from the calibration pass into
// batches, so the cost stays within a few passes whatever the depth.
// Scores.Passes records what a computation cost, Scores.SkipSequences and
// SkipTokens what was scored. The approximation is measured by
// TestBudgetOrderings (Spearman of the layer, attention and MLP orderings
// against every row scored).
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
// Matches refuses them, so a cache of version 1 is recomputed.
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
const Version = "2"

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

	// SkipSequences is the number of calibration sequences (spread evenly,
	// Scored) the skip losses were measured on, SkipTokens the positions of
	// each (its first ones; SeqLen for whole sequences); Passes what the
	// whole computation cost in equivalent forward passes over all
	// Sequences (0 when unknown: a file written before they were recorded).
	SkipSequences int
	SkipTokens    int
	Passes        float64

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
	// passes over all rows (0: none). With a budget, the skip losses are
	// scored on prefixes of calibration sequences spread evenly over the
	// set, as many as the budget allows (at least one): see SkipScope and
	// Scored. Every other score uses all
	// rows. It cannot be combined with SkipRows.
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
	pr := progress.Start(o.Progress, progress.Event{Stage: "importance", Total: int64(len(rows)) + int64(len(passes)*K), Unit: "seq"})
	// Forward passes only, with one set of layer buffers whatever the depth.
	defer m.SetInference(m.Inference())
	m.SetInference(true)
	defer func() {
		m.SetObserver(nil)
		m.SetSkip()
		m.SetSkipBlock(engine.BlockAttention)
		m.SetSkipBlock(engine.BlockMLP)
	}()
	full := m.ForwardFLOPs(len(rows), T)
	sk := newSkipScorer(m, passes, o.Batch, Tk, pr)
	H := arch.Hidden
	var base float64
	var n int
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
		if err != nil {
			return nil, fmt.Errorf("importance: sequences %d..%d: %w", i, i+len(part)-1, err)
		}
		base += float64(l) * float64(len(part)*T)
		n += len(part) * T
		pr.Add(int64(len(part)))
		// The collector holds every layer's input of this pass: the scored
		// rows' first Tk positions are gathered into batches for the skip
		// passes.
		for r := range part {
			if !Scored(i+r, K, len(rows)) {
				continue
			}
			if err := sk.add(ctx, c.in, tg[r*T:r*T+Tk], r*T*H, (r*T+Tk)*H); err != nil {
				return nil, err
			}
		}
	}
	if err := sk.flush(ctx); err != nil {
		return nil, err
	}
	cost := full + sk.flops
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
		Tokens: int64(len(rows) * T), Version: Version, SkipSequences: K, SkipTokens: Tk, Passes: cost / full,
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
	skipBase := sk.base / float64(sk.tokens)
	for j, p := range passes {
		d := sk.sums[j]/float64(sk.tokens) - skipBase
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

// skipPass is one skip-loss measurement: layer skipped, or one sub-block
// of it.
type skipPass struct {
	layer int
	block engine.Block // used when sub
	sub   bool
}

// skipPasses lists the skip passes: every layer, then each sub-block of the
// layers that have both (a lone sub-block skipped is the layer skipped:
// measured once, reported for both).
func skipPasses(m *engine.Model, o Options) []skipPass {
	var passes []skipPass
	if o.NoSkipLoss {
		return nil
	}
	arch := m.Arch()
	for l := range arch.Layers {
		passes = append(passes, skipPass{layer: l})
	}
	if !o.NoSubBlockSkipLoss {
		for l, layer := range arch.Layers {
			if layer.Attention != nil && layer.MLP != nil {
				passes = append(passes, skipPass{l, engine.BlockAttention, true}, skipPass{l, engine.BlockMLP, true})
			}
		}
	}
	return passes
}

// Scored reports whether Compute scores the skip losses on calibration
// sequence j of rows when it scores k of them: the rows j with
// ⌊(j+1)·k/rows⌋ > ⌊j·k/rows⌋, k rows spread evenly over the set (every
// one when k = rows, every other when k = rows/2).
func Scored(j, k, rows int) bool {
	return int64(j+1)*int64(k)/int64(rows) > int64(j)*int64(k)/int64(rows)
}

// SkipScope returns what Compute scores the skip losses on, for rows
// calibration sequences of T tokens: k sequences spread evenly over the set
// (Scored), each on its first tokens positions (the model is causal: the
// calibration pass's layer inputs at those positions are exactly what a
// pass over the prefix computes).
//
// SkipRows, when set, scores that many sequences (at most rows) in full;
// without a pass budget every sequence is scored in full. With a budget,
// the prefix is a quarter of each sequence (at least 32 tokens, at most T)
// and k the most sequences whose cost keeps the whole computation within
// Passes equivalent forward passes (at least one, even if that exceeds
// it); when every sequence fits, the prefix grows as far as the budget
// allows. Many short prefixes estimate the skip losses better than a few
// whole sequences at the same cost (TestBudgetOrderings).
//
// A skip pass reruns only the layers from the skipped one on, from the
// layer input that the calibration pass cached, and the scored rows' base
// loss reruns the last layer, so scoring k prefixes of t tokens costs
// k · (Σ_passes ForwardFLOPsFrom(layer, 1, t) + ForwardFLOPsFrom(L−1, 1, t))
// / ForwardFLOPs(rows, T) passes beyond the calibration pass. The budget
// counts model FLOPs, as ForwardFLOPs does.
func (o Options) SkipScope(m *engine.Model, rows, T int) (k, tokens int) {
	o.EnsureDefaults()
	if o.SkipRows > 0 {
		return min(o.SkipRows, rows), T
	}
	if o.Passes == 0 || rows == 0 {
		return rows, T
	}
	passes := skipPasses(m, o)
	full := m.ForwardFLOPs(rows, T)
	cost := func(k, t int) float64 { return 1 + float64(k)*perRowFLOPs(m, passes, t)/full }
	t := min(T, max(32, (T+3)/4))
	if cost(rows, t) > o.Passes {
		k := int(math.Floor((o.Passes - 1) * full / perRowFLOPs(m, passes, t)))
		return min(rows, max(1, k)), t
	}
	for t < T && cost(rows, t+1) <= o.Passes {
		t++
	}
	return rows, t
}

// perRowFLOPs is the model FLOPs of scoring one sequence's first t tokens.
func perRowFLOPs(m *engine.Model, passes []skipPass, t int) float64 {
	if len(passes) == 0 {
		return 0
	}
	f := m.ForwardFLOPsFrom(m.Arch().NumLayers()-1, 1, t)
	for _, p := range passes {
		f += m.ForwardFLOPsFrom(p.layer, 1, t)
	}
	return f
}

// skipScorer runs the skip passes of Compute on batches of scored rows,
// each from the cached input of the skipped layer, and sums their losses.
type skipScorer struct {
	m      *engine.Model
	passes []skipPass
	batch  int
	T      int
	sums   []float64 // per pass: Σ loss·tokens
	base   float64   // Σ base loss·tokens over the scored rows
	tokens int       // scored
	flops  float64   // model FLOPs of the skip passes
	pr     *progress.Task
	// The gathered batch: every layer's input, the targets, the rows.
	in   [][]float32
	tg   []int32
	rows int
}

func newSkipScorer(m *engine.Model, passes []skipPass, batch, T int, pr *progress.Task) *skipScorer {
	return &skipScorer{m: m, passes: passes, batch: batch, T: T, sums: make([]float64, len(passes)), pr: pr,
		in: make([][]float32, m.Arch().NumLayers())}
}

// add gathers one scored row: [lo, hi) of every layer input in layerIn,
// and its targets; a full batch is scored at once.
func (sk *skipScorer) add(ctx context.Context, layerIn [][]float32, targets []int32, lo, hi int) error {
	for l := range sk.in {
		sk.in[l] = append(sk.in[l], layerIn[l][lo:hi]...)
	}
	sk.tg = append(sk.tg, targets...)
	if sk.rows++; sk.rows == sk.batch {
		return sk.flush(ctx)
	}
	return nil
}

// flush runs the base loss and every skip pass on the gathered rows.
func (sk *skipScorer) flush(ctx context.Context) error {
	B := sk.rows
	if B == 0 {
		return nil
	}
	defer func() {
		for l := range sk.in {
			sk.in[l] = sk.in[l][:0]
		}
		sk.tg, sk.rows = sk.tg[:0], 0
	}()
	tokens := float64(B * sk.T)
	L := len(sk.in)
	base, err := sk.m.ForwardLossFrom(L-1, sk.in[L-1], sk.tg, B, sk.T)
	if err != nil {
		return fmt.Errorf("importance: %w", err)
	}
	sk.base += float64(base) * tokens
	sk.tokens += B * sk.T
	sk.flops += sk.m.ForwardFLOPsFrom(L-1, B, sk.T)
	for j, p := range sk.passes {
		if err := ctx.Err(); err != nil {
			return err
		}
		what := fmt.Sprintf("layer %d", p.layer)
		if p.sub {
			what = fmt.Sprintf("the %s of layer %d", p.block, p.layer)
			err = sk.m.SetSkipBlock(p.block, p.layer)
		} else {
			err = sk.m.SetSkip(p.layer)
		}
		if err != nil {
			return err
		}
		loss, err := sk.m.ForwardLossFrom(p.layer, sk.in[p.layer], sk.tg, B, sk.T)
		if p.sub {
			sk.m.SetSkipBlock(p.block)
		} else {
			sk.m.SetSkip()
		}
		if err != nil {
			return fmt.Errorf("importance: skipping %s: %w", what, err)
		}
		sk.sums[j] += float64(loss) * tokens
		sk.flops += sk.m.ForwardFLOPsFrom(p.layer, B, sk.T)
		sk.pr.Add(int64(B))
	}
	return nil
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
		"aggregation": "mean over tokens, L2 over sequences (Minitron); hidden = sum over norm sites; heads, mamba_heads = L2 over head_dim; layer_bi = mean over tokens of 1-cos(in,out); attn_bi, mlp_bi = the same across each sub-block (in to mid, mid to out); *_skip_loss = loss(skip) - base; NaN = absent or not measured",
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
