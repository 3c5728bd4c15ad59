package prune

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
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

// TestUniformPlan: the same targets in every layer, the top-scoring units
// kept (heads ranked within their KV group), the layer of lowest block
// influence dropped; 0 keeps all; scores of another model are refused
// naming the file.
func TestUniformPlan(t *testing.T) {
	lm := testutil.Llama{Vocab: 64, Hidden: 32, Intermediate: 600, Heads: 8, KVHeads: 4, HeadDim: 4, Layers: 3}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), testutil.LlamaConfig(lm, checkpoint.BF16), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := &importance.Scores{KVHeads: []int{4, 4, 4}, LayerBI: []float64{0.5, 0.1, 0.9}, LayerSkipLoss: []float64{0, 0, 0}, Version: importance.Version}
	for i := 0; i < 32; i++ {
		sc.Hidden = append(sc.Hidden, float64((i*7)%32)) // a permutation of 0..31
	}
	for l := 0; l < 3; l++ {
		var h, hc, n []float64
		for i := 0; i < 8; i++ {
			h = append(h, float64((i+l)%8))
		}
		for i := 0; i < 32; i++ {
			hc = append(hc, 1)
		}
		for i := 0; i < 600; i++ {
			n = append(n, float64((i*13+l)%600))
		}
		sc.Heads, sc.HeadChannels, sc.Neurons = append(sc.Heads, h), append(sc.HeadChannels, hc), append(sc.Neurons, n)
	}
	scores := filepath.Join(t.TempDir(), "scores.safetensors")
	if err := sc.Save(scores); err != nil {
		t.Fatal(err)
	}
	p, err := UniformPlan(dir, scores, Uniform{Hidden: 24, Heads: 4, Neurons: 512, DropLayers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hidden) != 24 {
		t.Errorf("hidden %v", p.Hidden)
	}
	for _, c := range p.Hidden {
		if sc.Hidden[c] < 8 {
			t.Errorf("kept hidden channel %d of score %v", c, sc.Hidden[c])
		}
	}
	var removed []int
	for _, lp := range p.Layers {
		if lp.Remove {
			removed = append(removed, lp.Layer)
			continue
		}
		if len(lp.Heads) != 4 || len(lp.Neurons) != 512 {
			t.Errorf("layer %d keeps %d heads and %d neurons, want 4 and 512 in every layer", lp.Layer, len(lp.Heads), len(lp.Neurons))
		}
		if lp.Layer == 0 && !reflect.DeepEqual(lp.Heads, []int{1, 3, 5, 7}) {
			t.Errorf("layer 0 heads %v, want the better head of each pair [1 3 5 7]", lp.Heads)
		}
	}
	if !reflect.DeepEqual(removed, []int{1}) {
		t.Errorf("removed %v, want [1] (lowest block influence)", removed)
	}
	all, err := UniformPlan(dir, scores, Uniform{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range all.Layers {
		if lp.Remove || lp.Heads != nil && len(lp.Heads) != 8 || lp.Neurons != nil && len(lp.Neurons) != 600 {
			t.Errorf("zero targets: layer %+v, want everything kept", lp)
		}
	}
	sc.LayerBI, sc.LayerSkipLoss = sc.LayerBI[:2], sc.LayerSkipLoss[:2]
	sc.Heads, sc.HeadChannels, sc.Neurons, sc.KVHeads = sc.Heads[:2], sc.HeadChannels[:2], sc.Neurons[:2], sc.KVHeads[:2]
	other := filepath.Join(t.TempDir(), "other.safetensors")
	if err := sc.Save(other); err != nil {
		t.Fatal(err)
	}
	if _, err := UniformPlan(dir, other, Uniform{Heads: 4}); err == nil || !strings.Contains(err.Error(), "other.safetensors") {
		t.Errorf("another model's scores: %v, want an error naming the file", err)
	}
}
