package importance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// TestBatchOneEqualsBatchEight: every score, block influence included, is
// the same whether the sequences run one at a time or eight at a time (the
// influence used to be a sum over forward calls: 8.1 at batch 1 and 1.0 at
// batch 8 for the same sequences).
func TestBatchOneEqualsBatchEight(t *testing.T) {
	data := rows(9, 8, 2) // 9 rows: batch 8 ends with a partial batch
	a, err := Compute(context.Background(), model(t), data, Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compute(context.Background(), model(t), data, Options{Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, x, y []float64) {
		t.Helper()
		if len(x) != len(y) {
			t.Fatalf("%s: %d vs %d entries", name, len(x), len(y))
		}
		for i := range x {
			if math.IsNaN(x[i]) != math.IsNaN(y[i]) || math.Abs(x[i]-y[i]) > 1e-5*math.Max(1, math.Abs(x[i])) {
				t.Fatalf("%s[%d]: %g at batch 1, %g at batch 8", name, i, x[i], y[i])
			}
		}
	}
	same("layer_bi", a.LayerBI, b.LayerBI)
	same("attn_bi", a.AttnBI, b.AttnBI)
	same("mlp_bi", a.MLPBI, b.MLPBI)
	same("layer_skip_loss", a.LayerSkipLoss, b.LayerSkipLoss)
	same("attn_skip_loss", a.AttnSkipLoss, b.AttnSkipLoss)
	same("mlp_skip_loss", a.MLPSkipLoss, b.MLPSkipLoss)
	same("hidden", a.Hidden, b.Hidden)
	for l := range a.Neurons {
		same(fmt.Sprintf("neurons[%d]", l), a.Neurons[l], b.Neurons[l])
		same(fmt.Sprintf("heads[%d]", l), a.Heads[l], b.Heads[l])
	}
	// A mean of 1 − cos lies in [0, 2].
	for l, v := range a.LayerBI {
		if v < 0 || v > 2 || a.AttnBI[l] < 0 || a.MLPBI[l] < 0 {
			t.Fatalf("layer %d: BI %g, attention %g, MLP %g", l, v, a.AttnBI[l], a.MLPBI[l])
		}
	}
}

// withoutSubBlock returns a copy of m whose layer l has no attention (or no
// MLP), built as its own architecture: an independent path to the loss of a
// child with that sub-block removed.
func withoutSubBlock(t *testing.T, m *engine.Model, l int, attn bool) *engine.Model {
	t.Helper()
	a := m.Arch()
	if attn {
		a.Layers[l].Attention = nil
	} else {
		a.Layers[l].MLP = nil
	}
	c, err := engine.NewZero(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Specs() {
		copy(c.Tensor(s.Name), m.Tensor(s.Name))
	}
	return c
}

// TestSubBlockScores: a planted dead attention (layer 1's o_proj zero) has
// zero attention influence and skip loss while its MLP matters; the
// identity layer 2 has zero everywhere; each sub-block skip loss equals the
// loss increase of a model built without that sub-block.
func TestSubBlockScores(t *testing.T) {
	m := model(t)
	clear(m.Tensor("model.layers.1.self_attn.o_proj.weight"))
	data := rows(6, 10, 4)
	s, err := Compute(context.Background(), m, data, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	zero := func(name string, v float64) {
		t.Helper()
		if math.Abs(v) > 1e-6 {
			t.Errorf("%s = %g, want 0", name, v)
		}
	}
	zero("attn_bi[1]", s.AttnBI[1])
	zero("attn_skip_loss[1]", s.AttnSkipLoss[1])
	for _, f := range []struct {
		name string
		v    []float64
	}{{"attn_bi", s.AttnBI}, {"mlp_bi", s.MLPBI}, {"attn_skip_loss", s.AttnSkipLoss}, {"mlp_skip_loss", s.MLPSkipLoss}} {
		zero(f.name+"[2]", f.v[2])
	}
	if s.MLPBI[1] < 0.01 || math.Abs(s.MLPSkipLoss[1]) < 1e-3 || s.AttnBI[0] < 0.01 || math.Abs(s.AttnSkipLoss[0]) < 1e-3 {
		t.Errorf("live sub-blocks: mlp_bi[1] %g mlp_skip[1] %g attn_bi[0] %g attn_skip[0] %g; want clearly non-zero",
			s.MLPBI[1], s.MLPSkipLoss[1], s.AttnBI[0], s.AttnSkipLoss[0])
	}
	for _, c := range []struct {
		l    int
		attn bool
		got  float64
	}{{0, true, s.AttnSkipLoss[0]}, {0, false, s.MLPSkipLoss[0]}, {1, false, s.MLPSkipLoss[1]}} {
		ref := withoutSubBlock(t, m, c.l, c.attn)
		loss, err := meanLoss(context.Background(), ref, data, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := loss - s.BaseLoss; math.Abs(c.got-want) > 1e-5 {
			t.Errorf("layer %d (attention %v removed): skip loss %g, the model without it gives %g", c.l, c.attn, c.got, want)
		}
	}
	// The model's skips are cleared afterwards.
	again, _ := meanLoss(context.Background(), m, data, 4, nil)
	if math.Abs(again-s.BaseLoss) > 1e-6 {
		t.Errorf("after Compute the model's loss is %g, base was %g: skips left set", again, s.BaseLoss)
	}

	// Round trip, and NoSubBlockSkipLoss leaves the sub-block losses NaN.
	p := filepath.Join(t.TempDir(), "s.safetensors")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2][]float64{"attn_bi": {s.AttnBI, got.AttnBI}, "mlp_bi": {s.MLPBI, got.MLPBI},
		"attn_skip_loss": {s.AttnSkipLoss, got.AttnSkipLoss}, "mlp_skip_loss": {s.MLPSkipLoss, got.MLPSkipLoss}} {
		for i := range pair[0] {
			if float32(pair[0][i]) != float32(pair[1][i]) {
				t.Fatalf("%s[%d]: saved %g, loaded %g", name, i, pair[0][i], pair[1][i])
			}
		}
	}
	n, err := Compute(context.Background(), m, data, Options{Batch: 4, NoSubBlockSkipLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(n.AttnSkipLoss[0]) || math.IsNaN(n.LayerSkipLoss[0]) || math.IsNaN(n.AttnBI[0]) {
		t.Errorf("NoSubBlockSkipLoss: attn skip %g, layer skip %g, attn BI %g", n.AttnSkipLoss[0], n.LayerSkipLoss[0], n.AttnBI[0])
	}
}

// TestVersion1FileLoads: a file written before sub-block scores loads with
// NaN sub-block scores, and is not reused as a cache.
func TestVersion1FileLoads(t *testing.T) {
	old := &Scores{Hidden: []float64{1, 2}, LayerBI: []float64{8.1, 3}, LayerSkipLoss: []float64{0.5, 0.1}, KVHeads: []int{1, 1},
		Heads: [][]float64{{1, 2}, {3, 4}}, HeadChannels: [][]float64{{1, 2, 3, 4}, {1, 2, 3, 4}}, Neurons: [][]float64{{5}, {6}},
		Version: "1", ModelHash: "m", DataHash: "d"}
	p := filepath.Join(t.TempDir(), "v1.safetensors")
	if err := old.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range [][]float64{got.AttnBI, got.MLPBI, got.AttnSkipLoss, got.MLPSkipLoss} {
		if len(v) != 2 || !math.IsNaN(v[0]) || !math.IsNaN(v[1]) {
			t.Fatalf("version 1 sub-block scores %v, want two NaN", v)
		}
	}
	if !reflect.DeepEqual(f32(got.LayerBI), f32(old.LayerBI)) || got.Matches("m", "d") {
		t.Errorf("layer BI %v, matches %v", got.LayerBI, got.Matches("m", "d"))
	}
}

func TestProgressAndCancel(t *testing.T) {
	m := model(t)
	data := rows(5, 6, 1)
	var calls int
	var last, total int64
	_, err := Compute(context.Background(), m, data, Options{Batch: 2, SkipRows: 3, Progress: func(e progress.Event) {
		calls++
		d, n := e.Done, e.Total
		if e.Stage != "importance" || e.Unit != "seq" {
			t.Fatalf("event %+v", e)
		}
		if d <= last || n != total && total != 0 {
			t.Fatalf("progress %d/%d after %d/%d", d, n, last, total)
		}
		last, total = d, n
	}})
	if err != nil {
		t.Fatal(err)
	}
	// 5 calibration rows, then 3 layer + 3·2 sub-block skip passes of 3 rows.
	if want := int64(5 + 9*3); last != want || total != want {
		t.Errorf("progress ended at %d/%d, want %d/%d", last, total, want, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	_, err = Compute(ctx, m, data, Options{Batch: 1, Progress: func(e progress.Event) {
		calls++
		if e.Done == 7 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || calls != 7 {
		t.Errorf("cancelled after 7 sequences: err %v after %d calls", err, calls)
	}
	if l, _ := meanLoss(context.Background(), m, data, 2, nil); l == 0 {
		t.Error("no loss after a cancelled run")
	}
}

func ExampleLeastImportant() {
	bi := []float64{0.9, 0.02, 0.3, 0.05, math.NaN()}
	fmt.Println(LeastImportant(bi, 3))
	// Output: [1 3 2]
}
