package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// withoutBlocks returns a model of m's architecture with the attention of
// layers attn and the MLP of layers mlp removed (DeciLM no_op), holding m's
// weights for every tensor that remains.
func withoutBlocks(t *testing.T, m *Model, attn, mlp []int) *Model {
	t.Helper()
	a := m.Arch()
	for _, l := range attn {
		a.Layers[l].Attention = nil
	}
	for _, l := range mlp {
		a.Layers[l].MLP = nil
	}
	c, err := NewZero(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Specs() {
		src := m.Tensor(s.Name)
		if src == nil {
			t.Fatalf("tensor %s of the reduced model is not in the full one", s.Name)
		}
		copy(c.Tensor(s.Name), src)
	}
	return c
}

// TestSetSkipBlockEqualsRemovedBlock: skipping a sub-block computes what a
// model without it computes (forward and gradients), skipping both
// sub-blocks equals skipping the layer, and clearing restores the model.
func TestSetSkipBlockEqualsRemovedBlock(t *testing.T) {
	m, err := New(tinyArch(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 11, 0.4)
	r := rand.New(rand.NewPCG(5, 5))
	const B, T = 2, 7
	toks, tg := randTokens(r, B*T, 11), randTokens(r, B*T, 11)
	base, err := m.ForwardLoss(toks, tg, B, T)
	if err != nil {
		t.Fatal(err)
	}
	baseLogits := append([]float32(nil), m.a.logits...)

	cases := []struct {
		name      string
		attn, mlp []int
	}{
		{"attention of layer 0", []int{0}, nil},
		{"mlp of layer 3", nil, []int{3}},
		{"attention of 0 and 3, mlp of 0", []int{0, 3}, []int{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := m.SetSkipBlock(BlockAttention, c.attn...); err != nil {
				t.Fatal(err)
			}
			if err := m.SetSkipBlock(BlockMLP, c.mlp...); err != nil {
				t.Fatal(err)
			}
			defer m.SetSkipBlock(BlockAttention)
			defer m.SetSkipBlock(BlockMLP)
			ref := withoutBlocks(t, m, c.attn, c.mlp)
			want, err := ref.ForwardLoss(toks, tg, B, T)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.ForwardLoss(toks, tg, B, T)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(m.a.logits, ref.a.logits); d > 1e-6 {
				t.Fatalf("logits differ from the reduced model's by %.3g", d)
			}
			if got != want || got == base {
				t.Fatalf("loss %v, reduced model %v, full model %v", got, want, base)
			}
			m.ZeroGrad()
			ref.ZeroGrad()
			if err := m.Backward(); err != nil {
				t.Fatal(err)
			}
			if err := ref.Backward(); err != nil {
				t.Fatal(err)
			}
			for _, s := range m.Specs() {
				g := m.Grad(s.Name)
				if rg := ref.Grad(s.Name); rg != nil {
					if d := maxAbsDiff(g, rg); d > 1e-5 {
						t.Fatalf("%s: gradient differs from the reduced model's by %.3g", s.Name, d)
					}
					continue
				}
				for _, v := range g {
					if v != 0 {
						t.Fatalf("%s belongs to a skipped sub-block but has a gradient", s.Name)
					}
				}
			}
		})
	}

	// Both sub-blocks of layer 0 skipped = layer 0 skipped.
	if err := m.SetSkipBlock(BlockAttention, 0); err != nil {
		t.Fatal(err)
	}
	if err := m.SetSkipBlock(BlockMLP, 0); err != nil {
		t.Fatal(err)
	}
	both, _ := m.ForwardLoss(toks, tg, B, T)
	m.SetSkipBlock(BlockAttention)
	m.SetSkipBlock(BlockMLP)
	if err := m.SetSkip(0); err != nil {
		t.Fatal(err)
	}
	whole, _ := m.ForwardLoss(toks, tg, B, T)
	m.SetSkip()
	if both != whole {
		t.Fatalf("skipping both sub-blocks gives loss %v, skipping the layer %v", both, whole)
	}
	// A layer without attention (layer 1) is unchanged by skipping it.
	if err := m.SetSkipBlock(BlockAttention, 1); err != nil {
		t.Fatal(err)
	}
	if l, _ := m.ForwardLoss(toks, tg, B, T); l != base {
		t.Fatalf("skipping the absent attention of layer 1 changed the loss: %v, want %v", l, base)
	}
	m.SetSkipBlock(BlockAttention)
	if l, _ := m.ForwardLoss(toks, tg, B, T); l != base || maxAbsDiff(m.a.logits, baseLogits) != 0 {
		t.Fatalf("loss after clearing the skips %v, want %v", l, base)
	}
	for _, bad := range []func() error{
		func() error { return m.SetSkipBlock(BlockMLP, 4) },
		func() error { return m.SetSkipBlock(BlockAttention, -1) },
		func() error { return m.SetSkipBlock(Block(7), 0) },
	} {
		if bad() == nil {
			t.Fatal("an out-of-range sub-block skip did not fail")
		}
	}
}

// TestNewZero: every parameter is zero and the layout matches New's.
func TestNewZero(t *testing.T) {
	a := tinyArch(true)
	z, err := NewZero(a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := New(a, 1)
	if z.NumParams() != m.NumParams() {
		t.Fatalf("NewZero has %d parameters, New %d", z.NumParams(), m.NumParams())
	}
	for _, v := range z.Params() {
		if v != 0 {
			t.Fatal("NewZero has a non-zero parameter")
		}
	}
	if _, err := NewZero(&architecture.Model{}); err == nil {
		t.Fatal("NewZero accepted an empty architecture")
	}
}
