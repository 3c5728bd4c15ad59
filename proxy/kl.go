package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/internal/progress"
)

// Options configures KL, NewReference and Reference.Score.
type Options struct {
	// Batch is the number of rows per forward pass (0: the default, 8).
	Batch int
	// Progress receives every forward pass (stage "proxy", unit "row": the
	// rows scored so far of the total); nil = none.
	Progress progress.Func
	// MaxReferenceBytes caps the memory NewReference may use for the
	// parent's distributions, rows·T·vocab float32 values (0: the default,
	// 4 GiB); a larger request fails and says how many rows fit.
	MaxReferenceBytes int64
}

const defaultMaxReferenceBytes = 4 << 30

// EnsureDefaults fills the unset (zero) fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Batch == 0 {
		o.Batch = 8
	}
	if o.MaxReferenceBytes == 0 {
		o.MaxReferenceBytes = defaultMaxReferenceBytes
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.Batch < 1:
		return fmt.Errorf("proxy: batch %d: want at least 1 row per forward pass", o.Batch)
	case o.MaxReferenceBytes < 1:
		return fmt.Errorf("proxy: MaxReferenceBytes %d: want a positive number of bytes", o.MaxReferenceBytes)
	}
	return nil
}

// check completes and validates o.
func (o *Options) check() error {
	return o.EnsureDefaults().Validate()
}

// Result is the measured proxy of one child on one set of rows.
type Result struct {
	// KL is the mean over scored tokens of KL(parent ‖ child) in nats: the
	// parent's next-token distribution against the child's.
	KL float64
	// Loss is the child's mean cross-entropy on the rows' targets
	// (nats/token), ParentLoss the parent's on the same targets.
	Loss, ParentLoss float64
	// Tokens is the number of scored token positions (rows × T).
	Tokens int64
	// Spent is the number of tokens this call ran through forward passes:
	// the child's, plus the parent's for KL (not for Reference.Score, whose
	// parent pass NewReference paid once: Reference.Tokens).
	Spent int64
}

// Reference holds the parent's next-token distributions on a fixed set of
// rows, so that scoring N candidate children costs one parent pass and N
// child passes. It holds rows·T·vocab float32 values. A Reference is safe
// for concurrent Score calls on different children.
type Reference struct {
	rows       [][]int32
	T, V       int
	probs      []float32 // (rows·T, V): the parent's softmax
	negEnt     []float64 // per position: Σ_v p log p
	parentLoss float64
}

// checkRows validates packed rows of T+1 token ids (inputs row[:T],
// targets row[1:]) against a vocabulary and returns T.
func checkRows(rows [][]int32, vocab int) (int, error) {
	if len(rows) == 0 {
		return 0, errors.New("proxy: no rows to score")
	}
	T := len(rows[0]) - 1
	if T < 1 {
		return 0, fmt.Errorf("proxy: rows of %d tokens; want at least 2 (inputs row[:T], targets row[1:])", len(rows[0]))
	}
	for i, r := range rows {
		if len(r) != T+1 {
			return 0, fmt.Errorf("proxy: row %d has %d tokens, row 0 has %d", i, len(r), T+1)
		}
		for j, t := range r {
			if t < 0 || int(t) >= vocab {
				return 0, fmt.Errorf("proxy: row %d token %d is %d, outside the vocabulary [0, %d)", i, j, t, vocab)
			}
		}
	}
	return T, nil
}

// batchInputs fills in and tg with the inputs and targets of rows.
func batchInputs(in, tg []int32, rows [][]int32, T int) ([]int32, []int32) {
	in, tg = in[:0], tg[:0]
	for _, r := range rows {
		in = append(in, r[:T]...)
		tg = append(tg, r[1:]...)
	}
	return in, tg
}

// parentStats turns parent logits (n, V) into probabilities (written to
// probs), Σ p log p per position (negEnt) and the summed cross-entropy on
// tg.
func parentStats(probs []float32, negEnt []float64, logits []float32, tg []int32, V int) float64 {
	n := len(tg)
	ce := make([]float64, n)
	parallelRows(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			z, p := logits[i*V:(i+1)*V], probs[i*V:(i+1)*V]
			copy(p, z)
			mx := blas.Max(p)
			s := blas.ExpShiftSum(p, mx)
			blas.Scale(1/s, p)
			lse := float64(mx) + math.Log(float64(s))
			negEnt[i] = float64(blas.Dot(p, z)) - lse
			ce[i] = lse - float64(z[tg[i]])
		}
	})
	var sum float64
	for _, v := range ce {
		sum += v
	}
	return sum
}

// childStats returns the summed KL(p ‖ softmax(logits)) and cross-entropy
// on tg of child logits (n, V) against parent probabilities.
func childStats(probs []float32, negEnt []float64, logits []float32, tg []int32, V int) (kl, ce float64) {
	n := len(tg)
	kls, ces := make([]float64, n), make([]float64, n)
	parallelRows(n, func(lo, hi int) {
		tmp := make([]float32, V)
		for i := lo; i < hi; i++ {
			z, p := logits[i*V:(i+1)*V], probs[i*V:(i+1)*V]
			copy(tmp, z)
			mx := blas.Max(tmp)
			lse := float64(mx) + math.Log(float64(blas.ExpShiftSum(tmp, mx)))
			// KL = Σ p log p − Σ p (z − lse) = negEnt − p·z + lse (Σ p = 1).
			kls[i] = negEnt[i] - float64(blas.Dot(p, z)) + lse
			ces[i] = lse - float64(z[tg[i]])
		}
	})
	for i := range kls {
		kl += kls[i]
		ce += ces[i]
	}
	return kl, ce
}

// parallelRows splits [0, n) over the cores.
func parallelRows(n int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), max(1, n/16))
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + w - 1) / w
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	wg.Wait()
}

// NewReference runs parent once over rows (packed sequences of T+1 token
// ids: inputs row[:T], targets row[1:]) and keeps its next-token
// distributions for Score. The cost is len(rows)·T tokens (Tokens).
func NewReference(ctx context.Context, parent *engine.Model, rows [][]int32, opt Options) (*Reference, error) {
	if parent == nil {
		return nil, errors.New("proxy: no parent model")
	}
	if err := opt.check(); err != nil {
		return nil, err
	}
	V := parent.Arch().Vocab
	T, err := checkRows(rows, V)
	if err != nil {
		return nil, err
	}
	limit := opt.MaxReferenceBytes
	perRow := int64(T) * int64(V) * 4
	if need := int64(len(rows)) * perRow; need > limit {
		return nil, fmt.Errorf("proxy: a reference over %d rows × %d tokens × vocabulary %d needs %.1f GiB, over the %.1f GiB limit: use at most %d rows (or raise Options.MaxReferenceBytes)",
			len(rows), T, V, float64(need)/(1<<30), float64(limit)/(1<<30), limit/perRow)
	}
	N := len(rows) * T
	r := &Reference{rows: rows, T: T, V: V, probs: make([]float32, N*V), negEnt: make([]float64, N)}
	B := opt.Batch
	task := progress.Start(opt.Progress, progress.Event{Stage: "proxy", Phase: "parent reference", Total: int64(len(rows)), Unit: "row"})
	var in, tg []int32
	var ce float64
	for i := 0; i < len(rows); i += B {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		part := rows[i:min(i+B, len(rows))]
		in, tg = batchInputs(in, tg, part, T)
		logits, err := parent.Forward(in, len(part), T)
		if err != nil {
			return nil, fmt.Errorf("proxy: parent on rows %d..%d: %w", i, i+len(part)-1, err)
		}
		lo, hi := i*T, (i+len(part))*T
		ce += parentStats(r.probs[lo*V:hi*V], r.negEnt[lo:hi], logits, tg, V)
		task.Set(int64(i+len(part)), "")
	}
	r.parentLoss = ce / float64(N)
	return r, nil
}

// Tokens is the number of tokens the parent pass of NewReference spent.
func (r *Reference) Tokens() int64 { return int64(len(r.rows) * r.T) }

// ParentLoss is the parent's mean cross-entropy on the rows (nats/token).
func (r *Reference) ParentLoss() float64 { return r.parentLoss }

// Rows returns the rows the reference was computed on (not a copy).
func (r *Reference) Rows() [][]int32 { return r.rows }

// Score runs child over the reference's rows and returns its mean
// KL(parent ‖ child) and cross-entropy. The child must share the parent's
// vocabulary (pruning never changes it).
func (r *Reference) Score(ctx context.Context, child *engine.Model, opt Options) (Result, error) {
	if child == nil {
		return Result{}, errors.New("proxy: no child model")
	}
	if v := child.Arch().Vocab; v != r.V {
		return Result{}, fmt.Errorf("proxy: the child's vocabulary has %d tokens, the parent's %d", v, r.V)
	}
	if err := opt.check(); err != nil {
		return Result{}, err
	}
	B, T, V := opt.Batch, r.T, r.V
	task := progress.Start(opt.Progress, progress.Event{Stage: "proxy", Total: int64(len(r.rows)), Unit: "row"})
	var in, tg []int32
	var kl, ce float64
	for i := 0; i < len(r.rows); i += B {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		part := r.rows[i:min(i+B, len(r.rows))]
		in, tg = batchInputs(in, tg, part, T)
		logits, err := child.Forward(in, len(part), T)
		if err != nil {
			return Result{}, fmt.Errorf("proxy: child on rows %d..%d: %w", i, i+len(part)-1, err)
		}
		lo, hi := i*T, (i+len(part))*T
		k, c := childStats(r.probs[lo*V:hi*V], r.negEnt[lo:hi], logits, tg, V)
		kl += k
		ce += c
		task.Set(int64(i+len(part)), "")
	}
	N := int64(len(r.rows) * T)
	return Result{KL: kl / float64(N), Loss: ce / float64(N), ParentLoss: r.parentLoss, Tokens: N, Spent: N}, nil
}

// KL measures child against parent on rows (packed sequences of T+1 token
// ids: inputs row[:T], targets row[1:]): the mean KL(parent ‖ child) per
// token, both models' cross-entropy, and the tokens spent (both passes).
// It streams batch by batch and keeps no distributions; to score many
// children on the same rows, build a Reference once instead.
func KL(ctx context.Context, parent, child *engine.Model, rows [][]int32, opt Options) (Result, error) {
	if parent == nil || child == nil {
		return Result{}, errors.New("proxy: KL needs a parent and a child model")
	}
	V := parent.Arch().Vocab
	if v := child.Arch().Vocab; v != V {
		return Result{}, fmt.Errorf("proxy: the child's vocabulary has %d tokens, the parent's %d", v, V)
	}
	T, err := checkRows(rows, V)
	if err != nil {
		return Result{}, err
	}
	if err := opt.check(); err != nil {
		return Result{}, err
	}
	B := opt.Batch
	task := progress.Start(opt.Progress, progress.Event{Stage: "proxy", Total: int64(len(rows)), Unit: "row"})
	probs := make([]float32, min(B, len(rows))*T*V)
	negEnt := make([]float64, min(B, len(rows))*T)
	var in, tg []int32
	var kl, ce, pce float64
	for i := 0; i < len(rows); i += B {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		part := rows[i:min(i+B, len(rows))]
		in, tg = batchInputs(in, tg, part, T)
		n := len(part) * T
		logits, err := parent.Forward(in, len(part), T)
		if err != nil {
			return Result{}, fmt.Errorf("proxy: parent on rows %d..%d: %w", i, i+len(part)-1, err)
		}
		pce += parentStats(probs[:n*V], negEnt[:n], logits, tg, V)
		if logits, err = child.Forward(in, len(part), T); err != nil {
			return Result{}, fmt.Errorf("proxy: child on rows %d..%d: %w", i, i+len(part)-1, err)
		}
		k, c := childStats(probs[:n*V], negEnt[:n], logits, tg, V)
		kl += k
		ce += c
		task.Set(int64(i+len(part)), "")
	}
	N := int64(len(rows) * T)
	return Result{KL: kl / float64(N), Loss: ce / float64(N), ParentLoss: pce / float64(N), Tokens: N, Spent: 2 * N}, nil
}
