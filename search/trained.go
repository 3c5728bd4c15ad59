package search

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/train"
)

// DefaultTopKTrainTokens is the brief training's default token count per
// top-k candidate: 16 steps of 8×128 tokens, seconds per candidate for the
// embedded parent on two cores.
const DefaultTopKTrainTokens = 16384

// TrainOptions are the brief distillation that Minitron++ gives each top-k
// candidate before choosing by loss (method.md §3, §7: "a short KD of each
// top-k candidate, then selection by LM loss"). The knobs are the recovery
// stage's (package distill): forward KL at Temperature scaled by T²,
// optionally mixed with cross-entropy, AdamW with warm-up and cosine decay.
type TrainOptions struct {
	// Tokens are the training tokens per candidate; the steps are
	// ceil(Tokens / (Batch·SeqLen)). 0 disables the training (the
	// candidates are ranked by their loss untrained).
	Tokens int64
	Batch  int     // sequences per step (default 8)
	SeqLen int     // tokens per sequence; training rows hold SeqLen+1 (default 128)
	LR     float64 // peak learning rate (default 1e-3)
	// Temperature of the KL term (default 1); KDWeight and CEWeight weigh
	// the KL and the cross-entropy (both 0: KD only, weight 1).
	Temperature        float64
	KDWeight, CEWeight float64
	Seed               uint64 // data order; every candidate sees the same batches
	// CacheK > 0 keeps the teacher's CacheK largest logits of every
	// training row in a scratch file for the whole search, so that the
	// teacher runs once across the k candidates (the KL is then taken
	// against the teacher's distribution renormalised onto those ids, as
	// distill's --top-k cache does). 0 runs the dense teacher every step of
	// every candidate, the recovery stage's default loss.
	CacheK int
	// Progress receives every training step of every candidate (phase
	// "training top-k candidate N"); nil = none.
	Progress progress.Func `json:"-"`
}

// Steps returns the optimiser steps per candidate.
func (o TrainOptions) Steps() int {
	o.EnsureDefaults()
	per := int64(o.Batch * o.SeqLen)
	return int((o.Tokens + per - 1) / per)
}

// TrainedMeasurer is Minitron++'s top-k selection: each candidate is pruned
// in memory (proxy.Child), distilled from the parent for TrainOptions.Tokens
// on the training rows, and scored on held-out rows that were not trained on
// (proxy.Reference: the loss on the rows' targets and the KL to the
// parent). Measurement.Loss is the loss after the training,
// Measurement.UntrainedLoss the same candidate's before it.
//
// Measurement.Tokens counts every token run through a model: the parent's
// reference pass (once, with the first candidate), the student's training
// tokens, the teacher's (every step without a cache, each training row once
// with one) and the two scoring passes. It is deterministic for a seed.
type TrainedMeasurer struct {
	parent *engine.Model
	ref    *proxy.Reference
	rows   [][]int32
	o      TrainOptions

	teacher distill.Teacher
	cache   *distill.TopKCache
	dir     string // the cache's scratch directory
	charged bool
	n       int // candidates measured
}

// NewTrainedMeasurer runs the parent once over the held-out rows (T+1 ids
// each) and prepares the brief training on trainRows (o.SeqLen+1 ids each,
// none of them among heldOut). Close releases the teacher cache.
func NewTrainedMeasurer(ctx context.Context, parent *engine.Model, heldOut, trainRows [][]int32, o TrainOptions) (*TrainedMeasurer, error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if o.Tokens <= 0 {
		return nil, errors.New("trained proxy: no training tokens (use the untrained measurer)")
	}
	if len(trainRows) < o.Batch {
		return nil, fmt.Errorf("trained proxy: %d training rows, fewer than one batch of %d", len(trainRows), o.Batch)
	}
	if o.CacheK < 0 || o.CacheK > parent.Arch().Vocab {
		return nil, fmt.Errorf("trained proxy: teacher cache k %d: want 0..%d", o.CacheK, parent.Arch().Vocab)
	}
	ref, err := proxy.NewReference(ctx, parent, heldOut, proxy.Options{})
	if err != nil {
		return nil, fmt.Errorf("trained proxy: %w", err)
	}
	m := &TrainedMeasurer{parent: parent, ref: ref, rows: trainRows, o: o}
	dense := distill.NewModelTeacher(parent)
	m.teacher = dense
	if o.CacheK > 0 {
		dir, err := os.MkdirTemp("", "autocompress-topk-teacher-") //output:not-an-output: scratch teacher-logit cache, removed by Close
		if err != nil {
			return nil, fmt.Errorf("trained proxy: %w", err)
		}
		key := distill.CacheKey{Teacher: distill.ModelHash(parent), Data: distill.RowsHash(trainRows), Rows: len(trainRows),
			SeqLen: o.SeqLen, K: o.CacheK, Shared: parent.Arch().Vocab}
		if m.cache, err = distill.OpenTopKCache(dir, key, dense); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("trained proxy: %w", err)
		}
		m.dir, m.teacher = dir, m.cache
	}
	return m, nil
}

// Close removes the teacher cache, if any.
func (m *TrainedMeasurer) Close() error {
	if m.cache == nil {
		return nil
	}
	err := m.cache.Close()
	if e := os.RemoveAll(m.dir); err == nil {
		err = e
	}
	m.cache = nil
	return err
}

// Ranking says in words what the measurements rank by, for the notes.
func (m *TrainedMeasurer) Ranking() string {
	teacher := "the dense teacher every step"
	if m.o.CacheK > 0 {
		teacher = fmt.Sprintf("the teacher's top-%d logits cached across candidates", m.o.CacheK)
	}
	return fmt.Sprintf("the held-out loss of each candidate after %d tokens of distillation from the parent (%d steps of %d×%d, LR %g, T %g, KD %g + CE %g, %s)",
		int64(m.o.Steps()*m.o.Batch*m.o.SeqLen), m.o.Steps(), m.o.Batch, m.o.SeqLen, m.o.LR, m.o.Temperature, m.o.KDWeight, m.o.CEWeight, teacher)
}

// Measure prunes plan's child, scores it, trains it briefly and scores it
// again.
func (m *TrainedMeasurer) Measure(ctx context.Context, plan *prune.Plan) (Measurement, error) {
	child, err := proxy.Child(m.parent, plan)
	if err != nil {
		return Measurement{}, err
	}
	cand := m.n
	m.n++
	child.SetInference(true)
	before, err := m.ref.Score(ctx, child, proxy.Options{})
	if err != nil {
		return Measurement{}, err
	}
	child.SetInference(false)
	kd := &distill.KD{Teacher: m.teacher, Temperature: m.o.Temperature, KDWeight: m.o.KDWeight, CEWeight: m.o.CEWeight, Shared: m.parent.Arch().Vocab}
	var misses0 int64
	if m.cache != nil {
		misses0 = m.cache.Misses.Load()
	}
	steps := m.o.Steps()
	to := train.Options{Steps: steps, Batch: m.o.Batch, SeqLen: m.o.SeqLen, LR: m.o.LR, Seed: m.o.Seed, Loss: train.FromLogits(kd),
		Progress: m.o.Progress.Phase(fmt.Sprintf("training top-k candidate %d", cand+1))}
	tr, err := train.New(child, m.rows, nil, to)
	if err != nil {
		return Measurement{}, fmt.Errorf("trained proxy: %w", err)
	}
	res, err := tr.Run(ctx)
	if err != nil {
		return Measurement{}, fmt.Errorf("trained proxy: %w", err)
	}
	child.SetInference(true)
	after, err := m.ref.Score(ctx, child, proxy.Options{})
	if err != nil {
		return Measurement{}, err
	}
	teacher := res.Tokens
	if m.cache != nil {
		teacher = (m.cache.Misses.Load() - misses0) * int64(m.o.SeqLen)
	}
	meas := Measurement{KL: after.KL, Loss: after.Loss, UntrainedLoss: before.Loss, TrainTokens: res.Tokens,
		Tokens: res.Tokens + teacher + before.Spent + after.Spent}
	if !m.charged {
		meas.Tokens += m.ref.Tokens()
		m.charged = true
	}
	return meas, nil
}
