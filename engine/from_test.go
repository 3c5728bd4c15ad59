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

// TestTokenLosses: the per-token losses of a loss pass average to the loss
// it returned, give NaN at an ignored target, equal between a whole pass
// and ForwardLossFrom position by position, and are refused after a pass
// that computed no loss.
func TestTokenLosses(t *testing.T) {
	m, err := New(tinyArch(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 5, 0.4)
	m.SetInference(true)
	r := rand.New(rand.NewPCG(3, 4))
	const B, T = 2, 7
	toks, tg := randTokens(r, B*T, 11), randTokens(r, B*T, 11)
	tg[3] = -1
	var in1 []float32
	m.SetObserver(ObserverFunc(func(a *Activation) {
		if a.Site == SiteLayerInput && a.Layer == 1 {
			in1 = append([]float32(nil), a.Data...)
		}
	}))
	loss, err := m.ForwardLoss(toks, tg, B, T)
	m.SetObserver(nil)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := m.TokenLosses(nil)
	if err != nil || len(whole) != B*T {
		t.Fatalf("TokenLosses: %d values, %v", len(whole), err)
	}
	var sum float64
	for i, v := range whole {
		switch {
		case i == 3 && !math.IsNaN(v):
			t.Errorf("ignored target 3: loss %v, want NaN", v)
		case i != 3 && !(v > 0):
			t.Errorf("position %d: loss %v", i, v)
		case i != 3:
			sum += v
		}
	}
	if mean := float32(sum / float64(B*T-1)); mean != loss {
		t.Errorf("mean per-token loss %v, ForwardLoss %v", mean, loss)
	}
	if _, err := m.ForwardLossFrom(1, in1, tg, B, T); err != nil {
		t.Fatal(err)
	}
	from, err := m.TokenLosses(whole[:0:0])
	if err != nil {
		t.Fatal(err)
	}
	for i := range whole {
		if math.Float64bits(from[i]) != math.Float64bits(whole[i]) {
			t.Errorf("position %d: ForwardLossFrom %v, whole pass %v", i, from[i], whole[i])
		}
	}
	if _, err := m.Forward(toks, B, T); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TokenLosses(nil); err != ErrNoLoss {
		t.Errorf("TokenLosses after Forward: %v, want ErrNoLoss", err)
	}
}

// TestFinalGradients: each position's gradient predicts, to first order,
// how its own loss changes when a small vector is added to its final
// hidden state (ForwardLossFrom past the last layer), and Backward cannot
// follow (the logits are spent).
func TestFinalGradients(t *testing.T) {
	m, err := New(tinyArch(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 5, 0.4)
	m.SetInference(true)
	r := rand.New(rand.NewPCG(5, 6))
	const B, T = 2, 5
	toks, tg := randTokens(r, B*T, 11), randTokens(r, B*T, 11)
	L, H := m.Arch().NumLayers(), m.Arch().Hidden
	var out []float32
	m.SetObserver(ObserverFunc(func(a *Activation) {
		if a.Site == SiteLayerOutput && a.Layer == L-1 {
			out = append([]float32(nil), a.Data...)
		}
	}))
	if _, err := m.ForwardLoss(toks, tg, B, T); err != nil {
		t.Fatal(err)
	}
	m.SetObserver(nil)
	base, _ := m.TokenLosses(nil)
	g, err := m.FinalGradients(nil)
	if err != nil || len(g) != B*T*H {
		t.Fatalf("FinalGradients: %d values, %v", len(g), err)
	}
	if _, err := m.FinalGradients(nil); err != ErrNoLoss {
		t.Errorf("FinalGradients twice: %v, want ErrNoLoss", err)
	}
	const eps = 1e-3
	v := make([]float32, len(out))
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	moved := append([]float32(nil), out...)
	for i := range moved {
		moved[i] += eps * v[i]
	}
	if _, err := m.ForwardLossFrom(L, moved, tg, B, T); err != nil {
		t.Fatal(err)
	}
	after, _ := m.TokenLosses(nil)
	for p := 0; p < B*T; p++ {
		var want float64
		for k := p * H; k < (p+1)*H; k++ {
			want += eps * float64(g[k]) * float64(v[k])
		}
		if got := after[p] - base[p]; math.Abs(got-want) > 0.05*math.Abs(want)+2e-6 {
			t.Errorf("position %d: loss moved %.3g, the gradient predicts %.3g", p, got, want)
		}
	}
}
