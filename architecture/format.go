package architecture

// Format is a config.json dialect that Config can write.
type Format int

// Formats.
const (
	// Auto picks FormatFor(m).
	Auto Format = iota
	// Native is the model's own architecture class with uniform shapes
	// (LlamaForCausalLM, Qwen3ForCausalLM, NemotronHForCausalLM, ...).
	Native
	// DeciLMFormat is DeciLMForCausalLM / nemotron-nas block_configs: per-layer
	// KV heads, FFN widths (multiples of 256) and removed sub-blocks for
	// Llama-family layers.
	DeciLMFormat
)

func (f Format) String() string {
	switch f {
	case Auto:
		return "auto"
	case Native:
		return "native"
	case DeciLMFormat:
		return "DeciLM"
	}
	return "unknown"
}
