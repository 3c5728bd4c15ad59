package train

import (
	"context"
	"fmt"

	"github.com/autocompress/autocompress/engine"
)

// Batch is one step's training data: B packed sequences of T tokens.
type Batch struct {
	Inputs  []int32 // (B·T) token ids, row-major
	Targets []int32 // (B·T) next-token ids
	// Rows are the indices of the sequences in the training rows given to
	// New, so that a loss can look up per-row data (e.g. cached teacher
	// logits).
	Rows []int
	B, T int
	Step int // 0-based step the batch is for
}

// A Loss computes one training step's loss on a batch and accumulates its
// gradient into m's gradient slab (the trainer zeroes it before and clips
// and applies it after). It must be deterministic: a resumed run repeats
// the same steps bit for bit only if the loss does.
type Loss interface {
	Step(ctx context.Context, m *engine.Model, b *Batch) (float64, error)
}

// CrossEntropy is the default loss: the mean next-token cross-entropy of
// the model's logits against the batch's targets (engine.ForwardLoss and
// Backward).
type CrossEntropy struct{}

// Step implements Loss.
func (CrossEntropy) Step(_ context.Context, m *engine.Model, b *Batch) (float64, error) {
	l, err := m.ForwardLoss(b.Inputs, b.Targets, b.B, b.T)
	if err != nil {
		return 0, err
	}
	return float64(l), m.Backward()
}

// LogitLoss is a loss defined on the logits alone: given the model's
// logits (B·T, vocab) for the batch, it returns the loss and writes its
// gradient with respect to the logits into dlogits (same shape, to be
// overwritten, not accumulated).
type LogitLoss interface {
	Logits(ctx context.Context, logits []float32, b *Batch, vocab int, dlogits []float32) (float64, error)
}

// FromLogits makes a Loss from a LogitLoss: it runs m.Forward on the batch,
// calls l, and back-propagates dlogits with m.BackwardFromLogits.
func FromLogits(l LogitLoss) Loss { return &logitLoss{l: l} }

type logitLoss struct {
	l       LogitLoss
	dlogits []float32
}

func (x *logitLoss) Step(ctx context.Context, m *engine.Model, b *Batch) (float64, error) {
	logits, err := m.Forward(b.Inputs, b.B, b.T)
	if err != nil {
		return 0, err
	}
	if cap(x.dlogits) < len(logits) {
		x.dlogits = make([]float32, len(logits))
	}
	d := x.dlogits[:len(logits)]
	vocab := len(logits) / (b.B * b.T)
	loss, err := x.l.Logits(ctx, logits, b, vocab, d)
	if err != nil {
		return 0, err
	}
	if err := m.BackwardFromLogits(d); err != nil {
		return 0, fmt.Errorf("train: backward: %w", err)
	}
	return loss, nil
}
