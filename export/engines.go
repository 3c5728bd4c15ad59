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
// same table to avoid proposing shapes an engine cannot load.
package export

import (
	"fmt"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
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
	// FFNIntermediateSize: reads block_configs[i].ffn.intermediate_size;
	// engines without it read only ffn_mult.
	FFNIntermediateSize bool
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
	// RemoteCode: DeciLM needs the auto_map Python files beside the weights.
	RemoteCode bool
	// ByModelType: picks the model class from config.json's model_type
	// (transformers' Auto classes); the serving engines and llama.cpp's
	// converter read architectures[0] and refuse a config without it.
	ByModelType bool
	// NoMamba, NoMoE: the engine has no Mamba2 mixer / MoE block (the
	// native engine).
	NoMamba, NoMoE bool
	// ShardsTP: the engine shards every layer over the tensor-parallel
	// group, so the shape must split (architecture.Model.TPViolations);
	// the others do not shard layers by TP and its rules are not checked.
	// It agrees with estimate.EngineSpec.ShardsTP (TestTablesNameTheSameEngines).
	ShardsTP bool
}

var nativeAll = []string{
	architecture.Llama, architecture.Mistral, architecture.Qwen2, architecture.Qwen3,
	architecture.Qwen3MoE, architecture.Mixtral, architecture.NemotronH, architecture.GptOss,
}

var engines = map[string]Capabilities{
	"vllm": {Name: "vllm", Native: nativeAll, DeciLM: true, FFNIntermediateSize: true,
		DeciLMBias: true, KVPageRatios: true, ShardsTP: true},
	"sglang": {Name: "sglang", Native: nativeAll, DeciLM: true, DeciLMBias: true, ShardsTP: true},
	"trtllm": {Name: "trtllm", Native: nativeAll, DeciLM: true,
		LinearAttention: true, LinearFFN: true, ShardsTP: true},
	"llamacpp": {Name: "llamacpp", Native: nativeAll, DeciLM: true,
		LinearAttention: true, DeciLMBias: true, DeciLMHeadDimRule: true},
	"hf": {Name: "hf", Native: nativeAll, DeciLM: true, FFNIntermediateSize: true,
		LinearAttention: true, LinearFFN: true, DeciLMBias: true, RemoteCode: true, ByModelType: true},
	// autocompress's own engine (package engine): Llama-family blocks with
	// any per-layer widths and removed sub-blocks; no Mamba2 or MoE layers.
	// It reads the checkpoint through package architecture, which reads
	// block_configs' intermediate_size. The classes it runs are the
	// families' Engine facts.
	"native": {Name: "native", EngineFamilies: true,
		DeciLM: true, FFNIntermediateSize: true, DeciLMBias: true, NoMamba: true, NoMoE: true},
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
