package prune

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/importance"
)

// FromImportance turns importance scores of m into pruning Scores: hidden
// channels, per-layer query heads and MLP neurons, and the block
// influence per layer (the layers dropped first are the lowest). Scores
// computed for another model (other hidden size or layer count) are an
// error. Layers without head or neuron scores get none (nil).
func FromImportance(sc *importance.Scores, m *architecture.Model) (Scores, error) {
	if len(sc.Hidden) != m.Hidden || len(sc.LayerBI) != len(m.Layers) {
		return Scores{}, fmt.Errorf("the scores were computed for another model: %d hidden scores and %d layers, the model has %d and %d",
			len(sc.Hidden), len(sc.LayerBI), m.Hidden, len(m.Layers))
	}
	s := Scores{Hidden: float32s(sc.Hidden), Layers: float32s(sc.LayerBI)}
	for l := range m.Layers {
		var h, n []float64
		if l < len(sc.Heads) {
			h = sc.Heads[l]
		}
		if l < len(sc.Neurons) {
			n = sc.Neurons[l]
		}
		s.Heads = append(s.Heads, float32s(h))
		s.Neurons = append(s.Neurons, float32s(n))
	}
	return s, nil
}

func float32s(v []float64) []float32 {
	if v == nil {
		return nil
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// Uniform gives the same targets to every layer, Minitron-style: hidden
// channels, query heads per layer (a multiple of the KV groups) and MLP
// neurons per layer, 0 keeping all, and DropLayers layers removed.
type Uniform struct {
	Hidden, Heads, Neurons, DropLayers int
}

// Targets broadcasts u to the layers of m.
func (u Uniform) Targets(m *architecture.Model) Targets {
	t := Targets{Hidden: u.Hidden, DropLayers: u.DropLayers}
	for range m.Layers {
		t.Heads = append(t.Heads, u.Heads)
		t.Neurons = append(t.Neurons, u.Neurons)
	}
	return t
}

// UniformPlan builds the uniform plan u for the checkpoint in modelDir from
// the importance scores in scoresPath (autocompress importance output): the
// top-scoring units kept (query heads ranked within their KV groups), the
// layers of lowest block influence dropped.
func UniformPlan(modelDir, scoresPath string, u Uniform) (*Plan, error) {
	m, err := architecture.Load(modelDir)
	if err != nil {
		return nil, err
	}
	sc, err := importance.Load(scoresPath)
	if err != nil {
		return nil, err
	}
	s, err := FromImportance(sc, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", scoresPath, err)
	}
	p, err := PlanFromScores(m, s, u.Targets(m))
	if err != nil {
		return nil, fmt.Errorf("plan from %s: %w", scoresPath, err)
	}
	return p, nil
}
