package export

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestFFNMultRoundTrip: widths that are multiples of 256 survive
// ffn_mult = 3·I/(2·hidden) and the engines' round_up(int(2·m·h/3), 256);
// other widths silently grow to the next multiple (the trap the decilm
// export avoids by zero-padding). The two documented examples come from
// serving-formats.md §2 (hidden 8192: 5.25 → 28672, 2.625 → 14336).
func TestFFNMultRoundTrip(t *testing.T) {
	if got := DeciLMFFNWidth(5.25, 8192); got != 28672 {
		t.Errorf("5.25 → %d, want 28672", got)
	}
	if got := DeciLMFFNWidth(2.625, 8192); got != 14336 {
		t.Errorf("2.625 → %d, want 14336", got)
	}
	for _, h := range []int{64, 896, 1024, 2048, 3584, 4096, 5120, 8192, 16384} {
		for w := 256; w <= 8*h; w += 256 {
			if got := DeciLMFFNWidth(FFNMult(w, h), h); got != w {
				t.Fatalf("hidden %d width %d: round trip gives %d", h, w, got)
			}
		}
		if got := DeciLMFFNWidth(FFNMult(300, h), h); got != 512 {
			t.Errorf("hidden %d width 300 → %d, want 512", h, got)
		}
	}
}

// pyNum is f as prune writes it: with a decimal point when integral, as
// Python writes a float (encoding/json would write 12 for 12.0, which
// Python reads as an int).
func pyNum(f float64) json.Number {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return json.Number(s)
}

func deciConfig(mod func(c map[string]any, blocks []map[string]any)) []byte {
	blocks := []map[string]any{}
	for range 3 {
		blocks = append(blocks, map[string]any{
			"attention": map[string]any{"n_heads_in_group": 2, "no_op": false, "replace_with_linear": false},
			"ffn":       map[string]any{"ffn_mult": pyNum(FFNMult(512, 64)), "no_op": false, "replace_with_linear": false},
		})
	}
	c := map[string]any{
		"architectures": []string{"DeciLMForCausalLM"}, "model_type": "nemotron-nas",
		"hidden_size": 64, "num_attention_heads": 8, "head_dim": 8, "vocab_size": 100,
		"num_hidden_layers": 3, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16",
		"auto_map": map[string]any{"AutoConfig": "configuration_decilm.DeciLMConfig", "AutoModelForCausalLM": "modeling_decilm.DeciLMForCausalLM"},
	}
	if mod != nil {
		mod(c, blocks)
	}
	c["block_configs"] = blocks
	b, _ := json.Marshal(c)
	return b
}

// TestValidateConfigRules: each DeciLM rule fires exactly for the engines
// that enforce it, naming the layer.
func TestValidateConfigRules(t *testing.T) {
	cases := []struct {
		name  string
		cfg   []byte
		rule  string
		layer int
		fails []string // engines that must report the rule
	}{
		{"clean", deciConfig(nil), "", -1, nil},
		{"intermediate_size only", deciConfig(func(c map[string]any, b []map[string]any) {
			b[1]["ffn"] = map[string]any{"intermediate_size": 512, "no_op": false}
		}), "decilm-ffn-mult-only", 1, []string{"llamacpp"}}, // a warning for sglang and trtllm: 512 round-trips
		{"width not multiple of 256", deciConfig(func(c map[string]any, b []map[string]any) {
			b[2]["ffn"] = map[string]any{"intermediate_size": 300, "no_op": false}
		}), "decilm-ffn-multiple", 2, []string{"sglang", "trtllm", "llamacpp"}},
		{"ffn_mult and intermediate_size disagree", deciConfig(func(c map[string]any, b []map[string]any) {
			b[0]["ffn"] = map[string]any{"ffn_mult": pyNum(FFNMult(512, 64)), "intermediate_size": 500, "no_op": false}
		}), "decilm-ffn-round-trip", 0, []string{"vllm", "sglang", "trtllm", "llamacpp", "hf", "native"}},
		{"linear attention", deciConfig(func(c map[string]any, b []map[string]any) {
			b[1]["attention"] = map[string]any{"replace_with_linear": true, "no_op": false}
		}), "decilm-linear", 1, []string{"vllm", "sglang", "native"}},
		{"linear ffn", deciConfig(func(c map[string]any, b []map[string]any) {
			b[2]["ffn"] = map[string]any{"replace_with_linear": true, "no_op": false}
		}), "decilm-linear", 2, []string{"vllm", "sglang", "llamacpp", "native"}},
		{"attention bias", deciConfig(func(c map[string]any, b []map[string]any) { c["attention_bias"] = true }), "decilm-bias", 0, []string{"trtllm"}},
		{"head_dim not hidden/heads", deciConfig(func(c map[string]any, b []map[string]any) { c["head_dim"] = 16 }), "head-dim", -1, []string{"llamacpp"}},
		{"n_heads_in_group", deciConfig(func(c map[string]any, b []map[string]any) {
			b[1]["attention"] = map[string]any{"n_heads_in_group": 3, "no_op": false}
		}), "decilm-n-heads-in-group", 1, []string{"vllm", "sglang", "trtllm", "llamacpp", "hf", "native"}},
		{"first ffn_mult written as an integer", []byte(strings.Replace(string(deciConfig(func(c map[string]any, b []map[string]any) {
			b[0]["ffn"] = map[string]any{"ffn_mult": "MULT", "no_op": false}
		})), `"MULT"`, "12", 1)), "decilm-ffn-mult-float", 0, []string{"llamacpp"}},
		{"first ffn_mult written as a float", []byte(strings.Replace(string(deciConfig(func(c map[string]any, b []map[string]any) {
			b[0]["ffn"] = map[string]any{"ffn_mult": "MULT", "no_op": false}
		})), `"MULT"`, "12.0", 1)), "decilm-ffn-mult-float", 0, nil},
		{"no auto_map", deciConfig(func(c map[string]any, b []map[string]any) { delete(c, "auto_map") }), "remote-code", -1, []string{"vllm", "sglang", "trtllm", "hf"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must := map[string]bool{}
			for _, e := range c.fails {
				must[e] = true
			}
			for _, e := range Engines() {
				r, err := ValidateConfig(c.cfg, e)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, v := range r.Violations {
					if v.Rule == c.rule && v.Layer == c.layer {
						found = true
					}
				}
				if found != must[e] {
					t.Errorf("%s: rule %s at layer %d reported %v, want %v; violations %v", e, c.rule, c.layer, found, must[e], r.Violations)
				}
				if c.rule == "" && !r.OK() {
					t.Errorf("%s: clean config fails: %v", e, r.Violations)
				}
			}
		})
	}
	// vLLM reads an intermediate_size-only block only with a configuration
	// module that leaves ffn_mult unset: a warning naming the rule.
	r, err := ValidateConfig(deciConfig(func(c map[string]any, b []map[string]any) {
		b[1]["ffn"] = map[string]any{"intermediate_size": 512, "no_op": false}
	}), "vllm")
	if err != nil || !r.OK() || len(r.Warnings) != 1 || r.Warnings[0].Rule != "decilm-ffn-mult-first" || r.Warnings[0].Layer != 1 ||
		!strings.Contains(r.Warnings[0].Msg, "hasattr") {
		t.Errorf("vllm, intermediate_size only: %v %v (%v)", r.Violations, r.Warnings, err)
	}
	if _, err := ValidateConfig(deciConfig(nil), "ollama"); err == nil {
		t.Error("unknown engine accepted")
	}
}

// TestValidateRealConfigs: published configs load in every engine (the
// native engine runs Nemotron-H's Mamba2 mixers forward). The
// Nemotron-Super-49B DeciLM config carries ffn_mult values such as 1.0 that
// do not map to an exact width before rounding: legal (a warning), not a
// violation.
func TestValidateRealConfigs(t *testing.T) {
	for _, name := range []string{"nvidia--Llama-3_3-Nemotron-Super-49B-v1.json", "Qwen--Qwen3-8B.json",
		"meta-llama--Meta-Llama-3.1-8B.json", "nvidia--Nemotron-H-56B-Base-8K.json"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(sdtest.Require(t, "configs/"+name))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range Engines() {
				r, err := ValidateConfig(data, e)
				if err != nil {
					t.Fatal(err)
				}
				if !r.OK() {
					t.Errorf("%s: %v", e, r.Err())
				}
				if strings.Contains(name, "Super") {
					warned := false
					for _, w := range r.Warnings {
						if w.Rule == "decilm-ffn-round-trip" {
							warned = true
						}
					}
					if !warned {
						t.Errorf("%s: no round-trip warning for ffn_mult 1.0", e)
					}
				}
			}
		})
	}
}

// llamaBPETokenizer is the part of a tokenizer.json that llama.cpp's
// LlamaHfVocab checks (a Llama 2 style BPE tokenizer), so that DeciLM
// fixtures with a vocabulary other than 128256 convert.
const llamaBPETokenizer = `{"model": {"type": "BPE", "byte_fallback": true}, "decoder": {"type": "Sequence"}}`

// loadableFiles are the files beside config.json that DeciLM fixtures need
// to load everywhere: the auto_map modules (stand-ins) and a tokenizer.
func loadableFiles() map[string][]byte {
	return map[string][]byte{"configuration_decilm.py": []byte("#"), "modeling_decilm.py": []byte("#"),
		"tokenizer.json": []byte(llamaBPETokenizer)}
}

// writeDeci writes a checkpoint whose tensors follow cfg (optionally edited).
func writeDeci(t *testing.T, cfg []byte, edit func([]checkpoint.TensorSpec) []checkpoint.TensorSpec, files map[string][]byte) string {
	t.Helper()
	m, err := architecture.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var specs []checkpoint.TensorSpec
	for _, ts := range m.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: ts.Name, DType: checkpoint.BF16, Shape: ts.Shape})
	}
	if edit != nil {
		specs = edit(specs)
	}
	if files == nil {
		files = map[string][]byte{}
	}
	files["config.json"] = cfg
	dir := filepath.Join(t.TempDir(), "ck")
	if err := testutil.Write(dir, specs, testutil.Options{Files: files}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestValidateDirTensors: tensors are compared with the config, each
// violation naming the tensor, its layer and where it is stored.
func TestValidateDirTensors(t *testing.T) {
	cfg := deciConfig(func(c map[string]any, b []map[string]any) {
		b[1]["attention"] = map[string]any{"no_op": true}
		b[2]["ffn"] = map[string]any{"ffn_mult": pyNum(FFNMult(768, 64)), "no_op": false}
	})
	remote := loadableFiles()
	dir := writeDeci(t, cfg, nil, remote)
	for _, e := range Engines() {
		r, err := ValidateDir(dir, e)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Errorf("%s: %v", e, r.Err())
		}
	}
	// Without the remote-code files: every engine that builds the config
	// through transformers' AutoConfig.
	dir = writeDeci(t, cfg, nil, map[string][]byte{"tokenizer.json": []byte(llamaBPETokenizer)})
	var r *Report
	for _, e := range []string{"hf", "vllm", "sglang", "trtllm"} {
		r, _ = ValidateDir(dir, e)
		if r.OK() || r.Violations[0].Rule != "remote-code" || !strings.Contains(r.Violations[0].Msg, "modeling_decilm.py") && !strings.Contains(r.Violations[0].Msg, "configuration_decilm.py") {
			t.Errorf("%s without remote code: %v", e, r.Violations)
		}
	}
	// Wrong width in layer 2, a q_norm in layer 0, a missing k_proj in layer 0.
	dir = writeDeci(t, cfg, func(s []checkpoint.TensorSpec) []checkpoint.TensorSpec {
		var out []checkpoint.TensorSpec
		for _, x := range s {
			switch x.Name {
			case "model.layers.2.mlp.up_proj.weight":
				x.Shape = []int64{700, 64}
			case "model.layers.0.self_attn.k_proj.weight":
				continue
			}
			out = append(out, x)
		}
		return append(out, checkpoint.TensorSpec{Name: "model.layers.0.self_attn.q_norm.weight", DType: checkpoint.BF16, Shape: []int64{8}})
	}, remote)
	r, _ = ValidateDir(dir, "vllm")
	want := map[string]string{
		"model.layers.2.mlp.up_proj.weight":      "tensor-shape",
		"model.layers.0.self_attn.k_proj.weight": "tensor-missing",
		"model.layers.0.self_attn.q_norm.weight": "decilm-qk-norm",
	}
	for _, v := range r.Violations {
		if want[v.Tensor] == v.Rule {
			delete(want, v.Tensor)
		}
		if v.Tensor == "model.layers.2.mlp.up_proj.weight" && (v.Layer != 2 || !strings.Contains(v.Msg, "byte offset") || !strings.Contains(v.Msg, "[1 768 64]") && !strings.Contains(v.Msg, "[768 64]")) {
			t.Errorf("shape violation lacks detail: %v", v)
		}
	}
	if len(want) > 0 {
		t.Errorf("not reported: %v; got %v", want, r.Violations)
	}
	if err := CheckDir(dir, "vllm"); err == nil || !strings.Contains(err.Error(), "breaks 3 rule(s) of vllm") {
		t.Errorf("CheckDir: %v", err)
	}
}

// FuzzValidateConfig: arbitrary config bytes never panic any validator.
func FuzzValidateConfig(f *testing.F) {
	f.Add(deciConfig(nil))
	f.Add(deciConfig(func(c map[string]any, b []map[string]any) {
		b[0]["ffn"] = map[string]any{"intermediate_size": "x", "ffn_mult": nil}
		b[1]["attention"] = map[string]any{"n_heads_in_group": 0, "replace_with_linear": true}
	}))
	f.Add([]byte(`{"architectures":["DeciLMForCausalLM"],"block_configs":[1,null,{"ffn":[]}]}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"num_attention_heads":8,"num_hidden_layers":2,"intermediate_size":8,"vocab_size":4}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, e := range []string{"", "vllm", "sglang", "trtllm", "llamacpp", "hf"} {
			r, err := ValidateConfig(data, e)
			if err != nil || r == nil {
				t.Fatalf("%s: %v", e, err)
			}
		}
	})
}

// TestTensorParallel: per-layer KV heads must divide by TP or replicate
// evenly; query heads and MLP widths must divide by TP.
func TestTensorParallel(t *testing.T) {
	cfg := deciConfig(func(c map[string]any, b []map[string]any) {
		b[1]["attention"] = map[string]any{"n_heads_in_group": 8, "no_op": false} // 1 KV head: replicates
		b[2]["attention"] = map[string]any{"n_heads_in_group": 4, "no_op": false} // 2 KV heads
	})
	dir := writeDeci(t, cfg, nil, loadableFiles())
	for _, c := range []struct {
		tp    int
		rules string // tp-* violations in layer order
	}{
		{1, ""}, {2, ""},
		{4, ""}, // 4, 1 and 2 KV heads: divide or replicate evenly
		{3, "tp-heads,tp-kv-heads,tp-mlp,tp-heads,tp-mlp,tp-heads,tp-kv-heads,tp-mlp"},
	} {
		r, err := ValidateDirWith(dir, "vllm", Options{TP: c.tp})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range r.Violations {
			if strings.HasPrefix(v.Rule, "tp-") {
				got = append(got, v.Rule)
			}
		}
		if strings.Join(got, ",") != c.rules {
			t.Errorf("TP %d: %v, want %v", c.tp, got, c.rules)
		}
	}
	r, _ := ValidateDirWith(dir, "llamacpp", Options{TP: 4})
	if !r.OK() || len(r.Warnings) == 0 {
		t.Errorf("llama.cpp with TP: %v %v", r.Violations, r.Warnings)
	}
}

// TestValidateNoArchitectures: a config.json without "architectures" loads
// in transformers (model_type picks the class) but not in the serving
// engines or llama.cpp's converter, which read architectures[0].
func TestValidateNoArchitectures(t *testing.T) {
	data, err := os.ReadFile(sdtest.Require(t, "configs/meta-llama--Meta-Llama-3.1-8B.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []any{nil, []any{}} {
		if arch == nil {
			delete(cfg, "architectures")
		} else {
			cfg["architectures"] = arch
		}
		b, _ := json.Marshal(cfg)
		for _, e := range Engines() {
			r, err := ValidateConfig(b, e)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range r.Violations {
				if v.Rule == "architectures" && strings.Contains(v.Msg, `"LlamaForCausalLM"`) {
					found = true
				}
			}
			if found != (e != "hf") {
				t.Errorf("%s, architectures %v: violations %v", e, arch, r.Violations)
			}
		}
	}
}
