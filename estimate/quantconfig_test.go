package estimate_test

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/workload"
)

// llamaConfig is Meta-Llama-3.1-8B's config.json (../shared/data/configs)
// with its closing brace cut off, so that a quantization_config can follow.
const llamaConfig = `{"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
 "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
 "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
 "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256`

// quantConfigs are quantization_config objects in the shapes the published
// checkpoints ship, one per declared form. They go through
// architecture.FromConfig, which decodes numbers as json.Number, as every
// config the CLI reads does.
var quantConfigs = []struct {
	name, q, want string
}{
	// HF FineGrainedFP8 (Qwen/Qwen3-8B-FP8, Qwen3-235B-A22B-FP8).
	{"fp8 block (Qwen3-FP8)", `{"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}`, "fp8-block"},
	{"fp8 per-tensor", `{"activation_scheme": "static", "quant_method": "fp8"}`, "fp8"},
	{"fbgemm fp8 (Meta-Llama-3.1-405B-Instruct-FP8)", `{"activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"], "quant_method": "fbgemm_fp8"}`, "fp8"},
	// gpt-oss.
	{"mxfp4 (gpt-oss)", `{"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}`, "mxfp4"},
	// AutoAWQ (hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4) and its older spelling.
	{"awq 4-bit", `{"bits": 4, "group_size": 128, "modules_to_not_convert": null, "quant_method": "awq", "version": "gemm", "zero_point": true}`, "int4-awq"},
	{"awq w_bit", `{"w_bit": 4, "q_group_size": 128, "quant_method": "awq", "version": "GEMM", "zero_point": true}`, "int4-awq"},
	// AutoGPTQ / GPTQModel (hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4).
	{"gptq 4-bit", `{"bits": 4, "checkpoint_format": "gptq", "damp_percent": 0.01, "desc_act": true, "group_size": 128, "quant_method": "gptq", "static_groups": false, "sym": true, "true_sequential": true}`, "int4-gptq"},
	{"gptq 8-bit", `{"bits": 8, "group_size": 128, "quant_method": "gptq", "sym": true}`, ""},
	// NVIDIA ModelOpt: older flat form (nvidia/Llama-3.1-8B-Instruct-FP8) and
	// the config_groups form of the FP4 checkpoints (nvidia/Llama-3.3-70B-Instruct-FP4).
	{"modelopt fp8", `{"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"], "quant_method": "modelopt"}`, "fp8"},
	{"modelopt nvfp4", `{"config_groups": {"group_0": {"input_activations": {"dynamic": false, "num_bits": 4, "type": "float", "group_size": 16},
	  "weights": {"dynamic": false, "num_bits": 4, "type": "float", "group_size": 16}, "targets": ["Linear"]}},
	  "ignore": ["lm_head"], "quant_algo": "NVFP4", "producer": {"name": "modelopt", "version": "0.29.0"}, "quant_method": "modelopt"}`, "nvfp4"},
	{"modelopt w4a8", `{"quant_algo": "W4A8_AWQ", "quant_method": "modelopt"}`, ""},
	// llm-compressor compressed-tensors (RedHatAI checkpoints).
	{"compressed-tensors fp8 dynamic", `{"config_groups": {"group_0": {"input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "float"},
	  "output_activations": null, "targets": ["Linear"], "weights": {"dynamic": false, "num_bits": 8, "observer": "minmax", "strategy": "channel", "symmetric": true, "type": "float"}}},
	  "format": "float-quantized", "ignore": ["lm_head"], "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}`, "fp8"},
	{"compressed-tensors fp8 block", `{"config_groups": {"group_0": {"input_activations": {"dynamic": true, "group_size": 128, "num_bits": 8, "strategy": "group", "type": "float"},
	  "targets": ["Linear"], "weights": {"block_structure": [128, 128], "dynamic": false, "num_bits": 8, "strategy": "block", "symmetric": true, "type": "float"}}},
	  "format": "float-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors", "quantization_status": "compressed"}`, "fp8-block"},
	{"compressed-tensors w4a16", `{"config_groups": {"group_0": {"input_activations": null, "output_activations": null, "targets": ["Linear"],
	  "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 128, "num_bits": 4, "observer": "minmax", "strategy": "group", "symmetric": true, "type": "int"}}},
	  "format": "pack-quantized", "ignore": ["lm_head"], "kv_cache_scheme": null, "quant_method": "compressed-tensors", "quantization_status": "compressed"}`, "int4-gptq"},
	{"compressed-tensors nvfp4", `{"config_groups": {"group_0": {"input_activations": {"dynamic": "local", "group_size": 16, "num_bits": 4, "strategy": "tensor_group", "symmetric": true, "type": "float"},
	  "targets": ["Linear"], "weights": {"dynamic": false, "group_size": 16, "num_bits": 4, "observer": "minmax", "strategy": "tensor_group", "symmetric": true, "type": "float"}}},
	  "format": "nvfp4-pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors", "quantization_status": "compressed"}`, "nvfp4"},
	{"compressed-tensors mxfp4", `{"config_groups": {"group_0": {"targets": ["Linear"], "weights": {"dynamic": false, "group_size": 32, "num_bits": 4, "strategy": "group", "symmetric": true, "type": "float"}}},
	  "format": "mxfp4-pack-quantized", "quant_method": "compressed-tensors"}`, "mxfp4"},
	{"compressed-tensors w8a8 int8", `{"config_groups": {"group_0": {"input_activations": {"dynamic": true, "num_bits": 8, "strategy": "token", "symmetric": true, "type": "int"},
	  "targets": ["Linear"], "weights": {"dynamic": false, "num_bits": 8, "strategy": "channel", "symmetric": true, "type": "int"}}},
	  "format": "int-quantized", "quant_method": "compressed-tensors"}`, ""},
	{"bitsandbytes", `{"bnb_4bit_compute_dtype": "bfloat16", "load_in_4bit": true, "quant_method": "bitsandbytes"}`, ""},
	{"no method", `{"bits": 4}`, ""},
}

func TestConfigPrecision(t *testing.T) {
	for _, tc := range quantConfigs {
		t.Run(tc.name, func(t *testing.T) {
			m, err := architecture.FromConfig([]byte(llamaConfig + `, "quantization_config": ` + tc.q + `}`))
			if err != nil {
				t.Fatal(err)
			}
			got, err := estimate.ConfigPrecision(m.Raw)
			if tc.want == "" {
				var qe *estimate.QuantConfigError
				if !errors.As(err, &qe) || got != "" {
					t.Fatalf("got %q, %v; want a *QuantConfigError (no silent bf16)", got, err)
				}
				if !strings.Contains(err.Error(), "pass the deployed one as the precision") || !strings.Contains(qe.Spell(func(n string) string { return "--" + n }), "with --precision") {
					t.Errorf("error %q does not say how to proceed (the precision, spelled --precision by a command)", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if _, err := estimate.LookupPrecision(got); err != nil {
				t.Errorf("%q is not a known precision: %v", got, err)
			}
		})
	}
	m, err := architecture.FromConfig([]byte(llamaConfig + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := estimate.ConfigPrecision(m.Raw); got != "" || err != nil {
		t.Errorf("no quantization_config: %q, %v; want \"\", nil", got, err)
	}
}

// TestConfigPrecisionShared reads the real configs of ../shared/data/configs:
// the gpt-oss ones declare MXFP4; the others declare nothing.
func TestConfigPrecisionShared(t *testing.T) {
	dir, ok := shareddata.Path("configs")
	if !ok {
		t.Skip("shared data configs/ not found (../shared/data or $AUTOCOMPRESS_SHARED_DATA); skipping")
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		m, err := architecture.Load(dir + "/" + e.Name())
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		want := ""
		if strings.HasPrefix(e.Name(), "openai--gpt-oss") {
			want = "mxfp4"
		}
		got, err := estimate.ConfigPrecision(m.Raw)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", e.Name(), got, err, want)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no configs in %s", dir)
	}
}

// gptOSS20bGGUF is the size of gpt-oss-20b's MXFP4 GGUF
// (lmstudio-community/gpt-oss-20b-GGUF/gpt-oss-20b-MXFP4.gguf, 12,109,565,632
// bytes, as docusealco/rllama @e8baf3b91daf30b02e11fcc0ec0338ea87406a18 :
// lib/rllama/cli.rb, POPULAR_MODELS, lists it): the weights plus a few MB
// of metadata and vocabulary.
const gptOSS20bGGUF = 12_109_565_632

// TestLlamaCppMXFP4: on llama.cpp a gpt-oss checkpoint (quantization_config
// MXFP4) is priced as its GGUF, mxfp4_moe — the routed experts MXFP4,
// every other matrix Q8_0 (ggml-org/llama.cpp src/llama-quant.cpp,
// llama_tensor_get_type_impl) — not as f16: gpt-oss-20b's weights within
// 2 % of the published GGUF's size, and it fits a 32 GB card. An explicit
// --precision still wins; a dense model refuses mxfp4_moe.
func TestLlamaCppMXFP4(t *testing.T) {
	dir, ok := shareddata.Path("configs")
	if !ok {
		t.Skip("shared data configs/ not found (../shared/data or $AUTOCOMPRESS_SHARED_DATA); skipping")
	}
	m, err := architecture.Load(dir + "/openai--gpt-oss-20b.json")
	if err != nil {
		t.Fatal(err)
	}
	hw, err := hardware.Lookup("rtx-5090")
	if err != nil {
		t.Fatal(err)
	}
	w := workload.FixedClosed(1024, 256, 1)
	r, err := estimate.Estimate(m, hw, estimate.LlamaCPP, estimate.Options{}, &w)
	if err != nil {
		t.Fatalf("gpt-oss-20b on an RTX 5090 with llama.cpp: %v", err)
	}
	if !r.PrecisionFromConfig || r.Memory.Precision != "mxfp4_moe" {
		t.Errorf("precision %q (from config %v), want mxfp4_moe from the config", r.Memory.Precision, r.PrecisionFromConfig)
	}
	if got := r.Memory.WeightsBytes; math.Abs(got/gptOSS20bGGUF-1) > 0.02 {
		t.Errorf("weights %.3f GB, the published GGUF %.3f GB", got/1e9, gptOSS20bGGUF/1e9)
	}
	f16, err := estimate.Estimate(m, hw, estimate.LlamaCPP, estimate.Options{Precision: "f16"}, &w)
	if err == nil || f16 == nil || f16.Memory.WeightsBytes < 3*r.Memory.WeightsBytes {
		t.Errorf("--precision f16: %v; want the f16 weights (≈ 39 GiB), which do not fit", err)
	}
	dense, err := architecture.Load(dir + "/meta-llama--Meta-Llama-3.1-8B.json")
	if err != nil {
		t.Fatal(err)
	}
	var ue *estimate.UnsupportedError
	if _, err := estimate.Estimate(dense, hw, estimate.LlamaCPP, estimate.Options{Precision: "mxfp4_moe"}, &w); !errors.As(err, &ue) {
		t.Errorf("a dense model in mxfp4_moe: %v", err)
	}
	if r, err := estimate.Estimate(dense, hw, estimate.LlamaCPP, estimate.Options{}, &w); err != nil || r.Memory.Precision != "f16" {
		t.Errorf("a dense model without quantization_config: %v, precision %q; want f16", err, r.Memory.Precision)
	}
}
