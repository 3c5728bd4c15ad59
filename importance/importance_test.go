package importance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

func arch() *architecture.Model {
	return &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 32, Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 64,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{0},
		Layers: []architecture.Layer{
			{Attention: &architecture.Attention{Heads: 4, KVHeads: 4, HeadDim: 4}, MLP: &architecture.MLP{Width: 24, Gated: true, Activation: "silu"}},
			{Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4}, MLP: &architecture.MLP{Width: 24, Gated: true, Activation: "silu"}},
			{Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4}, MLP: &architecture.MLP{Width: 24, Gated: true, Activation: "silu"}},
		}}
}

// model returns a tiny model with large random weights (so activations
// differ clearly) and the planted structure: neuron 5 of layer 1 dead, head
// 2 of layer 0 dead, hidden channel 7 dead at every norm, layer 2 an
// identity.
func model(t testing.TB) *engine.Model {
	m, err := engine.New(arch(), 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range m.Specs() {
		w := m.Tensor(s.Name)
		for i := range w {
			if strings.HasSuffix(s.Name, "norm.weight") {
				w[i] = float32(0.5 + r.Float64())
			} else {
				w[i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
	const H = 16
	zeroRow := func(name string, row, width int) {
		clear(m.Tensor(name)[row*width : (row+1)*width])
	}
	zeroRow("model.layers.1.mlp.up_proj.weight", 5, H)
	for d := 0; d < 4; d++ { // v rows of KV head 2 (= query head 2 in MHA layer 0)
		zeroRow("model.layers.0.self_attn.v_proj.weight", 2*4+d, H)
	}
	for l := 0; l < 3; l++ {
		m.Tensor(fmt.Sprintf("model.layers.%d.input_layernorm.weight", l))[7] = 0
		m.Tensor(fmt.Sprintf("model.layers.%d.post_attention_layernorm.weight", l))[7] = 0
	}
	clear(m.Tensor("model.layers.2.self_attn.o_proj.weight"))
	clear(m.Tensor("model.layers.2.mlp.down_proj.weight"))
	return m
}

func rows(n, T int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, 9))
	out := make([][]int32, n)
	for i := range out {
		out[i] = make([]int32, T+1)
		for j := range out[i] {
			out[i][j] = int32(r.IntN(32))
		}
	}
	return out
}

func last(v []float64) int { rk := Ranking(v); return rk[len(rk)-1] }

func TestPlantedStructureRanksLast(t *testing.T) {
	s, err := Compute(context.Background(), model(t), rows(6, 12, 1), Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := last(s.Neurons[1]); got != 5 || s.Neurons[1][5] != 0 {
		t.Errorf("layer 1: least important neuron %d (score %g), want 5 with score 0", got, s.Neurons[1][5])
	}
	if got := last(s.Heads[0]); got != 2 || s.Heads[0][2] != 0 {
		t.Errorf("layer 0: least important head %d (%v), want 2", got, s.Heads[0])
	}
	if got := last(s.Hidden); got != 7 || s.Hidden[7] != 0 {
		t.Errorf("least important hidden channel %d (%g), want 7", got, s.Hidden[7])
	}
	for l := 0; l < 2; l++ {
		// A random model's loss may rise or fall without a layer; either
		// way it changes, unlike for the identity layer.
		if math.Abs(s.LayerSkipLoss[l]) <= 1e-3 || s.LayerBI[l] <= 0.01 {
			t.Errorf("layer %d: skip loss %g, BI %g; want clearly non-zero", l, s.LayerSkipLoss[l], s.LayerBI[l])
		}
	}
	if math.Abs(s.LayerSkipLoss[2]) > 1e-6 || math.Abs(s.LayerBI[2]) > 1e-6 {
		t.Errorf("identity layer 2: skip loss %g, BI %g; want ~0", s.LayerSkipLoss[2], s.LayerBI[2])
	}
	if s.Tokens != 72 || s.Sequences != 6 || s.SeqLen != 12 || s.KVHeads[1] != 2 {
		t.Errorf("provenance: %d tokens %d seqs len %d kv %v", s.Tokens, s.Sequences, s.SeqLen, s.KVHeads)
	}
	if math.Abs(s.BaseLoss-math.Log(32)) > 3 || s.BaseLoss <= 0 {
		t.Errorf("base loss %g", s.BaseLoss)
	}
}

// TestAggregationByHand checks mean-over-tokens, L2-over-sequences on
// numbers worked by hand, independent of the batch split.
func TestAggregationByHand(t *testing.T) {
	// Two sequences of two tokens, two channels:
	// seq 0: (1, 0), (-3, 2)  -> mean |x| = (2, 1)
	// seq 1: (2, -4), (2, 0)  -> mean |x| = (2, 2)
	// A = (4+4, 1+4) = (8, 5)  -> s = (2.828427, 2.236068)
	x := []float32{1, 0, -3, 2, 2, -4, 2, 0}
	one := newAccum(2)
	one.add(x, 2, 2, 2)
	split := newAccum(2)
	split.add(x[:4], 1, 2, 2)
	split.add(x[4:], 1, 2, 2)
	want := []float64{math.Sqrt(8), math.Sqrt(5)}
	for _, a := range []*accum{one, split} {
		got := a.sqrt()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("channel %d: %g, want %g", i, got[i], want[i])
			}
		}
	}
	if c := meanCosine([]float32{1, 0, 0, 1}, []float32{1, 0, 1, 0}, 2); math.Abs(c-0.5) > 1e-12 {
		t.Errorf("mean cosine %g, want 0.5", c)
	}
}

// TestBatchInvariance: the scores do not depend on how sequences are batched.
func TestBatchInvariance(t *testing.T) {
	data := rows(5, 8, 2)
	a, err := Compute(context.Background(), model(t), data, Options{Batch: 1, NoSkipLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compute(context.Background(), model(t), data, Options{Batch: 5, NoSkipLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Hidden {
		if math.Abs(a.Hidden[i]-b.Hidden[i]) > 1e-4*math.Max(1, a.Hidden[i]) {
			t.Fatalf("hidden[%d]: %g (batch 1) vs %g (batch 5)", i, a.Hidden[i], b.Hidden[i])
		}
	}
	if !math.IsNaN(a.LayerSkipLoss[0]) {
		t.Error("skip loss measured although NoSkipLoss")
	}
}

func TestHeadOrderGroupAware(t *testing.T) {
	s := &Scores{Heads: [][]float64{{1, 5, 3, 3, 9, 0, 2, 8}}, KVHeads: []int{2}}
	want := [][]int{{1, 2, 3, 0}, {4, 7, 6, 5}}
	if got := s.HeadOrder(0); !reflect.DeepEqual(got, want) {
		t.Errorf("HeadOrder = %v, want %v", got, want)
	}
	if s.HeadOrder(3) != nil {
		t.Error("out-of-range layer gave an order")
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	m := model(t)
	data := rows(4, 8, 3)
	s, err := Compute(context.Background(), m, data, Options{Batch: 2, SkipRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.ModelHash = "abc"
	p := filepath.Join(t.TempDir(), "scores.safetensors")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Matches("abc", dataset.HashRows(data)) || got.Matches("abd", dataset.HashRows(data)) || got.Matches("abc", dataset.HashRows(data[:3])) {
		t.Error("Matches wrong")
	}
	if got.SeqLen != 8 || got.Sequences != 4 || got.Tokens != 32 || !reflect.DeepEqual(got.KVHeads, s.KVHeads) {
		t.Errorf("metadata: %+v", got)
	}
	for l := range s.Neurons {
		for i := range s.Neurons[l] {
			if float32(got.Neurons[l][i]) != float32(s.Neurons[l][i]) {
				t.Fatalf("neuron %d/%d differs", l, i)
			}
		}
		if len(got.Heads[l]) != 4 || len(got.HeadChannels[l]) != 16 {
			t.Fatalf("layer %d heads %d channels %d", l, len(got.Heads[l]), len(got.HeadChannels[l]))
		}
	}
	if float32(got.BaseLoss) != float32(s.BaseLoss) || float32(got.LayerSkipLoss[1]) != float32(s.LayerSkipLoss[1]) {
		t.Error("losses differ after round trip")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "none.safetensors")); err == nil {
		t.Error("missing file accepted")
	}
	p := filepath.Join(dir, "junk.safetensors")
	os.WriteFile(p, []byte("not safetensors at all"), 0o644)
	if _, err := Load(p); err == nil {
		t.Error("junk accepted")
	}
	s := &Scores{Hidden: []float64{1}, LayerBI: []float64{1}, LayerSkipLoss: []float64{0}, KVHeads: []int{0},
		Heads: [][]float64{nil}, HeadChannels: [][]float64{nil}, Neurons: [][]float64{nil}, Version: Version}
	q := filepath.Join(dir, "ok.safetensors")
	if err := s.Save(q); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(q); err != nil {
		t.Errorf("minimal file: %v", err)
	}
	// A scores file with inconsistent head counts.
	s.KVHeads = []int{3}
	s.Heads = [][]float64{{1, 2}}
	s.HeadChannels = [][]float64{{1, 2, 3, 4}}
	if err := s.Save(q); err != nil {
		t.Fatal(err)
	}
	var fe *FormatError
	if _, err := Load(q); !errors.As(err, &fe) || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("bad heads: %v", err)
	}
}

func TestComputeErrors(t *testing.T) {
	m := model(t)
	if _, err := Compute(context.Background(), m, nil, Options{}); err == nil {
		t.Error("no rows accepted")
	}
	if _, err := Compute(context.Background(), m, [][]int32{{1, 2, 3}, {1, 2}}, Options{}); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("ragged rows: %v", err)
	}
	if _, err := Compute(context.Background(), m, [][]int32{{1, 2, 99}}, Options{}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("bad token: %v", err)
	}
}

func ExampleScores_HeadOrder() {
	s := &Scores{Heads: [][]float64{{0.1, 0.9, 0.5, 0.2}}, KVHeads: []int{2}}
	fmt.Println(s.HeadOrder(0))
	// Output: [[1 0] [2 3]]
}

func ExampleRanking() {
	fmt.Println(Ranking([]float64{0.2, 3, 0, 1}))
	// Output: [1 3 0 2]
}

func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	s := &Scores{Hidden: []float64{1, 2}, LayerBI: []float64{1}, LayerSkipLoss: []float64{0}, KVHeads: []int{1},
		Heads: [][]float64{{1, 2}}, HeadChannels: [][]float64{{1, 2, 3, 4}}, Neurons: [][]float64{{5}}, Version: Version}
	p := filepath.Join(dir, "seed.safetensors")
	if err := s.Save(p); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		q := filepath.Join(dir, "f.safetensors")
		if err := os.WriteFile(q, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(q)
		if err != nil {
			return
		}
		for l := range got.Heads {
			got.HeadOrder(l)
		}
		Ranking(got.Hidden)
	})
}

// TestStories260K runs the scorer on a checkpoint written by another
// project (llama2.c's stories260K in HF layout: 5 layers, 8 heads sharing 4
// KV heads, hidden 64, FFN 172) and checks shapes, finiteness and the
// round trip.
func TestStories260K(t *testing.T) {
	dir := filepath.Dir(sdtest.Require(t, "models/stories260K/config.json"))
	m, err := engine.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	data := make([][]int32, 8)
	for i := range data {
		data[i] = make([]int32, 33)
		for j := range data[i] {
			data[i][j] = int32(3 + r.IntN(509))
		}
	}
	s, err := Compute(context.Background(), m, data, Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hidden) != 64 || len(s.LayerBI) != 5 || len(s.Heads[4]) != 8 || s.KVHeads[0] != 4 || len(s.Neurons[2]) != 172 || len(s.HeadChannels[1]) != 64 {
		t.Fatalf("shapes: hidden %d layers %d heads %d kv %d neurons %d", len(s.Hidden), len(s.LayerBI), len(s.Heads[4]), s.KVHeads[0], len(s.Neurons[2]))
	}
	check := func(name string, v []float64) {
		for i, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 && name != "skip" {
				t.Fatalf("%s[%d] = %g", name, i, x)
			}
		}
	}
	check("hidden", s.Hidden)
	check("bi", s.LayerBI)
	check("skip", s.LayerSkipLoss)
	for l := range 5 {
		check("heads", s.Heads[l])
		check("neurons", s.Neurons[l])
		if len(s.HeadOrder(l)) != 4 || len(s.HeadOrder(l)[0]) != 2 {
			t.Fatalf("layer %d head order %v", l, s.HeadOrder(l))
		}
	}
	p := filepath.Join(t.TempDir(), "s.safetensors")
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatal(err)
	}
}
