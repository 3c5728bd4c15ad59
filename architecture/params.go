package architecture

import "strings"

// Params are exact parameter counts of a model, derived from Tensors.
type Params struct {
	// Total counts every parameter once (a tied LM head is not counted twice).
	Total int64
	// Active counts the parameters used for one token: everything except the
	// routed experts, which count only TopK of Experts. Embedding and LM head
	// are included, as publishers of MoE models usually state.
	Active int64
	// Embedding is the input embedding (vocab × hidden).
	Embedding int64
	// LMHead is the output projection, 0 when tied to the embedding.
	LMHead int64
	// FinalNorm is the final norm before the LM head.
	FinalNorm int64
	// PerLayer[i] counts layer i (norms included); ActivePerLayer[i] its
	// active part.
	PerLayer       []int64
	ActivePerLayer []int64
	// Experts counts all routed-expert weights (and their biases).
	Experts int64
}

// NonEmbedding returns Total minus the embedding and the LM head.
func (p Params) NonEmbedding() int64 { return p.Total - p.Embedding - p.LMHead }

// ActiveNonEmbedding returns Active minus the embedding and the LM head.
func (p Params) ActiveNonEmbedding() int64 { return p.Active - p.Embedding - p.LMHead }

// Params counts the parameters of m exactly from its tensor list.
func (m *Model) Params() Params {
	p := Params{
		PerLayer:       make([]int64, len(m.Layers)),
		ActivePerLayer: make([]int64, len(m.Layers)),
	}
	expert := make([]int64, len(m.Layers))
	m.walkTensors(&TensorList{visit: func(t TensorSpec, repeat int64) {
		n := t.Numel() * repeat
		p.Total += n
		switch {
		case t.Layer < 0:
			switch t.Kind {
			case "embedding":
				p.Embedding += n
			case "lm_head":
				p.LMHead += n
			default:
				p.FinalNorm += n
			}
		case t.Experts > 0:
			p.PerLayer[t.Layer] += n
			expert[t.Layer] += n
		default:
			p.PerLayer[t.Layer] += n
			p.ActivePerLayer[t.Layer] += n
		}
	}})
	p.Active = p.Embedding + p.LMHead + p.FinalNorm
	for i, l := range m.Layers {
		if expert[i] > 0 && l.MoE != nil {
			// All experts of a layer have the same shape, so the sum divides.
			p.ActivePerLayer[i] += expert[i] / int64(l.MoE.Experts) * int64(l.MoE.TopK)
		}
		p.Experts += expert[i]
		p.Active += p.ActivePerLayer[i]
	}
	return p
}

// KVElemsPerToken returns the number of key and value elements one token
// adds to the KV cache, summed over attention layers (2·KV heads·head_dim
// each), ignoring sliding-window caps. Multiply by the cache element size in
// bytes (2 for bf16) for bytes per token.
func (m *Model) KVElemsPerToken() int64 {
	var n int64
	for _, l := range m.Layers {
		if a := l.Attention; a != nil {
			n += 2 * int64(a.KVHeads) * int64(a.HeadDim)
		}
	}
	return n
}

// SSMStateElems returns the recurrent state one sequence holds across the
// Mamba2 layers, in elements: conv is the convolution window
// (conv_kernel−1)·(d_inner + 2·n_groups·d_state) per layer and ssm the state
// heads·head_dim·d_state per layer. Engines keep ssm in fp32 or the model
// dtype (mamba_ssm_cache_dtype); multiply accordingly.
func (m *Model) SSMStateElems() (conv, ssm int64) {
	for _, l := range m.Layers {
		if x := l.Mamba; x != nil {
			conv += int64(x.ConvKernel-1) * int64(x.DInner()+2*x.Groups*x.StateSize)
			ssm += int64(x.DInner()) * int64(x.StateSize)
		}
	}
	return conv, ssm
}

// Kind names the layer's sub-blocks joined by "+": "attention+mlp",
// "attention+moe", "mamba", "attention", "mlp", "moe", or "empty" for a
// removed layer.
func (l Layer) Kind() string {
	var parts []string
	if l.Mamba != nil {
		parts = append(parts, "mamba")
	}
	if l.Attention != nil {
		parts = append(parts, "attention")
	}
	if l.MLP != nil {
		parts = append(parts, "mlp")
	}
	if l.MoE != nil {
		parts = append(parts, "moe")
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, "+")
}
