package importance

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

// moeModel is arch() with its layers' MLPs replaced by Mixtral MoE blocks
// of 4 experts, top-2, and large random weights.
func moeModel(t *testing.T) *engine.Model {
	a := arch()
	a.Arch, a.ModelType = architecture.Mixtral, "mixtral"
	for i := range a.Layers {
		a.Layers[i].MLP = nil
		a.Layers[i].MoE = &architecture.MoE{Experts: 4, TopK: 2, ExpertWidth: 8, Gated: true, Activation: "silu"}
	}
	m, err := engine.New(a, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Specs() {
		if len(s.Shape) == 2 {
			for i, w := range m.Tensor(s.Name) {
				m.Tensor(s.Name)[i] = 15 * w
			}
		}
	}
	return m
}

// TestExpertRouting: every calibration position is routed to top-k
// experts of every MoE layer, batching does not change the statistics,
// and Compute scores an MoE model (its MoE layers without neurons).
func TestExpertRouting(t *testing.T) {
	m := moeModel(t)
	data := rows(6, 10, 3)
	st, err := ExpertRouting(context.Background(), m, data, 4)
	if err != nil {
		t.Fatal(err)
	}
	one, err := ExpertRouting(context.Background(), m, data, 1)
	if err != nil {
		t.Fatal(err)
	}
	for l := range 3 {
		var n int64
		for _, c := range st.Counts[l] {
			n += c
		}
		if st.Rows[l] != 60 || n != 120 {
			t.Errorf("layer %d: %d rows, %d routings; want 60, 120", l, st.Rows[l], n)
		}
		reap, reap1 := st.REAP(l), one.REAP(l)
		for e := range reap {
			if st.Counts[l][e] != one.Counts[l][e] || abs(reap[e]-reap1[e]) > 1e-5*reap[e] {
				t.Errorf("layer %d expert %d: batch 4 gives %d rows, REAP %v; batch 1 %d, %v", l, e, st.Counts[l][e], reap[e], one.Counts[l][e], reap1[e])
			}
		}
	}
	s, err := Compute(context.Background(), m, data, Options{Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s.Neurons[0] != nil || len(s.Heads[0]) != 4 {
		t.Errorf("Compute on an MoE model: neurons %v, heads %v; want none and 4", s.Neurons[0], s.Heads[0])
	}
	// As expert scores: they fit the model, survive Save and LoadExperts,
	// and REAP is the statistics' saliency.
	for _, kind := range []string{ExpertREAP, ExpertFrequency} {
		es, err := RoutedExperts(context.Background(), m, data, 4, kind)
		if err != nil {
			t.Fatal(err)
		}
		if err := es.Check(m.Arch()); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		path := filepath.Join(t.TempDir(), kind+".safetensors")
		if err := es.Save(path); err != nil {
			t.Fatal(err)
		}
		back, err := LoadExperts(path)
		if err != nil {
			t.Fatal(err)
		}
		if back.Kind != kind || back.Tokens != 60 {
			t.Errorf("%s: read back kind %q, %d tokens", kind, back.Kind, back.Tokens)
		}
		for l := range 3 {
			want := st.Frequency(l)
			if kind == ExpertREAP {
				want = st.REAP(l)
			}
			for e, v := range back.Layers[l] {
				if abs(v-want[e]) > 1e-6*max(1, abs(want[e])) {
					t.Errorf("%s layer %d expert %d: %v, want %v", kind, l, e, v, want[e])
				}
			}
		}
	}
	if _, err := ExpertRouting(context.Background(), model(t), data, 4); err == nil {
		t.Error("ExpertRouting of a dense model succeeded")
	}
}

func abs(x float64) float64 { return max(x, -x) }
