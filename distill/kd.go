package distill

import (
	"context"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/fastmath"
	"github.com/autocompress/autocompress/internal/parallel"
	"github.com/autocompress/autocompress/train"
)

// TeacherLogits are a teacher's logits for the N = B·T positions of a
// batch: dense (N, Vocab) or sparse top-k (N, K) pairs of id and logit.
type TeacherLogits struct {
	Dense []float32 // (N, Vocab), or nil when sparse
	Vocab int

	IDs  []int32   // (N, K) ids of the K largest logits
	Vals []float32 // (N, K) their logits
	K    int
}

// A Teacher produces teacher logits for a training batch.
type Teacher interface {
	Logits(ctx context.Context, b *train.Batch) (*TeacherLogits, error)
}

// ModelTeacher runs a model forward on every batch (dense logits). The
// model is switched to inference mode: no activations are kept for a
// backward pass.
type ModelTeacher struct{ m *engine.Model }

// NewModelTeacher returns a dense teacher over m.
func NewModelTeacher(m *engine.Model) *ModelTeacher {
	m.SetInference(true)
	return &ModelTeacher{m: m}
}

// Logits implements Teacher.
func (t *ModelTeacher) Logits(_ context.Context, b *train.Batch) (*TeacherLogits, error) {
	lg, err := t.m.Forward(b.Inputs, b.B, b.T)
	if err != nil {
		return nil, fmt.Errorf("distill: teacher forward: %w", err)
	}
	return &TeacherLogits{Dense: lg, Vocab: t.m.Arch().Vocab}, nil
}

// KD is the distillation loss of one step (a train.LogitLoss): over the N
// positions of the batch,
//
//	L = KDWeight · T² · mean_n KL( softmax(z_t/T) ‖ softmax(z_s/T) )
//	  + CEWeight · mean_n ( logsumexp(z_s) − z_s[target] )
//
// with the softmaxes of the KL term over the Shared ids only (ids the two
// vocabularies share; rows beyond them are padding and get no KD
// gradient). The gradient with respect to the student's logits is
//
//	∂L/∂z_s[j] = KDWeight · T/N · (q_j − p_j) + CEWeight/N · (s_j − [j = target])
//
// where p and q are the tempered teacher and student distributions and s
// the student's untempered softmax over its whole vocabulary. With a
// sparse (top-k) teacher, p is the softmax of the K teacher logits / T and
// is 0 elsewhere (the teacher's mass renormalised onto its top K).
type KD struct {
	Teacher     Teacher
	Temperature float64
	KDWeight    float64
	CEWeight    float64
	Shared      int

	rowLoss []float64
}

// Logits implements train.LogitLoss.
func (k *KD) Logits(ctx context.Context, logits []float32, b *train.Batch, vocab int, d []float32) (float64, error) {
	N := b.B * b.T
	var tl *TeacherLogits
	if k.KDWeight != 0 {
		var err error
		if tl, err = k.Teacher.Logits(ctx, b); err != nil {
			return 0, err
		}
		if tl.Dense != nil && (tl.Vocab < k.Shared || len(tl.Dense) != N*tl.Vocab) {
			return 0, fmt.Errorf("distill: teacher gave %d logits of vocabulary %d for %d positions, %d shared ids", len(tl.Dense), tl.Vocab, N, k.Shared)
		}
		if tl.Dense == nil && (len(tl.IDs) != N*tl.K || len(tl.Vals) != N*tl.K) {
			return 0, fmt.Errorf("distill: teacher gave %d top-%d entries for %d positions", len(tl.IDs), tl.K, N)
		}
	}
	if k.Shared > vocab {
		return 0, fmt.Errorf("distill: %d shared ids but the student has a vocabulary of %d", k.Shared, vocab)
	}
	if cap(k.rowLoss) < N {
		k.rowLoss = make([]float64, N)
	}
	rl := k.rowLoss[:N]
	parallel.For(N, 1, func(lo, hi int) {
		eq := make([]float32, vocab)
		var et []float32
		if tl != nil && tl.Dense != nil {
			et = make([]float32, k.Shared)
		}
		for i := lo; i < hi; i++ {
			rl[i] = k.row(logits[i*vocab:(i+1)*vocab], d[i*vocab:(i+1)*vocab], tl, i, b.Targets[i], N, eq, et)
		}
	})
	var sum float64
	for _, l := range rl { // in order: the same sum whatever the thread split
		sum += l
	}
	return sum / float64(N), nil
}

// row computes one position's loss (times N) and writes its gradient.
// eq (vocab) and et (Shared, dense teachers only) are scratch.
//
// Each distribution takes one exponential per id: e_j = exp((z_j − max)/T)
// and its sum S give p_j = e_j/S and log p_j = (z_j − max)/T − log S.
func (k *KD) row(z, d []float32, tl *TeacherLogits, i int, target int32, N int, eq, et []float32) float64 {
	n, T := k.Shared, k.Temperature
	invT := float32(1 / T)
	clear(d)
	var loss float64
	var sq float64 // Σ eq over the shared ids at temperature T
	mq := maxOf(z[:n])
	if tl != nil {
		sq = expSum(eq[:n], z[:n], mq, invT)
		lsq := float32(math.Log(sq))
		iq := float32(1 / sq)
		g := float32(k.KDWeight * T / float64(N))
		var kl float64
		if tl.Dense != nil {
			zt := tl.Dense[i*tl.Vocab : i*tl.Vocab+n]
			mt := maxOf(zt)
			st := expSum(et, zt, mt, invT)
			lst, it := float32(math.Log(st)), float32(1/st)
			for j := range n {
				pj := et[j] * it
				// p_j · (log p_j − log q_j)
				kl += float64(pj * (((zt[j]-mt)*invT - lst) - ((z[j]-mq)*invT - lsq)))
				d[j] = g * (eq[j]*iq - pj)
			}
		} else {
			ids, vals := tl.IDs[i*tl.K:(i+1)*tl.K], tl.Vals[i*tl.K:(i+1)*tl.K]
			mt := maxOf(vals)
			var st float64
			for _, v := range vals {
				st += float64(fastmath.Exp((v - mt) * invT))
			}
			lst := float32(math.Log(st))
			for j := range n {
				d[j] = g * eq[j] * iq
			}
			for c, id := range ids {
				lpj := (vals[c]-mt)*invT - lst
				pj := fastmath.Exp(lpj)
				kl += float64(pj * (lpj - ((z[id]-mq)*invT - lsq)))
				d[id] -= g * pj
			}
		}
		loss += k.KDWeight * T * T * kl
	}
	if k.CEWeight != 0 && target >= 0 {
		// The untempered softmax over the whole student vocabulary: the
		// tempered one already computed when T = 1 and nothing is padding.
		var s float64
		m := mq
		if tl != nil && T == 1 && n == len(z) {
			s = sq
		} else {
			m = maxOf(z)
			s = expSum(eq, z, m, 1)
		}
		is := float32(1 / s)
		g := float32(k.CEWeight / float64(N))
		for j := range z {
			d[j] += g * eq[j] * is
		}
		d[target] -= g
		loss += k.CEWeight * (float64(m) + math.Log(s) - float64(z[target]))
	}
	return loss
}

func maxOf(z []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range z {
		if v > m {
			m = v
		}
	}
	return m
}

// expSum sets e[j] = exp((z[j] − m)·scale) and returns Σ e in float64.
func expSum(e, z []float32, m, scale float32) float64 {
	var s float64
	for j, v := range z {
		e[j] = fastmath.Exp((v - m) * scale)
		s += float64(e[j])
	}
	return s
}
