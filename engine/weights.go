package engine

import (
	"errors"
	"fmt"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine/blas"
)

// matrix is a weight matrix (out, in) in HuggingFace layout, as the
// products read it: float32 (a view of the parameter slab, or of an F32
// checkpoint's mapping), or 16-bit words (BF16 or F16) read in place from
// the mapped checkpoint and converted to float32 one tile at a time by
// blas.SgemmHalf.
type matrix struct {
	f    []float32
	h    []uint16
	kind blas.HalfKind
}

func f32mat(f []float32) matrix { return matrix{f: f} }

// mul computes y (N,out) = x (N,in) · Wᵀ.
func (w matrix) mul(y, x []float32, N, in, out int) {
	if w.h != nil {
		blas.SgemmHalf(N, out, in, x, in, w.h, w.kind, in, 0, y, out)
		return
	}
	blas.Sgemm(false, true, N, out, in, 1, x, in, w.f, in, 0, y, out)
}

// mulT computes dx (N,in) = dy (N,out) · W: the input gradient of mul,
// and the forward product of gpt-oss's stacked expert matrices (stored
// input-major, applied as x·W); 16-bit weights are converted a tile of
// rows at a time into pooled scratch.
func (w matrix) mulT(dx, dy []float32, N, in, out int) {
	if w.h == nil {
		blas.Sgemm(false, false, N, in, out, 1, dy, out, w.f, in, 0, dx, in)
		return
	}
	const rows = 256
	buf := getScratch(rows * in) // per gpt-oss expert and layer: pooled
	defer putScratch(buf)
	tile := (*buf)[:rows*in]
	for lo := 0; lo < out; lo += rows {
		hi := min(lo+rows, out)
		for i := lo; i < hi; i++ {
			w.row(tile[(i-lo)*in:], i, in)
		}
		beta := float32(1)
		if lo == 0 {
			beta = 0
		}
		blas.Sgemm(false, false, N, in, hi-lo, 1, dy[lo:], out, tile, in, beta, dx, in)
	}
}

// sub returns the n elements of the matrix from element off: one expert
// of a stacked tensor (gpt-oss's [E, in, out] expert matrices).
func (w matrix) sub(off, n int) matrix {
	if w.h != nil {
		return matrix{h: w.h[off : off+n : off+n], kind: w.kind}
	}
	return matrix{f: w.f[off : off+n : off+n]}
}

// row writes row i (C wide) of the matrix into dst as float32.
func (w matrix) row(dst []float32, i, C int) {
	if w.h != nil {
		w.kind.ToFloat32(dst[:C], w.h[i*C:(i+1)*C])
		return
	}
	copy(dst[:C], w.f[i*C:(i+1)*C])
}

// layerMats are the weight matrices of one decoder layer (absent: zero).
type layerMats struct {
	q, k, v, o, gate, up, down matrix
	// router and experts are an MoE layer's (moe.go); gateUp and downS
	// gpt-oss's stacked experts ([E, hidden, 2·width], [E, width, hidden]).
	router        matrix
	experts       []expertMats
	gateUp, downS matrix
}

// mapped holds what a model opened with LoadOptions.Mapped reads in place:
// the open checkpoint (whose mapping the matrices view) and the matrices.
type mapped struct {
	r      *checkpoint.Reader
	stream bool
	embed  matrix
	head   matrix
	layers []layerMats
	// names of each layer's mapped tensors, and of the global ones, for
	// Release when streaming.
	layerNames  [][]string
	headNames   []string
	bytes       int64 // mapped weight bytes
	layerBytes  []int64
	globalBytes int64 // embedding and head
}

// mats returns layer l's weight matrices.
func (m *Model) mats(l int) layerMats {
	if m.mapped != nil {
		return m.mapped.layers[l]
	}
	w := &m.p.layers[l]
	lm := layerMats{q: f32mat(w.q), k: f32mat(w.k), v: f32mat(w.v), o: f32mat(w.o),
		gate: f32mat(w.gate), up: f32mat(w.up), down: f32mat(w.down), router: f32mat(w.router),
		gateUp: f32mat(w.stacked.gateUp), downS: f32mat(w.stacked.down)}
	if w.experts != nil {
		lm.experts = make([]expertMats, len(w.experts))
		for e, x := range w.experts {
			lm.experts[e] = expertMats{gate: f32mat(x.gate), up: f32mat(x.up), down: f32mat(x.down)}
		}
	}
	return lm
}

func (m *Model) embedMat() matrix {
	if m.mapped != nil {
		return m.mapped.embed
	}
	return f32mat(m.p.embed)
}

func (m *Model) headMat() matrix {
	if m.mapped != nil {
		return m.mapped.head
	}
	return f32mat(m.p.head)
}

// releaseLayer gives layer l's mapped pages back to the operating system
// when the model streams its layers (LoadOptions.Stream).
func (m *Model) releaseLayer(l int) {
	if m.mapped == nil || !m.mapped.stream {
		return
	}
	for _, n := range m.mapped.layerNames[l] {
		m.mapped.r.Release(n) // advice: failing it only keeps the pages resident
	}
}

// releaseHead gives the mapped embedding and LM head pages back when
// streaming.
func (m *Model) releaseHead() {
	if m.mapped == nil || !m.mapped.stream {
		return
	}
	for _, n := range m.mapped.headNames {
		m.mapped.r.Release(n)
	}
}

// LoadOptions configures LoadWith.
type LoadOptions struct {
	// Mapped reads the weight matrices (embedding, projections, MLP, LM
	// head) in place from the memory-mapped checkpoint, in their stored
	// dtype (BF16, F16 or F32), instead of converting them into the
	// float32 parameter slab: a bf16 checkpoint's forward pass then holds
	// about its file size plus activations, not twice it. Every product
	// converts one tile of weights at a time and accumulates in float32;
	// with the pure-Go sgemm the logits are bit-identical to those of the
	// checkpoint converted to float32 first (TestMappedBitExact). Norms
	// and biases are float32 in the slab. Such a model is forward-only
	// (Forward, ForwardLoss, generation, serving, observers and skips):
	// its matrices are not in Params, Tensor returns nil for them, and
	// the backward passes return ErrMapped. Close releases the mapping.
	// Other dtypes (F64, F8) are converted into the slab as Load does.
	Mapped bool
	// Stream (with Mapped) releases each layer's pages after the layer has
	// run (madvise MADV_DONTNEED), so the resident set holds about one
	// layer's weights, the embedding and LM head, and activations, and a
	// parent larger than memory still runs, at the speed the disk (or page
	// cache) gives.
	Stream bool
}

// EnsureDefaults returns o (every zero field is a valid setting).
func (o *LoadOptions) EnsureDefaults() *LoadOptions { return o }

// Validate reports an invalid combination: streaming needs the weights
// mapped in place.
func (o *LoadOptions) Validate() error {
	if o.Stream && !o.Mapped {
		return errors.New("engine: load: streaming layers needs the weights mapped in place (Mapped)")
	}
	return nil
}

// ErrMapped is returned by the backward passes of a model whose weights are
// read in place from its checkpoint (LoadOptions.Mapped).
var ErrMapped = errors.New("engine: backward on a model loaded with its weights mapped in place (forward only); load it as float32 to train it")

// DTypeError reports a checkpoint tensor whose dtype the engine cannot read.
type DTypeError struct {
	File   string
	Tensor string
	DType  checkpoint.DType
}

func (e *DTypeError) Error() string {
	return fmt.Sprintf("%s: tensor %q is %s, which the engine cannot read as weights (it reads F32, BF16 and F16, and converts F64, F8_E4M3 and F8_E5M2); convert the checkpoint to bf16 or f32 first", e.File, e.Tensor, e.DType)
}

// readable reports whether the engine reads weights of dtype d.
func readable(d checkpoint.DType) bool { return d.IsFloat() }

// halfKind returns the blas kind of a 16-bit float dtype.
func halfKind(d checkpoint.DType) (blas.HalfKind, bool) {
	switch d {
	case checkpoint.BF16:
		return blas.BF16, true
	case checkpoint.F16:
		return blas.F16, true
	}
	return 0, false
}

// isMatrix reports whether the tensor is one of the weight matrices that
// a mapped model reads in place.
func (s TensorSpec) isMatrix() bool {
	switch s.kind {
	case "embedding", "lm_head", "attn_q", "attn_k", "attn_v", "attn_o", "mlp_gate", "mlp_up", "mlp_down",
		"moe_router", "expert_gate", "expert_up", "expert_down":
		return len(s.Shape) == 2 || s.isStacked()
	case "expert_gate_up":
		return s.isStacked()
	}
	return false
}

// newMapped builds a model over the open checkpoint r: the matrices it can
// read in place are views of r's mapping, the rest is converted into the
// slab. r must have been checked (every tensor present, shaped and
// readable); the model owns it from then on.
func newMapped(arch *architecture.Model, r *checkpoint.Reader, stream bool) (*Model, error) {
	dims, err := checkArch(arch)
	if err != nil {
		return nil, err
	}
	specs := tensorSpecs(arch)
	mp := &mapped{r: r, stream: stream, layers: make([]layerMats, len(dims)), layerNames: make([][]string, len(dims)), layerBytes: make([]int64, len(dims))}
	inPlace := make([]bool, len(specs))
	mats := make([]matrix, len(specs))
	for i, s := range specs {
		if !s.isMatrix() {
			continue
		}
		info, _ := r.Tensor(s.Name)
		var w matrix
		if kind, ok := halfKind(info.DType); ok {
			h, err := r.Uint16s(s.Name)
			if err != nil {
				return nil, err
			}
			w = matrix{h: h, kind: kind}
		} else if f, ok := r.Float32View(s.Name); ok {
			w = matrix{f: f}
		} else {
			continue // converted into the slab
		}
		inPlace[i], mats[i] = true, w
		mp.bytes += info.Size
		if s.layer < 0 {
			mp.headNames = append(mp.headNames, s.Name)
			mp.globalBytes += info.Size
		} else {
			mp.layerNames[s.layer] = append(mp.layerNames[s.layer], s.Name)
			mp.layerBytes[s.layer] += info.Size
		}
	}
	m, err := newSlab(arch, dims, specs, inPlace, false)
	if err != nil {
		return nil, err
	}
	for i, s := range specs {
		if inPlace[i] {
			continue
		}
		info, _ := r.Tensor(s.Name)
		if err := r.Float32Into(m.Tensor(s.Name), s.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", info.File, err)
		}
	}
	// Every matrix, in place or in the slab.
	mat := func(i int) matrix {
		if inPlace[i] {
			return mats[i]
		}
		return f32mat(m.Tensor(specs[i].Name))
	}
	for i, s := range specs {
		if !s.isMatrix() {
			continue
		}
		w := mat(i)
		if s.layer < 0 {
			if s.kind == "embedding" {
				mp.embed = w
			} else {
				mp.head = w
			}
			continue
		}
		lm := &mp.layers[s.layer]
		switch s.kind {
		case "attn_q":
			lm.q = w
		case "attn_k":
			lm.k = w
		case "attn_v":
			lm.v = w
		case "attn_o":
			lm.o = w
		case "mlp_gate":
			lm.gate = w
		case "mlp_up":
			lm.up = w
		case "mlp_down":
			lm.down = w
		case "moe_router":
			lm.router = w
		case "expert_gate_up":
			lm.gateUp = w
		case "expert_gate", "expert_up", "expert_down":
			if s.isStacked() {
				lm.downS = w
			} else {
				mapExpert(lm, dims[s.layer].moe.experts, s, w)
			}
		}
	}
	if arch.TiedEmbeddings {
		mp.head = mp.embed
	}
	m.mapped = mp
	return m, nil
}

// MappedBytes returns the bytes of weights the model reads in place from
// its mapped checkpoint (LoadOptions.Mapped; 0 otherwise).
func (m *Model) MappedBytes() int64 {
	if m.mapped == nil {
		return 0
	}
	return m.mapped.bytes
}

// Close releases the checkpoint mapping of a model loaded with
// LoadOptions.Mapped; the model must not be used afterwards. For other
// models it does nothing.
func (m *Model) Close() error {
	if m.mapped == nil {
		return nil
	}
	r := m.mapped.r
	m.mapped = nil
	m.p = views{}
	return r.Close()
}

// TensorFloat32 returns the tensor named name as float32: the view of the
// slab (Tensor), or, for a matrix read in place (LoadOptions.Mapped), a
// converted copy of it, which the caller owns. Unlike Tensor it serves
// mapped models, one tensor at a time: what a reader of a few tensors of a
// parent needs without a float32 copy of the whole model.
func (m *Model) TensorFloat32(name string) ([]float32, error) {
	i, ok := m.index[name]
	if !ok {
		return nil, fmt.Errorf("engine: no tensor %q", name)
	}
	return m.tensorF32(i)
}

// tensorF32 returns tensor i as float32: the slab view, or a converted copy
// of a matrix read in place.
func (m *Model) tensorF32(i int) ([]float32, error) {
	s := m.specs[i]
	if m.offsets[i] >= 0 {
		return m.params[m.offsets[i] : m.offsets[i]+s.Size() : m.offsets[i]+s.Size()], nil
	}
	if m.mapped == nil {
		return nil, fmt.Errorf("engine: tensor %q: the model's checkpoint was closed", s.Name)
	}
	out := make([]float32, s.Size())
	if err := m.mapped.r.Float32Into(out, s.Name); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return out, nil
}
