package architecture

import (
	"strings"
	"testing"
)

func TestStandIn(t *testing.T) {
	cases := []struct {
		preset        string
		layers, div   int
		hidden, vocab int
		check         func(t *testing.T, m *Model)
	}{
		{"meta-llama/Llama-3.1-8B", 2, 8, 512, 16032, func(t *testing.T, m *Model) {
			a, x := m.Layers[0].Attention, m.Layers[0].MLP
			if a.Heads != 4 || a.KVHeads != 1 || a.HeadDim != 128 || x.Width != 1792 {
				t.Errorf("layer 0: %d heads, %d KV heads of %d, FFN %d; want 4, 1 of 128, 1792", a.Heads, a.KVHeads, a.HeadDim, x.Width)
			}
		}},
		{"Qwen/Qwen3-30B-A3B", 3, 4, 512, 37984, func(t *testing.T, m *Model) {
			e := m.Layers[2].MoE
			if e == nil || e.Experts != 128 || e.TopK != 8 || e.ExpertWidth != 192 {
				t.Errorf("layer 2's experts: %+v; want 128 experts, top-8, width 192", e)
			}
		}},
		{"nvidia/Nemotron-H-56B-Base-8K", 4, 8, 1024, 16384, func(t *testing.T, m *Model) {
			x := m.Layers[0].Mamba
			if x == nil || x.Heads%x.Groups != 0 || x.Heads != 32 {
				t.Errorf("layer 0's Mamba mixer: %+v; want 32 heads in whole groups", x)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			p, err := Preset(c.preset)
			if err != nil {
				t.Fatal(err)
			}
			m, err := p.StandIn(c.layers, c.div)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Layers) != c.layers || m.Hidden != c.hidden || m.Vocab != c.vocab {
				t.Errorf("%d layers, hidden %d, vocab %d; want %d, %d, %d", len(m.Layers), m.Hidden, m.Vocab, c.layers, c.hidden, c.vocab)
			}
			c.check(t, m)
			if q, _ := Preset(c.preset); q.Hidden != p.Hidden || len(q.Layers) != len(p.Layers) {
				t.Error("StandIn changed the preset it was called on")
			}
			if p.Hidden == m.Hidden {
				t.Error("the receiver was modified")
			}
		})
	}
	p, err := Preset("meta-llama/Llama-3.1-8B")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.StandIn(0, 8); err == nil {
		t.Error("a stand-in of 0 layers was accepted")
	}
	// A divisor past every width leaves zero widths: Validate refuses them.
	if _, err := p.StandIn(2, 1<<20); err == nil || !strings.Contains(err.Error(), "divided by") {
		t.Errorf("a divisor past every width: %v, want a validation error naming the divisor", err)
	}
}
