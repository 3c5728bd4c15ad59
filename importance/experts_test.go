package importance

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

func moeCheckpoint(t *testing.T, cfg map[string]any) (string, *architecture.Model) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := architecture.FromConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	var specs []checkpoint.TensorSpec
	for _, ts := range m.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: ts.Name, DType: checkpoint.BF16, Shape: ts.Shape})
	}
	dir := testutil.WriteTB(t, specs, testutil.Options{Seed: 5, Files: map[string][]byte{"config.json": b}})
	return dir, m
}

// TestStructuralExperts: the structural prior of each expert is its router
// row's norm times the norm of its weights, for per-expert tensors
// (Qwen3-MoE) and for stacked ones (gpt-oss), computed here from the
// tensors read whole; the scores save and load with their provenance.
func TestStructuralExperts(t *testing.T) {
	qwen := map[string]any{"architectures": []string{"Qwen3MoeForCausalLM"}, "model_type": "qwen3_moe",
		"vocab_size": 32, "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"num_hidden_layers": 2, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
		"decoder_sparse_step": 1, "mlp_only_layers": []int{1}, "intermediate_size": 24, "torch_dtype": "bfloat16"}
	gpt := map[string]any{"architectures": []string{"GptOssForCausalLM"}, "model_type": "gpt_oss",
		"vocab_size": 32, "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"num_hidden_layers": 1, "num_local_experts": 3, "num_experts_per_tok": 2, "intermediate_size": 8, "torch_dtype": "bfloat16"}
	for _, cfg := range []map[string]any{qwen, gpt} {
		dir, m := moeCheckpoint(t, cfg)
		s, err := StructuralExperts(context.Background(), dir, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(m); err != nil {
			t.Fatal(err)
		}
		r, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for l, layer := range m.Layers {
			if layer.MoE == nil {
				if s.Layers[l] != nil {
					t.Errorf("layer %d without MoE has scores", l)
				}
				continue
			}
			for e := range layer.MoE.Experts {
				var router, w float64
				for _, ts := range m.Tensors() {
					if ts.Layer != l || ts.Block != architecture.BlockMoE || strings.HasSuffix(ts.Kind, "_bias") {
						continue
					}
					v, err := r.Float32(ts.Name)
					if err != nil {
						t.Fatal(err)
					}
					per := len(v) / int(ts.Shape[0])
					switch {
					case ts.Kind == "moe_router":
						for _, x := range v[e*per : (e+1)*per] {
							router += float64(x) * float64(x)
						}
					case ts.Expert == e:
						for _, x := range v {
							w += float64(x) * float64(x)
						}
					case ts.Expert < 0 && ts.Experts > 0:
						for _, x := range v[e*per : (e+1)*per] {
							w += float64(x) * float64(x)
						}
					}
				}
				want := math.Sqrt(router) * math.Sqrt(w)
				if got := s.Layers[l][e]; math.Abs(got-want) > 1e-9*want || want == 0 {
					t.Errorf("%s layer %d expert %d: %v, want %v", m.Arch, l, e, got, want)
				}
			}
		}
		path := filepath.Join(t.TempDir(), "experts.safetensors")
		if err := s.Save(path); err != nil {
			t.Fatal(err)
		}
		back, err := LoadExperts(path)
		if err != nil {
			t.Fatal(err)
		}
		if back.Kind != ExpertStructural || back.ModelHash != s.ModelHash || len(back.Layers) != len(s.Layers) || float32(back.Layers[0][1]) != float32(s.Layers[0][1]) {
			t.Errorf("loaded %+v, saved %+v", back, s)
		}
		if !strings.Contains(back.Describe(), "structural prior") {
			t.Errorf("Describe = %q", back.Describe())
		}
	}
}

// TestExpertScoresRefused: a file of another format or kind, and scores
// that do not fit the model, are refused with what was wrong.
func TestExpertScoresRefused(t *testing.T) {
	dir := t.TempDir()
	s := &ExpertScores{Kind: "bogus", Layers: [][]float64{{1, 2}}}
	p := filepath.Join(dir, "x.safetensors")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadExperts(p); err == nil || !strings.Contains(err.Error(), `kind "bogus": want reap, frequency or structural`) {
		t.Errorf("LoadExperts(kind bogus) = %v", err)
	}
	m, err := architecture.Load("Qwen/Qwen3-30B-A3B")
	if err != nil {
		t.Fatal(err)
	}
	s = &ExpertScores{Kind: ExpertREAP, Layers: make([][]float64, len(m.Layers))}
	for l := range s.Layers {
		s.Layers[l] = make([]float64, 128)
	}
	if err := s.Check(m); err != nil {
		t.Errorf("Check: %v", err)
	}
	s.Layers[3] = s.Layers[3][:100]
	if err := s.Check(m); err == nil || !strings.Contains(err.Error(), "layer 3: 100 expert scores, the layer has 128 routed experts") {
		t.Errorf("Check(short layer) = %v", err)
	}
	s.Layers[3] = make([]float64, 128)
	s.Layers[3][7] = math.NaN()
	if err := s.Check(m); err == nil || !strings.Contains(err.Error(), "expert 7") {
		t.Errorf("Check(NaN) = %v", err)
	}
}
