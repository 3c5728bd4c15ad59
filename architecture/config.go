package architecture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Sanity limits: a config beyond these is rejected as implausible rather than
// allowed to make Tensors or Params allocate without bound.
const (
	maxLayers  = 1 << 12
	maxWidth   = 1 << 22
	maxVocab   = 1 << 24
	maxExperts = 1 << 14
	maxHeads   = 1 << 14
	// maxPositions caps max_position_embeddings, sliding windows and
	// rope_scaling's original_max_position_embeddings: 64Mi, six times
	// the longest context of a published model (Llama 4 Scout's 10M).
	maxPositions = 1 << 26
	// maxExpertBlocks caps routed experts summed over layers (Nemotron-3
	// Super has 20,480; Qwen3-235B 12,032).
	maxExpertBlocks = 1 << 18
	// maxParams caps the parameter count (10^15, far beyond any model) so
	// that counts stay well inside int64.
	maxParams = 1e15
)

// Load reads a model description from path, which is a config.json file, a
// checkpoint directory containing config.json, or a preset name (see
// Presets). Files win over presets when both exist.
func Load(path string) (*Model, error) {
	if path == "" {
		return nil, errors.New("architecture: empty model path: give a config.json, a checkpoint directory or a preset name")
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		file := filepath.Join(path, "config.json")
		data, err := os.ReadFile(file)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s: directory has no config.json (expected a HuggingFace checkpoint directory)", path)
			}
			return nil, err
		}
		m, err := FromConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		m.Name = filepath.Base(filepath.Clean(path))
		return m, nil
	case err == nil:
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := FromConfig(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// A checkpoint's config.json is named after its directory; any other
		// file (e.g. meta-llama--Llama-3.1-8B.json) after itself.
		clean := filepath.Clean(path)
		if base := filepath.Base(clean); base == "config.json" {
			m.Name = filepath.Base(filepath.Dir(clean))
		} else {
			m.Name = strings.TrimSuffix(base, filepath.Ext(base))
		}
		return m, nil
	case errors.Is(err, fs.ErrNotExist):
		m, perr := Preset(path)
		if perr == nil {
			return m, nil
		}
		return nil, fmt.Errorf("%q is neither a file, a directory nor a preset; presets: %s", path, strings.Join(Presets(), ", "))
	default:
		return nil, err
	}
}

// FromConfig reads a HuggingFace config.json. Bare Infinity, -Infinity and
// NaN (as written by Python) are accepted. Defaults follow the transformers
// configuration class of the architecture. The result has passed Validate.
func FromConfig(data []byte) (*Model, error) {
	raw, err := decodeJSON(data)
	if err != nil {
		return nil, err
	}
	f := &fields{m: raw}
	arch := ""
	if a, ok := f.array("architectures"); ok && len(a) > 0 {
		s, ok := a[0].(string)
		if !ok {
			return nil, &ConfigError{Key: "architectures[0]", Msg: fmt.Sprintf("want a string, got %s", jsonKind(a[0]))}
		}
		arch = s
	}
	if f.err != nil {
		return nil, f.err
	}
	mt := f.strOr("model_type", "")
	var fam *Family
	if arch != "" {
		fam = lookup(arch)
	} else if mt != "" {
		fam = lookupModelType(mt)
	}
	if fam == nil {
		return nil, &UnsupportedArchError{Arch: arch}
	}
	if mt == "" {
		mt = fam.ModelType
	}
	m := &Model{Arch: fam.Arch, ModelType: mt, Raw: raw, BOS: -1}
	readGlobals(f, m, fam.Defaults)
	if f.err != nil {
		return nil, f.err
	}
	fam.Read(&ConfigReader{f: f}, m)
	if f.err != nil {
		return nil, f.err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// readGlobals reads the model-wide fields shared by every architecture.
func readGlobals(f *fields, m *Model, d Defaults) {
	m.Hidden = f.reqInt("hidden_size")
	m.Vocab = f.reqInt("vocab_size")
	f.check(m.Hidden > 0 && m.Hidden <= maxWidth, "hidden_size", "want 1..%d, got %d", maxWidth, m.Hidden)
	f.check(m.Vocab > 0 && m.Vocab <= maxVocab, "vocab_size", "want 1..%d, got %d", maxVocab, m.Vocab)
	// Every supported class defaults tie_word_embeddings to false.
	m.TiedEmbeddings = f.boolOr("tie_word_embeddings", false)
	m.Norm = RMSNorm
	m.NormEps = f.firstFloat(d.NormEps, "rms_norm_eps", "layer_norm_epsilon", "norm_eps")
	m.MaxPositions = f.intOr("max_position_embeddings", d.MaxPositions)
	checkRange(f, "max_position_embeddings", m.MaxPositions, 0, maxPositions)
	m.DType = f.strOr("torch_dtype", "")
	if m.DType == "" {
		m.DType = f.strOr("dtype", "")
	}
	if f.has("bos_token_id") {
		m.BOS = f.intOr("bos_token_id", -1)
		checkRange(f, "bos_token_id", m.BOS, -1, maxVocab-1)
	}
	m.EOS = f.intList("eos_token_id")
	for _, id := range m.EOS {
		if !checkRange(f, "eos_token_id", id, 0, maxVocab-1) {
			break
		}
	}
	m.Rope = readRope(f, d.RopeTheta)
}

func readRope(f *fields, defTheta float64) Rope {
	r := Rope{Theta: f.floatOr("rope_theta", defTheta), PartialFactor: f.floatOr("partial_rotary_factor", 1)}
	scaling, ok := f.object("rope_scaling")
	if !ok {
		// transformers 5 keeps theta and scaling in rope_parameters.
		if p, ok := f.object("rope_parameters"); ok {
			r.Theta = p.floatOr("rope_theta", r.Theta)
			if t := p.strOr("rope_type", "default"); t != "default" {
				scaling = p
			}
			if p.err != nil {
				f.fail(p.err)
			}
		}
	}
	if scaling == nil {
		return r
	}
	s := &RopeScaling{Extra: map[string]any{}}
	s.Type = scaling.strOr("rope_type", scaling.strOr("type", ""))
	s.Factor = scaling.floatOr("factor", 0)
	s.LowFreqFactor = scaling.floatOr("low_freq_factor", 0)
	s.HighFreqFactor = scaling.floatOr("high_freq_factor", 0)
	s.OriginalMaxPositions = scaling.intOr("original_max_position_embeddings", 0)
	checkRange(scaling, "original_max_position_embeddings", s.OriginalMaxPositions, 0, maxPositions)
	for k, v := range scaling.m {
		switch k {
		case "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "rope_theta":
		default:
			s.Extra[k] = deepCopyJSON(v)
		}
	}
	if len(s.Extra) == 0 {
		s.Extra = nil
	}
	if scaling.err != nil {
		f.fail(scaling.err)
	}
	if s.Type == "default" && s.Factor == 0 {
		return r
	}
	r.Scaling = s
	return r
}

// attentionShape reads heads, KV heads and head_dim.
func attentionShape(f *fields, m *Model) (heads, kv, headDim int) {
	d := familyOf(m.Arch).Defaults
	heads = f.reqInt("num_attention_heads")
	f.check(heads > 0 && heads <= maxHeads, "num_attention_heads", "want 1..%d, got %d", maxHeads, heads)
	switch {
	case f.has("num_key_value_heads"):
		kv = f.intOr("num_key_value_heads", heads)
	case f.present("num_key_value_heads") || d.KVHeads < 0:
		kv = heads // null, or LlamaConfig's None default
	default:
		kv = d.KVHeads
	}
	headDim = f.firstInt(0, "head_dim", "attention_head_dim")
	if headDim == 0 {
		headDim = d.HeadDim
	}
	if headDim == 0 && heads > 0 {
		headDim = m.Hidden / heads
	}
	return heads, kv, headDim
}

// numLayers reads num_hidden_layers; out of range it records the error and
// returns 0, so that no reader sizes a slice by it.
func numLayers(f *fields) int {
	n := f.reqInt("num_hidden_layers")
	if !checkRange(f, "num_hidden_layers", n, 1, maxLayers) {
		return 0
	}
	return n
}

// readDense reads the dense Llama-style families: every layer has
// attention and a gated MLP. class sets the attention and MLP flags the
// class reads or fixes and returns the per-layer sliding windows.
func readDense(f *fields, m *Model, class func(f *fields, n int, a *Attention, x *MLP) (windows []int)) {
	n := numLayers(f)
	heads, kv, hd := attentionShape(f, m)
	width := f.reqInt("intermediate_size")
	act := f.strOr("hidden_act", "silu")
	att := Attention{Heads: heads, KVHeads: kv, HeadDim: hd}
	mlp := MLP{Width: width, Gated: true, Activation: act}
	windows := class(f, n, &att, &mlp)
	if f.err != nil {
		return
	}
	m.Layers = make([]Layer, n)
	for i := range m.Layers {
		a, x := att, mlp
		a.SlidingWindow = windows[i]
		m.Layers[i] = Layer{Attention: &a, MLP: &x}
	}
}

// layerTypes reads "layer_types" (full_attention / sliding_attention).
func layerTypes(f *fields, n int) ([]string, bool) {
	a, ok := f.array("layer_types")
	if !ok {
		return nil, false
	}
	if len(a) != n {
		f.bad("layer_types", "has %d entries for %d layers", len(a), n)
		return nil, false
	}
	out := make([]string, n)
	for i, e := range a {
		s, ok := e.(string)
		if !ok || (s != "full_attention" && s != "sliding_attention") {
			f.bad(fmt.Sprintf("layer_types[%d]", i), "want \"full_attention\" or \"sliding_attention\", got %v", e)
			return nil, false
		}
		out[i] = s
	}
	return out, true
}
