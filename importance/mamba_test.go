package importance

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

// TestMambaHeadScores: on a small Nemotron-H whose Mamba head 1 (group 0)
// of layer 0 is dead (its gate rows of in_proj zero, so silu(z) = 0), the
// head scores come from the mixer's activations: that head scores 0 and is
// ranked last in its group, the other group's order is untouched by it,
// attention layers keep their head scores, and the scores round-trip.
func TestMambaHeadScores(t *testing.T) {
	a, err := architecture.FromConfig([]byte(`{
		"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
		"vocab_size": 32, "hidden_size": 16, "hybrid_override_pattern": "M*-M",
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
		"intermediate_size": 24, "mamba_num_heads": 4, "mamba_head_dim": 4, "ssm_state_size": 4,
		"n_groups": 2, "conv_kernel": 4, "layer_norm_epsilon": 1e-5}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.New(a, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range m.Specs() {
		w := m.Tensor(s.Name)
		for i := range w {
			if strings.HasSuffix(s.Name, "norm.weight") {
				w[i] = float32(0.5 + r.Float64())
			} else if len(s.Shape) >= 2 {
				w[i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
	const H, hd = 16, 4
	in := m.Tensor("backbone.layers.0.mixer.in_proj.weight")
	clear(in[1*hd*H : 2*hd*H]) // z rows of head 1: the first d_inner rows are z
	rows := make([][]int32, 6)
	for i := range rows {
		rows[i] = make([]int32, 17)
		for j := range rows[i] {
			rows[i][j] = int32(r.IntN(32))
		}
	}
	s, err := Compute(context.Background(), m, rows, Options{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	for l, want := range []bool{true, false, false, true} {
		if (s.MambaHeads[l] != nil) != want {
			t.Fatalf("layer %d: Mamba head scores %v, want present %v", l, s.MambaHeads[l], want)
		}
	}
	if s.Heads[1] == nil || s.Heads[0] != nil {
		t.Errorf("attention head scores: layer 0 %v, layer 1 %v", s.Heads[0], s.Heads[1])
	}
	if s.MambaHeads[0][1] != 0 || s.MambaHeads[0][0] <= 0 || len(s.MambaHeadChannels[0]) != 16 {
		t.Fatalf("layer 0 Mamba head scores %v (want head 1 zero, the others positive)", s.MambaHeads[0])
	}
	order := s.MambaHeadOrder(0, 2)
	if len(order) != 2 || order[0][1] != 1 || order[0][0] != 0 || len(order[1]) != 2 || order[1][0] < 2 {
		t.Errorf("MambaHeadOrder = %v, want group 0 [0 1] and group 1 a permutation of [2 3]", order)
	}
	path := filepath.Join(t.TempDir(), "scores.safetensors")
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for l := range s.MambaHeads {
		if len(back.MambaHeads[l]) != len(s.MambaHeads[l]) {
			t.Fatalf("layer %d: %d Mamba head scores loaded, %d saved", l, len(back.MambaHeads[l]), len(s.MambaHeads[l]))
		}
	}
	if !reflect.DeepEqual(back.MambaHeadOrder(0, 2), order) {
		t.Errorf("loaded order %v, saved %v", back.MambaHeadOrder(0, 2), order)
	}
}

// TestMambaChannelScores: a channel position's score is the L2 norm of its
// scores over the heads.
func TestMambaChannelScores(t *testing.T) {
	s := &Scores{MambaHeadChannels: [][]float64{nil, {3, 0, 4, 4, 1, 3}}}
	if got := s.MambaChannelScores(1, 2); len(got) != 3 || got[0] != 5 || got[1] != 1 || got[2] != 5 {
		t.Errorf("channel scores %v, want [5 1 5]", got)
	}
	for _, c := range []struct{ l, heads int }{{0, 2}, {1, 4}, {2, 2}, {1, 0}} {
		if got := s.MambaChannelScores(c.l, c.heads); got != nil {
			t.Errorf("layer %d, %d heads: %v, want nil", c.l, c.heads, got)
		}
	}
}
