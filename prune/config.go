package prune

import (
	"path/filepath"
	"slices"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/prune/remotecode"
)

// childConfig returns the child's config.json, written by the architecture
// package from the child model: every shape field (hidden_size,
// intermediate_size, num_attention_heads, num_key_value_heads, explicit
// head_dim, num_hidden_layers, tie_word_embeddings, torch_dtype, the Mamba
// fields and hybrid_override_pattern) matches the sliced tensors; keys the
// format does not own are kept from the parent. The decilm format writes
// DeciLMForCausalLM block_configs; autoMap, when not nil, is its auto_map.
func childConfig(lay *Layout, autoMap map[string]string) ([]byte, error) {
	opts := architecture.ConfigOptions{Format: architecture.Native, AutoMap: autoMap}
	if lay.Format == FormatDeciLM {
		opts.Format = architecture.DeciLMFormat
	}
	return lay.Child.Config(opts)
}

// auxToCopy lists the parent's auxiliary files the child gets: all but
// config.json (written from the child) and, for a DeciLM child, the
// parent's own copies of the configuration module files prune writes.
func auxToCopy(aux []string, deci bool) []string {
	own := remotecode.DeciLMFiles()
	var out []string
	for _, a := range aux {
		if a == "config.json" || deci && slices.Contains(own, a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// deciLMAutoMap is the auto_map of a DeciLM child, naming only modules the
// child contains: AutoConfig, the configuration module prune writes
// (package remotecode), which is all vLLM, SGLang and TensorRT-LLM need
// (they build the config through transformers' AutoConfig and use their
// own DeciLM model classes); AutoModelForCausalLM only when a
// modeling_decilm.py comes with the parent's files or extra. nil for any
// other child (its auto_map is the parent's).
func deciLMAutoMap(deci bool, copied, extra []string) map[string]string {
	if !deci {
		return nil
	}
	am := map[string]string{"AutoConfig": remotecode.DeciLMAutoConfig}
	has := slices.Contains(copied, remotecode.DeciLMModeling)
	for _, f := range extra {
		has = has || filepath.Base(f) == remotecode.DeciLMModeling
	}
	if has {
		am["AutoModelForCausalLM"] = remotecode.DeciLMAutoModel
	}
	return am
}
