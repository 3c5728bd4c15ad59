// Package published describes the released models that the estimator's
// ground truth and published serving tables name, by their HuggingFace ids:
// a compact table of their config.json values (Describe), the suffixes and
// shape-identical aliases published ids carry (DescribePublished), and the
// ids themselves (Known). It is data about models, beside package
// architecture, so that the --model resolver (modelref) and the estimator's
// ground truth (estimate/groundtruth) share it without depending on each
// other.
package published

import (
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// shape is a compact description of a uniform decoder from its public
// config.json (HuggingFace), enough for the estimator.
type shape struct {
	layers, hidden, heads, kv, headDim, ffn, vocab int
	tied, qkvBias, qkNorm                          bool
	experts, topK, expertFFN                       int
	window                                         int  // sliding window (Mistral-7B-v0.1: 4096 on every layer)
	altWindow                                      bool // window on even layers only (gpt-oss)
	attnBias                                       bool
}

// shapes maps the model ids found in the ground-truth files to their
// config.json values. Ids not listed are skipped and counted.
var shapes = map[string]shape{
	"meta-llama/Llama-3.1-8B":        {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 14336, vocab: 128256},
	"meta-llama/Llama-3.1-70B":       {layers: 80, hidden: 8192, heads: 64, kv: 8, headDim: 128, ffn: 28672, vocab: 128256},
	"meta-llama/Meta-Llama-3-8B":     {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 14336, vocab: 128256},
	"meta-llama/Meta-Llama-3-70B":    {layers: 80, hidden: 8192, heads: 64, kv: 8, headDim: 128, ffn: 28672, vocab: 128256},
	"meta-llama/Llama-2-7b-hf":       {layers: 32, hidden: 4096, heads: 32, kv: 32, headDim: 128, ffn: 11008, vocab: 32000},
	"meta-llama/Llama-2-70b-hf":      {layers: 80, hidden: 8192, heads: 64, kv: 8, headDim: 128, ffn: 28672, vocab: 32000},
	"mistralai/Mistral-7B-v0.1":      {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 14336, vocab: 32000, window: 4096},
	"mistralai/Mixtral-8x7B-v0.1":    {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, vocab: 32000, experts: 8, topK: 2, expertFFN: 14336},
	"Qwen/Qwen2-7B":                  {layers: 28, hidden: 3584, heads: 28, kv: 4, headDim: 128, ffn: 18944, vocab: 152064, qkvBias: true},
	"Qwen/Qwen2-72B":                 {layers: 80, hidden: 8192, heads: 64, kv: 8, headDim: 128, ffn: 29568, vocab: 152064, qkvBias: true},
	"Qwen/Qwen3-32B":                 {layers: 64, hidden: 5120, heads: 64, kv: 8, headDim: 128, ffn: 25600, vocab: 151936, qkNorm: true},
	"Qwen/Qwen3-235B-A22B":           {layers: 94, hidden: 4096, heads: 64, kv: 4, headDim: 128, vocab: 151936, qkNorm: true, experts: 128, topK: 8, expertFFN: 1536},
	"huggyllama/llama-7b":            {layers: 32, hidden: 4096, heads: 32, kv: 32, headDim: 128, ffn: 11008, vocab: 32000},
	"Qwen/Qwen1.5-7B":                {layers: 32, hidden: 4096, heads: 32, kv: 32, headDim: 128, ffn: 11008, vocab: 151936, qkvBias: true},
	"BAAI/Aquila-7B":                 {layers: 32, hidden: 4096, heads: 32, kv: 32, headDim: 128, ffn: 11008, vocab: 100008},
	"meta-llama/Meta-Llama-3.1-8B":   {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 14336, vocab: 128256},
	"meta-llama/Meta-Llama-3.1-70B":  {layers: 80, hidden: 8192, heads: 64, kv: 8, headDim: 128, ffn: 28672, vocab: 128256},
	"meta-llama/Meta-Llama-3.1-405B": {layers: 126, hidden: 16384, heads: 128, kv: 8, headDim: 128, ffn: 53248, vocab: 128256},
	"Qwen/Qwen3-8B":                  {layers: 36, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 12288, vocab: 151936, qkNorm: true},
	"Qwen/Qwen3-30B-A3B":             {layers: 48, hidden: 2048, heads: 32, kv: 4, headDim: 128, vocab: 151936, qkNorm: true, experts: 128, topK: 8, expertFFN: 768},
	"openai/gpt-oss-120b": {layers: 36, hidden: 2880, heads: 64, kv: 8, headDim: 64, vocab: 201088, experts: 128, topK: 4, expertFFN: 2880,
		window: 128, altWindow: true, attnBias: true},
	"openai/gpt-oss-20b": {layers: 24, hidden: 2880, heads: 64, kv: 8, headDim: 64, vocab: 201088, experts: 32, topK: 4, expertFFN: 2880,
		window: 128, altWindow: true, attnBias: true},
	// MiniMaxAI/MiniMax-M2.5 (MiniMaxM2ForCausalLM): full attention with
	// per-layer qk-norm, 256 experts, no shared expert, untied head; the
	// published FP8 checkpoint is block-scaled (128×128).
	"MiniMaxAI/MiniMax-M2.5": {layers: 62, hidden: 3072, heads: 48, kv: 8, headDim: 128, vocab: 200064, qkNorm: true,
		experts: 256, topK: 8, expertFFN: 1536},
	"meta-llama/Llama-3.1-8B-Instruct": {layers: 32, hidden: 4096, heads: 32, kv: 8, headDim: 128, ffn: 14336, vocab: 128256},
}

// Canonical strips quantization and instruct suffixes that do not change
// the shape: "nvidia/Llama-3.1-8B-Instruct-FP8" → "meta-llama/Llama-3.1-8B".
func Canonical(id string) string {
	s := id
	for _, suf := range []string{"-FP8", "-NVFP4", "-Instruct", "-hf"} {
		s = strings.TrimSuffix(s, suf)
	}
	switch {
	case strings.HasPrefix(s, "nvidia/Llama-3.1-"):
		s = "meta-llama/" + strings.TrimPrefix(s, "nvidia/")
	case strings.HasPrefix(s, "nvidia/Qwen3-"):
		s = "Qwen/" + strings.TrimPrefix(s, "nvidia/")
	case strings.HasPrefix(s, "Qwen/Qwen3-235B-A22B"):
		s = "Qwen/Qwen3-235B-A22B"
	}
	if s == "meta-llama/Llama-2-7b" || s == "meta-llama/Llama-2-70b" {
		s += "-hf"
	}
	return s
}

// Describe returns the architecture of a model id found in the ground-truth
// files (or one of a few common presets), built from its config.json values.
func Describe(id string) (*architecture.Model, bool) {
	sh, ok := shapes[id]
	if !ok {
		sh, ok = shapes[Canonical(id)]
	}
	if !ok {
		return nil, false
	}
	m := &architecture.Model{Name: id, Vocab: sh.vocab, Hidden: sh.hidden, TiedEmbeddings: sh.tied,
		Norm: architecture.RMSNorm, DType: "bfloat16", Layers: make([]architecture.Layer, sh.layers)}
	for i := range m.Layers {
		l := &m.Layers[i]
		win := sh.window
		if sh.altWindow && i%2 == 1 {
			win = 0
		}
		l.Attention = &architecture.Attention{Heads: sh.heads, KVHeads: sh.kv, HeadDim: sh.headDim,
			QKVBias: sh.qkvBias || sh.attnBias, OutBias: sh.attnBias, QKNorm: sh.qkNorm, SlidingWindow: win,
			Sinks: sh.attnBias}
		if sh.experts > 0 {
			l.MoE = &architecture.MoE{Experts: sh.experts, TopK: sh.topK, ExpertWidth: sh.expertFFN, Gated: true, Activation: "silu",
				RouterBias: sh.attnBias, ExpertBias: sh.attnBias}
		} else {
			l.MLP = &architecture.MLP{Width: sh.ffn, Gated: true, Activation: "silu"}
		}
	}
	return m, true
}

// sameShape maps released checkpoints whose config.json has exactly the
// architecture of a model Describe knows (layers, widths, heads, vocabulary,
// bias and norm layout; only the weights, rope scaling or quantization
// differ) to that model. Only shape-identical pairs belong here.
var sameShape = map[string]string{
	// Qwen2.5-7B: 28 layers, hidden 3584, 28 heads / 4 KV, FFN 18944, vocab 152064, QKV bias.
	"Qwen/Qwen2.5-7B": "Qwen/Qwen2-7B",
	// Qwen2.5-72B: 80 layers, hidden 8192, 64 / 8 heads, FFN 29568, vocab 152064, QKV bias.
	"Qwen/Qwen2.5-72B": "Qwen/Qwen2-72B",
	// Llama 3.3 70B has Llama 3.1 70B's config.json shape.
	"meta-llama/Llama-3.3-70B":           "meta-llama/Llama-3.1-70B",
	"nvidia/Llama-3.3-70B-Instruct-FP4":  "meta-llama/Llama-3.1-70B",
	"nvidia/Llama-3.3-70B-Instruct-FP8":  "meta-llama/Llama-3.1-70B",
	"nvidia/Llama-3.1-405B-Instruct-FP4": "meta-llama/Meta-Llama-3.1-405B",
	"nvidia/Llama-3.1-405B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-405B",
	"nvidia/Qwen3-30B-A3B-FP4":           "Qwen/Qwen3-30B-A3B",
	"nvidia/Qwen3-235B-A22B-FP4":         "Qwen/Qwen3-235B-A22B",
	"nvidia/Qwen3-235B-A22B-FP8":         "Qwen/Qwen3-235B-A22B",
	// RedHatAI (Neural Magic) llm-compressor checkpoints keep the base
	// config.json and add only a compressed-tensors quantization_config;
	// their suffixes (-fp8-dynamic, -quantized.w8a8, -quantized.w4a16,
	// -Instruct) are stripped before this lookup. Checked against
	// llm-d-planner@d3121e05's vLLM 0.19.0 logs, which resolve
	// LlamaForCausalLM / Qwen2ForCausalLM and whose KV pools match the base
	// shapes to the token: Llama-3.3-70B-Instruct-fp8-dynamic 244,304 tokens
	// in 37.28 GiB at TP 2 (80 layers x 4 KV heads per GPU x 128 x 2 x 2 B);
	// Qwen2.5-7B-Instruct-fp8-dynamic 1,210,304 and -quantized.w8a8 1,210,272
	// tokens in 64.64 GiB (28 x 4 x 128 x 2 x 2 B). Meta-Llama-3.1-8B-Instruct
	// -quantized.w8a8 / .w4a16 were not checked against a log or a config.json
	// here; they rest on llm-compressor copying the base config.json.
	"RedHatAI/Llama-3.3-70B":     "meta-llama/Llama-3.1-70B",
	"RedHatAI/Qwen2.5-7B":        "Qwen/Qwen2-7B",
	"RedHatAI/Meta-Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
	// Mixtral-8x7B-Instruct-v0.1 has the base v0.1's config.json
	// (MixtralForCausalLM, 32 layers, hidden 4096, 32 / 8 heads x 128, 8
	// experts top-2 of width 14336, as printed by a MixtralConfig dump of
	// "mistralai/Mixtral-8x7B-Instruct-v0.1" in the code index; vocab 32000
	// as published, not re-read here). Stripping "-Instruct-v0.1" would give
	// an id Describe does not know.
	"mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
	// Qwen3-Coder-30B-A3B-Instruct (ztxz16/fastllm@f8f04c33:
	// Qwen3-Coder-30B-A3B-Instruct/config.json): Qwen3MoeForCausalLM, 48
	// layers, hidden 2048, 32 / 4 heads x 128, 128 experts top-8 of width 768,
	// no shared expert, vocab 151936, untied, qk-norm, as Qwen3-30B-A3B; only
	// max_position_embeddings (262144) and rope_theta (1e7) differ.
	"Qwen/Qwen3-Coder-30B-A3B": "Qwen/Qwen3-30B-A3B",
}

// DescribePublished resolves a model id as published tables and logs write
// it: Describe, then with its quantization and chat suffixes stripped, then
// the shape-identical aliases, then the architecture presets.
func DescribePublished(id string) (*architecture.Model, bool) {
	if m, ok := Describe(id); ok {
		return m, true
	}
	base := id
	for changed := true; changed; {
		changed = false
		for _, suf := range []string{"-GPTQ-Int4", "-GPTQ-Int8", "-AWQ", "-FP8", "-FP4", "-NVFP4", "-fp8-dynamic",
			"-FP8-dynamic", "-FP8-Dynamic", "-quantized.w8a8", "-quantized.w4a16", "-Chat", "-Instruct"} {
			if s, ok := strings.CutSuffix(base, suf); ok {
				base, changed = s, true
			}
		}
	}
	if m, ok := Describe(base); ok {
		return m, true
	}
	for _, k := range []string{id, base} {
		if a, ok := sameShape[k]; ok {
			if m, ok := Describe(a); ok {
				return m, true
			}
		}
	}
	for _, k := range []string{id, base} {
		if m, err := architecture.Preset(k); err == nil {
			return m, true
		}
	}
	return nil, false
}

// Known returns the model ids Describe accepts.
func Known() []string {
	out := make([]string, 0, len(shapes))
	for k := range shapes {
		out = append(out, k)
	}
	return out
}
