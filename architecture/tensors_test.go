package architecture

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// safetensorsHeader reads a safetensors file's header (8-byte little-endian
// length, then JSON) and returns tensor names in file order and shapes.
func safetensorsHeader(t *testing.T, path string) ([]string, map[string][]int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		t.Fatal(err)
	}
	if n > 100<<20 {
		t.Fatalf("header length %d implausible", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(f, buf); err != nil {
		t.Fatal(err)
	}
	// Decode in order with a token stream.
	dec := json.NewDecoder(strings.NewReader(string(buf)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var names []string
	shapes := map[string][]int64{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Shape []int64 `json:"shape"`
		}
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if k == "__metadata__" {
			continue
		}
		names = append(names, k.(string))
		shapes[k.(string)] = v.Shape
	}
	return names, shapes
}

func TestTensorsMatchStories260K(t *testing.T) {
	m := loadShared(t, "models/stories260K/config.json")
	names, shapes := safetensorsHeader(t, sdtest.Require(t, "models/stories260K/model.safetensors"))
	if err := m.CheckShapes(shapes, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m.Tensors() {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("tensor order differs from the checkpoint:\n got %v\nwant %v", got, names)
	}
	// The checkpoint's element count is the model's parameter count.
	var total int64
	for _, s := range shapes {
		n := int64(1)
		for _, d := range s {
			n *= d
		}
		total += n
	}
	if p := m.Params(); p.Total != total || total != 260032 {
		t.Errorf("Params().Total = %d, checkpoint holds %d, README says 260,032", p.Total, total)
	}
}

func TestCheckShapesReportsDifferences(t *testing.T) {
	m, err := FromConfig([]byte(llamaMinimal))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string][]int64{}
	for _, s := range m.Tensors() {
		have[s.Name] = s.Shape
	}
	if err := m.CheckShapes(have, nil); err != nil {
		t.Fatalf("exact tensors rejected: %v", err)
	}
	delete(have, "model.layers.1.mlp.up_proj.weight")
	have["model.layers.0.self_attn.k_proj.weight"] = []int64{16, 64}
	have["model.layers.0.self_attn.k_proj.weight_scale"] = []int64{1}
	have["extra.weight"] = []int64{3}
	err = m.CheckShapes(have, func(name string) bool { return strings.HasSuffix(name, "_scale") })
	var se *ShapeError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *ShapeError", err)
	}
	if !slices.Equal(se.Missing, []string{"model.layers.1.mlp.up_proj.weight"}) ||
		!slices.Equal(se.Unexpected, []string{"extra.weight"}) ||
		len(se.Mismatched) != 1 || !strings.Contains(se.Mismatched[0], "have [16 64], want [64 64]") {
		t.Errorf("ShapeError = %+v", se)
	}
	if !strings.Contains(err.Error(), "1 missing (model.layers.1.mlp.up_proj.weight)") {
		t.Errorf("message %q", err)
	}
}

func specMap(m *Model) map[string]TensorSpec {
	out := map[string]TensorSpec{}
	for _, s := range m.Tensors() {
		if _, dup := out[s.Name]; dup {
			panic("duplicate tensor " + s.Name)
		}
		out[s.Name] = s
	}
	return out
}

func TestTensorNamesPerArch(t *testing.T) {
	type want map[string][]int64
	tests := []struct {
		name, cfg string
		want      want
		absent    []string
		count     int
	}{
		{"mixtral", `{"architectures":["MixtralForCausalLM"],"hidden_size":64,"intermediate_size":96,"num_attention_heads":8,"num_key_value_heads":2,
		  "num_hidden_layers":2,"vocab_size":100,"num_local_experts":4,"num_experts_per_tok":2}`,
			want{"model.layers.1.block_sparse_moe.gate.weight": {4, 64}, "model.layers.1.block_sparse_moe.experts.3.w1.weight": {96, 64},
				"model.layers.1.block_sparse_moe.experts.3.w2.weight": {64, 96}, "model.layers.0.self_attn.k_proj.weight": {16, 64}, "lm_head.weight": {100, 64}},
			nil, 1 + 2*(1+4+1+1+12) + 1 + 1},
		{"qwen3 moe", `{"architectures":["Qwen3MoeForCausalLM"],"hidden_size":64,"intermediate_size":256,"moe_intermediate_size":32,"num_attention_heads":4,"num_key_value_heads":2,
		  "head_dim":16,"num_hidden_layers":2,"vocab_size":100,"num_experts":4,"num_experts_per_tok":2,"mlp_only_layers":[0],"tie_word_embeddings":true}`,
			want{"model.layers.0.mlp.gate_proj.weight": {256, 64}, "model.layers.1.mlp.gate.weight": {4, 64}, "model.layers.1.mlp.experts.0.gate_proj.weight": {32, 64},
				"model.layers.1.self_attn.q_norm.weight": {16}, "model.layers.1.self_attn.q_proj.weight": {64, 64}, "model.layers.1.self_attn.o_proj.weight": {64, 64}},
			[]string{"lm_head.weight"}, 1 + (1 + 6 + 1 + 3) + (1 + 6 + 1 + 1 + 12) + 1},
		{"qwen2 bias", `{"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_key_value_heads":2,"num_hidden_layers":1,"vocab_size":100}`,
			want{"model.layers.0.self_attn.q_proj.bias": {64}, "model.layers.0.self_attn.v_proj.bias": {16}},
			[]string{"model.layers.0.self_attn.o_proj.bias"}, 1 + 1 + 7 + 1 + 3 + 1 + 1},
		{"gpt-oss", `{"architectures":["GptOssForCausalLM"],"hidden_size":64,"intermediate_size":32,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":16,
		  "num_hidden_layers":2,"vocab_size":100,"num_local_experts":4,"num_experts_per_tok":2,"sliding_window":8}`,
			want{"model.layers.0.self_attn.sinks": {8}, "model.layers.0.self_attn.o_proj.bias": {64}, "model.layers.0.mlp.router.bias": {4},
				"model.layers.0.mlp.experts.gate_up_proj": {4, 64, 64}, "model.layers.0.mlp.experts.down_proj": {4, 32, 64}, "model.layers.0.mlp.experts.down_proj_bias": {4, 64}},
			nil, 1 + 2*(1+9+1+2+4) + 1 + 1},
		{"nemotron-h", `{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":100,"hybrid_override_pattern":"M*-E",
		  "mamba_num_heads":8,"mamba_head_dim":16,"ssm_state_size":4,"n_groups":2,"conv_kernel":4,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
		  "intermediate_size":96,"n_routed_experts":3,"num_experts_per_tok":1,"moe_intermediate_size":24,"moe_shared_expert_intermediate_size":48,"moe_latent_size":32}`,
			want{"backbone.embeddings.weight": {100, 64}, "backbone.layers.0.norm.weight": {64},
				// in_proj: 2·128 + 2·2·4 + 8 = 280; conv channels 128 + 16 = 144.
				"backbone.layers.0.mixer.in_proj.weight": {280, 64}, "backbone.layers.0.mixer.conv1d.weight": {144, 1, 4}, "backbone.layers.0.mixer.conv1d.bias": {144},
				"backbone.layers.0.mixer.A_log": {8}, "backbone.layers.0.mixer.D": {8}, "backbone.layers.0.mixer.dt_bias": {8}, "backbone.layers.0.mixer.norm.weight": {128},
				"backbone.layers.0.mixer.out_proj.weight": {64, 128}, "backbone.layers.1.mixer.k_proj.weight": {32, 64}, "backbone.layers.2.mixer.up_proj.weight": {96, 64},
				"backbone.layers.3.mixer.gate.weight": {3, 64}, "backbone.layers.3.mixer.gate.e_score_correction_bias": {3},
				"backbone.layers.3.mixer.fc1_latent_proj.weight": {32, 64}, "backbone.layers.3.mixer.experts.2.up_proj.weight": {24, 32},
				"backbone.layers.3.mixer.experts.2.down_proj.weight": {32, 24}, "backbone.layers.3.mixer.fc2_latent_proj.weight": {64, 32},
				"backbone.layers.3.mixer.shared_experts.up_proj.weight": {48, 64}, "backbone.norm_f.weight": {64}, "lm_head.weight": {100, 64}},
			[]string{"backbone.layers.2.mixer.gate_proj.weight"},
			// embedding; Mamba norm + 8; attention norm + 4; MLP norm + 2;
			// MoE norm + router 2 + latent 2 + 3 experts × 2 + shared 2; norm_f; lm_head.
			1 + (1 + 8) + (1 + 4) + (1 + 2) + (1 + 2 + 2 + 6 + 2) + 1 + 1},
		{"decilm no-op", `{"architectures":["DeciLMForCausalLM"],"hidden_size":64,"vocab_size":100,"num_attention_heads":8,
		  "block_configs":[{"attention":{"no_op":true},"ffn":{"ffn_mult":3}},{"attention":{"n_heads_in_group":4},"ffn":{"no_op":true}}]}`,
			want{"model.layers.0.post_attention_layernorm.weight": {64}, "model.layers.0.mlp.up_proj.weight": {256, 64},
				"model.layers.1.input_layernorm.weight": {64}, "model.layers.1.self_attn.k_proj.weight": {16, 64}},
			[]string{"model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.1.post_attention_layernorm.weight", "model.layers.1.mlp.up_proj.weight"},
			1 + 4 + 5 + 1 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := FromConfig([]byte(tt.cfg))
			if err != nil {
				t.Fatal(err)
			}
			got := specMap(m)
			for name, shape := range tt.want {
				s, ok := got[name]
				if !ok {
					t.Errorf("missing %s", name)
				} else if !slices.Equal(s.Shape, shape) {
					t.Errorf("%s shape %v, want %v", name, s.Shape, shape)
				}
			}
			for _, name := range tt.absent {
				if _, ok := got[name]; ok {
					t.Errorf("unexpected %s", name)
				}
			}
			if len(got) != tt.count {
				var names []string
				for _, s := range m.Tensors() {
					names = append(names, s.Name)
				}
				t.Errorf("%d tensors, want %d: %v", len(got), tt.count, names)
			}
		})
	}
}

// TestParamsFormula checks Params against the closed-form counts of the cost
// model (costmodel.md §3.1), written independently of Tensors.
func TestParamsFormula(t *testing.T) {
	for file, m := range allModels(t) {
		h := int64(m.Hidden)
		var total int64 = int64(m.Vocab) * h
		if !m.TiedEmbeddings {
			total *= 2
		}
		total += h // final norm
		for _, l := range m.Layers {
			if a := l.Attention; a != nil {
				q, kv := int64(a.Heads*a.HeadDim), int64(a.KVHeads*a.HeadDim)
				total += h*q + 2*h*kv + q*h + h
				if a.QKVBias {
					total += q + 2*kv
				}
				if a.OutBias {
					total += h
				}
				if a.QKNorm {
					total += 2 * int64(a.HeadDim)
				}
				if a.Sinks {
					total += int64(a.Heads)
				}
			}
			if x := l.MLP; x != nil {
				mats := int64(2)
				if x.Gated {
					mats = 3
				}
				total += mats*h*int64(x.Width) + h
			}
			if x := l.MoE; x != nil {
				mats := int64(2)
				if x.Gated {
					mats = 3
				}
				in := h
				if x.LatentSize > 0 {
					in = int64(x.LatentSize)
					total += 2 * h * in
				}
				e, w := int64(x.Experts), int64(x.ExpertWidth)
				total += e*mats*in*w + h*e + h + mats*0 + 2*h*int64(x.SharedWidth)
				if x.RouterBias || x.RouterCorrection {
					total += e
				}
				if x.ExpertBias {
					total += e * ((mats-1)*w + in)
				}
			}
			if x := l.Mamba; x != nil {
				di, gn, nh := int64(x.DInner()), int64(x.Groups*x.StateSize), int64(x.Heads)
				total += h*(2*di+2*gn+nh) + (di+2*gn)*int64(x.ConvKernel) + 3*nh + di + di*h + h
				if x.ConvBias {
					total += di + 2*gn
				}
			}
		}
		if got := m.Params().Total; got != total {
			t.Errorf("%s: Params().Total = %d, formula %d", file, got, total)
		}
	}
}

func ExampleModel_Tensors() {
	m, _ := Preset("meta-llama/Llama-2-7b-hf")
	for _, t := range m.Tensors()[:4] {
		fmt.Println(t.Name, t.Shape, t.Kind)
	}
	// Output:
	// model.embed_tokens.weight [32000 4096] embedding
	// model.layers.0.input_layernorm.weight [4096] norm
	// model.layers.0.self_attn.q_proj.weight [4096 4096] attn_q
	// model.layers.0.self_attn.k_proj.weight [4096 4096] attn_k
}
