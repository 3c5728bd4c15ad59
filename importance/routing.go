package importance

import (
	"context"
	"errors"
	"fmt"

	"github.com/autocompress/autocompress/engine"
)

// ExpertRouting runs the calibration rows (each T+1 tokens, the last not
// fed) through m, batch sequences per forward pass, and returns what the
// routers of its mixture-of-experts layers did (engine.ExpertStats): per
// routed expert the rows it received, and REAP's router-weighted
// activation saliency (ExpertStats.REAP) and the routing frequency
// (ExpertStats.Frequency), from which per-expert scores follow. A model
// without MoE layers is an error. It stops with ctx.Err() between forward
// passes.
func ExpertRouting(ctx context.Context, m *engine.Model, rows [][]int32, batch int) (*engine.ExpertStats, error) {
	if len(rows) == 0 {
		return nil, errors.New("importance: no calibration sequences")
	}
	arch := m.Arch()
	moe := false
	for _, l := range arch.Layers {
		moe = moe || l.MoE != nil
	}
	if !moe {
		return nil, errors.New("importance: expert routing of a model without mixture-of-experts layers")
	}
	if batch <= 0 {
		batch = 8
	}
	T := len(rows[0]) - 1
	if T < 1 {
		return nil, fmt.Errorf("importance: calibration rows of %d tokens; want at least 2", len(rows[0]))
	}
	st := engine.NewExpertStats(arch.NumLayers())
	defer m.SetInference(m.Inference())
	m.SetInference(true)
	m.SetObserver(st)
	defer m.SetObserver(nil)
	in := make([]int32, 0, batch*T)
	for i := 0; i < len(rows); i += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		part := rows[i:min(i+batch, len(rows))]
		in = in[:0]
		for j, r := range part {
			if len(r) != T+1 {
				return nil, fmt.Errorf("importance: row %d has %d tokens, row 0 has %d", i+j, len(r), T+1)
			}
			in = append(in, r[:T]...)
		}
		if _, err := m.Forward(in, len(part), T); err != nil {
			return nil, fmt.Errorf("importance: sequences %d..%d: %w", i, i+len(part)-1, err)
		}
	}
	return st, nil
}
