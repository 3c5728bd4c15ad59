package estimate

import (
	"fmt"
	"sort"
	"strings"
)

// Precision is a deployed weight format: effective bits per weight for each
// tensor class (scales included) and the tensor-core data type its matrix
// products run in.
type Precision struct {
	Name string
	// LinearBPW covers the projection matrices of attention, MLP, MoE and Mamba.
	LinearBPW float64
	// EmbedBPW and HeadBPW cover the token embedding and the LM head.
	EmbedBPW, HeadBPW float64
	// SmallBPW covers norms, biases and Mamba's small vectors (F32 in GGUF).
	SmallBPW float64
	// Compute is the GEMM data type: "bf16", "fp8" or "fp4" (see hardware.GPU.PeakFLOPS).
	Compute string
	// GGUF marks llama.cpp formats.
	GGUF bool
	// Block marks block-scaled FP8 (one scale per 128×128 tile), whose
	// kernels the engine families price with their own Block coefficient.
	Block bool
	// ExpertsOnly keeps the non-expert projections of MoE layers (attention,
	// router, shared experts) in BF16, as gpt-oss's MXFP4 checkpoints do
	// (quantization_config.modules_to_not_convert); dense layers use LinearBPW.
	ExpertsOnly bool
	// OtherBPW, when > 0, holds every projection that is not a routed
	// expert's — attention, router, shared experts, dense MLPs, Mamba — at
	// OtherBPW instead (llama.cpp's MXFP4_MOE: Q8_0).
	OtherBPW float64
	Note     string
}

// Effective bits per weight (costmodel.md §3.1). Embeddings and the LM head
// stay in BF16 in the HF-quantized formats (vLLM, SGLang and TRT-LLM load them
// unquantized); llama.cpp writes token_embd in the base type and output.weight
// in Q6_K for the k-quant mixes and Q4_0/Q8_0.
var precisions = map[string]Precision{
	"bf16": {Name: "bf16", LinearBPW: 16, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "bf16"},
	"fp16": {Name: "fp16", LinearBPW: 16, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "bf16"},
	"fp8": {Name: "fp8", LinearBPW: 8.002, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "fp8",
		Note: "8 bits + per-tensor or per-channel scales"},
	"fp8-block": {Name: "fp8-block", LinearBPW: 8.002, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "fp8", Block: true,
		Note: "8 bits + one FP32 scale per 128×128 tile (weight_block_size [128, 128], as DeepSeek-V3, Qwen3-FP8 and MiniMax-M2 ship)"},
	"nvfp4": {Name: "nvfp4", LinearBPW: 4.5, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "fp4",
		Note: "4 bits + one FP8 scale per 16"},
	"mxfp4": {Name: "mxfp4", LinearBPW: 4.25, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "fp4", ExpertsOnly: true,
		Note: "4 bits + one E8M0 scale per 32; in MoE layers only the experts (gpt-oss keeps attention and router in BF16)"},
	// llama.cpp's MXFP4_MOE file type, as gpt-oss's GGUFs ship
	// (ggml-org/llama.cpp @007dbbf3fd17eefe9b47fee45f48f7ba5e62b714 :
	// src/llama-quant.cpp, llama_tensor_get_type_impl: "MoE tensors ->
	// MXFP4, other tensors -> Q8_0", the output tensor Q8_0;
	// tensor_allows_quantization keeps norms and the router
	// ffn_gate_inp unquantized): MXFP4 (17 B per 32 weights) for the
	// routed experts, Q8_0 (34 B per 32) for every other matrix and the
	// embedding and head, norms F32.
	"mxfp4_moe": {Name: "mxfp4_moe", LinearBPW: 4.25, EmbedBPW: 8.5, HeadBPW: 8.5, SmallBPW: 32, Compute: "bf16", GGUF: true,
		ExpertsOnly: true, OtherBPW: 8.5,
		Note: "GGUF MXFP4_MOE: routed experts MXFP4, every other matrix Q8_0, norms F32"},
	"int4-awq": {Name: "int4-awq", LinearBPW: 4.156, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "bf16",
		Note: "W4A16, group 128: FP16 scale + 4-bit zero per group (derived)"},
	"int4-gptq": {Name: "int4-gptq", LinearBPW: 4.156, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 16, Compute: "bf16",
		Note: "W4A16, group 128: FP16 scale + packed 4-bit zero per group (derived)"},
	"q4_0": {Name: "q4_0", LinearBPW: 4.5, EmbedBPW: 4.5, HeadBPW: 6.5625, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "18 B per 32 weights; output.weight Q6_K"},
	"q4_k_m": {Name: "q4_k_m", LinearBPW: 4.81, EmbedBPW: 4.5, HeadBPW: 6.5625, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "Q4_K mix with some Q6_K tensors: 4.9 bpw over a Llama-3-8B file (derived for linear tensors)"},
	"q5_k_m": {Name: "q5_k_m", LinearBPW: 5.66, EmbedBPW: 5.5, HeadBPW: 6.5625, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "Q5_K mix with some Q6_K tensors (derived from a 5.73 GB Llama-3-8B file)"},
	"q6_k": {Name: "q6_k", LinearBPW: 6.5625, EmbedBPW: 6.5625, HeadBPW: 6.5625, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "210 B per 256 weights"},
	"q8_0": {Name: "q8_0", LinearBPW: 8.5, EmbedBPW: 8.5, HeadBPW: 8.5, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "34 B per 32 weights"},
	"f16": {Name: "f16", LinearBPW: 16, EmbedBPW: 16, HeadBPW: 16, SmallBPW: 32, Compute: "bf16", GGUF: true,
		Note: "GGUF F16; norms F32"},
}

// Precisions returns the known precision names, sorted.
func Precisions() []string {
	out := make([]string, 0, len(precisions))
	for n := range precisions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupPrecision returns the named precision ("Q4_K_M", "int4_awq" and
// "fp4" are accepted spellings).
func LookupPrecision(name string) (Precision, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "int4_awq", "awq":
		n = "int4-awq"
	case "int4_gptq", "gptq":
		n = "int4-gptq"
	case "fp4":
		n = "nvfp4"
	case "fp8_block", "fp8block", "block-fp8":
		n = "fp8-block"
	case "bfloat16":
		n = "bf16"
	case "float16":
		n = "fp16"
	}
	p, ok := precisions[n]
	if !ok {
		return Precision{}, &UnknownError{Kind: "precision", Name: name, Valid: Precisions()}
	}
	return p, nil
}

// KVType is the data type of the KV cache.
type KVType struct {
	Name  string
	Bytes float64 // bytes per element (scales included)
}

var kvTypes = map[string]KVType{
	"bf16": {"bf16", 2}, "fp16": {"fp16", 2}, "f16": {"f16", 2}, "fp8": {"fp8", 1},
	"q8_0": {"q8_0", 8.5 / 8}, "q4_0": {"q4_0", 4.5 / 8}, "fp32": {"fp32", 4},
}

// LookupKVType returns a KV-cache type; "" or "auto" is the model dtype (2 bytes).
func LookupKVType(name string) (KVType, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" || n == "auto" {
		return kvTypes["bf16"], nil
	}
	if n == "fp8_e4m3" || n == "fp8_e5m2" {
		n = "fp8"
	}
	t, ok := kvTypes[n]
	if !ok {
		names := make([]string, 0, len(kvTypes)+1)
		for k := range kvTypes {
			names = append(names, k)
		}
		names = append(names, "auto")
		sort.Strings(names)
		return KVType{}, &UnknownError{Kind: "KV cache dtype", Name: name, Valid: names}
	}
	return t, nil
}

// UnknownError reports a name that is not one of the valid choices.
type UnknownError struct {
	Kind  string
	Name  string
	Valid []string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown %s %q; valid: %s", e.Kind, e.Name, strings.Join(e.Valid, ", "))
}
