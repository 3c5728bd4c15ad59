package importance

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// Kinds of per-expert scores (ExpertScores.Kind).
const (
	// ExpertREAP is REAP's router-weighted expert activation saliency:
	// S_j = (1/N_j) Σ_t g_j(t)·‖f_j(t)‖₂ over the N_j calibration tokens
	// routed to expert j, with g_j(t) its router gate weight and f_j(t) its
	// output (Lasby et al., "REAP the Experts", arXiv 2510.13999; as
	// llm-compressor's REAPPruningModifier computes it).
	ExpertREAP = "reap"
	// ExpertFrequency is the share of calibration tokens routed to the
	// expert (its top-k selection count over all tokens).
	ExpertFrequency = "frequency"
	// ExpertStructural is the structural prior computed from the weights
	// alone, with no calibration data: the L2 norm of the expert's router
	// row times the L2 norm of all its weights (StructuralExperts).
	ExpertStructural = "structural"
)

// ExpertScores rank the routed experts of every MoE layer (higher = more
// important): the pruner keeps the highest. They are stored like Scores,
// as a safetensors file, with provenance in __metadata__:
//
//	format      "autocompress-expert-scores"
//	version     "1"
//	kind        reap | frequency | structural
//	layers      the parent's layer count
//	model_hash  HashModelDir of the parent ("" when unknown)
//	data_hash   the calibration data's hash ("" for structural)
//	tokens      calibration tokens (0 for structural)
//	source      free text: what computed them (a tool and its command)
//
// with one float32 tensor "layers.N.experts" of num_experts entries per
// MoE layer N (none for other layers). The native engine does not run MoE
// layers, so autocompress computes only the structural kind itself;
// REAP or frequency scores computed elsewhere (e.g. with PyTorch) are read
// from such a file.
type ExpertScores struct {
	Kind      string
	Layers    [][]float64 // [layer][expert]; nil for a layer without MoE
	ModelHash string
	DataHash  string
	Tokens    int64
	Source    string
}

const expertFormat = "autocompress-expert-scores"

// Describe says in a few words where the scores come from.
func (s *ExpertScores) Describe() string {
	switch s.Kind {
	case ExpertStructural:
		return "structural prior (router row norm × expert weight norm; no calibration data)"
	case ExpertREAP:
		return fmt.Sprintf("REAP router-weighted activation norms over %d tokens (%s)", s.Tokens, s.Source)
	}
	return fmt.Sprintf("routing frequency over %d tokens (%s)", s.Tokens, s.Source)
}

// Check reports whether the scores fit m: one score per routed expert of
// every MoE layer, none elsewhere, every score a finite number.
func (s *ExpertScores) Check(m *architecture.Model) error {
	if len(s.Layers) != len(m.Layers) {
		return fmt.Errorf("expert scores for %d layers, the model has %d", len(s.Layers), len(m.Layers))
	}
	for l, v := range s.Layers {
		x := m.Layers[l].MoE
		switch {
		case x == nil && v != nil:
			return fmt.Errorf("layer %d: expert scores for a layer without MoE", l)
		case x != nil && len(v) != x.Experts:
			return fmt.Errorf("layer %d: %d expert scores, the layer has %d routed experts", l, len(v), x.Experts)
		}
		for e, f := range v {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("layer %d: expert %d: score %v is not a finite number", l, e, f)
			}
		}
	}
	return nil
}

// Save writes the scores (atomically).
func (s *ExpertScores) Save(path string) error {
	var specs []checkpoint.TensorSpec
	for l, v := range s.Layers {
		if v != nil {
			specs = append(specs, checkpoint.TensorSpec{Name: expertTensor(l), DType: checkpoint.F32, Shape: []int64{int64(len(v))}})
		}
	}
	meta := map[string]string{"format": expertFormat, "version": "1", "kind": s.Kind, "layers": strconv.Itoa(len(s.Layers)),
		"model_hash": s.ModelHash, "data_hash": s.DataHash, "tokens": strconv.FormatInt(s.Tokens, 10), "source": s.Source}
	w, err := checkpoint.Create(path, specs, meta)
	if err != nil {
		return err
	}
	for l, v := range s.Layers {
		if v != nil {
			if err := w.WriteFloat32(expertTensor(l), f32(v)); err != nil {
				w.Abort()
				return err
			}
		}
	}
	return w.Close()
}

func expertTensor(l int) string { return fmt.Sprintf("layers.%d.experts", l) }

// LoadExperts reads expert scores written by ExpertScores.Save (or by any
// tool that follows its format).
func LoadExperts(path string) (*ExpertScores, error) {
	r, err := checkpoint.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	md := r.Metadata()
	bad := func(f string, a ...any) error { return &FormatError{Path: path, Msg: fmt.Sprintf(f, a...)} }
	if md["format"] != expertFormat {
		return nil, bad("not an expert-scores file (metadata format %q, want %q)", md["format"], expertFormat)
	}
	if md["version"] != "1" {
		return nil, bad("expert-scores version %q, this autocompress reads 1", md["version"])
	}
	s := &ExpertScores{Kind: md["kind"], ModelHash: md["model_hash"], DataHash: md["data_hash"], Source: md["source"]}
	switch s.Kind {
	case ExpertREAP, ExpertFrequency, ExpertStructural:
	default:
		return nil, bad("kind %q: want %s, %s or %s", s.Kind, ExpertREAP, ExpertFrequency, ExpertStructural)
	}
	L, err := strconv.Atoi(md["layers"])
	if err != nil || L <= 0 {
		return nil, bad("metadata layers = %q is not a layer count", md["layers"])
	}
	if md["tokens"] != "" {
		if s.Tokens, err = strconv.ParseInt(md["tokens"], 10, 64); err != nil || s.Tokens < 0 {
			return nil, bad("metadata tokens = %q is not a count", md["tokens"])
		}
	}
	s.Layers = make([][]float64, L)
	for _, t := range r.Tensors() {
		var l int
		if _, err := fmt.Sscanf(t.Name, "layers.%d.experts", &l); err != nil || expertTensor(l) != t.Name || l < 0 || l >= L || len(t.Shape) != 1 {
			return nil, bad("tensor %s (shape %v): want layers.N.experts, one vector per MoE layer N < %d", t.Name, t.Shape, L)
		}
		v, err := r.Float32(t.Name)
		if err != nil {
			return nil, err
		}
		s.Layers[l] = make([]float64, len(v))
		for i, x := range v {
			s.Layers[l][i] = float64(x)
		}
	}
	return s, nil
}

// StructuralExperts computes the structural prior of the routed experts
// of the checkpoint in dir (model m) from its weights alone: for expert e
// of an MoE layer, ‖router row e‖₂ · ‖all of e's weights‖₂ (its gate, up
// and down matrices, or its slices of gpt-oss's stacked tensors; biases
// left out). An expert the router rarely favours, or whose weights are
// small, scores low. It is a prior, not a measurement: REAP or routing
// frequency on calibration data rank experts better. It streams every
// expert tensor once and holds no tensor whole.
func StructuralExperts(ctx context.Context, dir string, m *architecture.Model) (*ExpertScores, error) {
	r, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	router := make([][]float64, len(m.Layers))
	weights := make([][]float64, len(m.Layers))
	for l, layer := range m.Layers {
		if x := layer.MoE; x != nil {
			weights[l] = make([]float64, x.Experts)
		}
	}
	for _, t := range m.Tensors() {
		if t.Layer < 0 || m.Layers[t.Layer].MoE == nil || t.Block != architecture.BlockMoE {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		isBias := len(t.Kind) > 5 && t.Kind[len(t.Kind)-5:] == "_bias"
		switch {
		case t.Kind == "moe_router":
			if router[t.Layer], err = rowSumSquares(r, t.Name); err != nil {
				return nil, err
			}
		case isBias:
		case t.Expert >= 0:
			rows, err := rowSumSquares(r, t.Name)
			if err != nil {
				return nil, err
			}
			for _, v := range rows {
				weights[t.Layer][t.Expert] += v
			}
		case t.Experts > 0: // stacked along dimension 0
			rows, err := rowSumSquares(r, t.Name)
			if err != nil {
				return nil, err
			}
			for e, v := range rows {
				weights[t.Layer][e] += v
			}
		}
	}
	s := &ExpertScores{Kind: ExpertStructural, Layers: make([][]float64, len(m.Layers)), Source: "autocompress StructuralExperts"}
	if s.ModelHash, err = HashModelDir(dir); err != nil {
		return nil, err
	}
	for l := range m.Layers {
		if weights[l] == nil {
			continue
		}
		if len(router[l]) != len(weights[l]) {
			return nil, fmt.Errorf("importance: layer %d: the router has %d rows for %d experts", l, len(router[l]), len(weights[l]))
		}
		s.Layers[l] = make([]float64, len(weights[l]))
		for e := range weights[l] {
			s.Layers[l][e] = math.Sqrt(router[l][e]) * math.Sqrt(weights[l][e])
		}
	}
	return s, nil
}

// rowSumSquares streams a tensor and returns the sum of squares of each
// slice along dimension 0.
func rowSumSquares(r *checkpoint.Reader, name string) ([]float64, error) {
	info, ok := r.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("importance: tensor %s is missing", name)
	}
	sec, err := r.Section(name)
	if err != nil {
		return nil, err
	}
	rows := 1
	if len(info.Shape) > 0 {
		rows = int(info.Shape[0])
	}
	es := info.DType.Size()
	if rows <= 0 || es <= 0 || info.Size%int64(rows) != 0 {
		return nil, fmt.Errorf("importance: tensor %s of shape %v cannot be read by rows", name, info.Shape)
	}
	rowBytes := int(info.Size / int64(rows))
	per := max(1, (4<<20)/max(rowBytes, 1))
	buf := make([]byte, per*rowBytes)
	vals := make([]float32, per*rowBytes/es)
	out := make([]float64, rows)
	for i := 0; i < rows; i += per {
		k := min(per, rows-i)
		b := buf[:k*rowBytes]
		if _, err := io.ReadFull(io.NewSectionReader(sec, int64(i*rowBytes), int64(len(b))), b); err != nil {
			return nil, fmt.Errorf("importance: reading %s: %w", name, err)
		}
		v := vals[:len(b)/es]
		if err := checkpoint.DecodeFloat32(v, info.DType, b); err != nil {
			return nil, fmt.Errorf("importance: tensor %s: %w", name, err)
		}
		n := rowBytes / es
		for j := range k {
			sum := 0.0
			for _, x := range v[j*n : (j+1)*n] {
				sum += float64(x) * float64(x)
			}
			out[i+j] = sum
		}
	}
	return out, nil
}
