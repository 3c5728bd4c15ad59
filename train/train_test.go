package train

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
)

func tinyArch(vocab int) *architecture.Model {
	layers := make([]architecture.Layer, 2)
	for i := range layers {
		layers[i] = architecture.Layer{
			Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 8},
			MLP:       &architecture.MLP{Width: 48, Gated: true, Activation: "silu"},
		}
	}
	return &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: vocab, Hidden: 32,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 64,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{0}, Layers: layers}
}

// patternRows returns rows drawn from a simple learnable process: each
// token is (previous + 1 or + 2) mod vocab.
func patternRows(n, T, vocab int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, 1))
	rows := make([][]int32, n)
	for i := range rows {
		row := make([]int32, T+1)
		row[0] = int32(r.IntN(vocab))
		for j := 1; j <= T; j++ {
			row[j] = (row[j-1] + 1 + int32(r.IntN(2))) % int32(vocab)
		}
		rows[i] = row
	}
	return rows
}

func newTrainer(t *testing.T, o Options) *Trainer {
	t.Helper()
	m, err := engine.New(tinyArch(16), 42)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(m, patternRows(64, 16, 16, 1), patternRows(8, 16, 16, 2), o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestLossFalls(t *testing.T) {
	var log bytes.Buffer
	tr := newTrainer(t, Options{Steps: 60, Batch: 4, SeqLen: 16, LR: 1e-2, Warmup: Ptr(5), EvalEvery: 30, Log: &log})
	before, err := tr.Evaluate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Uniform over 16 tokens is ln 16 = 2.77 nats; the process has 1 bit of
	// entropy per token (ln 2 = 0.69), which a trained model approaches.
	if math.Abs(before-math.Log(16)) > 0.3 {
		t.Errorf("initial validation loss %.3f, want about ln 16 = 2.77", before)
	}
	if res.ValLoss > 1.4 || res.LastLoss > 1.4 {
		t.Errorf("after 60 steps: train %.3f validation %.3f; want < 1.4\n%s", res.LastLoss, res.ValLoss, log.String())
	}
	if !strings.Contains(log.String(), "step 30 validation loss") {
		t.Errorf("no periodic evaluation in the log:\n%s", log.String())
	}
}

// TestResumeBitIdentical: 20 steps straight equal 8 steps, a checkpoint, a
// fresh process state resumed from it, and 12 more steps — bit for bit.
func TestResumeBitIdentical(t *testing.T) {
	dir := t.TempDir()
	o := Options{Steps: 20, Batch: 3, SeqLen: 16, LR: 5e-3, Warmup: Ptr(3), Seed: 7, EvalEvery: 0}
	a := newTrainer(t, o)
	if _, err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	ckpt := filepath.Join(dir, "train.ckpt")
	o1 := o
	o1.CheckpointPath = ckpt
	o1.CheckpointEvery = 8
	const stopAt = 8
	o2 := o1
	o2.StopAt = stopAt
	b := newTrainer(t, o2)
	if _, err := b.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	c := newTrainer(t, o1) // fresh model with the initial weights
	if err := c.Resume(ckpt); err != nil {
		t.Fatal(err)
	}
	if c.State.Step != stopAt {
		t.Fatalf("resumed at step %d, want %d", c.State.Step, stopAt)
	}
	if _, err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Model.Params(), c.Model.Params()) || !slices.Equal(a.Opt.V, c.Opt.V) {
		t.Fatal("resumed run differs from the uninterrupted run")
	}
	if a.State.Epoch != c.State.Epoch || a.State.Index != c.State.Index {
		t.Errorf("data position %d/%d vs %d/%d", a.State.Epoch, a.State.Index, c.State.Epoch, c.State.Index)
	}
}

func TestInterruptWritesCheckpoint(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c")
	tr := newTrainer(t, Options{Steps: 50, Batch: 2, SeqLen: 16, CheckpointPath: ckpt, CheckpointEvery: 1000})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(ckpt); err != nil {
		t.Fatalf("no checkpoint after interrupt: %v", err)
	}
}

func TestResumeErrors(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "c")
	tr := newTrainer(t, Options{Steps: 2, Batch: 2, SeqLen: 16, CheckpointPath: ckpt})
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(ckpt)
	write := func(b []byte) string {
		p := filepath.Join(dir, fmt.Sprint("x", len(b)))
		os.WriteFile(p, b, 0o644)
		return p
	}
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)/2] ^= 1
	tests := []struct {
		name string
		path string
		tr   *Trainer
		want string
	}{
		{"missing", filepath.Join(dir, "nope"), tr, "no such file"},
		{"magic", write([]byte("hello world, not a checkpoint")), tr, "not a training checkpoint"},
		{"truncated", write(good[:len(good)-10]), tr, "CRC mismatch"},
		{"corrupt", write(corrupt), tr, "CRC mismatch"},
		{"seqlen", ckpt, func() *Trainer {
			m, _ := engine.New(tinyArch(16), 1)
			x, _ := New(m, patternRows(64, 8, 16, 1), nil, Options{Steps: 2, Batch: 2, SeqLen: 8})
			return x
		}(), "resume with the same data"},
		{"arch", ckpt, func() *Trainer {
			m, _ := engine.New(tinyArch(17), 1)
			x, _ := New(m, patternRows(64, 16, 16, 1), nil, Options{Steps: 2, Batch: 2, SeqLen: 16})
			return x
		}(), "architecture"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.tr.Resume(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSchedule(t *testing.T) {
	s := Schedule{Peak: 1, Min: 0.1, Warmup: 10, Total: 110}
	tests := []struct {
		step int
		want float64
	}{{0, 0.1}, {4, 0.5}, {9, 1}, {10, 1}, {60, 0.55}, {110, 0.1}, {500, 0.1}}
	for _, tc := range tests {
		if got := s.LR(tc.step); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("LR(%d) = %g, want %g", tc.step, got, tc.want)
		}
	}
}

func TestAdamWByHand(t *testing.T) {
	// Two parameters, one decayed, one a norm weight; two steps checked
	// against the formulas evaluated in float64.
	o := NewAdamW(2, []Span{{"w", 0, 1}, {"model.norm.weight", 1, 1}}, 0.9, 0.99, 1e-8, 0.5)
	p := []float32{1, 2}
	g := []float32{0.1, -0.2}
	var m, v [2]float64
	want := []float64{1, 2}
	for step := 1; step <= 2; step++ {
		if err := o.Step(p, g, 0.01); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			m[i] = 0.9*m[i] + 0.1*float64(g[i])
			v[i] = 0.99*v[i] + 0.01*float64(g[i])*float64(g[i])
			u := m[i] / (1 - math.Pow(0.9, float64(step))) / (math.Sqrt(v[i]/(1-math.Pow(0.99, float64(step)))) + 1e-8)
			if i == 0 {
				u += 0.5 * want[i]
			}
			want[i] -= 0.01 * u
		}
	}
	for i := range p {
		if math.Abs(float64(p[i])-want[i]) > 1e-6 {
			t.Errorf("param %d = %.7f, want %.7f", i, p[i], want[i])
		}
	}
	if err := o.Step(p, g[:1], 0.01); err == nil {
		t.Error("length mismatch accepted")
	}
}

// TestAdamWExemptRanges: the exempt ranges are the NoDecay spans, sorted
// and merged, and only they go undecayed (zero gradients: a decayed
// parameter shrinks, an exempt one stays).
func TestAdamWExemptRanges(t *testing.T) {
	spans := []Span{{"l1.w", 5, 2}, {"l0.input_layernorm.weight", 2, 1}, {"l0.w", 0, 2}, {"l0.q.bias", 3, 2}, {"model.norm.weight", 7, 1}}
	o := NewAdamW(8, spans, 0.9, 0.99, 1e-8, 0.5)
	if want := []Range{{2, 5}, {7, 8}}; !reflect.DeepEqual(o.Exempt, want) {
		t.Fatalf("exempt %v, want %v", o.Exempt, want)
	}
	p := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	if err := o.Step(p, make([]float32, 8), 0.1); err != nil {
		t.Fatal(err)
	}
	for i, x := range p {
		exempt := i >= 2 && i < 5 || i == 7
		if (x == 1) != exempt {
			t.Errorf("parameter %d = %g after a step of zero gradient (exempt %v)", i, x, exempt)
		}
	}
}

func TestNoDecay(t *testing.T) {
	for name, want := range map[string]bool{
		"model.norm.weight": true, "model.layers.0.input_layernorm.weight": true,
		"model.layers.0.self_attn.q_norm.weight": true, "model.layers.0.self_attn.q_proj.bias": true,
		"model.layers.0.self_attn.q_proj.weight": false, "model.embed_tokens.weight": false, "lm_head.weight": false,
	} {
		if NoDecay(name) != want {
			t.Errorf("NoDecay(%q) = %v", name, !want)
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	g := []float32{3, 4}
	if n := ClipGradNorm(g, 1); n != 5 || math.Abs(float64(g[0])-0.6) > 1e-7 || math.Abs(float64(g[1])-0.8) > 1e-7 {
		t.Errorf("norm %g grads %v", n, g)
	}
	g = []float32{0.3, 0.4}
	if n := ClipGradNorm(g, 1); math.Abs(n-0.5) > 1e-7 || g[0] != 0.3 {
		t.Errorf("below the limit: norm %g grads %v", n, g)
	}
	g = []float32{float32(math.Inf(1)), 1}
	if n := ClipGradNorm(g, 1); !math.IsInf(n, 1) || g[1] != 1 {
		t.Errorf("infinite: %g %v", n, g)
	}
}

func TestOptionsValidate(t *testing.T) {
	m, _ := engine.New(tinyArch(16), 1)
	if _, err := New(m, patternRows(2, 16, 16, 1), nil, Options{Batch: 4, SeqLen: 16}); err == nil || !strings.Contains(err.Error(), "fewer than one batch") {
		t.Errorf("too little data: %v", err)
	}
	if _, err := New(m, patternRows(8, 10, 16, 1), nil, Options{Batch: 4, SeqLen: 16}); err == nil || !strings.Contains(err.Error(), "want seq-len+1") {
		t.Errorf("row length: %v", err)
	}
	for _, o := range []Options{{Steps: -1}, {LR: 1, MinLR: Ptr(2.0)}, {Beta1: Ptr(1.0)}, {WeightDecay: Ptr(-1.0)}} {
		o.EnsureDefaults()
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// FuzzResume feeds checkpoint bodies with a valid CRC appended, so that the
// header and length checks behind the CRC are exercised.
func FuzzResume(f *testing.F) {
	dir := f.TempDir()
	ckpt := filepath.Join(dir, "seed")
	m, _ := engine.New(tinyArch(16), 42)
	tr, err := New(m, patternRows(8, 16, 16, 1), nil, Options{Steps: 1, Batch: 2, SeqLen: 16, CheckpointPath: ckpt})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(ckpt)
	f.Add(good[:len(good)-4])
	f.Add([]byte(magic + "\x05\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := filepath.Join(dir, "fuzz")
		b := binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.ChecksumIEEE(body))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, _ := engine.New(tinyArch(16), 42)
		x, _ := New(m, patternRows(8, 16, 16, 1), nil, Options{Steps: 1, Batch: 2, SeqLen: 16})
		x.Resume(p)
	})
}

func ExampleSchedule() {
	s := Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 10, Total: 100}
	for _, step := range []int{0, 9, 55, 99, 100} {
		fmt.Printf("step %3d: lr %.2e\n", step, s.LR(step))
	}
	// Output:
	// step   0: lr 3.00e-04
	// step   9: lr 3.00e-03
	// step  55: lr 1.65e-03
	// step  99: lr 3.01e-04
	// step 100: lr 3.00e-04
}

func TestParentArch(t *testing.T) {
	a := ParentArch(4096, 4095)
	m, err := engine.New(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 4096·192 tied embedding + 8 × (q 192·192, k,v 2·192·48, o 192·192,
	// gate/up/down 3·192·512, two norms 2·192) + final norm 192.
	want := 4096*192 + 8*(192*192+2*192*48+192*192+3*192*512+2*192) + 192
	if m.NumParams() != want {
		t.Errorf("%d parameters, want %d", m.NumParams(), want)
	}
	if bf16 := 2 * want; bf16 > 10<<20 {
		t.Errorf("%d bytes in bf16, over the 10 MB budget", bf16)
	}
	at := a.Layers[0].Attention
	if a.NumLayers() < 8 || at.Heads != 8 || at.KVHeads != 2 || !a.TiedEmbeddings || a.EOS[0] != 4095 {
		t.Errorf("arch %+v", a)
	}
}

// TestRowOrder: RowOrder lists the rows nextBatch takes, step after step,
// across epochs (what a PyTorch job reads in order).
func TestRowOrder(t *testing.T) {
	o := Options{Steps: 25, Batch: 3, SeqLen: 16, LR: 5e-3, Seed: 11}
	tr := newTrainer(t, o)
	n := len(tr.train)
	var got []int
	for range o.Steps {
		tr.nextBatch()
		got = append(got, tr.rows[:o.Batch]...)
	}
	want := RowOrder(n, o.Seed, o.Steps*o.Batch)
	if !slices.Equal(got, want) {
		t.Fatalf("nextBatch took %v, RowOrder gives %v", got, want)
	}
	if o.Steps*o.Batch <= n {
		t.Fatalf("only %d rows for %d sequences: the test must cross an epoch", n, o.Steps*o.Batch)
	}
}
