package proxy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// loadParent loads the embedded parent model (8 layers, hidden 192, 8 heads
// in 2 KV groups, FFN 512, vocabulary 4096).
func loadParent(t testing.TB) (*engine.Model, string) {
	t.Helper()
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

func randRows(seed uint64, n, T, vocab int) [][]int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]int32, n)
	for i := range rows {
		rows[i] = make([]int32, T+1)
		for j := range rows[i] {
			rows[i][j] = int32(r.IntN(vocab))
		}
	}
	return rows
}

func seq(lo, hi, step int) []int {
	var s []int
	for i := lo; i < hi; i += step {
		s = append(s, i)
	}
	return s
}

// testPlans covers every kind of cut a plan can make on the embedded
// parent, in each output format.
func testPlans() map[string]*prune.Plan {
	return map[string]*prune.Plan{
		"native: hidden, heads, neurons, two layers removed": {
			Version: 1, Hidden: seq(0, 192, 3)[:48:48],
			Layers: []prune.LayerPlan{
				{Layer: 0, Heads: []int{0, 2, 5, 7}, Neurons: seq(1, 512, 2)},
				{Layer: 1, Heads: []int{1, 3, 4, 6}, Neurons: seq(0, 256, 1)},
				{Layer: 2, Remove: true},
				{Layer: 3, Heads: []int{0, 1, 4, 5}, Neurons: seq(100, 356, 1)},
				{Layer: 4, Heads: []int{2, 3, 6, 7}, Neurons: seq(0, 512, 2)},
				{Layer: 5, Remove: true},
				{Layer: 6, Heads: []int{0, 3, 4, 7}, Neurons: seq(1, 512, 2)},
				{Layer: 7, Heads: []int{1, 2, 5, 6}, Neurons: seq(256, 512, 1)},
			},
		},
		"decilm: per-layer widths, removed sub-blocks": {
			Version: 1, OutputFormat: prune.FormatDeciLM, Hidden: seq(0, 192, 1)[8:],
			Layers: []prune.LayerPlan{
				{Layer: 1, RemoveAttention: true, Neurons: seq(0, 300, 1)},
				{Layer: 3, RemoveMLP: true},
				{Layer: 4, Remove: true},
				{Layer: 6, Neurons: seq(0, 512, 5)},
			},
		},
		"padded: per-layer heads and widths zero-padded": {
			Version: 1, OutputFormat: prune.FormatPadded,
			Layers: []prune.LayerPlan{
				{Layer: 0, Heads: []int{0, 1, 4, 5}},
				{Layer: 2, RemoveMLP: true},
				{Layer: 5, Neurons: seq(0, 128, 1)},
				{Layer: 7, KVHeads: []int{0}, Heads: []int{0, 1, 2, 3}},
			},
		},
	}
}

// TestChildEqualsPrunedCheckpoint: the child built in memory is the child
// that prune writes and the engine loads back: the same tensors bit for bit
// and the same logits.
func TestChildEqualsPrunedCheckpoint(t *testing.T) {
	par, dir := loadParent(t)
	rows := randRows(3, 2, 24, par.Arch().Vocab)
	in := append(append([]int32(nil), rows[0][:24]...), rows[1][:24]...)
	for name, plan := range testPlans() {
		t.Run(strings.Fields(name)[0], func(t *testing.T) {
			mem, err := Child(par, plan)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "child")
			if _, err := prune.Prune(context.Background(), prune.Options{Model: dir, Plan: plan, Out: out}); err != nil {
				t.Fatal(err)
			}
			disk, err := engine.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			ms, ds := mem.Specs(), disk.Specs()
			if len(ms) != len(ds) {
				t.Fatalf("in memory %d tensors, on disk %d", len(ms), len(ds))
			}
			for i, s := range ms {
				if s.Name != ds[i].Name || s.Size() != ds[i].Size() {
					t.Fatalf("tensor %d: in memory %s %v, on disk %s %v", i, s.Name, s.Shape, ds[i].Name, ds[i].Shape)
				}
				a, b := mem.Tensor(s.Name), disk.Tensor(s.Name)
				for j := range a {
					if a[j] != b[j] {
						t.Fatalf("%s[%d]: in memory %v, on disk %v", s.Name, j, a[j], b[j])
					}
				}
			}
			lm, err := mem.Forward(in, 2, 24)
			if err != nil {
				t.Fatal(err)
			}
			lm = append([]float32(nil), lm...)
			ld, err := disk.Forward(in, 2, 24)
			if err != nil {
				t.Fatal(err)
			}
			for i := range lm {
				if lm[i] != ld[i] {
					t.Fatalf("logit %d: in memory %v, on disk %v", i, lm[i], ld[i])
				}
			}
			// The child really is smaller (padded: the same size with
			// zeros) and really differs.
			if mem.NumParams() >= par.NumParams() && plan.OutputFormat != prune.FormatPadded {
				t.Fatalf("child has %d parameters, parent %d", mem.NumParams(), par.NumParams())
			}
			res, err := KL(context.Background(), par, mem, rows, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !(res.KL > 1e-3) {
				t.Fatalf("KL(parent ‖ child) = %g, want clearly positive", res.KL)
			}
		})
	}
}

// TestChildOfMappedParent: a forward-only child gathered from a bf16 parent
// read in place (engine.LoadOptions.Mapped), as the search builds its
// candidates, is, bit for bit, the child of the same checkpoint converted
// to float32 whole.
func TestChildOfMappedParent(t *testing.T) {
	par, _ := loadParent(t)
	dir := filepath.Join(t.TempDir(), "bf16")
	if err := par.Save(dir, checkpoint.BF16); err != nil {
		t.Fatal(err)
	}
	whole, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	mapped, err := engine.LoadWith(dir, engine.LoadOptions{Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if mapped.MappedBytes() == 0 {
		t.Fatal("the bf16 parent was not read in place")
	}
	for name, plan := range testPlans() {
		a, err := Child(whole, plan)
		if err != nil {
			t.Fatal(err)
		}
		// Forward only, as the search's measured proxy builds them.
		b, err := ForwardChild(mapped, plan)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b.Grads() != nil {
			t.Fatalf("%s: a forward-only child has a gradient slab", name)
		}
		pa, pb := a.Params(), b.Params()
		if len(pa) != len(pb) {
			t.Fatalf("%s: %d and %d parameters", name, len(pa), len(pb))
		}
		for i := range pa {
			if math.Float32bits(pa[i]) != math.Float32bits(pb[i]) {
				t.Fatalf("%s: parameter %d: %v from the float32 parent, %v from the mapped one", name, i, pa[i], pb[i])
			}
		}
	}
}

// TestChildRemovedSubBlockEqualsSkip: a child without a sub-block computes
// what the parent computes with that sub-block skipped (engine.SetSkipBlock),
// and the identity plan gives the parent back.
func TestChildRemovedSubBlockEqualsSkip(t *testing.T) {
	par, _ := loadParent(t)
	rows := randRows(5, 2, 16, par.Arch().Vocab)
	ref, err := NewReference(context.Background(), par, rows, Options{})
	if err != nil {
		t.Fatal(err)
	}
	same, err := Child(par, &prune.Plan{Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Score(context.Background(), same, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.KL != 0 || res.Loss != res.ParentLoss {
		t.Fatalf("identity plan: KL %g, loss %v, parent loss %v", res.KL, res.Loss, res.ParentLoss)
	}
	for _, c := range []struct {
		block engine.Block
		lp    prune.LayerPlan
	}{
		{engine.BlockAttention, prune.LayerPlan{Layer: 3, RemoveAttention: true}},
		{engine.BlockMLP, prune.LayerPlan{Layer: 6, RemoveMLP: true}},
	} {
		child, err := Child(par, &prune.Plan{Version: 1, OutputFormat: prune.FormatDeciLM, Layers: []prune.LayerPlan{c.lp}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ref.Score(context.Background(), child, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := par.SetSkipBlock(c.block, c.lp.Layer); err != nil {
			t.Fatal(err)
		}
		want, err := ref.Score(context.Background(), par, Options{})
		par.SetSkipBlock(c.block)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.KL-want.KL) > 1e-6 || math.Abs(got.Loss-want.Loss) > 1e-6 || got.KL <= 0 {
			t.Fatalf("%s of layer %d removed: KL %g loss %g; skipped in the parent: KL %g loss %g", c.block, c.lp.Layer, got.KL, got.Loss, want.KL, want.Loss)
		}
	}
}

// TestKLSelfIsZero: the parent against itself has KL 0 and its own loss,
// through KL and through a Reference, for any batch size.
func TestKLSelfIsZero(t *testing.T) {
	par, _ := loadParent(t)
	rows := randRows(7, 5, 20, par.Arch().Vocab)
	for _, batch := range []int{1, 2, 8} {
		res, err := KL(context.Background(), par, par, rows, Options{Batch: batch})
		if err != nil {
			t.Fatal(err)
		}
		if res.KL != 0 || res.Loss != res.ParentLoss || res.Tokens != 100 || res.Spent != 200 {
			t.Fatalf("batch %d: %+v", batch, res)
		}
		// A trained model on random tokens: loss above uniform's log V is
		// possible, but it is finite and positive.
		if !(res.Loss > 0) || math.IsInf(res.Loss, 0) {
			t.Fatalf("batch %d: loss %v", batch, res.Loss)
		}
	}
}

// handModel is a one-layer model whose attention and MLP weights are zero
// (the layer is an identity) and whose every token embeds as (1, 1), so
// that every position has the logits head·(1, 1)/sqrt(1+eps).
func handModel(t *testing.T, head []float32) *engine.Model {
	t.Helper()
	a := &architecture.Model{
		Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 3, Hidden: 2, Norm: architecture.RMSNorm, NormEps: 1e-5,
		MaxPositions: 16, Rope: architecture.Rope{Theta: 10000, PartialFactor: 1},
		Layers: []architecture.Layer{{
			Attention: &architecture.Attention{Heads: 1, KVHeads: 1, HeadDim: 2},
			MLP:       &architecture.MLP{Width: 2, Gated: true, Activation: "silu"},
		}},
	}
	m, err := engine.NewZero(a)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Tensor("model.embed_tokens.weight") {
		m.Tensor("model.embed_tokens.weight")[i] = 1
	}
	for i := range m.Tensor("model.norm.weight") {
		m.Tensor("model.norm.weight")[i] = 1
	}
	copy(m.Tensor("lm_head.weight"), head)
	return m
}

// TestKLHandChecked: parent distribution (1/2, 1/4, 1/4) at every position,
// child uniform: KL = ½ ln 1.5 + ½ ln 0.75 = ½ ln 1.125; on targets 0, 1, 2
// the parent's loss is (ln 2 + ln 4 + ln 4)/3 and the child's ln 3.
func TestKLHandChecked(t *testing.T) {
	s := float32(math.Sqrt(1 + 1e-5)) // undo the norm's eps
	ln2 := float32(math.Ln2)
	par := handModel(t, []float32{s * ln2 / 2, s * ln2 / 2, 0, 0, 0, 0})
	child := handModel(t, make([]float32, 6))
	rows := [][]int32{{0, 0, 1, 2}}
	res, err := KL(context.Background(), par, child, rows, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantKL := 0.5 * math.Log(1.125)
	wantParent := 5 * math.Ln2 / 3
	if math.Abs(res.KL-wantKL) > 1e-6 || math.Abs(res.ParentLoss-wantParent) > 1e-6 || math.Abs(res.Loss-math.Log(3)) > 1e-6 {
		t.Fatalf("KL %.7f (want %.7f), parent loss %.7f (want %.7f), child loss %.7f (want %.7f)",
			res.KL, wantKL, res.ParentLoss, wantParent, res.Loss, math.Log(3))
	}
	if res.Tokens != 3 || res.Spent != 6 {
		t.Fatalf("tokens %d spent %d, want 3 and 6", res.Tokens, res.Spent)
	}
	// The reverse direction: KL(uniform ‖ p) = ln(1/3) − (ln ½ + 2 ln ¼)/3.
	rev, err := KL(context.Background(), child, par, rows, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Log(1.0/3) - (math.Log(0.5)+2*math.Log(0.25))/3; math.Abs(rev.KL-want) > 1e-6 {
		t.Fatalf("KL(uniform ‖ parent) = %.7f, want %.7f", rev.KL, want)
	}
	// A reference gives the same numbers and charges only the child.
	ref, err := NewReference(context.Background(), par, rows, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ref.Score(context.Background(), child, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.KL-res.KL) > 1e-12 || got.Loss != res.Loss || got.Spent != 3 || ref.Tokens() != 3 {
		t.Fatalf("reference: %+v (tokens %d), direct: %+v", got, ref.Tokens(), res)
	}
}

func TestErrors(t *testing.T) {
	par, _ := loadParent(t)
	V := par.Arch().Vocab
	ctx := context.Background()
	other := handModel(t, make([]float32, 6))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	last := 0
	for name, f := range map[string]func() error{
		"no rows":        func() error { _, err := KL(ctx, par, par, nil, Options{}); return err },
		"short row":      func() error { _, err := KL(ctx, par, par, [][]int32{{1}}, Options{}); return err },
		"ragged":         func() error { _, err := KL(ctx, par, par, [][]int32{{1, 2, 3}, {1, 2}}, Options{}); return err },
		"out of vocab":   func() error { _, err := KL(ctx, par, par, [][]int32{{1, int32(V)}}, Options{}); return err },
		"vocab differs":  func() error { _, err := KL(ctx, par, other, [][]int32{{1, 2}}, Options{}); return err },
		"negative batch": func() error { _, err := KL(ctx, par, par, randRows(1, 4, 8, V), Options{Batch: -1}); return err },
		"too big": func() error {
			_, err := NewReference(ctx, par, randRows(1, 4, 8, V), Options{MaxReferenceBytes: 1000})
			return err
		},
		"bad plan": func() error {
			_, err := Child(par, &prune.Plan{Version: 1, Layers: []prune.LayerPlan{{Layer: 9, Remove: true}}})
			return err
		},
		"native cannot remove a sub-block": func() error {
			_, err := Child(par, &prune.Plan{Version: 1, Layers: []prune.LayerPlan{{Layer: 1, RemoveMLP: true}}})
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	rows := randRows(2, 3, 8, V)
	if _, err := KL(cancelled, par, par, rows, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled KL: %v", err)
	}
	ref, err := NewReference(ctx, par, rows, Options{Batch: 1, Progress: func(e progress.Event) { last = int(e.Done*10 + e.Total) }})
	if err != nil {
		t.Fatal(err)
	}
	if last != 33 {
		t.Errorf("progress ended at done*10+total = %d, want 33", last)
	}
	if _, err := ref.Score(cancelled, par, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Score: %v", err)
	}
	if _, err := ref.Score(ctx, other, Options{}); err == nil {
		t.Error("Score of a child with another vocabulary did not fail")
	}
}
