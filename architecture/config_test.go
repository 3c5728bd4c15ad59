package architecture

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// realConfigs lists the shared config files (skipping when absent).
func realConfigs(t testing.TB) []string {
	t.Helper()
	dir := sdtest.Require(t, "configs")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Skipf("no configs in %s", dir)
	}
	return files
}

func loadShared(t *testing.T, rel string) *Model {
	t.Helper()
	m, err := Load(sdtest.Require(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFromConfigRealShapes(t *testing.T) {
	type want struct {
		arch                  string
		layers, hidden, vocab int
		tied                  bool
		l                     int // layer to inspect
		heads, kv, headDim    int // attention of layer l (0: none)
		mlp                   int // MLP width of layer l (0: none)
		experts, topK, expW   int
		sharedW, latent       int
		mambaHeads            int
		window                int
	}
	tests := map[string]want{
		"meta-llama--Meta-Llama-3.1-8B.json":   {arch: Llama, layers: 32, hidden: 4096, vocab: 128256, heads: 32, kv: 8, headDim: 128, mlp: 14336},
		"meta-llama--Meta-Llama-3.1-405B.json": {arch: Llama, layers: 126, hidden: 16384, vocab: 128256, heads: 128, kv: 8, headDim: 128, mlp: 53248},
		"Qwen--Qwen3-0.6B.json":                {arch: Qwen3, layers: 28, hidden: 1024, vocab: 151936, tied: true, heads: 16, kv: 8, headDim: 128, mlp: 3072},
		"Qwen--Qwen3-30B-A3B.json":             {arch: Qwen3MoE, layers: 48, hidden: 2048, vocab: 151936, heads: 32, kv: 4, headDim: 128, experts: 128, topK: 8, expW: 768},
		"mistralai--Mixtral-8x7B-v0.1.json":    {arch: Mixtral, layers: 32, hidden: 4096, vocab: 32000, heads: 32, kv: 8, headDim: 128, experts: 8, topK: 2, expW: 14336},
		"openai--gpt-oss-20b.json":             {arch: GptOss, layers: 24, hidden: 2880, vocab: 201088, heads: 64, kv: 8, headDim: 64, experts: 32, topK: 4, expW: 2880, window: 128},
		"openai--gpt-oss-120b.json":            {arch: GptOss, layers: 36, hidden: 2880, vocab: 201088, l: 1, heads: 64, kv: 8, headDim: 64, experts: 128, topK: 4, expW: 2880},
		// Nemotron-H 56B: pattern "M-M-M-M*-...": layer 7 is attention, 1 is MLP, 0 Mamba.
		"nvidia--Nemotron-H-56B-Base-8K.json": {arch: NemotronH, layers: 118, hidden: 8192, vocab: 131072, l: 7, heads: 64, kv: 8, headDim: 128},
		// Nemotron-3 Nano: "MEMEM*E...": layer 1 is MoE, 5 attention.
		"nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json":   {arch: NemotronH, layers: 52, hidden: 2688, vocab: 131072, l: 1, experts: 128, topK: 6, expW: 1856, sharedW: 3712},
		"nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json": {arch: NemotronH, layers: 88, hidden: 4096, vocab: 131072, l: 1, experts: 512, topK: 22, expW: 2688, sharedW: 5376, latent: 1024},
		// Super-49B block 6 has a no-op attention and ffn_mult 2.625 → 14336.
		"nvidia--Llama-3_3-Nemotron-Super-49B-v1.json": {arch: DeciLM, layers: 80, hidden: 8192, vocab: 128256, l: 6, mlp: 14336},
	}
	for file, w := range tests {
		t.Run(file, func(t *testing.T) {
			m := loadShared(t, "configs/"+file)
			if m.Arch != w.arch || len(m.Layers) != w.layers || m.Hidden != w.hidden || m.Vocab != w.vocab || m.TiedEmbeddings != w.tied {
				t.Fatalf("got %s L=%d h=%d v=%d tied=%v, want %s L=%d h=%d v=%d tied=%v", m.Arch, len(m.Layers), m.Hidden, m.Vocab, m.TiedEmbeddings, w.arch, w.layers, w.hidden, w.vocab, w.tied)
			}
			l := m.Layers[w.l]
			if a := l.Attention; (a == nil) != (w.heads == 0) || a != nil && (a.Heads != w.heads || a.KVHeads != w.kv || a.HeadDim != w.headDim || a.SlidingWindow != w.window) {
				t.Errorf("layer %d attention %+v, want heads %d kv %d head_dim %d window %d", w.l, a, w.heads, w.kv, w.headDim, w.window)
			}
			if x := l.MLP; (x == nil) != (w.mlp == 0) || x != nil && x.Width != w.mlp {
				t.Errorf("layer %d MLP %+v, want width %d", w.l, x, w.mlp)
			}
			if x := l.MoE; (x == nil) != (w.experts == 0) || x != nil && (x.Experts != w.experts || x.TopK != w.topK || x.ExpertWidth != w.expW || x.SharedWidth != w.sharedW || x.LatentSize != w.latent) {
				t.Errorf("layer %d MoE %+v, want %d experts top-%d width %d shared %d latent %d", w.l, x, w.experts, w.topK, w.expW, w.sharedW, w.latent)
			}
		})
	}
}

func TestNemotronHPattern(t *testing.T) {
	m := loadShared(t, "configs/nvidia--Nemotron-H-56B-Base-8K.json")
	var counts [4]int
	for i, l := range m.Layers {
		switch {
		case l.Mamba != nil:
			counts[0]++
			if l.Mamba.Heads != 256 || l.Mamba.HeadDim != 64 || l.Mamba.StateSize != 256 || l.Mamba.Groups != 8 || l.Mamba.DInner() != 16384 {
				t.Fatalf("layer %d Mamba %+v", i, l.Mamba)
			}
		case l.Attention != nil:
			counts[1]++
		case l.MLP != nil:
			counts[2]++
			if l.MLP.Width != 32768 || l.MLP.Gated || l.MLP.Activation != "relu2" {
				t.Fatalf("layer %d MLP %+v", i, l.MLP)
			}
		case l.MoE != nil:
			counts[3]++
		}
	}
	// 118 layers: 54 Mamba, 10 attention, 54 MLP (count of M, *, - in the pattern).
	if counts != [4]int{54, 10, 54, 0} {
		t.Errorf("layer kinds M,*,-,E = %v, want [54 10 54 0]", counts)
	}
	if s, ok := m.Raw["time_step_limit"].([]any); !ok || s[1] != PosInf {
		t.Errorf("time_step_limit = %#v, want [0.0, Infinity] kept in Raw", m.Raw["time_step_limit"])
	}
}

func TestDeciLMBlocks(t *testing.T) {
	m := loadShared(t, "configs/nvidia--Llama-3_3-Nemotron-Super-49B-v1.json")
	noAtt, widths := 0, map[int]int{}
	for _, l := range m.Layers {
		if l.Attention == nil {
			noAtt++
		} else if l.Attention.KVHeads != 8 {
			t.Errorf("KV heads %d, want 64/8 = 8", l.Attention.KVHeads)
		}
		widths[l.MLP.Width]++
	}
	if noAtt != 31 {
		t.Errorf("%d no-op attention layers, want 31", noAtt)
	}
	// ffn_mult → width with round_up(int(2·m·8192/3), 256): 0.5→2816, 1→5632,
	// 1.3125→7168, 2.625→14336, 3.28125→17920, 5.25→28672.
	want := map[int]int{2816: 6, 5632: 8, 7168: 10, 14336: 6, 17920: 1, 28672: 49}
	for w, n := range want {
		if widths[w] != n {
			t.Errorf("%d layers of width %d, want %d (all widths %v)", widths[w], w, n, widths)
		}
	}
	if m.Uniform() {
		t.Error("Uniform() = true for a DeciLM model with per-layer widths")
	}
}

func TestFFNMultToWidth(t *testing.T) {
	for _, c := range []struct {
		mult   float64
		hidden int
		want   int
	}{{5.25, 8192, 28672}, {2.625, 8192, 14336}, {0.5, 8192, 2816}, {1, 8192, 5632}, {1.3125, 8192, 7168}, {3.5, 4096, 9728}} {
		if got := FFNMultToWidth(c.mult, c.hidden); got != c.want {
			t.Errorf("FFNMultToWidth(%v, %d) = %d, want %d", c.mult, c.hidden, got, c.want)
		}
	}
}

const llamaMinimal = `{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,
"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":100}`

func TestDefaults(t *testing.T) {
	m, err := FromConfig([]byte(llamaMinimal))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Layers[0].Attention
	if a.KVHeads != 8 || a.HeadDim != 8 || m.Rope.Theta != 10000 || m.TiedEmbeddings || m.NormEps != 1e-6 || m.BOS != -1 || m.EOS != nil || m.ModelType != "llama" {
		t.Errorf("defaults: kv %d head_dim %d theta %v tied %v eps %v bos %d eos %v type %q",
			a.KVHeads, a.HeadDim, m.Rope.Theta, m.TiedEmbeddings, m.NormEps, m.BOS, m.EOS, m.ModelType)
	}
	// Class-specific defaults.
	cases := []struct {
		cfg   string
		check func(*Model) bool
		what  string
	}{
		{`{"architectures":["MistralForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":100}`,
			func(m *Model) bool { return m.Layers[0].Attention.SlidingWindow == 4096 }, "Mistral sliding_window defaults to 4096"},
		{`{"architectures":["MistralForCausalLM"],"sliding_window":null,"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":100}`,
			func(m *Model) bool { return m.Layers[0].Attention.SlidingWindow == 0 }, "Mistral sliding_window null is full attention"},
		{`{"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_key_value_heads":2,"num_hidden_layers":4,"vocab_size":100,
		  "use_sliding_window":true,"sliding_window":32,"max_window_layers":2}`,
			func(m *Model) bool {
				l := m.Layers
				return l[0].Attention.QKVBias && !l[0].Attention.OutBias && l[1].Attention.SlidingWindow == 0 && l[2].Attention.SlidingWindow == 32 && l[3].Attention.SlidingWindow == 32
			}, "Qwen2 has qkv bias and slides from max_window_layers"},
		{`{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_key_value_heads":null,"num_hidden_layers":2,"vocab_size":100}`,
			func(m *Model) bool {
				a := m.Layers[0].Attention
				return a.HeadDim == 128 && a.KVHeads == 8 && a.QKNorm
			}, "Qwen3 head_dim defaults to 128, null KV heads = heads"},
		{`{"model_type":"llama","hidden_size":64,"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":100,"eos_token_id":[1,2],"bos_token_id":0}`,
			func(m *Model) bool { return m.Arch == Llama && len(m.EOS) == 2 && m.BOS == 0 }, "architecture from model_type; EOS list"},
		{gptOssMinimal,
			func(m *Model) bool { x := m.Layers[1].MoE; return x.SwiGLUAlpha == 1.702 && x.SwiGLULimit == 7 }, "gpt-oss SwiGLU clamp defaults (GptOssExperts' alpha, GptOssConfig's limit)"},
		{strings.Replace(gptOssMinimal, `"hidden_size":64`, `"hidden_size":64,"swiglu_limit":5.5,"swiglu_alpha":1.5`, 1),
			func(m *Model) bool { x := m.Layers[0].MoE; return x.SwiGLUAlpha == 1.5 && x.SwiGLULimit == 5.5 }, "gpt-oss SwiGLU clamp from config.json"},
	}
	for _, c := range cases {
		m, err := FromConfig([]byte(c.cfg))
		if err != nil {
			t.Errorf("%s: %v", c.what, err)
			continue
		}
		if !c.check(m) {
			t.Errorf("%s: got layers %+v", c.what, *m.Layers[len(m.Layers)-1].Attention)
		}
	}
}

// gptOssMinimal is a two-layer gpt-oss config.json with every field at
// GptOssConfig's defaults but the widths.
const gptOssMinimal = `{"architectures":["GptOssForCausalLM"],"hidden_size":64,"intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,"vocab_size":100,"num_local_experts":4,"num_experts_per_tok":2}`

func TestFromConfigErrors(t *testing.T) {
	tests := []struct {
		name, cfg, want string
		target          any
	}{
		{"missing hidden", `{"architectures":["LlamaForCausalLM"],"intermediate_size":128,"num_attention_heads":8,"num_hidden_layers":2,"vocab_size":100}`,
			`config.json: missing "hidden_size"`, new(*MissingFieldError)},
		{"unsupported", `{"architectures":["GPT2LMHeadModel"],"hidden_size":64}`, "supported: DeciLMForCausalLM, GptOssForCausalLM", new(*UnsupportedArchError)},
		{"no arch", `{"hidden_size":64}`, "unsupported architecture", new(*UnsupportedArchError)},
		{"gpt-oss limit", strings.Replace(gptOssMinimal, `"hidden_size":64`, `"hidden_size":64,"swiglu_limit":0`, 1), `"swiglu_limit": want a positive number, got 0`, new(*ConfigError)},
		{"gpt-oss alpha", strings.Replace(gptOssMinimal, `"hidden_size":64`, `"hidden_size":64,"swiglu_alpha":-1`, 1), `"swiglu_alpha": want a positive number, got -1`, new(*ConfigError)},
		{"bad json", `{"hidden_size":`, "not valid JSON", new(*ConfigError)},
		{"not object", `[1,2]`, "top level is an array", new(*ConfigError)},
		{"wrong type", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":"64"`, 1), `"hidden_size": want a number, got a string`, new(*ConfigError)},
		{"fraction", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64.5`, 1), `"hidden_size": want an integer`, new(*ConfigError)},
		{"kv not dividing", strings.Replace(llamaMinimal, `"num_attention_heads":8`, `"num_attention_heads":8,"num_key_value_heads":3`, 1), "not divisible by KV heads 3", new(*ValidationError)},
		{"nan theta", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"rope_theta":NaN`, 1), `"rope_theta": want a finite number, got NaN`, new(*ConfigError)},
		{"huge", `{"architectures":["LlamaForCausalLM"],"hidden_size":4194304,"intermediate_size":4194304,"num_attention_heads":1,"num_hidden_layers":4096,"vocab_size":16777216}`, "parameters, more than 1e+15", new(*ValidationError)},
		{"zero layers", strings.Replace(llamaMinimal, `"num_hidden_layers":2`, `"num_hidden_layers":0`, 1), `"num_hidden_layers": want 1..`, new(*ConfigError)},
		// Issue 17, class 5: every field range-checked before use.
		{"negative layers", strings.Replace(llamaMinimal, `"num_hidden_layers":2`, `"num_hidden_layers":-4`, 1), `"num_hidden_layers": want 1..4096, got -4`, new(*ConfigError)},
		{"negative layers qwen", strings.Replace(strings.Replace(llamaMinimal, `"num_hidden_layers":2`, `"num_hidden_layers":-4`, 1), "LlamaForCausalLM", "Qwen2ForCausalLM", 1), `"num_hidden_layers": want 1..4096, got -4`, new(*ConfigError)},
		{"negative positions", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"max_position_embeddings":-5`, 1), `"max_position_embeddings": want 0..67108864, got -5`, new(*ConfigError)},
		{"huge positions", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"max_position_embeddings":4503599627370496`, 1), `"max_position_embeddings": want 0..67108864`, new(*ConfigError)},
		{"bos", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"bos_token_id":-2`, 1), `"bos_token_id": want -1..`, new(*ConfigError)},
		{"eos", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"eos_token_id":[1,-3]`, 1), `"eos_token_id": want 0..`, new(*ConfigError)},
		{"negative theta", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"rope_theta":-1`, 1), "rope theta -1", new(*ValidationError)},
		{"rope original", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"rope_scaling":{"rope_type":"llama3","factor":8,"original_max_position_embeddings":-1}`, 1),
			`"rope_scaling.original_max_position_embeddings": want 0..`, new(*ConfigError)},
		{"rope factor", strings.Replace(llamaMinimal, `"hidden_size":64`, `"hidden_size":64,"rope_scaling":{"rope_type":"linear","factor":-2}`, 1), "rope scaling factor -2", new(*ValidationError)},
		{"window", strings.Replace(strings.Replace(llamaMinimal, "LlamaForCausalLM", "MistralForCausalLM", 1), `"hidden_size":64`, `"hidden_size":64,"sliding_window":-8`, 1), "sliding window -8", new(*ValidationError)},
		{"mamba overflow", `{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":10,"hybrid_override_pattern":"M","mamba_num_heads":4294967296,"mamba_head_dim":4294967296,"n_groups":1}`,
			"Mamba heads 4294967296", new(*ValidationError)},
		{"pattern char", `{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":10,"hybrid_override_pattern":"M?","mamba_num_heads":4,"mamba_head_dim":8,"n_groups":1}`,
			`character '?' at layer 1`, new(*ConfigError)},
		{"pattern length", `{"architectures":["NemotronHForCausalLM"],"hidden_size":64,"vocab_size":10,"num_hidden_layers":3,"hybrid_override_pattern":"MM","mamba_num_heads":4,"mamba_head_dim":8,"n_groups":1}`,
			`"num_hidden_layers": is 3 but hybrid_override_pattern has 2 layers`, new(*ConfigError)},
		{"decilm linear", `{"architectures":["DeciLMForCausalLM"],"hidden_size":64,"vocab_size":10,"num_attention_heads":8,
		  "block_configs":[{"attention":{"replace_with_linear":true,"no_op":false},"ffn":{"ffn_mult":1}}]}`, "block_configs[0].attention.replace_with_linear is true", new(*UnsupportedArchError)},
		{"decilm sinks", `{"architectures":["DeciLMForCausalLM"],"hidden_size":64,"vocab_size":10,"num_attention_heads":8,
		  "block_configs":[{"attention":{"n_heads_in_group":2,"num_sink_tokens":4},"ffn":{"ffn_mult":1}}]}`, "block_configs[0].attention.num_sink_tokens is set", new(*UnsupportedArchError)},
		{"decilm group", `{"architectures":["DeciLMForCausalLM"],"hidden_size":64,"vocab_size":10,"num_attention_heads":8,
		  "block_configs":[{"attention":{"n_heads_in_group":3},"ffn":{"ffn_mult":1}}]}`, `"block_configs[0].attention.n_heads_in_group": must divide num_attention_heads 8, got 3`, new(*ConfigError)},
		{"decilm missing ffn", `{"architectures":["DeciLMForCausalLM"],"hidden_size":64,"vocab_size":10,"num_attention_heads":8,
		  "block_configs":[{"attention":{"n_heads_in_group":2}}]}`, `config.json: missing "block_configs[0].ffn"`, new(*MissingFieldError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromConfig([]byte(tt.cfg))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !errors.As(err, tt.target) {
				t.Errorf("error %T (%v) is not a %T", err, err, tt.target)
			}
		})
	}
}

func TestNonFiniteTokens(t *testing.T) {
	cfg := `{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":8,
	"num_hidden_layers":2,"vocab_size":100,"a":[Infinity,-Infinity,NaN],"s":"Infinity NaN \"NaN\"","b":{"x":-Infinity}}`
	m, err := FromConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	a := m.Raw["a"].([]any)
	if a[0] != PosInf || a[1] != NegInf || a[2] != NaN || !math.IsNaN(a[2].(NonFinite).Float()) {
		t.Errorf("a = %#v", a)
	}
	if s := m.Raw["s"]; s != `Infinity NaN "NaN"` {
		t.Errorf("string with Infinity inside changed: %q", s)
	}
	if m.Raw["b"].(map[string]any)["x"] != NegInf {
		t.Errorf("b.x = %#v", m.Raw["b"])
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(llamaMinimal), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "config.json")} {
		m, err := Load(p)
		if err != nil || m.Hidden != 64 || m.Name != filepath.Base(dir) {
			t.Errorf("Load(%s) = %v (name %q), %v", p, m, m.Name, err)
		}
	}
	// A config file with its own name is named after itself.
	other := filepath.Join(dir, "org--tiny-llama.json")
	if err := os.WriteFile(other, []byte(llamaMinimal), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := Load(other); err != nil || m.Name != "org--tiny-llama" {
		t.Errorf("Load(%s): name %q, %v", other, m.Name, err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no config.json") {
		t.Errorf("Load(empty dir) error = %v", err)
	}
	if _, err := Load("no/such/model"); err == nil || !strings.Contains(err.Error(), "neither a file, a directory nor a preset") || !strings.Contains(err.Error(), "meta-llama/Llama-2-7b-hf") {
		t.Errorf("Load(missing) error = %v", err)
	}
	m, err := Load("META-LLAMA/llama-2-7b-HF")
	if err != nil || m.Name != "meta-llama/Llama-2-7b-hf" || len(m.Layers) != 32 {
		t.Errorf("Load(preset) = %+v, %v", m, err)
	}
	bad := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(bad, []byte(`{"architectures":["LlamaForCausalLM"]}`), 0o644)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), `missing "hidden_size"`) {
		t.Errorf("Load(bad) error = %v, want the path and the missing field", err)
	}
}
