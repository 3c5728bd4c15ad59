package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// tinyArch is a model with every feature the engine supports, different
// widths in every layer, a layer without attention and one without MLP.
func tinyArch(tied bool) *architecture.Model {
	return &architecture.Model{
		Arch: "LlamaForCausalLM", ModelType: "llama",
		Vocab: 11, Hidden: 8, TiedEmbeddings: tied, Norm: architecture.RMSNorm, NormEps: 1e-5,
		MaxPositions: 64,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1, Scaling: &architecture.RopeScaling{
			Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 16}},
		BOS: 1, EOS: []int{2},
		Layers: []architecture.Layer{
			{Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4, QKNorm: true, QKVBias: true, OutBias: true},
				MLP: &architecture.MLP{Width: 6, Gated: true, Activation: "silu", Bias: true}},
			{MLP: &architecture.MLP{Width: 5, Gated: true, Activation: "silu"}},
			{Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 6}},
			{Attention: &architecture.Attention{Heads: 2, KVHeads: 2, HeadDim: 4, SlidingWindow: 3},
				MLP: &architecture.MLP{Width: 7, Gated: false, Activation: "gelu_pytorch_tanh"}},
		},
	}
}

func randomize(m *Model, seed uint64, std float64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for i, s := range m.specs {
		t := m.params[m.offsets[i] : m.offsets[i]+s.Size()]
		for j := range t {
			if isNormName(s.Name) {
				t[j] = float32(1 + 0.3*r.NormFloat64())
			} else {
				t[j] = float32(std * r.NormFloat64())
			}
		}
	}
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(r.IntN(vocab))
	}
	return t
}

// TestGradientsFiniteDifferences checks the gradient of every parameter
// tensor against central finite differences of the loss.
func TestGradientsFiniteDifferences(t *testing.T) {
	for _, tied := range []bool{true, false} {
		m, err := New(tinyArch(tied), 1)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, 3, 0.4)
		const B, T = 2, 5
		r := rand.New(rand.NewPCG(5, 6))
		tokens := randTokens(r, B*T, 11)
		targets := randTokens(r, B*T, 11)
		targets[3] = -1 // ignored position
		m.ZeroGrad()
		if _, err := m.ForwardLoss(tokens, targets, B, T); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(); err != nil {
			t.Fatal(err)
		}
		grads := append([]float32(nil), m.Grads()...)
		loss := func() float64 {
			l, err := m.ForwardLoss(tokens, targets, B, T)
			if err != nil {
				t.Fatal(err)
			}
			return float64(l)
		}
		const h = 1e-2
		for i, s := range m.specs {
			off, n := m.offsets[i], s.Size()
			// Check up to 12 elements: the largest gradients plus a spread.
			idx := map[int]bool{}
			for j := 0; j < n; j += max(1, n/6) {
				idx[j] = true
			}
			for range 6 {
				best := -1
				for j := 0; j < n; j++ {
					if !idx[j] && (best < 0 || math.Abs(float64(grads[off+j])) > math.Abs(float64(grads[off+best]))) {
						best = j
					}
				}
				if best >= 0 {
					idx[best] = true
				}
			}
			var num, den float64
			for j := range idx {
				p := &m.params[off+j]
				orig := *p
				*p = orig + h
				lp := loss()
				*p = orig - h
				lm := loss()
				*p = orig
				fd := (lp - lm) / (2 * h)
				g := float64(grads[off+j])
				num += (g - fd) * (g - fd)
				den += g*g + fd*fd
				if math.Abs(g-fd) > 2e-3+5e-2*math.Abs(fd) {
					t.Errorf("tied=%v %s[%d]: backward %.6g, finite difference %.6g", tied, s.Name, j, g, fd)
				}
			}
			rel := math.Sqrt(num / max(den, 1e-30))
			if den > 1e-12 && rel > 1e-2 {
				t.Errorf("tied=%v %s: relative gradient error %.3g", tied, s.Name, rel)
			}
			if den == 0 {
				t.Errorf("tied=%v %s: gradient and finite difference both zero: the check cannot see this tensor", tied, s.Name)
			}
			t.Logf("tied=%v %-45s rel err %.2e (|g|≈%.2e)", tied, s.Name, rel, math.Sqrt(den/2/float64(len(idx))))
		}
	}
}
