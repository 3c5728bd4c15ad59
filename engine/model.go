package engine

import (
	"errors"
	"fmt"

	"github.com/autocompress/autocompress/architecture"
)

// Model is a Llama-family decoder held in float32: one parameter slab, a
// mirrored gradient slab, and activations for the last (B, T) run. A Model is
// not safe for concurrent use.
type Model struct {
	arch    *architecture.Model
	dims    []layerDims
	specs   []TensorSpec
	offsets []int
	index   map[string]int
	eps     float32

	params, grads []float32
	p, g          views

	rope map[int]*ropeTable
	// noRoPE: the family's attention has no rotary embedding (Nemotron-H).
	noRoPE   bool
	observer Observer
	skip     []bool
	// skipAttn and skipMLP turn one sub-block of a layer into an identity
	// (SetSkipBlock).
	skipAttn, skipMLP []bool

	numParams int
	// mapped holds the matrices read in place from a mapped checkpoint
	// (LoadOptions.Mapped); nil when every tensor is in the slab.
	mapped *mapped

	a    *acts
	step *stepBufs
	// freeCaches are KV caches of finished Serve requests, for reuse.
	freeCaches []*Cache
	inference  bool
}

// New builds a model of architecture arch with random weights: matrices and
// embeddings from N(0, 0.02²) drawn from a PCG seeded with seed, norm weights
// 1, biases 0. Init writes the same weights as a checkpoint without holding
// them.
func New(arch *architecture.Model, seed uint64) (*Model, error) {
	m, err := newEmpty(arch)
	if err != nil {
		return nil, err
	}
	r := initRand(seed)
	for i, s := range m.specs {
		fillInit(r, s, m.params[m.offsets[i]:m.offsets[i]+s.Size()])
	}
	return m, nil
}

// isNormName reports whether a tensor name of the Llama-named families is a
// norm weight (the tests' check of TensorSpec.isNorm).
func isNormName(name string) bool {
	for _, suf := range []string{"layernorm.weight", "norm.weight", "q_norm.weight", "k_norm.weight"} {
		if len(name) >= len(suf) && name[len(name)-len(suf):] == suf {
			return true
		}
	}
	return false
}

// NewZero builds a model of architecture arch with every parameter zero,
// for callers that fill the slab themselves (e.g. building a pruned child in
// memory from its parent's weights).
func NewZero(arch *architecture.Model) (*Model, error) { return newEmpty(arch) }

// NewZeroForward is NewZero without the gradient slab: a model that runs
// forward only (half the memory of NewZero's; its backward passes return
// ErrNoGradients), e.g. a candidate child scored and dropped.
func NewZeroForward(arch *architecture.Model) (*Model, error) {
	dims, err := checkArch(arch)
	if err != nil {
		return nil, err
	}
	return newSlab(arch, dims, tensorSpecs(arch), nil, false)
}

// ErrNoGradients is returned by the backward passes of a model built
// without gradients (NewZeroForward).
var ErrNoGradients = errors.New("engine: backward on a model built without gradients (forward only)")

// newEmpty allocates the slabs for arch with zero parameters.
func newEmpty(arch *architecture.Model) (*Model, error) {
	dims, err := checkArch(arch)
	if err != nil {
		return nil, err
	}
	return newSlab(arch, dims, tensorSpecs(arch), nil, true)
}

// newSlab builds a model whose parameter slab holds every tensor of specs
// but those marked in inPlace (matrices read from a mapped checkpoint,
// offset -1), with a gradient slab when grads.
func newSlab(arch *architecture.Model, dims []layerDims, specs []TensorSpec, inPlace []bool, grads bool) (*Model, error) {
	m := &Model{arch: arch.Clone(), dims: dims, index: map[string]int{}, rope: map[int]*ropeTable{}}
	m.noRoPE = arch.Family().NoRoPE
	m.eps = float32(arch.NormEps)
	if m.eps <= 0 {
		m.eps = 1e-6
	}
	m.specs = specs
	m.offsets = make([]int, len(m.specs))
	total := 0
	for i, s := range m.specs {
		m.index[s.Name] = i
		m.numParams += s.Size()
		if inPlace != nil && inPlace[i] {
			m.offsets[i] = -1
			continue
		}
		m.offsets[i] = total
		total += s.Size()
	}
	m.params = make([]float32, total)
	m.p = bindViews(m.params, m.specs, m.offsets, len(dims), arch.TiedEmbeddings)
	if grads {
		m.grads = make([]float32, total)
		m.g = bindViews(m.grads, m.specs, m.offsets, len(dims), arch.TiedEmbeddings)
	}
	m.skip = make([]bool, len(dims))
	m.skipAttn, m.skipMLP = make([]bool, len(dims)), make([]bool, len(dims))
	for _, d := range dims {
		if d.attn && m.rope[d.hd] == nil {
			m.rope[d.hd] = newRopeTable(arch, d.hd)
		}
	}
	return m, nil
}

// Arch returns a copy of the model's architecture.
func (m *Model) Arch() *architecture.Model { return m.arch.Clone() }

// Specs returns the parameter tensors in slab order.
func (m *Model) Specs() []TensorSpec { return append([]TensorSpec(nil), m.specs...) }

// NumParams returns the number of parameters: len(Params()), and for a
// model whose matrices are read in place (LoadOptions.Mapped) those too.
func (m *Model) NumParams() int { return m.numParams }

// Params returns the parameter slab. Every tensor is a contiguous range of
// it (see Tensor and Offset); the optimiser may update it in place. The
// matrices of a model loaded with LoadOptions.Mapped are not in it.
func (m *Model) Params() []float32 { return m.params }

// Grads returns the gradient slab, laid out exactly like Params.
func (m *Model) Grads() []float32 { return m.grads }

// ZeroGrad sets every gradient to zero. Backward accumulates, so call it
// before each step.
func (m *Model) ZeroGrad() { clear(m.grads) }

// Tensor returns the view of the parameter named name (HF name, row-major
// HF shape), or nil when there is no such tensor or it is a matrix read in
// place (LoadOptions.Mapped).
func (m *Model) Tensor(name string) []float32 {
	i, ok := m.index[name]
	if !ok || m.offsets[i] < 0 {
		return nil
	}
	return m.params[m.offsets[i] : m.offsets[i]+m.specs[i].Size() : m.offsets[i]+m.specs[i].Size()]
}

// Grad returns the view of the gradient of the parameter named name.
func (m *Model) Grad(name string) []float32 {
	i, ok := m.index[name]
	if !ok || m.offsets[i] < 0 || m.grads == nil {
		return nil
	}
	return m.grads[m.offsets[i] : m.offsets[i]+m.specs[i].Size() : m.offsets[i]+m.specs[i].Size()]
}

// Offset returns where the tensor named name starts in the slabs, and
// whether it exists there (a matrix read in place does not).
func (m *Model) Offset(name string) (int, bool) {
	i, ok := m.index[name]
	if !ok || m.offsets[i] < 0 {
		return 0, false
	}
	return m.offsets[i], true
}

// SetObserver installs o (nil turns observation off).
func (m *Model) SetObserver(o Observer) { m.observer = o }

// SetSkip makes the given layers identities in Forward, ForwardLoss and the
// backward passes (their hidden state passes through unchanged); an empty
// call clears all skips. Generation ignores it.
func (m *Model) SetSkip(layers ...int) error {
	for _, l := range layers {
		if l < 0 || l >= len(m.dims) {
			return fmt.Errorf("engine: skip layer %d: model has layers 0..%d", l, len(m.dims)-1)
		}
	}
	clear(m.skip)
	for _, l := range layers {
		m.skip[l] = true
	}
	return nil
}

// Block names a sub-block of a decoder layer (SetSkipBlock).
type Block int

// Sub-blocks of a layer.
const (
	// BlockAttention is the attention sub-block with its input_layernorm.
	BlockAttention Block = iota
	// BlockMLP is the MLP (or mixture-of-experts) sub-block with its
	// post_attention_layernorm.
	BlockMLP
)

func (b Block) String() string {
	switch b {
	case BlockAttention:
		return "attention"
	case BlockMLP:
		return "mlp"
	}
	return "block?"
}

// SetSkipBlock makes sub-block b of the given layers an identity in Forward,
// ForwardLoss and the backward passes: the residual stream passes that
// sub-block unchanged, which is what removing it (DeciLM "no_op", prune's
// remove_attention / remove_mlp) computes. A layer lacking the sub-block is
// not an error (nothing changes). An empty call clears the skips of b only;
// SetSkip (whole layers) is independent. Generation ignores it.
func (m *Model) SetSkipBlock(b Block, layers ...int) error {
	var skip []bool
	switch b {
	case BlockAttention:
		skip = m.skipAttn
	case BlockMLP:
		skip = m.skipMLP
	default:
		return fmt.Errorf("engine: skip block %d: want BlockAttention or BlockMLP", int(b))
	}
	for _, l := range layers {
		if l < 0 || l >= len(m.dims) {
			return fmt.Errorf("engine: skip %s of layer %d: model has layers 0..%d", b, l, len(m.dims)-1)
		}
	}
	clear(skip)
	for _, l := range layers {
		skip[l] = true
	}
	return nil
}

// layerActs are one layer's saved activations.
type layerActs struct {
	ln1, rstd1      []float32
	q, qr, qrstd    []float32 // q after bias; after qk-norm and RoPE; qk-norm rstd
	k, kr, krstd, v []float32
	att             []float32 // (B, heads, T, T)
	ao, mid         []float32
	ln2, rstd2      []float32
	gate, up, h     []float32
	// mproj and my are a Mamba2 mixer's in_proj output and out_proj input.
	mproj, my []float32
	// moe is what an MoE block keeps for backward (nil in inference mode).
	moe *moeSaved
}

// acts holds every activation for one (B, T), plus backward scratch.
type acts struct {
	B, T        int
	tokens      []int32
	targets     []int32
	count       int  // targets ≥ 0
	inference   bool // layer buffers shared: no backward
	hasLoss     bool
	res         [][]float32 // L+1 hidden states (N,H)
	layers      []layerActs
	lnf         []float32
	rstdf       []float32
	logits      []float32
	lse         []float32 // per row log-sum-exp of the logits (ForwardLoss)
	tokenLoss   []float64 // per row cross-entropy (ForwardLoss, ForwardLossFrom; NaN: ignored)
	lossValid   bool      // tokenLoss is the last pass's
	logitsValid bool      // logits are the last pass's (FinalGradients overwrites them)
	backward    *backBufs
}

type backBufs struct {
	dlogits, dlnf, dres, dln  []float32
	dh, dgate, dup            []float32
	dao, dq, dqr, dk, dkr, dv []float32
	scratch                   []float32
	moe                       *moeBackBufs // nil without MoE layers
}

func (m *Model) allocActs(B, T int) *acts {
	N := B * T
	H := m.arch.Hidden
	a := &acts{B: B, T: T, tokens: make([]int32, N), targets: make([]int32, N), inference: m.inference}
	L := len(m.dims)
	a.res = make([][]float32, L+1)
	a.layers = make([]layerActs, L)
	// alloc returns a buffer of n floats; in inference mode, buffer number
	// slot is shared by all layers (sized for the widest), so memory does
	// not grow with depth.
	shared := map[int][]float32{}
	if m.inference {
		need := map[int]int{}
		for _, d := range m.dims {
			for slot, n := range layerBufSizes(d, N, H) {
				need[slot] = max(need[slot], n)
			}
		}
		for slot, n := range need {
			shared[slot] = make([]float32, n)
		}
		// Hidden states ping-pong between two buffers.
		r0, r1 := make([]float32, N*H), make([]float32, N*H)
		for i := range a.res {
			a.res[i] = r0
			if i%2 == 1 {
				a.res[i] = r1
			}
		}
	} else {
		for i := range a.res {
			a.res[i] = make([]float32, N*H)
		}
	}
	for i, d := range m.dims {
		sizes := layerBufSizes(d, N, H)
		buf := func(slot int) []float32 {
			n := sizes[slot]
			if n == 0 {
				return nil
			}
			if m.inference {
				return shared[slot][:n]
			}
			return make([]float32, n)
		}
		a.layers[i] = layerActs{
			mid: buf(slotMid), ln1: buf(slotLn1), rstd1: buf(slotRstd1),
			q: buf(slotQ), qr: buf(slotQr), k: buf(slotK), kr: buf(slotKr), v: buf(slotV),
			qrstd: buf(slotQrstd), krstd: buf(slotKrstd), ao: buf(slotAo),
			ln2: buf(slotLn2), rstd2: buf(slotRstd2), gate: buf(slotGate), up: buf(slotUp), h: buf(slotH),
			mproj: buf(slotMambaProj), my: buf(slotMambaY),
		}
		if d.moe != nil && !m.inference {
			a.layers[i].moe = newMoESaved(d.moe, N)
		}
	}
	a.lnf, a.rstdf = make([]float32, N*H), make([]float32, N)
	a.logits = make([]float32, N*m.arch.Vocab)
	a.lse = make([]float32, N)
	a.tokenLoss = make([]float64, N)
	return a
}

// Activation buffer slots of one layer.
const (
	slotMid = iota
	slotLn1
	slotRstd1
	slotQ
	slotQr
	slotK
	slotKr
	slotV
	slotQrstd
	slotKrstd
	slotAo
	slotLn2
	slotRstd2
	slotGate
	slotUp
	slotH
	slotMambaProj
	slotMambaY
	numSlots
)

// layerBufSizes returns the floats each activation buffer of a layer needs
// for N rows (0: the layer has no such buffer).
func layerBufSizes(d layerDims, N, H int) [numSlots]int {
	var s [numSlots]int
	s[slotMid] = N * H
	if d.attn {
		s[slotLn1], s[slotRstd1] = N*H, N
		s[slotQ], s[slotQr] = N*d.qd, N*d.qd
		s[slotK], s[slotKr], s[slotV] = N*d.kd, N*d.kd, N*d.kd
		if d.qkNorm {
			s[slotQrstd], s[slotKrstd] = N*d.heads, N*d.kvH
		}
		s[slotAo] = N * d.qd
	}
	if d.moe != nil {
		s[slotLn2], s[slotRstd2] = N*H, N
	}
	if x := d.mamba; x != nil {
		s[slotLn1], s[slotRstd1] = N*H, N
		s[slotMambaProj], s[slotMambaY] = N*x.projDim(), N*x.dInner()
	}
	if d.mlp {
		s[slotLn2], s[slotRstd2] = N*H, N
		if d.gated {
			s[slotGate] = N * d.ffn
		}
		s[slotUp], s[slotH] = N*d.ffn, N*d.ffn
	}
	return s
}

// SetInference switches inference mode on or off. In inference mode the
// forward passes keep no per-layer activations for backward: all layers
// share one set of buffers, so activation memory does not grow with the
// number of layers (calibration and evaluation of large models at long
// sequence lengths). Backward and BackwardFromLogits then return
// ErrInference. Observers and SetSkip work in both modes. The default is
// off (training mode).
func (m *Model) SetInference(on bool) {
	if m.inference != on {
		m.inference = on
		m.a = nil // reallocate for the new mode on the next forward pass
	}
}

// ErrInference is returned by the backward passes in inference mode.
var ErrInference = errors.New("engine: backward after a forward pass in inference mode (call SetInference(false) before the forward pass to keep activations)")

func (m *Model) backBufs() *backBufs {
	if m.a.backward != nil {
		return m.a.backward
	}
	N := m.a.B * m.a.T
	H := m.arch.Hidden
	var qd, kd, ffn int
	for _, d := range m.dims {
		qd, kd, ffn = max(qd, d.qd), max(kd, d.kd), max(ffn, d.ffn)
	}
	b := &backBufs{
		dlogits: make([]float32, N*m.arch.Vocab),
		dlnf:    make([]float32, N*H), dres: make([]float32, N*H), dln: make([]float32, N*H),
		dh: make([]float32, N*ffn), dgate: make([]float32, N*ffn), dup: make([]float32, N*ffn),
		dao: make([]float32, N*qd), dq: make([]float32, N*qd), dqr: make([]float32, N*qd),
		dk: make([]float32, N*kd), dkr: make([]float32, N*kd), dv: make([]float32, N*kd),
		moe: newMoEBackBufs(m.dims, N, H),
	}
	m.a.backward = b
	return b
}

// InputError reports tokens or targets that the model cannot take.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "engine: " + e.Msg }

func (m *Model) checkTokens(what string, tokens []int32, B, T int, allowNeg bool) error {
	if B <= 0 || T <= 0 {
		return &InputError{fmt.Sprintf("batch %d × sequence %d: both must be positive", B, T)}
	}
	if len(tokens) != B*T {
		return &InputError{fmt.Sprintf("%d %s for batch %d × sequence %d (want %d)", len(tokens), what, B, T, B*T)}
	}
	for i, t := range tokens {
		if (t < 0 && !allowNeg) || int(t) >= m.arch.Vocab {
			return &InputError{fmt.Sprintf("%s[%d] = %d outside the vocabulary [0, %d)", what, i, t, m.arch.Vocab)}
		}
	}
	return nil
}

// Forward runs the model on B sequences of T tokens (row-major, tokens[b·T+t])
// and returns the logits (B·T, vocab). The returned slice is owned by the
// model and overwritten by the next forward pass. Activations are allocated
// for the first (B, T) and reused; another (B, T) reallocates them.
func (m *Model) Forward(tokens []int32, B, T int) ([]float32, error) {
	if err := m.checkTokens("tokens", tokens, B, T, false); err != nil {
		return nil, err
	}
	if m.a == nil || m.a.B != B || m.a.T != T || m.a.inference != m.inference {
		m.a = nil // release before allocating the new size
		m.a = m.allocActs(B, T)
	}
	m.a.hasLoss, m.a.lossValid = false, false
	copy(m.a.tokens, tokens)
	m.forward(-1)
	m.a.logitsValid = true
	return m.a.logits, nil
}

// ForwardLossFrom runs layers layer..L-1, the final norm and the LM head on
// hidden, the input of layer `layer` (B·T, hidden) as a forward pass of
// the same model produced it (SiteLayerInput), and returns the mean
// cross-entropy against targets, as ForwardLoss would on the tokens that
// produced hidden: bit for bit the same, since the layers before `layer`
// compute the same whatever the skips of later ones. Skips and observers
// apply to the layers it runs. The cost is ForwardFLOPsFrom(layer, B, T).
// Backward does not follow it (ErrNoForward).
func (m *Model) ForwardLossFrom(layer int, hidden []float32, targets []int32, B, T int) (float32, error) {
	L := len(m.dims)
	if layer < 0 || layer > L {
		return 0, &InputError{fmt.Sprintf("forward from layer %d: model has layers 0..%d", layer, L-1)}
	}
	if err := m.checkTokens("targets", targets, B, T, true); err != nil {
		return 0, err
	}
	if want := B * T * m.arch.Hidden; len(hidden) != want {
		return 0, &InputError{fmt.Sprintf("hidden state of %d values for batch %d × sequence %d × hidden %d (want %d)", len(hidden), B, T, m.arch.Hidden, want)}
	}
	if m.a == nil || m.a.B != B || m.a.T != T || m.a.inference != m.inference {
		m.a = nil
		m.a = m.allocActs(B, T)
	}
	m.a.hasLoss, m.a.lossValid = false, false
	copy(m.a.res[layer], hidden)
	m.forward(layer)
	m.a.logitsValid = true
	copy(m.a.targets, targets)
	sum, count := crossEntropyForward(m.a.lse, m.a.logits, m.a.targets, m.a.tokenLoss, B*T, m.arch.Vocab)
	m.a.lossValid = true
	if count == 0 {
		return 0, &InputError{"every target is negative (ignored): no loss to compute"}
	}
	// The activations of the layers before `layer` are not this pass's:
	// no backward from here.
	m.a.count = count
	return float32(sum / float64(count)), nil
}

// TokenLosses appends to dst the cross-entropy (nats) of every position
// (B·T, row-major) of the last ForwardLoss or ForwardLossFrom, whose mean
// over the positions with a target is the loss it returned, and returns
// the extended slice; an ignored target (negative) gives NaN. It returns
// ErrNoLoss when no loss pass is the model's last pass. The per-token
// losses let a caller pair two passes over the same tokens (an ablation
// against the base model) token by token.
func (m *Model) TokenLosses(dst []float64) ([]float64, error) {
	if m.a == nil || !m.a.lossValid {
		return dst, ErrNoLoss
	}
	return append(dst, m.a.tokenLoss[:m.a.B*m.a.T]...), nil
}

// FinalGradients appends to dst, for every position of the last
// ForwardLoss or ForwardLossFrom, the gradient of that position's own
// cross-entropy with respect to the hidden state entering the final norm
// (the last layer's output), (B·T, hidden) row-major, zero at an ignored
// target, and returns the extended slice: the first-order change of a
// token's loss when a vector is added to its final hidden state. It
// overwrites the pass's logits, so Backward cannot follow (ErrNoForward);
// TokenLosses still can. It costs FinalGradientFLOPs. ErrNoLoss when no
// loss pass is the model's last pass.
func (m *Model) FinalGradients(dst []float32) ([]float32, error) {
	if m.a == nil || !m.a.lossValid {
		return dst, ErrNoLoss
	}
	a := m.a
	N, H, V := a.B*a.T, m.arch.Hidden, m.arch.Vocab
	if !a.logitsValid {
		return dst, ErrNoLoss
	}
	crossEntropyBackward(a.logits, a.logits, a.lse, a.targets, N, V, 1)
	a.hasLoss, a.logitsValid = false, false
	start := len(dst)
	dst = append(dst, make([]float32, N*H)...)
	g := dst[start:]
	m.headMat().mulT(g, a.logits, N, H, V)
	x, w := a.res[len(m.dims)], m.p.norm
	parallelFor(N, 32, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xi, gi := x[i*H:(i+1)*H], g[i*H:(i+1)*H]
			r := a.rstdf[i]
			var dot float32
			for j := range xi {
				dot += w[j] * gi[j] * xi[j] * r
			}
			dot /= float32(H)
			for j := range xi {
				gi[j] = r * (w[j]*gi[j] - xi[j]*r*dot)
			}
		}
	})
	return dst, nil
}

// FinalGradientFLOPs is the model FLOPs of FinalGradients after a pass of
// B sequences of T tokens: the LM head's product, transposed.
func (m *Model) FinalGradientFLOPs(B, T int) float64 {
	return 2 * float64(B*T) * float64(m.arch.Hidden) * float64(m.arch.Vocab)
}

// Inference reports whether inference mode is on (SetInference).
func (m *Model) Inference() bool { return m.inference }

// ForwardLoss runs Forward and returns the mean cross-entropy of the logits
// against targets (same layout as tokens; a negative target is ignored).
// Backward then computes the gradients of this loss.
func (m *Model) ForwardLoss(tokens, targets []int32, B, T int) (float32, error) {
	if err := m.checkTokens("targets", targets, B, T, true); err != nil {
		return 0, err
	}
	logits, err := m.Forward(tokens, B, T)
	if err != nil {
		return 0, err
	}
	copy(m.a.targets, targets)
	sum, count := crossEntropyForward(m.a.lse, logits, m.a.targets, m.a.tokenLoss, B*T, m.arch.Vocab)
	m.a.lossValid = true
	if count == 0 {
		return 0, &InputError{"every target is negative (ignored): no loss to compute"}
	}
	m.a.count, m.a.hasLoss = count, true
	return float32(sum / float64(count)), nil
}

// ErrNoLoss is returned by TokenLosses when the model's last pass computed
// no loss.
var ErrNoLoss = errors.New("engine: per-token losses need a preceding loss pass (ForwardLoss or ForwardLossFrom)")

// ErrNoForward is returned by the backward passes when no matching forward
// pass preceded them.
var ErrNoForward = errors.New("engine: backward needs a preceding forward pass (ForwardLoss for Backward)")

// Backward accumulates into Grads the gradient of the mean cross-entropy of
// the last ForwardLoss.
func (m *Model) Backward() error {
	if m.a == nil || !m.a.hasLoss {
		return ErrNoForward
	}
	if m.a.inference {
		return ErrInference
	}
	if m.mapped != nil {
		return ErrMapped
	}
	if m.grads == nil {
		return ErrNoGradients
	}
	if err := m.forwardOnly(); err != nil {
		return err
	}
	b := m.backBufs()
	crossEntropyBackward(b.dlogits, m.a.logits, m.a.lse, m.a.targets, m.a.B*m.a.T, m.arch.Vocab, 1/float32(m.a.count))
	m.backward(b.dlogits)
	return nil
}

// BackwardFromLogits accumulates into Grads the gradient of a loss whose
// gradient with respect to the last Forward's logits is dlogits (B·T, vocab),
// e.g. a distillation KL against teacher logits.
func (m *Model) BackwardFromLogits(dlogits []float32) error {
	if m.a == nil {
		return ErrNoForward
	}
	if m.a.inference {
		return ErrInference
	}
	if m.mapped != nil {
		return ErrMapped
	}
	if m.grads == nil {
		return ErrNoGradients
	}
	if err := m.forwardOnly(); err != nil {
		return err
	}
	if want := m.a.B * m.a.T * m.arch.Vocab; len(dlogits) != want {
		return &InputError{fmt.Sprintf("dlogits has %d values, the last forward produced %d logits", len(dlogits), want)}
	}
	m.backBufs()
	m.backward(dlogits)
	return nil
}

func (m *Model) observe(layer int, site Site, data []float32, width, heads, hd int) {
	if m.observer == nil {
		return
	}
	m.observer.Observe(&Activation{Layer: layer, Site: site, Data: data, B: m.a.B, T: m.a.T, Width: width, Heads: heads, HeadDim: hd})
}

// forward runs the model from layer start, whose input is in a.res[start]
// (start -1: from the embeddings of a.tokens).
func (m *Model) forward(start int) {
	a := m.a
	N, T, H, V := a.B*a.T, a.T, m.arch.Hidden, m.arch.Vocab
	if start < 0 {
		embeddingForward(a.res[0], m.embedMat(), a.tokens, H)
		start = 0
	}
	pos := func(row int) int { return row % T }
	for l := start; l < len(m.dims); l++ {
		d := m.dims[l]
		in, out := a.res[l], a.res[l+1]
		m.observe(l, SiteLayerInput, in, H, 0, 0)
		if m.skip[l] {
			parallelCopy(out, in)
			m.observe(l, SiteLayerOutput, out, H, 0, 0)
			continue
		}
		la, w, wm := &a.layers[l], &m.p.layers[l], m.mats(l)
		attn, mlp := d.attn && !m.skipAttn[l], d.mlp && !m.skipMLP[l]
		parallelCopy(la.mid, in)
		if attn {
			rmsnormForward(la.ln1, la.rstd1, in, w.inNorm, N, H, m.eps)
			m.observe(l, SiteAttnNorm, la.ln1, H, 0, 0)
			linearForward(la.q, la.ln1, wm.q, w.qb, N, H, d.qd)
			linearForward(la.k, la.ln1, wm.k, w.kb, N, H, d.kd)
			linearForward(la.v, la.ln1, wm.v, w.vb, N, H, d.kd)
			if d.qkNorm {
				rmsnormForward(la.qr, la.qrstd, la.q, w.qNorm, N*d.heads, d.hd, m.eps)
				rmsnormForward(la.kr, la.krstd, la.k, w.kNorm, N*d.kvH, d.hd, m.eps)
			} else {
				parallelCopy(la.qr, la.q)
				parallelCopy(la.kr, la.k)
			}
			if !m.noRoPE {
				tab := m.rope[d.hd]
				tab.ensure(T)
				ropeForward(la.qr, N, d.heads, d.hd, tab, pos)
				ropeForward(la.kr, N, d.kvH, d.hd, tab, pos)
			}
			shape := attnShape{B: a.B, T: T, heads: d.heads, kvH: d.kvH, hd: d.hd, window: d.window, sinks: w.sinks}
			attentionForward(la.ao, la.qr, la.kr, la.v, shape)
			m.observe(l, SiteAttnHeads, la.ao, d.qd, d.heads, d.hd)
			linearForward(out, la.ao, wm.o, w.ob, N, d.qd, H)
			residualAdd(la.mid, out)
		}
		if x := d.mamba; x != nil && !m.skipAttn[l] {
			rmsnormForward(la.ln1, la.rstd1, in, w.inNorm, N, H, m.eps)
			m.observe(l, SiteAttnNorm, la.ln1, H, 0, 0)
			seqs := make([]mambaSeq, a.B)
			for b := range seqs {
				seqs[b] = mambaSeq{row: b * T, n: T}
			}
			mamba2Mix(out, la.ln1, H, *x, w.mamba, seqs, mambaBufs{proj: la.mproj, y: la.my})
			if m.observer != nil {
				m.observer.Observe(&Activation{Layer: l, Site: SiteMambaHeads, Data: la.my, B: a.B, T: T, Width: x.dInner(), Heads: x.heads, HeadDim: x.headDim, Groups: x.groups})
			}
			residualAdd(la.mid, out)
		}
		m.observe(l, SiteAttnResidual, la.mid, H, 0, 0)
		if d.moe != nil && !m.skipMLP[l] {
			rmsnormForward(la.ln2, la.rstd2, la.mid, w.postNorm, N, H, m.eps)
			m.observe(l, SiteMLPNorm, la.ln2, H, 0, 0)
			r, logits := moeForward(out, la.ln2, d.moe, wm, w, N, H, la.moe)
			if m.observer != nil {
				m.observer.Observe(&Activation{Layer: l, Site: SiteMoERouting, Data: logits, B: a.B, T: a.T, Width: d.moe.experts, Routing: r})
			}
			residualAdd(out, la.mid)
		} else if !mlp {
			parallelCopy(out, la.mid)
		} else {
			rmsnormForward(la.ln2, la.rstd2, la.mid, w.postNorm, N, H, m.eps)
			m.observe(l, SiteMLPNorm, la.ln2, H, 0, 0)
			if d.gated {
				linearForward(la.gate, la.ln2, wm.gate, w.gateB, N, H, d.ffn)
			}
			linearForward(la.up, la.ln2, wm.up, w.upB, N, H, d.ffn)
			activationForward(la.h, la.gate, la.up, N, d.ffn, d.act)
			m.observe(l, SiteMLPAct, la.h, d.ffn, 0, 0)
			linearForward(out, la.h, wm.down, w.downB, N, d.ffn, H)
			residualAdd(out, la.mid)
		}
		m.observe(l, SiteLayerOutput, out, H, 0, 0)
		m.releaseLayer(l)
	}
	L := len(m.dims)
	rmsnormForward(a.lnf, a.rstdf, a.res[L], m.p.norm, N, H, m.eps)
	m.observe(L, SiteFinalNorm, a.lnf, H, 0, 0)
	linearForward(a.logits, a.lnf, m.headMat(), nil, N, H, V)
	m.releaseHead()
}

func (m *Model) backward(dlogits []float32) {
	a, b := m.a, m.a.backward
	N, T, H, V := a.B*a.T, a.T, m.arch.Hidden, m.arch.Vocab
	L := len(m.dims)
	linearBackward(b.dlnf, m.g.head, nil, dlogits, a.lnf, m.p.head, N, H, V, false)
	dres := b.dres
	clear(dres)
	rmsnormBackward(dres, m.g.norm, b.dlnf, a.res[L], m.p.norm, a.rstdf, N, H)
	pos := func(row int) int { return row % T }
	for l := L - 1; l >= 0; l-- {
		if m.skip[l] {
			continue
		}
		d, la, w, g := m.dims[l], &a.layers[l], &m.p.layers[l], &m.g.layers[l]
		// dres holds ∂loss/∂out; turn it into ∂loss/∂mid, then ∂loss/∂in.
		// A skipped sub-block is an identity: dres passes through it.
		if d.mlp && !m.skipMLP[l] {
			F := d.ffn
			dh, dup := b.dh[:N*F], b.dup[:N*F]
			linearBackward(dh, g.down, g.downB, dres, la.h, w.down, N, F, H, false)
			var dgate []float32
			if d.gated {
				dgate = b.dgate[:N*F]
			}
			activationBackward(dgate, dup, dh, la.gate, la.up, N, F, d.act)
			linearBackward(b.dln, g.up, g.upB, dup, la.ln2, w.up, N, H, F, false)
			if d.gated {
				linearBackward(b.dln, g.gate, g.gateB, dgate, la.ln2, w.gate, N, H, F, true)
			}
			rmsnormBackward(dres, g.postNorm, b.dln, la.mid, w.postNorm, la.rstd2, N, H)
		}
		if d.moe != nil && !m.skipMLP[l] {
			moeBackward(b.dln, g, dres, la.ln2, w, d.moe, la.moe, b.moe, N, H)
			rmsnormBackward(dres, g.postNorm, b.dln, la.mid, w.postNorm, la.rstd2, N, H)
		}
		if d.attn && !m.skipAttn[l] {
			qd, kd := d.qd, d.kd
			dao := b.dao[:N*qd]
			linearBackward(dao, g.o, g.ob, dres, la.ao, w.o, N, qd, H, false)
			dqr, dkr, dv := b.dqr[:N*qd], b.dkr[:N*kd], b.dv[:N*kd]
			clear(dkr)
			clear(dv)
			shape := attnShape{B: a.B, T: T, heads: d.heads, kvH: d.kvH, hd: d.hd, window: d.window}
			attentionBackward(dqr, dkr, dv, dao, la.qr, la.kr, la.v, shape)
			if !m.noRoPE {
				tab := m.rope[d.hd]
				ropeBackward(dqr, N, d.heads, d.hd, tab, pos)
				ropeBackward(dkr, N, d.kvH, d.hd, tab, pos)
			}
			dq, dk := dqr, dkr
			if d.qkNorm {
				dq, dk = b.dq[:N*qd], b.dk[:N*kd]
				clear(dq)
				clear(dk)
				rmsnormBackward(dq, g.qNorm, dqr, la.q, w.qNorm, la.qrstd, N*d.heads, d.hd)
				rmsnormBackward(dk, g.kNorm, dkr, la.k, w.kNorm, la.krstd, N*d.kvH, d.hd)
			}
			linearBackward(b.dln, g.q, g.qb, dq, la.ln1, w.q, N, H, qd, false)
			linearBackward(b.dln, g.k, g.kb, dk, la.ln1, w.k, N, H, kd, true)
			linearBackward(b.dln, g.v, g.vb, dv, la.ln1, w.v, N, H, kd, true)
			rmsnormBackward(dres, g.inNorm, b.dln, a.res[l], w.inNorm, la.rstd1, N, H)
		}
	}
	embeddingBackward(m.g.embed, dres, a.tokens, H)
}

// ForwardFLOPs returns the model FLOPs of one forward pass on (B, T):
// 2·rows·in·out for every matrix product (projections, MLP, LM head) plus
// 4·head_dim per causal (query, key) pair and head for attention (scores and
// weighted sum; B·T(T+1)/2 pairs per head, fewer with a sliding window). A
// training step (forward + backward) counts 3× this. The engine performs
// slightly more (whole 64-row blocks on the diagonal) and, in backward,
// recomputes the attention scores; neither is counted.
func (m *Model) ForwardFLOPs(B, T int) float64 { return m.ForwardFLOPsFrom(0, B, T) }

// ForwardFLOPsFrom is ForwardFLOPs counting only layers layer..L-1 and the
// LM head: the cost of ForwardLossFrom(layer, ...).
func (m *Model) ForwardFLOPsFrom(layer, B, T int) float64 {
	N := float64(B * T)
	H := float64(m.arch.Hidden)
	f := 2 * N * H * float64(m.arch.Vocab)
	for _, d := range m.dims[min(max(layer, 0), len(m.dims)):] {
		if d.attn {
			f += 2 * N * H * float64(2*d.qd+2*d.kd)
			f += 4 * float64(B*d.heads) * causalPairs(T, d.window) * float64(d.hd)
		}
		if d.mlp {
			mats := 2.0
			if d.gated {
				mats = 3
			}
			f += 2 * N * H * float64(d.ffn) * mats
		}
		if x := d.mamba; x != nil {
			f += mambaFLOPs(x, N, H)
		}
		if x := d.moe; x != nil {
			// The router, and each row's k gated experts.
			f += 2 * N * H * float64(x.experts)
			f += 2 * N * H * float64(x.width) * 3 * float64(x.topK)
		}
	}
	return f
}

// causalPairs counts the (query, key) pairs a causal mask with an optional
// sliding window allows in a sequence of T tokens.
func causalPairs(T, window int) float64 {
	if window <= 0 || window >= T {
		return float64(T) * float64(T+1) / 2
	}
	w := float64(window)
	return w*(w+1)/2 + float64(T-window)*w
}
