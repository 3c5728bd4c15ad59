package search

import (
	"context"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/workload"
)

// trainedFake ranks plans one way untrained and the opposite way trained:
// the more neurons kept, the better untrained and the worse trained.
type trainedFake struct{ calls int }

func (f *trainedFake) Measure(_ context.Context, p *prune.Plan) (Measurement, error) {
	f.calls++
	kept := 0.0
	for _, l := range p.Layers {
		kept += float64(len(l.Neurons))
	}
	return Measurement{Loss: kept, UntrainedLoss: -kept, TrainTokens: 10, Tokens: 30}, nil
}

func (f *trainedFake) Ranking() string { return "a fake trained loss" }

// TestTrainedRankingPicksByTrainedLoss: with a trained measurement Minitron
// picks the lowest loss after training even where the untrained loss orders
// the candidates the other way, and the notes say the choice changed and
// what the ranking rests on.
func TestTrainedRankingPicksByTrainedLoss(t *testing.T) {
	m := embedded(t)
	w := &workload.Workload{Input: workload.FixedLength(256), Output: workload.FixedLength(64), Concurrency: 1, Seed: 1}
	pc := parentCosts(t, m, "cpu-local", estimate.Native, w)
	b := Budgets{MaxParams: 0.8 * pc.Params}
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, Uniform: true})
	if err != nil {
		t.Fatal(err)
	}
	px, _ := NewProxy(m, nil)
	f := &trainedFake{}
	res, err := Run(context.Background(), sp, px, Options{Strategy: Minitron, GPU: gpu(t, "cpu-local"), Workload: w, Budgets: b,
		Measurer: f, Plan: func(c *Candidate) (*prune.Plan, error) { return sp.Plan(c, nil) }, TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	if f.calls < 2 || f.calls != len(res.TopK) {
		t.Fatalf("measured %d of %d candidates, want all and at least 2", f.calls, len(res.TopK))
	}
	for i := range res.TopK {
		if res.TopK[i].Measured.Loss < res.Best.Measured.Loss {
			t.Errorf("best has trained loss %g, candidate %d has %g", res.Best.Measured.Loss, i, res.TopK[i].Measured.Loss)
		}
	}
	if n := untrainedChoice(res.TopK); n != len(res.TopK)-1 {
		t.Errorf("untrained choice at rank %d, want the last (%d)", n+1, len(res.TopK))
	}
	if res.Tokens != int64(30*f.calls) {
		t.Errorf("tokens %d, want %d", res.Tokens, 30*f.calls)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{"a fake trained loss", "the brief training changed the choice", "tokens spent choosing the architecture"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
