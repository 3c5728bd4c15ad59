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

// kind is the ordering of p's covariate: 0 the layer, 1 attention, 2 MLP.
func (p skipPass) kind() int {
	switch {
	case !p.sub:
		return 0
	case p.block == engine.BlockAttention:
		return 1
	}
	return 2
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

// SkipScope returns what Compute scores the skip losses on, for rows
// calibration sequences of T tokens: k whole sequences (tokens = T).
//
// SkipRows, when set, scores that many sequences (at most rows), spread
// evenly over the set (Scored); without a pass budget, or with one that
// affords it, every sequence is scored: the exhaustive scores. Otherwise k
// is the most sequences the budget affords (at least one, even if that
// exceeds it): the first k of ScoreOrder, and each skip loss is the
// regression estimate of Compute (Scores.SkipRegression), whose
// covariate costs one transposed LM-head product over every calibration
// token (engine.FinalGradientFLOPs).
//
// A skip pass reruns only the layers from the skipped one on, from the
// layer input that the calibration pass cached, and is compared token by
// token with the calibration pass's losses, so scoring k sequences costs
// k · Σ_passes ForwardFLOPsFrom(layer, 1, T) / ForwardFLOPs(rows, T)
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
	per := perRowFLOPs(m, passes, T)
	if 1+float64(rows)*per/full <= o.Passes {
		return rows, T
	}
	k = int(math.Floor(max(0, (o.Passes-1)*full-m.FinalGradientFLOPs(rows, T)) / per))
	return min(rows, max(1, k)), T
}

// regression reports whether Compute scores the skip losses of rows
// sequences as regression estimates: under a pass budget that scores
// fewer than all of them.
func (o Options) regression(k, rows int) bool { return o.Passes > 0 && o.SkipRows == 0 && k < rows }

// scoredRows marks the sequences the skip losses are scored on: the first
// k of ScoreOrder for a regression estimate, else those Scored picks.
func (o Options) scoredRows(k, rows int) []bool {
	out := make([]bool, rows)
	if o.regression(k, rows) {
		for _, r := range ScoreOrder(rows)[:k] {
			out[r] = true
		}
		return out
	}
	for j := range out {
		out[j] = Scored(j, k, rows)
	}
	return out
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
// of the skipped layer, and sums per pass the differences y between the
// per-token losses with the skip and the calibration pass's on the same
// tokens.
type skipScorer struct {
	m      *engine.Model
	passes []skipPass
	T      int // positions scored per sequence
	sum    []float64
	tokens []int
	// For a regression estimate, each pass's covariate x (firstOrder),
	// with mu[j] its sum over every calibration token (its mean once
	// Compute divides it): Σx, Σx², Σxy over the scored tokens.
	sx, sxx, sxy, mu []float64
	// Σ over the scored sequences of each one's mean y and x: ȳ_b, ȳ_b²,
	// x̄_b, x̄_b², x̄_b·ȳ_b, and the sequences, for the spread round two
	// weighs.
	rowY, rowYY, rowX, rowXX, rowXY []float64
	rows                            []int
	flops                           float64 // model FLOPs of the skip passes
	pr                              *progress.Task
	tl                              []float64 // scratch: per-token losses
}

func newSkipScorer(m *engine.Model, passes []skipPass, T int, regression bool, pr *progress.Task) *skipScorer {
	n := len(passes)
	sk := &skipScorer{m: m, passes: passes, T: T, pr: pr, sum: make([]float64, n), tokens: make([]int, n)}
	if regression {
		sk.sx, sk.sxx, sk.sxy, sk.mu = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		sk.rowY, sk.rowYY, sk.rowX, sk.rowXX, sk.rowXY = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		sk.rows = make([]int, n)
	}
	return sk
}

// run scores pass j on B sequences: in is the skipped layer's input
// (B·T·hidden), targets and base the targets and the calibration pass's
// per-token losses (B·T), cov the pass's per-token covariate (B·T; nil
// without a regression estimate).
func (sk *skipScorer) run(ctx context.Context, j int, in []float32, targets []int32, base, cov []float64, B int) error {
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
		var ys, xs float64
		var n int
		for i := b * sk.T; i < (b+1)*sk.T; i++ {
			if targets[i] < 0 {
				continue
			}
			y := sk.tl[i] - base[i]
			ys += y
			n++
			if cov != nil {
				xs += cov[i]
				sk.sxx[j] += cov[i] * cov[i]
				sk.sxy[j] += cov[i] * y
			}
		}
		sk.sum[j] += ys
		sk.tokens[j] += n
		if cov != nil && n > 0 {
			sk.sx[j] += xs
			y, x := ys/float64(n), xs/float64(n)
			sk.rows[j]++
			sk.rowY[j] += y
			sk.rowYY[j] += y * y
			sk.rowX[j] += x
			sk.rowXX[j] += x * x
			sk.rowXY[j] += x * y
		}
	}
	sk.flops += sk.m.ForwardFLOPsFrom(p.layer, B, sk.T)
	sk.pr.Add(int64(B))
	return nil
}

// loss is pass j's skip loss: the mean over its scored tokens of y; for a
// regression estimate, ȳ − β·(x̄ − μ), the regression estimate of y's mean
// over every calibration token, with μ the covariate's mean over them and
// β the least-squares slope of y on x pooled over the passes of the same
// kind (layers, attention or MLP sub-blocks: a slope per pass, from a few
// sequences, is noisier than the differences it corrects).
func (sk *skipScorer) loss(j int) float64 {
	n := float64(sk.tokens[j])
	y := sk.sum[j] / n
	if sk.mu == nil {
		return y
	}
	return y - sk.beta(j)*(sk.sx[j]/n-sk.mu[j])
}

// beta is the slope of loss, pooled over the passes of pass j's kind (0
// when the covariate does not vary).
func (sk *skipScorer) beta(j int) float64 {
	var cxy, vx float64
	for k, p := range sk.passes {
		if p.kind() != sk.passes[j].kind() {
			continue
		}
		nk := float64(sk.tokens[k])
		xk, yk := sk.sx[k]/nk, sk.sum[k]/nk
		cxy += sk.sxy[k] - nk*xk*yk
		vx += sk.sxx[k] - nk*xk*xk
	}
	if !(vx > 0) {
		return 0
	}
	return cxy / vx
}

// spread is the variance over pass j's scored sequences of their mean
// y − β·x, the part of a sequence the regression estimate leaves (1 with
// fewer than two sequences).
func (sk *skipScorer) spread(j int) float64 {
	n := float64(sk.rows[j])
	if n < 2 {
		return 1
	}
	b := sk.beta(j)
	vy := sk.rowYY[j] - sk.rowY[j]*sk.rowY[j]/n
	vx := sk.rowXX[j] - sk.rowX[j]*sk.rowX[j]/n
	cxy := sk.rowXY[j] - sk.rowX[j]*sk.rowY[j]/n
	return max(0, (vy-2*b*cxy+b*b*vx)/(n-1))
}

// streamBatch gathers the scored sequences during the calibration pass
// and scores every pass on each full batch.
type streamBatch struct {
	in   [][]float32 // per layer
	tg   []int32
	base []float64
	cov  [][]float64 // per pass, for a regression estimate
	rows int
}

// add gathers positions [lo, hi) of a sequence (lo, hi in hidden values
// of layerIn, in tokens of cov divided by H).
func (sb *streamBatch) add(layerIn [][]float32, targets []int32, base []float64, cov [][]float64, lo, hi, H int) {
	if sb.in == nil {
		sb.in = make([][]float32, len(layerIn))
		sb.cov = make([][]float64, len(cov))
	}
	for l := range sb.in {
		sb.in[l] = append(sb.in[l], layerIn[l][lo:hi]...)
	}
	for j := range cov {
		sb.cov[j] = append(sb.cov[j], cov[j][lo/H:hi/H]...)
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
		var cov []float64
		if len(sb.cov) > 0 {
			cov = sb.cov[j]
		}
		if err := sk.run(ctx, j, sb.in[p.layer], sb.tg, sb.base, cov, sb.rows); err != nil {
			return err
		}
	}
	for l := range sb.in {
		sb.in[l] = sb.in[l][:0]
	}
	for j := range sb.cov {
		sb.cov[j] = sb.cov[j][:0]
	}
	sb.tg, sb.base, sb.rows = sb.tg[:0], sb.base[:0], 0
	return nil
}

// rowCache holds, for round two of a regression estimate, the sequences
// of ScoreOrder after round one's that the rest of the budget may score:
// every layer's input, the targets, the calibration pass's per-token
// losses and each pass's covariate, in that order.
type rowCache struct {
	pos  []int // per calibration sequence: its place in the cache, -1 if none
	in   [][]float32
	tg   []int32
	base []float64
	cov  [][]float64 // per pass
	T, H int
}

// newRowCache holds the sequences order[from:to] of rows.
func newRowCache(order []int, from, to, rows, layers, passes, T, H int) *rowCache {
	n := to - from
	rc := &rowCache{pos: make([]int, rows), in: make([][]float32, layers), tg: make([]int32, n*T), base: make([]float64, n*T), T: T, H: H,
		cov: make([][]float64, passes)}
	for j := range rc.cov {
		rc.cov[j] = make([]float64, n*T)
	}
	for i := range rc.pos {
		rc.pos[i] = -1
	}
	for i, r := range order[from:to] {
		rc.pos[r] = i
	}
	for l := range rc.in {
		rc.in[l] = make([]float32, n*T*H)
	}
	return rc
}

// put stores calibration sequence row (at offset r of the pass's batch of
// sequences of Tcal positions) if the cache holds it.
func (rc *rowCache) put(row, r, Tcal int, layerIn [][]float32, targets []int32, base []float64, cov [][]float64) {
	i := rc.pos[row]
	if i < 0 {
		return
	}
	T, H := rc.T, rc.H
	for j := range cov {
		copy(rc.cov[j][i*T:(i+1)*T], cov[j][r*Tcal:r*Tcal+T])
	}
	for l := range rc.in {
		copy(rc.in[l][i*T*H:(i+1)*T*H], layerIn[l][r*Tcal*H:(r*Tcal+T)*H])
	}
	copy(rc.tg[i*T:(i+1)*T], targets[r*Tcal:r*Tcal+T])
	copy(rc.base[i*T:(i+1)*T], base[r*Tcal:r*Tcal+T])
}

// score runs every pass j on the first upto[j] cached sequences in
// batches of batch sequences.
func (rc *rowCache) score(ctx context.Context, sk *skipScorer, upto []int, batch int) error {
	end := 0
	for _, n := range upto {
		end = max(end, n)
	}
	T, H := rc.T, rc.H
	for lo := 0; lo < end; lo += batch {
		for j, p := range sk.passes {
			hi := min(lo+batch, upto[j])
			if hi <= lo {
				continue
			}
			if err := sk.run(ctx, j, rc.in[p.layer][lo*T*H:hi*T*H], rc.tg[lo*T:hi*T], rc.base[lo*T:hi*T], rc.cov[j][lo*T:hi*T], hi-lo); err != nil {
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

// roundTwo spends left model FLOPs of a regression estimate's budget
// after round one (every pass on n1 sequences) on the cached sequences
// that follow them in ScoreOrder, for the passes allocate picks.
func roundTwo(ctx context.Context, sk *skipScorer, rc *rowCache, groups [3][]int, n1, batch int, left float64) error {
	P := len(sk.passes)
	d, v, cost := make([]float64, P), make([]float64, P), make([]float64, P)
	for j, p := range sk.passes {
		d[j], v[j], cost[j] = sk.loss(j), sk.spread(j), sk.m.ForwardFLOPsFrom(p.layer, 1, rc.T)
	}
	n := allocate(d, v, cost, groups, n1, n1+len(rc.tg)/rc.T, max(1, (n1+1)/2), left)
	for j := range n {
		n[j] -= n1
	}
	return rc.score(ctx, sk, n, batch)
}

// firstOrder fills cov[j] with each token's first-order estimate of its
// loss increase when pass j's layer or sub-block is skipped: −⟨g, Δ⟩, g
// the gradient of the token's loss with respect to the final hidden state
// (engine.FinalGradients) and Δ what the skipped block adds to the
// residual stream (x_out − x_in for a layer, x_mid − x_in for attention,
// x_out − x_mid for the MLP), as if nothing after it changed. It adds
// their sums to mu. n tokens of width H in c's current call.
func firstOrder(cov [][]float64, mu []float64, passes []skipPass, c *collector, g []float32, n, H int) {
	L := len(c.in)
	next := func(l int) []float32 {
		if l == L-1 {
			return c.out
		}
		return c.in[l+1]
	}
	for j, p := range passes {
		if cap(cov[j]) < n {
			cov[j] = make([]float64, n)
		}
		cov[j] = cov[j][:n]
		lo, hi := c.in[p.layer], next(p.layer)
		switch {
		case p.sub && p.block == engine.BlockAttention:
			hi = c.mid[p.layer]
		case p.sub:
			lo = c.mid[p.layer]
		}
		for t := 0; t < n; t++ {
			var s float64
			for k := t * H; k < (t+1)*H; k++ {
				s -= float64(g[k]) * float64(hi[k]-lo[k])
			}
			cov[j][t] = s
			mu[j] += s
		}
	}
}
