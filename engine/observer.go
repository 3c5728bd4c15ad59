package engine

// Site names a point of the forward pass where an Observer sees activations.
type Site int

// Observation sites, in the order they occur within a layer.
const (
	// SiteLayerInput is the hidden state entering a layer, (B·T, hidden).
	SiteLayerInput Site = iota
	// SiteAttnNorm is the output of input_layernorm, (B·T, hidden).
	SiteAttnNorm
	// SiteAttnHeads is the attention output before o_proj,
	// (B·T, heads·head_dim), head-major within a row.
	SiteAttnHeads
	// SiteAttnResidual is the residual stream between the two sub-blocks:
	// the layer input plus the attention output (the layer input itself
	// when the layer has no attention), (B·T, hidden). With SiteLayerInput
	// and SiteLayerOutput it gives each sub-block's influence.
	SiteAttnResidual
	// SiteMLPNorm is the output of post_attention_layernorm, (B·T, hidden).
	SiteMLPNorm
	// SiteMLPAct is the MLP intermediate act(gate)·up, the input of
	// down_proj, (B·T, ffn).
	SiteMLPAct
	// SiteLayerOutput is the hidden state leaving a layer, (B·T, hidden).
	SiteLayerOutput
	// SiteFinalNorm is the output of the final norm (Layer = number of
	// layers), (B·T, hidden).
	SiteFinalNorm
	// SiteMoERouting is a mixture-of-experts block's router logits,
	// (B·T, experts), with Activation.Routing saying where each row went
	// (after SiteMLPNorm, before SiteLayerOutput; ExpertStats collects
	// it).
	SiteMoERouting
	// SiteMambaHeads is a Mamba2 mixer's out_proj input, the gated-normed
	// scan output, (B·T, heads·head_dim), head-major within a row, with
	// Activation.Heads, HeadDim and Groups set (after SiteAttnNorm, which
	// a Mamba layer's norm reports, and before SiteAttnResidual).
	SiteMambaHeads
)

var siteNames = [...]string{"layer_input", "attn_norm", "attn_heads", "attn_residual", "mlp_norm", "mlp_act", "layer_output", "final_norm", "moe_routing", "mamba_heads"}

func (s Site) String() string {
	if s >= 0 && int(s) < len(siteNames) {
		return siteNames[s]
	}
	return "site?"
}

// Activation is one observed tensor. Data is row-major (B·T, Width), rows
// ordered batch-major (row = b·T + t); it is owned by the model and valid
// only during the Observe call: copy what you keep.
type Activation struct {
	Layer int
	Site  Site
	Data  []float32
	B, T  int
	Width int
	// Heads and HeadDim are set for SiteAttnHeads and SiteMambaHeads
	// (Width = Heads·HeadDim); Groups for SiteMambaHeads (n_groups).
	Heads, HeadDim, Groups int
	// Routing is set for SiteMoERouting (owned by the model like Data).
	Routing *Routing
}

// Observer receives activations during Forward and ForwardLoss. A nil
// Observer costs nothing. Observe is called from the goroutine that runs the
// forward pass, in forward order.
type Observer interface {
	Observe(a *Activation)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(a *Activation)

// Observe calls f(a).
func (f ObserverFunc) Observe(a *Activation) { f(a) }
