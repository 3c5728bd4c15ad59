package engine

import (
	"fmt"
	"math"

	"github.com/autocompress/autocompress/engine/blas"
)

// Cache holds the keys and values of one sequence for incremental decoding,
// and for each Mamba2 layer its recurrent state (the last conv_kernel−1
// convolution inputs and the SSM state, a fixed size whatever the length).
// Its capacity is fixed when it is made.
type Cache struct {
	n    int
	cap  int
	k, v [][]float32 // per layer (cap, kvHeads·head_dim); nil without attention
	// conv and ssm are per Mamba layer ((conv_kernel−1)·conv_dim and
	// heads·head_dim·state); nil for other layers. They are zeroed when a
	// Step finds the cache empty (new, Reset or reused).
	conv, ssm [][]float32
}

// NewCache returns an empty KV cache for up to capacity tokens of one
// sequence.
func (m *Model) NewCache(capacity int) *Cache {
	L := len(m.dims)
	c := &Cache{cap: capacity, k: make([][]float32, L), v: make([][]float32, L), conv: make([][]float32, L), ssm: make([][]float32, L)}
	for l, d := range m.dims {
		if d.attn {
			c.k[l] = make([]float32, capacity*d.kd)
			c.v[l] = make([]float32, capacity*d.kd)
		}
		if x := d.mamba; x != nil {
			c.conv[l] = make([]float32, (x.conv-1)*x.convDim())
			c.ssm[l] = make([]float32, x.heads*x.headDim*x.state)
		}
	}
	return c
}

// fits tells whether the cache's buffers can hold capacity tokens of m.
func (c *Cache) fits(m *Model, capacity int) bool {
	if len(c.k) != len(m.dims) {
		return false
	}
	for l, d := range m.dims {
		if d.attn && cap(c.k[l]) < capacity*d.kd {
			return false
		}
	}
	return true
}

// resize empties the cache and sets its capacity (buffers must fit).
func (c *Cache) resize(m *Model, capacity int) {
	c.n, c.cap = 0, capacity
	for l, d := range m.dims {
		if d.attn {
			c.k[l], c.v[l] = c.k[l][:capacity*d.kd], c.v[l][:capacity*d.kd]
		}
	}
}

// Len returns the number of tokens in the cache.
func (c *Cache) Len() int { return c.n }

// Cap returns the capacity in tokens.
func (c *Cache) Cap() int { return c.cap }

// Reset empties the cache, keeping its memory.
func (c *Cache) Reset() { c.n = 0 }

// CopyFrom makes c hold the same tokens as src, so that a prefix shared by
// several continuations is computed once and copied (log-likelihood
// evaluation of multiple-choice questions). Both caches must come from the
// same model, and c's capacity must hold src's tokens.
func (c *Cache) CopyFrom(src *Cache) error {
	if len(c.k) != len(src.k) {
		return &InputError{fmt.Sprintf("cache copy: %d layers into %d", len(src.k), len(c.k))}
	}
	if src.n > c.cap {
		return &InputError{fmt.Sprintf("cache copy: %d tokens into a cache of %d", src.n, c.cap)}
	}
	if src.n == 0 {
		c.n = 0
		return nil
	}
	for l := range src.k {
		if src.k[l] == nil {
			continue
		}
		kd := len(src.k[l]) / src.cap
		if c.k[l] == nil || len(c.k[l])/c.cap != kd {
			return &InputError{fmt.Sprintf("cache copy: layer %d has another width", l)}
		}
		copy(c.k[l], src.k[l][:src.n*kd])
		copy(c.v[l], src.v[l][:src.n*kd])
	}
	for l := range src.conv {
		if len(c.conv[l]) != len(src.conv[l]) || len(c.ssm[l]) != len(src.ssm[l]) {
			return &InputError{fmt.Sprintf("cache copy: layer %d has another Mamba state", l)}
		}
		copy(c.conv[l], src.conv[l])
		copy(c.ssm[l], src.ssm[l])
	}
	c.n = src.n
	return nil
}

// Bytes returns the memory held by the cache.
func (c *Cache) Bytes() int64 {
	var n int64
	for l := range c.k {
		n += int64(len(c.k[l])+len(c.v[l])+len(c.conv[l])+len(c.ssm[l])) * 4
	}
	return n
}

// stepBufs are the reusable buffers of Step, grown as needed.
type stepBufs struct {
	x, ln, ao, tmp []float32
	q, k, v        []float32
	rstd, qrstd    []float32
	gate, up, h    []float32
	mamba          mambaBufs
	seqs           []mambaSeq
	logits         []float32
	// Per-step bookkeeping, reused.
	flat          []int32
	rowPos, start []int
	rows          []int
	out           [][]float32
}

func growInt(b []int, n int) []int {
	if cap(b) < n {
		return make([]int, n)
	}
	return b[:n]
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// Step appends tokens[i] (at least one token) to the sequence of caches[i],
// for all i at once, and returns for each sequence the logits (vocab) of its
// last new token — or, when all is set, of every new token, concatenated
// (len(tokens[i])·vocab). Sequences may be at different lengths and mix
// prompt processing (many tokens) with decoding (one token): the linear
// layers see all new tokens as one matrix. The returned slices are owned by
// the model and overwritten by the next Step. Layers set by SetSkip are not
// skipped here.
func (m *Model) Step(caches []*Cache, tokens [][]int32, all bool) ([][]float32, error) {
	if len(caches) != len(tokens) {
		return nil, &InputError{fmt.Sprintf("step: %d caches for %d token lists", len(caches), len(tokens))}
	}
	R := 0
	for i, ts := range tokens {
		if len(ts) == 0 {
			return nil, &InputError{fmt.Sprintf("step: sequence %d has no new tokens", i)}
		}
		if caches[i].n+len(ts) > caches[i].cap {
			return nil, &InputError{fmt.Sprintf("step: sequence %d would hold %d tokens, its cache holds %d", i, caches[i].n+len(ts), caches[i].cap)}
		}
		for j, t := range ts {
			if t < 0 || int(t) >= m.arch.Vocab {
				return nil, &InputError{fmt.Sprintf("step: sequence %d token %d = %d outside the vocabulary [0, %d)", i, j, t, m.arch.Vocab)}
			}
		}
		R += len(ts)
	}
	if m.step == nil {
		m.step = &stepBufs{}
	}
	b := m.step
	// Row r is at position rowPos[r] of its sequence; sequence i has rows
	// start[i]..start[i+1]-1.
	flat, rowPos := b.flat[:0], b.rowPos[:0]
	start := growInt(b.start, len(tokens)+1)
	for i, ts := range tokens {
		start[i] = len(flat)
		flat = append(flat, ts...)
		for j := range ts {
			rowPos = append(rowPos, caches[i].n+j)
		}
	}
	start[len(tokens)] = R
	b.flat, b.rowPos, b.start = flat, rowPos, start
	H, V := m.arch.Hidden, m.arch.Vocab
	b.x = grow(b.x, R*H)
	b.ln = grow(b.ln, R*H)
	b.tmp = grow(b.tmp, R*H)
	b.rstd = grow(b.rstd, R)
	embeddingForward(b.x, m.embedMat(), flat, H)
	pos := func(r int) int { return rowPos[r] }
	for l, d := range m.dims {
		w, wm := &m.p.layers[l], m.mats(l)
		if d.attn {
			b.q, b.k, b.v = grow(b.q, R*d.qd), grow(b.k, R*d.kd), grow(b.v, R*d.kd)
			b.ao = grow(b.ao, R*d.qd)
			rmsnormForward(b.ln, b.rstd, b.x, w.inNorm, R, H, m.eps)
			linearForward(b.q, b.ln, wm.q, w.qb, R, H, d.qd)
			linearForward(b.k, b.ln, wm.k, w.kb, R, H, d.kd)
			linearForward(b.v, b.ln, wm.v, w.vb, R, H, d.kd)
			if d.qkNorm {
				b.qrstd = grow(b.qrstd, R*d.heads)
				rmsnormForward(b.q, b.qrstd, b.q, w.qNorm, R*d.heads, d.hd, m.eps)
				rmsnormForward(b.k, b.qrstd, b.k, w.kNorm, R*d.kvH, d.hd, m.eps)
			}
			if !m.noRoPE {
				tab := m.rope[d.hd]
				maxPos := 0
				for _, p := range rowPos {
					maxPos = max(maxPos, p+1)
				}
				tab.ensure(maxPos)
				ropeForward(b.q, R, d.heads, d.hd, tab, pos)
				ropeForward(b.k, R, d.kvH, d.hd, tab, pos)
			}
			for i, c := range caches {
				n := start[i+1] - start[i]
				copy(c.k[l][c.n*d.kd:(c.n+n)*d.kd], b.k[start[i]*d.kd:start[i+1]*d.kd])
				copy(c.v[l][c.n*d.kd:(c.n+n)*d.kd], b.v[start[i]*d.kd:start[i+1]*d.kd])
			}
			cachedAttention(b.ao, b.q, caches, l, start, d, w.sinks)
			linearForward(b.tmp, b.ao, wm.o, w.ob, R, d.qd, H)
			residualAdd(b.x, b.tmp)
		}
		if x := d.mamba; x != nil {
			rmsnormForward(b.ln, b.rstd, b.x, w.inNorm, R, H, m.eps)
			b.mamba.proj, b.mamba.y = grow(b.mamba.proj, R*x.projDim()), grow(b.mamba.y, R*x.dInner())
			seqs := b.seqs[:0]
			for i, c := range caches {
				if c.n == 0 {
					clear(c.conv[l])
					clear(c.ssm[l])
				}
				seqs = append(seqs, mambaSeq{row: start[i], n: start[i+1] - start[i], conv: c.conv[l], ssm: c.ssm[l]})
			}
			b.seqs = seqs
			mamba2Mix(b.tmp, b.ln, H, *x, w.mamba, seqs, b.mamba)
			residualAdd(b.x, b.tmp)
		}
		if d.mlp {
			F := d.ffn
			rmsnormForward(b.ln, b.rstd, b.x, w.postNorm, R, H, m.eps)
			b.up, b.h = grow(b.up, R*F), grow(b.h, R*F)
			var gate []float32
			if d.gated {
				b.gate = grow(b.gate, R*F)
				gate = b.gate
				linearForward(gate, b.ln, wm.gate, w.gateB, R, H, F)
			}
			linearForward(b.up, b.ln, wm.up, w.upB, R, H, F)
			activationForward(b.h, gate, b.up, R, F, d.act)
			linearForward(b.tmp, b.h, wm.down, w.downB, R, F, H)
			residualAdd(b.x, b.tmp)
		}
		if d.moe != nil {
			rmsnormForward(b.ln, b.rstd, b.x, w.postNorm, R, H, m.eps)
			moeForward(b.tmp, b.ln, d.moe, wm, w, R, H, nil)
			residualAdd(b.x, b.tmp)
		}
		m.releaseLayer(l)
	}
	for i, c := range caches {
		c.n += start[i+1] - start[i]
	}
	// Final norm and LM head on the rows whose logits are wanted.
	rows := b.rows[:0]
	if all {
		for r := range R {
			rows = append(rows, r)
		}
	} else {
		for i := range tokens {
			rows = append(rows, start[i+1]-1)
		}
	}
	b.rows = rows
	sel := b.ln[:len(rows)*H]
	for j, r := range rows {
		copy(sel[j*H:(j+1)*H], b.x[r*H:(r+1)*H])
	}
	rmsnormForward(sel, b.rstd, sel, m.p.norm, len(rows), H, m.eps)
	b.logits = grow(b.logits, len(rows)*V)
	linearForward(b.logits, sel, m.headMat(), nil, len(rows), H, V)
	m.releaseHead()
	if cap(b.out) < len(tokens) {
		b.out = make([][]float32, len(tokens))
	}
	out := b.out[:len(tokens)]
	for i := range tokens {
		if all {
			out[i] = b.logits[start[i]*V : start[i+1]*V]
		} else {
			out[i] = b.logits[i*V : (i+1)*V]
		}
	}
	return out, nil
}

// cachedAttention computes, for every new row of every sequence, causal
// attention over that sequence's cached keys and values (which already hold
// the new rows). q and ao are (R, heads·hd). Tasks are (sequence, head)
// pairs run in parallel, each on one core with serial GEMMs: scores
// (n × total), masked softmax, weighted sum.
func cachedAttention(ao, q []float32, caches []*Cache, l int, start []int, d layerDims, sinks []float32) {
	scale := float32(1 / math.Sqrt(float64(d.hd)))
	group := d.heads / d.kvH
	s := attnShape{heads: d.heads, kvH: d.kvH, hd: d.hd, window: d.window, sinks: sinks}
	// Decoding steps are small (one query row per sequence): below about
	// 2²² multiply-adds the goroutine fan-out costs more than it gains (see
	// blas smallSerialWork); prefill chunks are larger and run in parallel.
	work := 0
	for i, c := range caches {
		work += (start[i+1] - start[i]) * (c.n + 1) * d.hd * d.heads * 2
	}
	grain := 1
	if work < 1<<22 {
		grain = len(caches) * d.heads
	}
	parallelFor(len(caches)*d.heads, grain, func(lo, hi int) {
		buf := getScratch(0)
		defer putScratch(buf)
		for task := lo; task < hi; task++ {
			seq, h := task/d.heads, task%d.heads
			c := caches[seq]
			g := h / group
			n := start[seq+1] - start[seq]
			past := c.n // cached tokens before this step's rows
			total := past + n
			k0 := s.keyStart(past) // keys before k0 are outside every row's window
			nk := total - k0
			qo := start[seq]*d.qd + h*d.hd
			*buf = grow(*buf, n*nk)
			P := *buf
			blas.SgemmSerial(false, true, n, nk, d.hd, scale, q[qo:], d.qd, c.k[l][k0*d.kd+g*d.hd:], d.kd, 0, P, nk)
			for r := 0; r < n; r++ {
				softmaxRow(P[r*nk:(r+1)*nk], past+r-k0, s, h)
			}
			blas.SgemmSerial(false, false, n, d.hd, nk, 1, P, nk, c.v[l][k0*d.kd+g*d.hd:], d.kd, 0, ao[qo:], d.qd)
		}
	})
}

// softmaxRow turns the scores of query position p against key positions
// 0..len(row)-1 into masked softmax probabilities of query head h in
// place: keys after p, or outside the sliding window, get 0. With sinks
// (gpt-oss), head h's sink logit joins the softmax as one more column and
// is dropped from its output (transformers models/gpt_oss/
// modeling_gpt_oss.py, eager_attention_forward: the max is taken over the
// scores and the sink), so a row's probabilities sum to less than 1.
func softmaxRow(row []float32, p int, s attnShape, h int) {
	lo, hi := 0, min(p+1, len(row))
	if s.window > 0 {
		lo = max(0, p-s.window+1)
	}
	valid := row[lo:hi]
	mx := blas.Max(valid)
	if s.sinks != nil {
		mx = max(mx, s.sinks[h])
	}
	sum := blas.ExpShiftSum(valid, mx)
	if s.sinks != nil {
		sum += float32(math.Exp(float64(s.sinks[h] - mx)))
	}
	blas.Scale(1/sum, valid)
	clear(row[:lo])
	clear(row[hi:])
}
