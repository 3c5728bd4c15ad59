package prune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// childConfig returns the child's config.json: the parent's config with
// every shape field rewritten to match the sliced tensors exactly
// (serving-formats.md §5.3): hidden_size, intermediate_size,
// num_attention_heads, num_key_value_heads, head_dim (always explicit),
// num_hidden_layers, tie_word_embeddings, torch_dtype, the Mamba fields and
// hybrid_override_pattern; for the decilm format, block_configs.
//
// This is a private adapter: it edits the parent's raw config (keeping every
// key it does not own) because the architecture package does not yet offer
// a config writer.
func childConfig(lay *Layout) ([]byte, error) {
	p, c := lay.Parent, lay.Child
	raw := map[string]any{}
	for k, v := range p.Raw {
		raw[k] = v
	}
	raw["hidden_size"] = c.Hidden
	raw["num_hidden_layers"] = len(c.Layers)
	raw["tie_word_embeddings"] = c.TiedEmbeddings
	if c.DType != "" {
		raw["torch_dtype"] = c.DType
	}
	var attn *architecture.Attention
	var mlp *architecture.MLP
	var mamba *architecture.Mamba
	var pattern strings.Builder
	for _, l := range c.Layers {
		switch {
		case l.Mamba != nil:
			pattern.WriteByte('M')
		case l.Attention != nil && l.MLP == nil && l.MoE == nil:
			pattern.WriteByte('*')
		case l.MLP != nil && l.Attention == nil:
			pattern.WriteByte('-')
		case l.MoE != nil && l.Attention == nil:
			pattern.WriteByte('E')
		}
		if attn == nil && l.Attention != nil {
			attn = l.Attention
		}
		if mlp == nil && l.MLP != nil {
			mlp = l.MLP
		}
		if mamba == nil && l.Mamba != nil {
			mamba = l.Mamba
		}
	}
	if attn == nil {
		for _, l := range p.Layers {
			if l.Attention != nil {
				attn = l.Attention
				break
			}
		}
	}
	if attn != nil {
		raw["num_attention_heads"] = attn.Heads
		raw["num_key_value_heads"] = attn.KVHeads
		if p.Arch == architecture.NemotronH {
			raw["attention_head_dim"] = attn.HeadDim
		}
		raw["head_dim"] = attn.HeadDim
	}
	if mlp != nil {
		raw["intermediate_size"] = mlp.Width
	}
	if mamba != nil {
		raw["mamba_num_heads"] = mamba.Heads
		raw["mamba_head_dim"] = mamba.HeadDim
		raw["n_groups"] = mamba.Groups
		raw["ssm_state_size"] = mamba.StateSize
	}
	if p.Arch == architecture.NemotronH {
		raw["hybrid_override_pattern"] = pattern.String()
		delete(raw, "layers_block_type")
	}
	if _, ok := raw["layer_types"]; ok {
		if lt, ok := raw["layer_types"].([]any); ok {
			var out []any
			for _, ll := range lay.Layers {
				if ll.Parent < len(lt) {
					out = append(out, lt[ll.Parent])
				}
			}
			raw["layer_types"] = out
		}
	}
	if lay.Format == FormatDeciLM {
		raw["architectures"] = []any{"DeciLMForCausalLM"}
		raw["model_type"] = "nemotron-nas"
		if _, ok := raw["auto_map"]; !ok {
			raw["auto_map"] = map[string]any{
				"AutoConfig":           "configuration_decilm.DeciLMConfig",
				"AutoModelForCausalLM": "modeling_decilm.DeciLMForCausalLM",
			}
		}
		delete(raw, "intermediate_size")
		delete(raw, "num_key_value_heads")
		var blocks []any
		for _, l := range c.Layers {
			att := map[string]any{"no_op": l.Attention == nil, "replace_with_linear": false, "sparsify": nil,
				"num_sink_tokens": nil, "unshifted_sink": false, "use_prefill_window_in_sink_attention": false, "window_length": nil}
			if l.Attention != nil {
				att["n_heads_in_group"] = l.Attention.Heads / l.Attention.KVHeads
			} else {
				att["n_heads_in_group"] = nil
			}
			ffn := map[string]any{"no_op": l.MLP == nil, "replace_with_linear": false, "sparsify": nil}
			if l.MLP != nil {
				ffn["ffn_mult"] = 3 * float64(l.MLP.Width) / (2 * float64(c.Hidden))
			} else {
				ffn["ffn_mult"] = nil
			}
			blocks = append(blocks, map[string]any{"attention": att, "ffn": ffn})
		}
		raw["block_configs"] = blocks
	}
	return encodeConfig(raw)
}

// encodeConfig writes indented JSON with sorted keys, writing non-finite
// numbers (architecture.NonFinite) bare, as Python's json module does.
func encodeConfig(raw map[string]any) ([]byte, error) {
	const mark = "\u0000nonfinite:"
	var fix func(v any) any
	fix = func(v any) any {
		switch x := v.(type) {
		case architecture.NonFinite:
			return mark + string(x)
		case float64:
			if math.IsInf(x, 1) {
				return mark + "Infinity"
			} else if math.IsInf(x, -1) {
				return mark + "-Infinity"
			} else if math.IsNaN(x) {
				return mark + "NaN"
			}
			return x
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = fix(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = fix(e)
			}
			return out
		}
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fix(raw)); err != nil {
		return nil, fmt.Errorf("encoding config.json: %w", err)
	}
	out := buf.Bytes()
	for _, s := range []string{"Infinity", "-Infinity", "NaN"} {
		out = bytes.ReplaceAll(out, []byte(`"\u0000nonfinite:`+s+`"`), []byte(s))
	}
	return out, nil
}
