package prune

import (
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/importance"
)

// TestFromImportance: every score lands where PlanFromScores reads it,
// layers without scores get none, and scores of another model are
// refused; the converted scores plan the channels importance ranks
// highest.
func TestFromImportance(t *testing.T) {
	att := &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 2}
	m := &architecture.Model{Hidden: 4, Vocab: 8, Layers: []architecture.Layer{
		{Attention: att, MLP: &architecture.MLP{Width: 3, Gated: true, Activation: "silu"}},
		{Attention: att, MLP: &architecture.MLP{Width: 3, Gated: true, Activation: "silu"}},
	}}
	sc := &importance.Scores{Hidden: []float64{4, 1, 3, 2}, LayerBI: []float64{0.5, 0.25},
		Heads: [][]float64{{1, 2}}, Neurons: [][]float64{{3, 1, 2}, {1, 2, 3}}}
	s, err := FromImportance(sc, m)
	if err != nil {
		t.Fatal(err)
	}
	want := Scores{Hidden: []float32{4, 1, 3, 2}, Layers: []float32{0.5, 0.25},
		Heads: [][]float32{{1, 2}, nil}, Neurons: [][]float32{{3, 1, 2}, {1, 2, 3}}}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	p, err := PlanFromScores(m, s, Targets{Hidden: 2, Neurons: []int{2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Hidden, []int{0, 2}) || !reflect.DeepEqual(p.Layers[0].Neurons, []int{0, 2}) || !reflect.DeepEqual(p.Layers[1].Neurons, []int{1, 2}) {
		t.Errorf("plan keeps hidden %v, neurons %v and %v; want [0 2], [0 2], [1 2]", p.Hidden, p.Layers[0].Neurons, p.Layers[1].Neurons)
	}
	sc.LayerBI = sc.LayerBI[:1]
	if _, err := FromImportance(sc, m); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("another model's scores: %v", err)
	}
}
