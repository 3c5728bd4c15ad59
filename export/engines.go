// Package export knows the checkpoint formats a pruned child can be served
// in and re-implements, per serving engine, the shape rules that engine
// enforces when it loads a checkpoint, so that an export that would fail to
// load is caught before it is shipped.
//
// # Formats
//
// A uniform child is written in its parent's native architecture
// (LlamaForCausalLM, Qwen3ForCausalLM, NemotronHForCausalLM, ...). A
// Llama-family child with per-layer KV groups, FFN widths or removed
// sub-blocks is written as DeciLMForCausalLM block_configs, whose FFN widths
// are multiples of 256 (DeciLMFFNWidth / FFNMult round-trip them exactly). Any
// other per-layer child is made uniform by zero padding (the prune package
// does that).
//
// # Validators
//
// ValidateDir checks a checkpoint directory for one engine (Engines lists
// them: vllm, sglang, trtllm, llamacpp, hf, native) and returns a *Report listing
// every violation, each naming the layer, the rule and what to change.
// Capabilities are data (Capabilities), not code, so the search can use the
// same table to avoid proposing shapes an engine cannot load. The rules an
// engine's loader applies to DeciLM children beyond the format (SGLang's
// uniform KV groups, vLLM's and SGLang's first-block attention, llama.cpp's
// attention without FFN and its converter's tokenizer path) are LoaderRule
// facts of its entry, each saying what the loader does, as read in its
// source (prune/PLAN.md, "Engine load rules").
package export

import (
	"fmt"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

// Capabilities is what one serving engine loads, as read from its source
// (serving-formats.md §3). Items marked (verify) there are encoded as the
// documented expectation.
type Capabilities struct {
	Name string
	// Native lists the architecture classes the engine serves natively.
	Native []string
	// EngineFamilies: the engine serves natively the families that package
	// engine runs (architecture.Family.Engine) in their own uniform config
	// format, read from the family table when asked, so a family added
	// later is included.
	EngineFamilies bool
	// DeciLM: loads DeciLMForCausalLM / nemotron-nas block_configs.
	DeciLM bool
	// FFNIntermediateSize: builds an FFN's width from
	// block_configs[i].ffn.intermediate_size when the block gives it;
	// engines without it build it from ffn_mult (FFNMultReader says how).
	FFNIntermediateSize bool
	// FFNMultReader says, for an engine without FFNIntermediateSize, how
	// its loader reads the FFN width, as read in its source (the message
	// of an intermediate_size-only block).
	FFNMultReader string
	// FFNMultAttribute: the engine reads ffn_mult as an attribute of the
	// configuration module's block object, and the module prune writes
	// derives it from an intermediate_size that round-trips (prune/PLAN.md,
	// "Remote code of a DeciLM child"); so an intermediate_size-only block
	// of such a width is a warning (another module may not derive it), not
	// a violation.
	FFNMultAttribute bool
	// FFNMultFirst (nil: none): the engine reads intermediate_size only
	// where the block object has no ffn_mult attribute, which depends on
	// the configuration module beside the weights, so FFNIntermediateSize
	// is only half true: an intermediate_size-only block is a warning.
	FFNMultFirst *LoaderRule
	// LinearAttention / LinearFFN: loads replace_with_linear sub-blocks.
	LinearAttention, LinearFFN bool
	// DeciLMBias: honours attention_bias in DeciLM checkpoints.
	DeciLMBias bool
	// DeciLMHeadDimRule: derives head_dim as hidden_size/num_attention_heads
	// for DeciLM (llama.cpp's converter), so an explicit other head_dim breaks.
	DeciLMHeadDimRule bool
	// KVPageRatios: prefers per-layer KV-group counts whose cache pages
	// divide each other (older vLLM V1 page-size unification); a warning.
	KVPageRatios bool
	// RemoteCode: the engine builds a DeciLM config through transformers'
	// AutoConfig with the child's auto_map, so the configuration module
	// (and what it imports) must be beside the weights; its loader then
	// reads block_configs as the objects that module builds
	// (prune/PLAN.md, "Engine load rules").
	RemoteCode bool
	// DeciLMUniformKV, DeciLMFirstAttention and DeciLMAttentionNeedsFFN
	// are the loader's rules on DeciLM block shapes (nil: the engine has
	// no such rule); each says what the loader does with a child that
	// breaks it. Loads applies them, so the search never proposes such a
	// child.
	//
	// DeciLMUniformKV: every attention block must have the same KV groups.
	DeciLMUniformKV *LoaderRule
	// DeciLMFirstAttention: the first block must keep its attention when
	// it keeps its FFN.
	DeciLMFirstAttention *LoaderRule
	// DeciLMAttentionNeedsFFN: a block whose FFN is removed must have its
	// attention removed too (the whole layer removed).
	DeciLMAttentionNeedsFFN *LoaderRule
	// DeciLMFloatFFNMult: the converter asserts that the first block's
	// ffn_mult is a float, so a JSON integer there (4, not 4.0) fails.
	// It needs the number as written, so the config checks (ValidateConfig,
	// ValidateDir) apply it, not Loads.
	DeciLMFloatFFNMult *LoaderRule
	// DeciLMTokenizer is the converter's rule on the tokenizer of a DeciLM
	// child (nil: none). It needs the child's tokenizer.json, so only
	// ValidateDir checks it; PerLayer assumes a parent whose vocabulary
	// takes that path fails it.
	DeciLMTokenizer *TokenizerRule
	// ByModelType: picks the model class from config.json's model_type
	// (transformers' Auto classes); the serving engines and llama.cpp's
	// converter read architectures[0] and refuse a config without it.
	ByModelType bool
	// Runs is the engine's own check of a model with Mamba2 mixers or MoE
	// blocks (nil: it takes them as the family's config has them): the
	// native engine's engine.Check, which runs Nemotron-H's Mamba2 mixers
	// and Qwen3-MoE's and Mixtral's MoE blocks and refuses the others
	// (gpt-oss routing, latent or sigmoid-routed experts, shared experts).
	Runs func(*architecture.Model) error
	// EvenLayerWindows: the engine's model class of one architecture
	// places the sliding window by layer index, not by config.json's
	// layer_types (nil: every class it has reads layer_types). A child of
	// that architecture must then keep windows on its even layers only:
	// removing one layer of an alternating parent shifts the pattern, and
	// the engine would compute the kept layers with the wrong attention
	// span.
	EvenLayerWindows *IndexWindows
	// ShardsTP: the engine shards every layer over the tensor-parallel
	// group, so the shape must split (architecture.Model.TPViolations);
	// the others do not shard layers by TP and its rules are not checked.
	// It agrees with estimate.EngineSpec.ShardsTP (TestTablesNameTheSameEngines).
	ShardsTP bool
}

// A LoaderRule is one rule an engine's loader applies to a DeciLM child,
// as read in the engine's source: its id in reports, what the loader does
// with a child that breaks it (file and function, and the commit read),
// and how to make a child that passes.
type LoaderRule struct {
	ID   string
	Does string
	Fix  string
}

// A TokenizerRule is a converter's rule on a DeciLM child's tokenizer:
// with vocab_size KeptVocab it takes the tokenizer as it is; with any
// other, tokenizer.json must have model type ModelType, byte_fallback
// when ByteFallback, and decoder type Decoder.
type TokenizerRule struct {
	LoaderRule
	KeptVocab    int
	ModelType    string
	ByteFallback bool
	Decoder      string
}

// The loaders' rules, as read in their source (versions of mid-2026, the
// commit in brackets; prune/PLAN.md "Engine load rules" has each in full).
var (
	// SGLang: ModelConfig.get_total_num_kv_heads collects the KV-head
	// count of every attention block that is not a no_op into a set and
	// raises when it has more than one.
	sglangUniformKV = &LoaderRule{ID: "decilm-uniform-kv",
		Does: `SGLang's ModelConfig.get_total_num_kv_heads (python/sglang/srt/configs/model_config.py, 001adf56) raises ValueError "Variable GQA (VGQA) is not yet supported for nemotron-nas in sglang" when the attention blocks' KV-head counts differ`,
		Fix:  "give every attention block the same KV groups (n_heads_in_group), or serve on vllm or trtllm, which load per-layer KV groups"}
	// vLLM and SGLang: the model starts with residual = None and only an
	// attention block sets it; a first block without attention hands
	// None to post_attention_layernorm, which then returns one tensor
	// where two are unpacked.
	vllmFirstAttention = &LoaderRule{ID: "decilm-first-attention",
		Does: "vLLM's DeciLMDecoderLayer.forward (vllm/model_executor/models/nemotron_nas.py, 00bd1493) sets the residual only in an attention block, so with attention no_op in the first block it calls post_attention_layernorm(hidden_states, None), which returns one tensor where two are unpacked: the forward pass fails",
		Fix:  "keep the first layer's attention (remove its MLP or the whole layer instead)"}
	// SGLang's GptOssDecoderLayer.__init__ (python/sglang/srt/models/
	// gpt_oss.py, 009c6808) passes layer_type=config.layer_types[layer_id]
	// to GptOssAttention, which windows exactly the sliding_attention
	// layers: it has no such rule.
	vllmGptOssWindows = &LoaderRule{ID: "gpt-oss-even-windows",
		Does: "vLLM's OAIAttention.__init__ (vllm/model_executor/models/gpt_oss.py, a6b6cfaa) sets sliding_window = config.sliding_window if self.layer_idx % 2 == 0 else None (so too at 0025d69b), ignoring layer_types: a gpt-oss layer is windowed exactly when its index is even, so a child whose layer_types do not alternate sliding, full from layer 0 loads but attends over the wrong spans",
		Fix:  "keep gpt-oss layers so that the windowed ones stay at even indices (remove layers in sliding/full pairs), or serve the child on SGLang, which reads layer_types"}
	sglangFirstAttention = &LoaderRule{ID: "decilm-first-attention",
		Does: "SGLang's DeciLMDecodeLayer.forward (python/sglang/srt/models/nemotron_nas.py, 15a024d4) sets the residual only in an attention block, so with attention no_op in the first block it calls post_attention_layernorm(hidden_states, None), which returns one tensor where two are unpacked: the forward pass fails",
		Fix:  "keep the first layer's attention (remove its MLP or the whole layer instead)"}
	// vLLM: DeciLMDecoderLayer.__init__ tests hasattr(ffn, "ffn_mult").
	vllmFFNMultFirst = &LoaderRule{ID: "decilm-ffn-mult-first",
		Does: `vLLM's DeciLMDecoderLayer.__init__ (vllm/model_executor/models/nemotron_nas.py, 00bd1493) reads ffn.intermediate_size only where the block object has no ffn_mult attribute (hasattr): the configuration module autocompress writes leaves it unset here, but NVIDIA's configuration_decilm.py gives every block ffn_mult=None, and vLLM then fails computing the width`,
		Fix:  "write ffn_mult beside intermediate_size, as prune does"}
	// llama.cpp: llm_build_deci `continue`s on n_ff == 0 before the
	// residual add and before inpL = cur.
	llamacppAttentionNeedsFFN = &LoaderRule{ID: "decilm-attention-needs-ffn",
		Does: "llama.cpp's llm_build_deci (src/models/deci.cpp, 75dc8f64) skips the rest of a layer whose n_ff is 0 (`if (n_ff == 0) continue;`) before adding the attention output to the residual and before passing it on, so this layer's attention output is thrown away (in the last layer the output-row gather too): it loads, but computes another model",
		Fix:  "keep the layer's MLP, remove its attention too (the whole layer), or write the child with output_format padded"}
	// llama.cpp's converter: DeciModel.__init__ collects the blocks'
	// ffn_mult values and asserts isinstance(_ffn_multipliers[0], float).
	llamacppFloatFFNMult = &LoaderRule{ID: "decilm-ffn-mult-float",
		Does: "llama.cpp's DeciModel.__init__ (conversion/deci.py, 2bbcf7fc) asserts isinstance(_ffn_multipliers[0], float), and Python's json reads a number written without a point as an int: the conversion to GGUF fails",
		Fix:  "write the first block's ffn_mult with a decimal point (4.0, as prune writes it)"}
	// llama.cpp's converter: DeciModel.set_vocab takes the Llama 3 path
	// only for vocab_size 128256; otherwise _set_vocab_llama_hf, whose
	// LlamaHfVocab refuses anything but a Llama BPE tokenizer.
	llamacppDeciLMTokenizer = &TokenizerRule{
		LoaderRule: LoaderRule{ID: "decilm-tokenizer",
			Does: "llama.cpp's converter takes the tokenizer of a DeciLM checkpoint as it is only for vocab_size 128256 (DeciModel.set_vocab, conversion/deci.py, 2bbcf7fc); for any other it calls _set_vocab_llama_hf, whose LlamaHfVocab (gguf-py/gguf/vocab.py, 85f9d68b) raises FileNotFoundError \"Cannot find Llama BPE tokenizer\" (TypeError for a Llama 3 one) unless tokenizer.json is BPE with byte_fallback and a Sequence decoder: the conversion to GGUF fails",
			Fix:  "export the child in the parent's native format (uniform widths, or output_format padded), or serve it on another engine"},
		KeptVocab: 128256, ModelType: "BPE", ByteFallback: true, Decoder: "Sequence"}
)

var nativeAll = []string{
	architecture.Llama, architecture.Mistral, architecture.Qwen2, architecture.Qwen3,
	architecture.Qwen3MoE, architecture.Mixtral, architecture.NemotronH, architecture.GptOss,
}

// The pool engines (vLLM: HFConfigParser.parse in
// vllm/transformers_utils/config.py, 0036026e; TensorRT-LLM:
// ModelConfig.from_pretrained; SGLang, which ships no nemotron-nas config
// class) build a DeciLM config through transformers'
// AutoConfig.from_pretrained, which loads model_type nemotron-nas only
// through auto_map: RemoteCode.
var engines = map[string]Capabilities{
	// vLLM reads ffn.intermediate_size only where the block object has no
	// ffn_mult attribute (DeciLMDecoderLayer.__init__, hasattr): half of
	// FFNIntermediateSize (FFNMultFirst).
	"vllm": {Name: "vllm", Native: nativeAll, DeciLM: true, FFNIntermediateSize: true, FFNMultFirst: vllmFFNMultFirst,
		DeciLMBias: true, KVPageRatios: true, RemoteCode: true, ShardsTP: true,
		DeciLMFirstAttention: vllmFirstAttention, EvenLayerWindows: &IndexWindows{Arch: architecture.GptOss, Rule: vllmGptOssWindows}},
	"sglang": {Name: "sglang", Native: nativeAll, DeciLM: true, DeciLMBias: true, RemoteCode: true, ShardsTP: true,
		FFNMultReader: "SGLang's DeciLMDecodeLayer (python/sglang/srt/models/nemotron_nas.py, 15a024d4) reads only ffn.ffn_mult", FFNMultAttribute: true,
		DeciLMUniformKV: sglangUniformKV, DeciLMFirstAttention: sglangFirstAttention},
	"trtllm": {Name: "trtllm", Native: nativeAll, DeciLM: true, RemoteCode: true,
		FFNMultReader: "TensorRT-LLM's NemotronNASDecoderLayer (tensorrt_llm/_torch/models/modeling_nemotron_nas.py, 0193dbd4) reads only ffn.ffn_mult", FFNMultAttribute: true,
		LinearAttention: true, LinearFFN: true, ShardsTP: true},
	"llamacpp": {Name: "llamacpp", Native: nativeAll, DeciLM: true,
		FFNMultReader:   "llama.cpp's DeciModel.__init__ (conversion/deci.py, 2bbcf7fc) reads only the ffn_mult key",
		LinearAttention: true, DeciLMBias: true, DeciLMHeadDimRule: true,
		DeciLMAttentionNeedsFFN: llamacppAttentionNeedsFFN, DeciLMTokenizer: llamacppDeciLMTokenizer,
		DeciLMFloatFFNMult: llamacppFloatFFNMult},
	"hf": {Name: "hf", Native: nativeAll, DeciLM: true, FFNIntermediateSize: true,
		LinearAttention: true, LinearFFN: true, DeciLMBias: true, RemoteCode: true, ByModelType: true},
	// autocompress's own engine (package engine): Llama-family blocks with
	// any per-layer widths and removed sub-blocks, and the Mamba2 and MoE
	// layers engine.Check takes (forward only).
	// It reads the checkpoint through package architecture, which reads
	// block_configs' intermediate_size. The classes it runs are the
	// families' Engine facts.
	"native": {Name: "native", EngineFamilies: true,
		DeciLM: true, FFNIntermediateSize: true, DeciLMBias: true, Runs: engine.Check},
}

// Engines returns the engine names, sorted.
func Engines() []string {
	out := make([]string, 0, len(engines))
	for k := range engines {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Lookup returns an engine's capabilities.
func Lookup(engine string) (Capabilities, error) {
	c, ok := engines[engine]
	if !ok {
		return Capabilities{}, fmt.Errorf("unknown engine %q (want %s)", engine, strings.Join(Engines(), ", "))
	}
	return c, nil
}

// ParseEngines reads an engine list as the commands take it: one name, a
// comma-separated list, or "all" (every engine, sorted); "" is no engine.
// Unknown names are an error listing the valid ones.
func ParseEngines(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return nil, nil
	case "all":
		return Engines(), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if _, err := Lookup(e); err != nil {
			return nil, err
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out, nil
}

func (c Capabilities) native(arch string) bool {
	if c.EngineFamilies {
		if f, ok := architecture.Lookup(arch); ok && f.Engine.Runs && !f.PerLayer {
			return true
		}
	}
	for _, a := range c.Native {
		if a == arch {
			return true
		}
	}
	return false
}

// DeciLMFFNMultiple is the granularity of DeciLM FFN widths.
const DeciLMFFNMultiple = 256

// FFNMult returns the ffn_mult that DeciLM engines turn back into width for
// the given hidden size: 3·width/(2·hidden). It round-trips exactly
// (DeciLMFFNWidth(FFNMult(w, h), h) == w) when width is a multiple of 256.
func FFNMult(width, hidden int) float64 {
	return 3 * float64(width) / (2 * float64(hidden))
}

// DeciLMFFNWidth is the engines' rule: round_up(int(2·ffn_mult·hidden/3), 256).
func DeciLMFFNWidth(ffnMult float64, hidden int) int {
	return architecture.FFNMultToWidth(ffnMult, hidden)
}

// IndexWindows is an engine's model class that places each layer's sliding
// window by the layer's index instead of config.json's layer_types: the
// class's architecture (Arch) and the rule a child breaks when a window
// lands on the wrong parity.
type IndexWindows struct {
	Arch string
	Rule *LoaderRule
}
