package search

import (
	"context"
	"fmt"
	"runtime"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
)

// KLMeasurer is the measured proxy: each candidate is pruned in memory
// (proxy.Child) and scored against the parent's next-token distributions
// on held-out calibration rows (proxy.Reference), without training. The
// parent's pass is paid once; its tokens are counted with the first
// measurement.
type KLMeasurer struct {
	parent  *engine.Model
	ref     *proxy.Reference
	opt     proxy.Options
	charged bool
}

// NewKLMeasurer runs the parent once over rows (T+1 token ids each).
func NewKLMeasurer(ctx context.Context, parent *engine.Model, rows [][]int32, opt proxy.Options) (*KLMeasurer, error) {
	ref, err := proxy.NewReference(ctx, parent, rows, opt)
	if err != nil {
		return nil, fmt.Errorf("measured proxy: %w", err)
	}
	return &KLMeasurer{parent: parent, ref: ref, opt: opt}, nil
}

// Measure scores the child plan makes of the parent.
func (k *KLMeasurer) Measure(ctx context.Context, plan *prune.Plan) (Measurement, error) {
	child, err := proxy.ForwardChild(k.parent, plan)
	if err != nil {
		return Measurement{}, err
	}
	r, err := k.ref.Score(ctx, child, k.opt)
	// A real-size parent's candidate is gigabytes: collected now, before
	// the next is built, two are never resident at once.
	child = nil
	runtime.GC()
	if err != nil {
		return Measurement{}, err
	}
	m := Measurement{KL: r.KL, Loss: r.Loss, Tokens: r.Spent}
	if !k.charged {
		m.Tokens += k.ref.Tokens()
		k.charged = true
	}
	return m, nil
}

func ftoa(x float64) string { return fmt.Sprintf("%.4f", x) }
