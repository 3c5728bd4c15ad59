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

// RoutedExperts is ExpertRouting turned into per-expert scores of kind
// ExpertREAP (router-weighted activation saliency; an expert no row
// reached scores 0) or ExpertFrequency (share of rows routed to it), with
// Tokens set to the positions run; the caller sets ModelHash, DataHash
// and Source.
func RoutedExperts(ctx context.Context, m *engine.Model, rows [][]int32, batch int, kind string) (*ExpertScores, error) {
	if kind != ExpertREAP && kind != ExpertFrequency {
		return nil, fmt.Errorf("importance: routed expert scores of kind %q: want %s or %s", kind, ExpertREAP, ExpertFrequency)
	}
	st, err := ExpertRouting(ctx, m, rows, batch)
	if err != nil {
		return nil, err
	}
	s := &ExpertScores{Kind: kind, Layers: make([][]float64, len(st.Rows)), Tokens: int64(len(rows)) * int64(len(rows[0])-1)}
	for l := range st.Rows {
		if kind == ExpertREAP {
			s.Layers[l] = st.REAP(l)
		} else {
			s.Layers[l] = st.Frequency(l)
		}
	}
	return s, nil
}
