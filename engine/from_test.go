package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestForwardLossFromMatchesForwardLoss: rerunning only the layers after a
// cached layer input gives, bit for bit, the loss of the whole forward pass
// with the same skips, for every layer and sub-block skip, in training and
// inference mode.
func TestForwardLossFromMatchesForwardLoss(t *testing.T) {
	m, err := New(tinyArch(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 5, 0.4)
	r := rand.New(rand.NewPCG(1, 2))
	const B, T = 3, 9
	toks, tg, other := randTokens(r, B*T, 11), randTokens(r, B*T, 11), randTokens(r, B*T, 11)
	L := m.Arch().NumLayers()
	for _, inference := range []bool{false, true} {
		m.SetInference(inference)
		inputs := make([][]float32, L+1)
		m.SetObserver(ObserverFunc(func(a *Activation) {
			if a.Site == SiteLayerInput {
				inputs[a.Layer] = append([]float32(nil), a.Data...)
			}
		}))
		if _, err := m.ForwardLoss(toks, tg, B, T); err != nil {
			t.Fatal(err)
		}
		m.SetObserver(nil)
		for l := 0; l < L; l++ {
			for _, skip := range []string{"layer", "attention", "mlp", "none"} {
				set := func(on bool) {
					ls := []int{}
					if on {
						ls = []int{l}
					}
					switch skip {
					case "layer":
						m.SetSkip(ls...)
					case "attention":
						m.SetSkipBlock(BlockAttention, ls...)
					case "mlp":
						m.SetSkipBlock(BlockMLP, ls...)
					}
				}
				set(true)
				want, err := m.ForwardLoss(toks, tg, B, T)
				if err != nil {
					t.Fatal(err)
				}
				// Another pass in between: ForwardLossFrom must not read
				// the last pass's tokens or activations.
				if _, err := m.Forward(other, B, T); err != nil {
					t.Fatal(err)
				}
				got, err := m.ForwardLossFrom(l, inputs[l], tg, B, T)
				if err != nil {
					t.Fatal(err)
				}
				set(false)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("inference=%v, layer %d, skip %s: from the cached input %v, whole pass %v", inference, l, skip, got, want)
				}
			}
		}
		if err := m.Backward(); err != ErrNoForward {
			t.Fatalf("Backward after ForwardLossFrom = %v, want ErrNoForward", err)
		}
	}
	if f0, f2 := m.ForwardFLOPsFrom(0, B, T), m.ForwardFLOPsFrom(2, B, T); f0 != m.ForwardFLOPs(B, T) || !(f2 < f0) || !(f2 > 0) {
		t.Fatalf("ForwardFLOPsFrom: from 0 %g (ForwardFLOPs %g), from 2 %g", f0, m.ForwardFLOPs(B, T), f2)
	}
	if _, err := m.ForwardLossFrom(L+1, nil, tg, B, T); err == nil {
		t.Fatal("ForwardLossFrom past the last layer succeeded")
	}
}
