// Package trained is Minitron++'s top-k measurement (method.md §3, §7: "a
// short KD of each top-k candidate, then selection by LM loss"): each
// candidate is pruned in memory, distilled briefly from the parent with the
// recovery stage's loss (package distill) through the training loop
// (package train), and scored on held-out rows. The search receives it as a
// search.MeasurerFactory (NewFactory, for search.Request.TopKMeasurer), so
// package search does not depend on distillation or training.
package trained

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/train"
)

// DefaultTokens is the brief training's default token count per
// top-k candidate: 16 steps of 8×128 tokens, seconds per candidate for the
// embedded parent on two cores.
const DefaultTokens = 16384

// Options are the brief distillation that Minitron++ gives each top-k
// candidate before choosing by loss (method.md §3, §7: "a short KD of each
// top-k candidate, then selection by LM loss"). The knobs are the recovery
// stage's (package distill): forward KL at Temperature scaled by T²,
// optionally mixed with cross-entropy, AdamW with warm-up and cosine decay.
type Options struct {
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

// EnsureDefaults fills the unset (zero) fields and returns o: batch 8,
// sequence length 128, learning rate 1e-3, temperature 1, and KD weight 1
// when both weights are 0.
func (o *Options) EnsureDefaults() *Options {
	if o.Batch == 0 {
		o.Batch = 8
	}
	if o.SeqLen == 0 {
		o.SeqLen = 128
	}
	if o.LR == 0 {
		o.LR = 1e-3
	}
	if o.Temperature == 0 {
		o.Temperature = 1
	}
	if o.KDWeight == 0 && o.CEWeight == 0 {
		o.KDWeight = 1
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *Options) Validate() error {
	switch {
	case o.Tokens < 0:
		return fmt.Errorf("trained proxy: tokens %d: want >= 0 (0: untrained)", o.Tokens)
	case o.Batch < 1 || o.SeqLen < 1:
		return fmt.Errorf("trained proxy: batch %d × sequence length %d: both must be positive", o.Batch, o.SeqLen)
	case !(o.LR > 0):
		return fmt.Errorf("trained proxy: learning rate %g: want > 0", o.LR)
	case !(o.Temperature > 0):
		return fmt.Errorf("trained proxy: temperature %g: want > 0", o.Temperature)
	case o.KDWeight < 0 || o.CEWeight < 0:
		return fmt.Errorf("trained proxy: KD weight %g, CE weight %g: want >= 0", o.KDWeight, o.CEWeight)
	case o.CacheK < 0:
		return fmt.Errorf("trained proxy: cache k %d: want >= 0 (0: no cache)", o.CacheK)
	}
	return nil
}

// Rows returns the training rows the brief training reads: one batch of
// rows per step. The search command and the pipeline read this many.
func (o Options) Rows() int {
	o.EnsureDefaults()
	return o.Steps() * o.Batch
}

// NewFactory returns the search.MeasurerFactory of o's brief training on
// trainRows (o.SeqLen+1 ids each, none of them among the held-out rows the
// search scores on), for search.Request.TopKMeasurer. Each candidate's
// training steps are reported through the search's progress (phase
// "training top-k candidate N") unless o.Progress is set.
func NewFactory(trainRows [][]int32, o Options) search.MeasurerFactory {
	return func(ctx context.Context, parent *engine.Model, heldOut [][]int32, progress progress.Func) (search.Measurer, error) {
		if len(trainRows) == 0 {
			return nil, errors.New("trained proxy: training the top-k candidates needs training rows")
		}
		if o.Progress == nil {
			o.Progress = progress
		}
		return NewMeasurer(ctx, parent, heldOut, trainRows, o)
	}
}

// Steps returns the optimiser steps per candidate.
func (o Options) Steps() int {
	o.EnsureDefaults()
	per := int64(o.Batch * o.SeqLen)
	return int((o.Tokens + per - 1) / per)
}

// Measurer is Minitron++'s top-k selection: each candidate is pruned
// in memory (proxy.Child), distilled from the parent for Options.Tokens
// on the training rows, and scored on held-out rows that were not trained on
// (proxy.Reference: the loss on the rows' targets and the KL to the
// parent). search.Measurement.Loss is the loss after the training,
// search.Measurement.UntrainedLoss the same candidate's before it.
//
// search.Measurement.Tokens counts every token run through a model: the parent's
// reference pass (once, with the first candidate), the student's training
// tokens, the teacher's (every step without a cache, each training row once
// with one) and the two scoring passes. It is deterministic for a seed.
type Measurer struct {
	parent *engine.Model
	ref    *proxy.Reference
	rows   [][]int32
	o      Options

	teacher distill.Teacher
	cache   *distill.TopKCache
	dir     string // the cache's scratch directory
	charged bool
	n       int // candidates measured
}

// NewMeasurer runs the parent once over the held-out rows (T+1 ids
// each) and prepares the brief training on trainRows (o.SeqLen+1 ids each,
// none of them among heldOut). Close releases the teacher cache.
func NewMeasurer(ctx context.Context, parent *engine.Model, heldOut, trainRows [][]int32, o Options) (*Measurer, error) {
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
	m := &Measurer{parent: parent, ref: ref, rows: trainRows, o: o}
	dense := distill.NewModelTeacher(parent)
	m.teacher = dense
	if o.CacheK > 0 {
		dir, err := os.MkdirTemp("", "autocompress-topk-teacher-") //output:not-an-output: scratch teacher-logit cache, removed by Close
		if err != nil {
			return nil, fmt.Errorf("trained proxy: %w", err)
		}
		key := distill.CacheKey{Teacher: parent.Hash(), Data: dataset.HashRows(trainRows), Rows: len(trainRows),
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
func (m *Measurer) Close() error {
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
func (m *Measurer) Ranking() string {
	teacher := "the dense teacher every step"
	if m.o.CacheK > 0 {
		teacher = fmt.Sprintf("the teacher's top-%d logits cached across candidates", m.o.CacheK)
	}
	return fmt.Sprintf("the held-out loss of each candidate after %d tokens of distillation from the parent (%d steps of %d×%d, LR %g, T %g, KD %g + CE %g, %s)",
		int64(m.o.Steps()*m.o.Batch*m.o.SeqLen), m.o.Steps(), m.o.Batch, m.o.SeqLen, m.o.LR, m.o.Temperature, m.o.KDWeight, m.o.CEWeight, teacher)
}

// Measure prunes plan's child, scores it, trains it briefly and scores it
// again.
func (m *Measurer) Measure(ctx context.Context, plan *prune.Plan) (search.Measurement, error) {
	child, err := proxy.Child(m.parent, plan)
	if err != nil {
		return search.Measurement{}, err
	}
	cand := m.n
	m.n++
	child.SetInference(true)
	before, err := m.ref.Score(ctx, child, proxy.Options{})
	if err != nil {
		return search.Measurement{}, err
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
		return search.Measurement{}, fmt.Errorf("trained proxy: %w", err)
	}
	res, err := tr.Run(ctx)
	if err != nil {
		return search.Measurement{}, fmt.Errorf("trained proxy: %w", err)
	}
	child.SetInference(true)
	after, err := m.ref.Score(ctx, child, proxy.Options{})
	if err != nil {
		return search.Measurement{}, err
	}
	teacher := res.Tokens
	if m.cache != nil {
		teacher = (m.cache.Misses.Load() - misses0) * int64(m.o.SeqLen)
	}
	meas := search.Measurement{KL: after.KL, Loss: after.Loss, UntrainedLoss: before.Loss, TrainTokens: res.Tokens,
		Tokens: res.Tokens + teacher + before.Spent + after.Spent}
	if !m.charged {
		meas.Tokens += m.ref.Tokens()
		m.charged = true
	}
	return meas, nil
}
