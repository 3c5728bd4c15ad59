package prune

import (
	"github.com/autocompress/autocompress/architecture"
)

// childConfig returns the child's config.json, written by the architecture
// package from the child model: every shape field (hidden_size,
// intermediate_size, num_attention_heads, num_key_value_heads, explicit
// head_dim, num_hidden_layers, tie_word_embeddings, torch_dtype, the Mamba
// fields and hybrid_override_pattern) matches the sliced tensors; keys the
// format does not own are kept from the parent. The decilm format writes
// DeciLMForCausalLM block_configs.
func childConfig(lay *Layout) ([]byte, error) {
	opts := architecture.ConfigOptions{Format: architecture.Native}
	if lay.Format == FormatDeciLM {
		opts.Format = architecture.DeciLMFormat
	}
	return lay.Child.Config(opts)
}
