package architecture

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// TensorSpec is one tensor a checkpoint of the model must contain.
type TensorSpec struct {
	// Name is the HuggingFace state-dict name, e.g. "model.layers.3.mlp.up_proj.weight".
	Name string
	// Shape is the PyTorch shape; linear weights are [out, in].
	Shape []int64
	// Layer is the decoder layer index, -1 for global tensors (embedding,
	// final norm, LM head).
	Layer int
	// Kind says what the tensor is, independent of the architecture's naming:
	// "embedding", "lm_head", "norm" (every RMSNorm weight outside a mixer),
	// "attn_q", "attn_k", "attn_v", "attn_o", "attn_q_norm", "attn_k_norm",
	// "attn_sinks", "mlp_gate", "mlp_up", "mlp_down", "moe_router",
	// "moe_router_correction", "expert_gate", "expert_up", "expert_down",
	// "expert_gate_up" (gpt-oss fused), "shared_up", "shared_down",
	// "latent_in", "latent_out", "mamba_in", "mamba_conv", "mamba_dt_bias",
	// "mamba_a_log", "mamba_d", "mamba_norm", "mamba_out". Biases carry the
	// kind of their weight with a "_bias" suffix ("attn_q_bias").
	Kind string
	// Expert is the routed expert index for per-expert tensors, else -1.
	Expert int
	// Experts is how many routed experts' weights the tensor holds: 1 for a
	// per-expert tensor, the expert count for stacked tensors (gpt-oss), 0
	// for anything else.
	Experts int
	// Block is the sub-block of the layer the tensor belongs to, its norm
	// included: BlockAttention, BlockMLP, BlockMamba or BlockMoE; "" for
	// global tensors.
	Block string
}

// Numel returns the number of elements.
func (t TensorSpec) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensors lists every tensor a HuggingFace checkpoint of m contains, with HF
// names and shapes, in forward order: the embedding; per layer the norm and
// weights of the token mixer, then the norm and weights of the feed-forward
// block; the final norm; the LM head unless tied. (This is the order of the
// stories260K checkpoint; HF shards may order names differently, so compare
// by name.)
//
// Naming follows m's family (Family.Tensors): Llama-family names (model.layers.N.self_attn.q_proj,
// mlp.gate_proj, block_sparse_moe.experts.E.w1 for Mixtral,
// mlp.experts.E.gate_proj for Qwen3-MoE, mlp.router and fused
// mlp.experts.gate_up_proj for gpt-oss), Nemotron-H names
// (backbone.layers.N.norm, backbone.layers.N.mixer.*). gpt-oss checkpoints
// on the Hub store the experts as MXFP4 (…_blocks and …_scales); Tensors
// lists the dequantised names and shapes transformers uses. Nemotron-3
// multi-token-prediction layers (mtp.*) are not part of the decoder and are
// not listed. DeciLM layers without a sub-block have neither its weights nor
// its norm.
func (m *Model) Tensors() []TensorSpec {
	b := TensorList{names: true}
	m.walkTensors(&b)
	return b.list
}

// LMHead returns the LM head's tensor as m's family names it. A model with
// tied embeddings does not list it in Tensors, but its checkpoints may still
// hold it (a copy of the embedding).
func (m *Model) LMHead() TensorSpec {
	u := *m // Tensors only reads the layers
	u.TiedEmbeddings = false
	var head TensorSpec
	u.walkTensors(&TensorList{names: true, visit: func(t TensorSpec, _ int64) {
		if t.Kind == "lm_head" {
			head = t
		}
	}})
	return head
}

// walkTensors emits the tensors of m into b, named by m's family; with
// b.names false the names are left empty (Params needs only shapes and
// kinds).
func (m *Model) walkTensors(b *TensorList) {
	familyOf(m.Arch).Tensors(m, b)
}

// llamaTensors lists the tensors of Llama-style checkpoints
// (model.layers.N.self_attn.*, mlp.*), the MoE block named by moe.
func llamaTensors(m *Model, b *TensorList, moe func(b *TensorList, p string, i int, h int64, x *MoE)) {
	h := int64(m.Hidden)
	v := int64(m.Vocab)
	b.add("model.embed_tokens.weight", -1, "embedding", v, h)
	for i, l := range m.Layers {
		p := b.layerPrefix("model.layers.", i)
		if l.Attention != nil {
			b.norm(p+"input_layernorm.weight", i, BlockAttention, h)
			b.attention(p+"self_attn.", i, h, l.Attention)
		}
		switch {
		case l.MLP != nil:
			b.norm(p+"post_attention_layernorm.weight", i, BlockMLP, h)
			b.mlp(p+"mlp.", i, h, l.MLP)
		case l.MoE != nil:
			b.norm(p+"post_attention_layernorm.weight", i, BlockMoE, h)
		}
		if l.MoE != nil {
			moe(b, p, i, h, l.MoE)
		}
	}
	b.add("model.norm.weight", -1, "norm", h)
	if !m.TiedEmbeddings {
		b.add("lm_head.weight", -1, "lm_head", v, h)
	}
}

// TensorList collects the TensorSpecs a family's Tensors lists, or with
// visit set passes each to it instead of storing it. Visitors see routed
// experts collapsed: the tensors of expert 0 only, with repeat set to the
// expert count (1 for everything else), which keeps counting independent of
// the number of experts.
type TensorList struct {
	list   []TensorSpec
	names  bool
	visit  func(t TensorSpec, repeat int64)
	repeat int64
}

func (b *TensorList) emit(t TensorSpec) {
	if b.visit != nil {
		r := int64(1)
		if b.repeat > 0 && t.Expert >= 0 {
			r = b.repeat
		}
		b.visit(t, r)
		return
	}
	b.list = append(b.list, t)
}

// experts returns how many experts to list: all of them when collecting, one
// (standing for all) when visiting.
func (b *TensorList) experts(n int) int {
	if b.visit != nil {
		b.repeat = int64(n)
		return min(n, 1)
	}
	return n
}

func (b *TensorList) add(name string, layer int, kind string, shape ...int64) {
	b.emit(TensorSpec{Name: name, Shape: shape, Layer: layer, Kind: kind, Expert: -1, Block: blockOfKind(layer, kind)})
}

func (b *TensorList) norm(name string, layer int, block string, size int64) {
	b.emit(TensorSpec{Name: name, Shape: []int64{size}, Layer: layer, Kind: "norm", Expert: -1, Block: block})
}

func (b *TensorList) addExpert(name string, layer, expert, experts int, kind string, shape ...int64) {
	b.emit(TensorSpec{Name: name, Shape: shape, Layer: layer, Kind: kind, Expert: expert, Experts: experts, Block: BlockMoE})
}

// blockOfKind is the sub-block of a layer tensor of kind (norms, which
// every block has, are listed with theirs by norm).
func blockOfKind(layer int, kind string) string {
	if layer < 0 {
		return ""
	}
	switch {
	case strings.HasPrefix(kind, "attn_"):
		return BlockAttention
	case strings.HasPrefix(kind, "mlp_"):
		return BlockMLP
	case strings.HasPrefix(kind, "mamba_"):
		return BlockMamba
	case strings.HasPrefix(kind, "moe_"), strings.HasPrefix(kind, "expert_"), strings.HasPrefix(kind, "shared_"), strings.HasPrefix(kind, "latent_"):
		return BlockMoE
	}
	return ""
}

// layerPrefix formats prefix+"<i>." only when names are wanted.
func (b *TensorList) layerPrefix(prefix string, i int) string {
	if !b.names {
		return ""
	}
	return prefix + strconv.Itoa(i) + "."
}

// expertPrefix formats p+"experts.<e>." only when names are wanted.
func (b *TensorList) expertPrefix(p string, e int) string {
	if !b.names {
		return ""
	}
	return p + "experts." + strconv.Itoa(e) + "."
}

// linear adds name.weight [out, in] and, with bias, name.bias [out].
func (b *TensorList) linear(name string, layer int, kind string, bias bool, out, in int64) {
	b.add(name+".weight", layer, kind, out, in)
	if bias {
		b.add(name+".bias", layer, kind+"_bias", out)
	}
}

func (b *TensorList) attention(p string, i int, h int64, a *Attention) {
	q := int64(a.Heads * a.HeadDim)
	kv := int64(a.KVHeads * a.HeadDim)
	b.linear(p+"q_proj", i, "attn_q", a.QKVBias, q, h)
	b.linear(p+"k_proj", i, "attn_k", a.QKVBias, kv, h)
	b.linear(p+"v_proj", i, "attn_v", a.QKVBias, kv, h)
	b.linear(p+"o_proj", i, "attn_o", a.OutBias, h, q)
	if a.QKNorm {
		b.add(p+"q_norm.weight", i, "attn_q_norm", int64(a.HeadDim))
		b.add(p+"k_norm.weight", i, "attn_k_norm", int64(a.HeadDim))
	}
	if a.Sinks {
		b.add(p+"sinks", i, "attn_sinks", int64(a.Heads))
	}
}

func (b *TensorList) mlp(p string, i int, h int64, x *MLP) {
	w := int64(x.Width)
	if x.Gated {
		b.linear(p+"gate_proj", i, "mlp_gate", x.Bias, w, h)
	}
	b.linear(p+"up_proj", i, "mlp_up", x.Bias, w, h)
	b.linear(p+"down_proj", i, "mlp_down", x.Bias, h, w)
}

func (b *TensorList) expertLinear(name string, i, e, n int, kind string, bias bool, out, in int64) {
	b.addExpert(name+".weight", i, e, n, kind, out, in)
	if bias {
		b.addExpert(name+".bias", i, e, n, kind+"_bias", out)
	}
}

// ShapeError lists the differences between a checkpoint's tensors and the
// ones the model requires.
type ShapeError struct {
	Missing    []string // required tensors the checkpoint lacks
	Unexpected []string // tensors the model does not have
	Mismatched []string // "name: have [a b], want [c d]"
}

func (e *ShapeError) Error() string {
	var parts []string
	list := func(what string, names []string) {
		if len(names) == 0 {
			return
		}
		shown := names
		if len(shown) > 5 {
			shown = shown[:5]
		}
		s := fmt.Sprintf("%d %s (%s", len(names), what, strings.Join(shown, "; "))
		if len(names) > len(shown) {
			s += fmt.Sprintf("; and %d more", len(names)-len(shown))
		}
		parts = append(parts, s+")")
	}
	list("missing", e.Missing)
	list("unexpected", e.Unexpected)
	list("with wrong shape", e.Mismatched)
	return "checkpoint does not match the model: " + strings.Join(parts, ", ")
}

// CheckShapes compares the tensors of a checkpoint (name → shape) with
// Tensors and returns a *ShapeError naming every missing, unexpected or
// mis-shaped tensor, or nil. Names matching ignore (e.g. quantisation
// scales) are skipped; ignore may be nil.
func (m *Model) CheckShapes(have map[string][]int64, ignore func(name string) bool) error {
	var e ShapeError
	want := m.Tensors()
	seen := make(map[string]bool, len(want))
	for _, t := range want {
		seen[t.Name] = true
		s, ok := have[t.Name]
		switch {
		case !ok:
			e.Missing = append(e.Missing, t.Name)
		case !slices.Equal(s, t.Shape):
			e.Mismatched = append(e.Mismatched, fmt.Sprintf("%s: have %v, want %v", t.Name, s, t.Shape))
		}
	}
	for name := range have {
		if !seen[name] && (ignore == nil || !ignore(name)) {
			e.Unexpected = append(e.Unexpected, name)
		}
	}
	sort.Strings(e.Unexpected)
	if len(e.Missing)+len(e.Unexpected)+len(e.Mismatched) == 0 {
		return nil
	}
	return &e
}
