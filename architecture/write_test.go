package architecture

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// sameModel compares everything but Name and Raw.
func sameModel(a, b *Model) bool {
	x, y := *a, *b
	x.Name, y.Name, x.Raw, y.Raw = "", "", nil, nil
	x.Layers, y.Layers = nil, nil
	if !reflect.DeepEqual(x, y) || len(a.Layers) != len(b.Layers) {
		return false
	}
	for i := range a.Layers {
		if !reflect.DeepEqual(a.Layers[i], b.Layers[i]) {
			return false
		}
	}
	return true
}

// diffModel describes the first difference, for test messages.
func diffModel(a, b *Model) string {
	if len(a.Layers) != len(b.Layers) {
		return "layer counts differ"
	}
	for i := range a.Layers {
		if !reflect.DeepEqual(a.Layers[i], b.Layers[i]) {
			return "layer " + itoa(i) + " differs: " + describeLayer(a.Layers[i]) + " vs " + describeLayer(b.Layers[i])
		}
	}
	x, y := *a, *b
	x.Name, y.Name, x.Raw, y.Raw, x.Layers, y.Layers = "", "", nil, nil, nil, nil
	return "globals differ: " + sprint(x) + " vs " + sprint(y)
}

func roundTrip(t *testing.T, m *Model, opts ConfigOptions) (*Model, []byte) {
	t.Helper()
	data, err := m.Config(opts)
	if err != nil {
		t.Fatalf("Config: %v", err)
	}
	back, err := FromConfig(data)
	if err != nil {
		t.Fatalf("reading back: %v\n%s", err, data)
	}
	again, err := back.Config(opts)
	if err != nil {
		t.Fatalf("Config of the read-back model: %v", err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("writing is not idempotent:\n%s\n---\n%s", data, again)
	}
	return back, data
}

func TestRoundTripRealConfigs(t *testing.T) {
	for _, file := range realConfigs(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			m, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			back, data := roundTrip(t, m, ConfigOptions{})
			if !sameModel(m, back) {
				t.Errorf("read→write→read changed the model: %s", diffModel(m, back))
			}
			// Keys not owned by the writer survive.
			for _, k := range []string{"initializer_range", "quantization_config", "auto_map", "time_step_limit", "transformers_version"} {
				if _, ok := m.Raw[k]; ok && !bytes.Contains(data, []byte(`"`+k+`"`)) {
					t.Errorf("key %q lost", k)
				}
			}
			if !bytes.Contains(data, []byte(`"head_dim"`)) {
				t.Error("head_dim not written explicitly")
			}
		})
	}
}

// prunedLlama returns a small Llama with per-layer KV heads, FFN widths and a
// removed attention.
func prunedLlama(t *testing.T) *Model {
	t.Helper()
	m, err := FromConfig([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":512,"intermediate_size":1536,
	"num_attention_heads":8,"num_key_value_heads":4,"num_hidden_layers":4,"vocab_size":1000,"torch_dtype":"bfloat16",
	"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192},
	"initializer_range":0.02}`))
	if err != nil {
		t.Fatal(err)
	}
	m.Layers[1].Attention.KVHeads = 2
	m.Layers[2].MLP.Width = 768
	m.Layers[3].Attention = nil
	return m
}

func TestDeciLMWrite(t *testing.T) {
	m := prunedLlama(t)
	if FormatFor(m) != DeciLMFormat {
		t.Fatalf("FormatFor = %v, want DeciLM", FormatFor(m))
	}
	back, data := roundTrip(t, m, ConfigOptions{})
	if back.Arch != DeciLM || back.ModelType != "nemotron-nas" {
		t.Errorf("arch %s / %s", back.Arch, back.ModelType)
	}
	back.Arch, back.ModelType = m.Arch, m.ModelType
	if !sameModel(m, back) {
		t.Errorf("DeciLM round trip changed the model: %s", diffModel(m, back))
	}
	if !bytes.Contains(data, []byte(`"ffn_mult": 2.25`)) || !bytes.Contains(data, []byte(`"ffn_mult": 4.5`)) {
		t.Errorf("ffn_mult for 768 and 1536 at hidden 512 should be 2.25 and 4.5:\n%s", data)
	}
	if _, err := m.Config(ConfigOptions{Format: Native}); err == nil || !strings.Contains(err.Error(), "DeciLMFormat") {
		t.Errorf("native write of a per-layer Llama: %v, want a hint at DeciLM", err)
	}
}

func TestDeciLMRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *Model)
		want   string
	}{
		{"width not multiple of 256", func(m *Model) { m.Layers[0].MLP.Width = 1000 }, "FFN width 1000 is not a multiple of 256: engines that read ffn_mult round it up to 1024"},
		{"per-layer query heads", func(m *Model) { m.Layers[0].Attention.Heads = 4 }, "DeciLM has one global num_attention_heads"},
		{"head_dim", func(m *Model) { m.Layers[2].Attention.HeadDim = 32 }, "DeciLM has one global head_dim"},
		{"qk norm", func(m *Model) { m.Layers[0].Attention.QKNorm = true }, "qk-norm"},
		{"moe", func(m *Model) {
			m.Layers[0].MLP = nil
			m.Layers[0].MoE = &MoE{Experts: 2, TopK: 1, ExpertWidth: 256, Gated: true}
		}, "no Mamba, no MoE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := prunedLlama(t)
			tt.modify(m)
			_, err := m.Config(ConfigOptions{Format: DeciLMFormat})
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a *FormatError containing %q", err, tt.want)
			}
		})
	}
}

func TestNativeRejects(t *testing.T) {
	m := prunedLlama(t)
	m.Layers[3].Attention = &Attention{Heads: 8, KVHeads: 4, HeadDim: 64, SlidingWindow: 16}
	m.Layers[1].Attention.KVHeads = 4
	m.Layers[2].MLP.Width = 1536
	if _, err := m.Config(ConfigOptions{Format: Native}); err == nil || !strings.Contains(err.Error(), "no sliding-window") {
		t.Errorf("Llama with a sliding window: %v", err)
	}
}

func TestNemotronHDepthPruneSlicesPattern(t *testing.T) {
	m, err := FromConfig([]byte(`{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":100,"hybrid_override_pattern":"M*-EM-",
	  "mamba_num_heads":8,"mamba_head_dim":16,"ssm_state_size":4,"n_groups":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
	  "intermediate_size":96,"n_routed_experts":3,"num_experts_per_tok":1,"moe_intermediate_size":24,"moe_shared_expert_intermediate_size":48,"time_step_limit":[0.0,Infinity]}`))
	if err != nil {
		t.Fatal(err)
	}
	m.Layers = append(m.Layers[:1], m.Layers[2:5]...) // drop layer 1 (attention) and 5
	back, data := roundTrip(t, m, ConfigOptions{})
	if got := back.Raw["hybrid_override_pattern"]; got != "M-EM" {
		t.Errorf("pattern %v, want M-EM", got)
	}
	if !bytes.Contains(data, []byte("Infinity")) {
		t.Errorf("bare Infinity lost:\n%s", data)
	}
	if !sameModel(m, back) {
		t.Errorf("changed: %s", diffModel(m, back))
	}
}

// TestNemotronHCleanFields: a Nemotron-H child keeps expand true (the
// Mamba width over the hidden size, or no key when that is no integer) and
// gains no rope_theta, since its attention has no RoPE; an unchanged model
// keeps both as read.
func TestNemotronHCleanFields(t *testing.T) {
	const base = `{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":100,"hybrid_override_pattern":"M*M-",
	  "mamba_num_heads":8,"mamba_head_dim":16,"ssm_state_size":4,"n_groups":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
	  "intermediate_size":96,"expand":2%s}`
	cases := []struct {
		name       string
		extra      string
		mambaHeads int
		hidden     int
		expand     any // nil: no key; else the number as read back
		rope       bool
	}{
		{"unchanged", "", 8, 64, 2, false},
		{"a fraction drops expand; rope_theta read is kept", `,"rope_theta":10000`, 6, 64, nil, true},
		{"heads halved: expand 1", "", 4, 64, 1, false},
		{"heads cut to a fraction: no expand", "", 2, 64, nil, false},
		{"hidden halved: expand 4", "", 8, 32, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := FromConfig([]byte(strings.Replace(base, "%s", c.extra, 1)))
			if err != nil {
				t.Fatal(err)
			}
			m.Hidden = c.hidden
			for _, l := range m.Layers {
				if l.Mamba != nil {
					l.Mamba.Heads = c.mambaHeads
				}
			}
			back, _ := roundTrip(t, m, ConfigOptions{})
			e, ok := back.Raw["expand"]
			if c.expand == nil && ok || c.expand != nil && fmt.Sprint(e) != fmt.Sprint(c.expand) {
				t.Errorf("expand %v (present %v), want %v", e, ok, c.expand)
			}
			if _, ok := back.Raw["rope_theta"]; ok != c.rope {
				t.Errorf("rope_theta present %v, want %v", ok, c.rope)
			}
		})
	}
}

func TestConfigGolden(t *testing.T) {
	cases := map[string]func(t *testing.T) ([]byte, error){
		"llama2-7b-native.json": func(t *testing.T) ([]byte, error) {
			m, err := Preset("meta-llama/Llama-2-7b-hf")
			if err != nil {
				return nil, err
			}
			return m.Config(ConfigOptions{})
		},
		"pruned-llama-decilm.json": func(t *testing.T) ([]byte, error) {
			return prunedLlama(t).Config(ConfigOptions{})
		},
		// Nemotron-H 56B cut to its first 20 layers, Mamba heads and MLP
		// narrowed uniformly: the pattern is sliced, Mamba fields rewritten.
		"nemotron-h-56b-cut.json": func(t *testing.T) ([]byte, error) {
			m, err := Preset("nvidia/Nemotron-H-56B-Base-8K")
			if err != nil {
				return nil, err
			}
			m.Layers = m.Layers[:20]
			for _, l := range m.Layers {
				if l.Mamba != nil {
					l.Mamba.Heads = 192
				}
				if l.MLP != nil {
					l.MLP.Width = 24576
				}
			}
			return m.Config(ConfigOptions{})
		},
		// gpt-oss-20b with 16 of 32 experts kept and 12 layers.
		"gpt-oss-20b-cut.json": func(t *testing.T) ([]byte, error) {
			m, err := Preset("openai/gpt-oss-20b")
			if err != nil {
				return nil, err
			}
			m.Layers = m.Layers[:12]
			for _, l := range m.Layers {
				l.MoE.Experts = 16
			}
			return m.Config(ConfigOptions{Drop: []string{"quantization_config"}, DType: "bfloat16"})
		},
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := gen(t)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestConfigGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Config output differs from %s (rerun with -update after review):\n%s", path, got)
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{500000: "500000.0", 1e-05: "1e-05", 1e-6: "1e-06", 0.02: "0.02", 5.25: "5.25", 1e6: "1000000.0", 1e20: "1e+20", 0.0001: "0.0001"} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestConfigDropAndArchChange(t *testing.T) {
	m := loadShared(t, "configs/nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")
	// Make it uniform and write it as a plain Llama.
	for i := range m.Layers {
		m.Layers[i] = Layer{Attention: &Attention{Heads: 64, KVHeads: 8, HeadDim: 128}, MLP: &MLP{Width: 28672, Gated: true, Activation: "silu"}}
	}
	m.Arch, m.ModelType = Llama, "llama"
	data, err := m.Config(ConfigOptions{Drop: []string{"_name_or_path"}, DType: "float16"})
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"auto_map", "block_configs", "_name_or_path", "nemotron-nas"} {
		if bytes.Contains(data, []byte(gone)) {
			t.Errorf("%s still in the Llama config", gone)
		}
	}
	back, err := FromConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Arch != Llama || back.DType != "float16" || back.Params().Total != 70_553_706_496 {
		t.Errorf("got %s %s %d params", back.Arch, back.DType, back.Params().Total)
	}
}
