package importance

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

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

// orderings groups the passes by the ordering their scores enter: the
// layers, the attention sub-blocks and the MLP sub-blocks (a layer with one
// sub-block enters the layer ordering and that sub-block's).
func orderings(m *engine.Model, passes []skipPass, o Options) [3][]int {
	var g [3][]int
	layers := m.Arch().Layers
	for j, p := range passes {
		switch {
		case p.sub && p.block == engine.BlockAttention:
			g[1] = append(g[1], j)
		case p.sub:
			g[2] = append(g[2], j)
		default:
			g[0] = append(g[0], j)
			if o.NoSubBlockSkipLoss {
				continue
			}
			if layers[p.layer].MLP == nil && layers[p.layer].Attention != nil {
				g[1] = append(g[1], j)
			}
			if layers[p.layer].Attention == nil && layers[p.layer].MLP != nil {
				g[2] = append(g[2], j)
			}
		}
	}
	return g
}

// Scored reports whether Compute scores the skip losses on calibration
// sequence j of rows when it scores k of them without a pass budget
// (Options.SkipRows): the rows j with ⌊(j+1)·k/rows⌋ > ⌊j·k/rows⌋, k rows
// spread evenly over the set (every one when k = rows, every other when
// k = rows/2).
func Scored(j, k, rows int) bool {
	return int64(j+1)*int64(k)/int64(rows) > int64(j)*int64(k)/int64(rows)
}

// ScoreOrder is the order in which Compute takes the calibration sequences
// under a pass budget: the bit-reversal permutation of 0..rows-1 (0,
// rows/2, rows/4, 3·rows/4, ... for a power of two), so that the first k
// of it are spread over the whole set for every k and the rows of a skip
// scored on k sequences include those of a skip scored on fewer.
func ScoreOrder(rows int) []int {
	bits := 0
	for 1<<bits < rows {
		bits++
	}
	out := make([]int, 0, rows)
	for i := 0; i < 1<<bits; i++ {
		r := 0
		for b := 0; b < bits; b++ {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		if r < rows {
			out = append(out, r)
		}
	}
	return out
}

// roundOneShare is the part of a pass budget (beyond the calibration pass)
// that round one spends scoring every skip on the same sequences; round
// two spends the rest on the skips whose ranks are uncertain.
const roundOneShare = 0.5

// SkipScope returns what Compute scores the skip losses on, for rows
// calibration sequences of T tokens: every skip is scored on k sequences,
// on their first tokens positions (the model is causal: the calibration
// pass's layer inputs at those positions are exactly what a pass over the
// prefix computes).
//
// SkipRows, when set, scores that many sequences (at most rows) in full,
// spread evenly over the set (Scored); without a pass budget every
// sequence is scored in full. With a budget, the prefix is a quarter of
// each sequence (at least 32 tokens, at most T) and the sequences are the
// first of ScoreOrder. When every sequence fits in the budget, k = rows and
// the prefix grows as far as the budget allows; otherwise k is what half
// of the budget beyond the calibration pass affords (round one, at least
// two sequences where the whole budget affords them, at least one), and
// round two spends the rest on more sequences for the skips whose ranks
// are uncertain (Compute): Scores.LayerSkipRows, AttnSkipRows and
// MLPSkipRows say how many each skip was scored on.
//
// A skip pass reruns only the layers from the skipped one on, from the
// layer input that the calibration pass cached, and is compared token by
// token with the calibration pass's losses, so scoring k prefixes of t
// tokens costs k · Σ_passes ForwardFLOPsFrom(layer, 1, t) / ForwardFLOPs(rows, T)
// passes beyond the calibration pass. The budget counts model FLOPs, as
// ForwardFLOPs does.
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
		affords := (o.Passes - 1) * full / perRowFLOPs(m, passes, t)
		k := int(math.Floor(roundOneShare * affords))
		if k < 2 {
			k = min(2, int(math.Floor(affords)))
		}
		return min(rows, max(1, k)), t
	}
	for t < T && cost(rows, t+1) <= o.Passes {
		t++
	}
	return rows, t
}

// perRowFLOPs is the model FLOPs of scoring every skip on one sequence's
// first t tokens.
func perRowFLOPs(m *engine.Model, passes []skipPass, t int) float64 {
	var f float64
	for _, p := range passes {
		f += m.ForwardFLOPsFrom(p.layer, 1, t)
	}
	return f
}

// skipScorer runs the skip passes of Compute, each from the cached input
// of the skipped layer, and sums per pass the differences between the
// per-token losses with the skip and the calibration pass's on the same
// tokens.
type skipScorer struct {
	m      *engine.Model
	passes []skipPass
	T      int // positions scored per sequence
	sum    []float64
	tokens []int
	rows   []int
	// Σ and Σ² over the scored sequences of each sequence's mean
	// difference: the spread the allocation of round two weighs.
	rowSum, rowSq []float64
	flops         float64 // model FLOPs of the skip passes
	pr            *progress.Task
	tl            []float64 // scratch: per-token losses
}

func newSkipScorer(m *engine.Model, passes []skipPass, T int, pr *progress.Task) *skipScorer {
	n := len(passes)
	return &skipScorer{m: m, passes: passes, T: T, pr: pr, sum: make([]float64, n), tokens: make([]int, n), rows: make([]int, n),
		rowSum: make([]float64, n), rowSq: make([]float64, n)}
}

// run scores pass j on B sequences: in is the skipped layer's input
// (B·T·hidden), targets and base the targets and the calibration pass's
// per-token losses (B·T).
func (sk *skipScorer) run(ctx context.Context, j int, in []float32, targets []int32, base []float64, B int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := sk.passes[j]
	var err error
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
	_, err = sk.m.ForwardLossFrom(p.layer, in, targets, B, sk.T)
	if err == nil {
		sk.tl, err = sk.m.TokenLosses(sk.tl[:0])
	}
	if p.sub {
		sk.m.SetSkipBlock(p.block)
	} else {
		sk.m.SetSkip()
	}
	if err != nil {
		return fmt.Errorf("importance: skipping %s: %w", what, err)
	}
	for b := 0; b < B; b++ {
		var s float64
		var n int
		for i := b * sk.T; i < (b+1)*sk.T; i++ {
			if targets[i] >= 0 {
				s += sk.tl[i] - base[i]
				n++
			}
		}
		sk.sum[j] += s
		sk.tokens[j] += n
		if n > 0 {
			sk.rows[j]++
			sk.rowSum[j] += s / float64(n)
			sk.rowSq[j] += (s / float64(n)) * (s / float64(n))
		}
	}
	sk.flops += sk.m.ForwardFLOPsFrom(p.layer, B, sk.T)
	sk.pr.Add(int64(B))
	return nil
}

// loss is pass j's mean over its scored tokens of the loss difference.
func (sk *skipScorer) loss(j int) float64 { return sk.sum[j] / float64(sk.tokens[j]) }

// spread is the variance over pass j's scored sequences of their mean
// differences (1 with fewer than two).
func (sk *skipScorer) spread(j int) float64 {
	n := float64(sk.rows[j])
	if n < 2 {
		return 1
	}
	return max(0, (sk.rowSq[j]-sk.rowSum[j]*sk.rowSum[j]/n)/(n-1))
}

// streamBatch gathers scored sequences during the calibration pass (no
// pass budget) and scores every pass on each full batch.
type streamBatch struct {
	in   [][]float32 // per layer
	tg   []int32
	base []float64
	rows int
}

func (sb *streamBatch) add(layerIn [][]float32, targets []int32, base []float64, lo, hi int) {
	if sb.in == nil {
		sb.in = make([][]float32, len(layerIn))
	}
	for l := range sb.in {
		sb.in[l] = append(sb.in[l], layerIn[l][lo:hi]...)
	}
	sb.tg = append(sb.tg, targets...)
	sb.base = append(sb.base, base...)
	sb.rows++
}

func (sb *streamBatch) flush(ctx context.Context, sk *skipScorer) error {
	if sb.rows == 0 {
		return nil
	}
	for j, p := range sk.passes {
		if err := sk.run(ctx, j, sb.in[p.layer], sb.tg, sb.base, sb.rows); err != nil {
			return err
		}
	}
	for l := range sb.in {
		sb.in[l] = sb.in[l][:0]
	}
	sb.tg, sb.base, sb.rows = sb.tg[:0], sb.base[:0], 0
	return nil
}

// rowCache holds, under a pass budget, the first positions of the first
// sequences of ScoreOrder: every layer's input, the targets and the
// calibration pass's per-token losses, in that order.
type rowCache struct {
	pos  []int // per calibration sequence: its place in the cache, -1 if none
	in   [][]float32
	tg   []int32
	base []float64
	T, H int
}

func newRowCache(order []int, n, rows, layers, T, H int) *rowCache {
	rc := &rowCache{pos: make([]int, rows), in: make([][]float32, layers), tg: make([]int32, n*T), base: make([]float64, n*T), T: T, H: H}
	for i := range rc.pos {
		rc.pos[i] = -1
	}
	for i, r := range order[:n] {
		rc.pos[r] = i
	}
	for l := range rc.in {
		rc.in[l] = make([]float32, n*T*H)
	}
	return rc
}

// put stores calibration sequence row (at offset r of the pass's batch of
// sequences of Tcal positions) if the cache holds it.
func (rc *rowCache) put(row, r, Tcal int, layerIn [][]float32, targets []int32, base []float64) {
	i := rc.pos[row]
	if i < 0 {
		return
	}
	T, H := rc.T, rc.H
	for l := range rc.in {
		copy(rc.in[l][i*T*H:(i+1)*T*H], layerIn[l][r*Tcal*H:(r*Tcal+T)*H])
	}
	copy(rc.tg[i*T:(i+1)*T], targets[r*Tcal:r*Tcal+T])
	copy(rc.base[i*T:(i+1)*T], base[r*Tcal:r*Tcal+T])
}

// score runs every pass j on the cached sequences [from, upto[j]) in
// batches of batch sequences.
func (rc *rowCache) score(ctx context.Context, sk *skipScorer, from int, upto []int, batch int) error {
	end := 0
	for _, n := range upto {
		end = max(end, n)
	}
	T, H := rc.T, rc.H
	for lo := from; lo < end; lo += batch {
		for j, p := range sk.passes {
			hi := min(lo+batch, upto[j])
			if hi <= lo {
				continue
			}
			if err := sk.run(ctx, j, rc.in[p.layer][lo*T*H:hi*T*H], rc.tg[lo*T:hi*T], rc.base[lo*T:hi*T], hi-lo); err != nil {
				return err
			}
		}
	}
	return nil
}

// allocate plans round two: the sequences each pass is scored on in all,
// from n1 (round one) up to most, within left model FLOPs (cost[j] per
// sequence of pass j). It repeatedly takes, among neighbours in one
// ordering (sorted by the round-one estimates d), the pair whose
// difference is least certain — the smallest |d_j − d_k| / √(v_j/n_j +
// v_k/n_k), v the spread of a sequence's mean difference and n the
// sequences planned — and gives each of the two step more sequences, while
// the budget affords them.
func allocate(d, v, cost []float64, groups [3][]int, n1, most, step int, left float64) []int {
	n := make([]int, len(d))
	for j := range n {
		n[j] = n1
	}
	var sorted [][]int
	for _, g := range groups {
		s := append([]int(nil), g...)
		sort.SliceStable(s, func(a, b int) bool { return d[s[a]] < d[s[b]] })
		sorted = append(sorted, s)
	}
	grow := func(j int) int { // sequences j can still take
		k := min(step, most-n[j])
		for k > 0 && float64(k)*cost[j] > left {
			k--
		}
		return k
	}
	for {
		bj, bk, bz := -1, -1, math.Inf(1)
		for _, s := range sorted {
			for i := 1; i < len(s); i++ {
				j, k := s[i-1], s[i]
				if grow(j) == 0 && grow(k) == 0 {
					continue
				}
				se := math.Sqrt(v[j]/float64(n[j]) + v[k]/float64(n[k]))
				z := math.Inf(1)
				switch gap := math.Abs(d[j] - d[k]); {
				case se > 0:
					z = gap / se
				case gap == 0:
					z = 0
				}
				if z < bz {
					bj, bk, bz = j, k, z
				}
			}
		}
		if bj < 0 {
			return n
		}
		for _, j := range []int{bj, bk} {
			if g := grow(j); g > 0 {
				n[j] += g
				left -= float64(g) * cost[j]
			}
		}
	}
}

// twoRounds scores the cached sequences under a pass budget: round one
// every pass on the first n1, round two more of them (up to most) for the
// passes allocate picks, within left model FLOPs after round one.
func twoRounds(ctx context.Context, m *engine.Model, sk *skipScorer, rc *rowCache, passes []skipPass, groups [3][]int, n1, most, batch int, left float64) error {
	upto := make([]int, len(passes))
	for j := range upto {
		upto[j] = n1
	}
	if err := rc.score(ctx, sk, 0, upto, batch); err != nil {
		return err
	}
	d, v, cost := make([]float64, len(passes)), make([]float64, len(passes)), make([]float64, len(passes))
	for j, p := range passes {
		d[j], v[j], cost[j] = sk.loss(j), sk.spread(j), m.ForwardFLOPsFrom(p.layer, 1, rc.T)
	}
	step := max(1, (n1+1)/2)
	upto = allocate(d, v, cost, groups, n1, most, step, left)
	return rc.score(ctx, sk, n1, upto, batch)
}
