package estimate

import "github.com/autocompress/autocompress/architecture"

// llama builds a uniform Llama-style model from config.json values.
func llama(name string, layers, hidden, heads, kv, ffn, vocab int) *architecture.Model {
	m := &architecture.Model{Name: name, Vocab: vocab, Hidden: hidden, Norm: architecture.RMSNorm, DType: "bfloat16",
		Layers: make([]architecture.Layer, layers)}
	for i := range m.Layers {
		m.Layers[i] = architecture.Layer{
			Attention: &architecture.Attention{Heads: heads, KVHeads: kv, HeadDim: hidden / heads},
			MLP:       &architecture.MLP{Width: ffn, Gated: true, Activation: "silu"},
		}
	}
	return m
}

func llama8B() *architecture.Model {
	return llama("meta-llama/Llama-3.1-8B", 32, 4096, 32, 8, 14336, 128256)
}
func llama70B() *architecture.Model {
	return llama("meta-llama/Llama-3.1-70B", 80, 8192, 64, 8, 28672, 128256)
}
