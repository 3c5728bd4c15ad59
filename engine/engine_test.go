package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/internal/shareddata"
)

// TestCacheMatchesForward: incremental decoding with the KV cache, several
// sequences of different lengths batched in one Step with prompt chunks both
// above and below the GEMM threshold, gives the full forward's logits.
func TestCacheMatchesForward(t *testing.T) {
	for _, tied := range []bool{true, false} {
		m, err := New(tinyArch(tied), 2)
		if err != nil {
			t.Fatal(err)
		}
		randomize(m, 4, 0.4)
		const T, V = 150, 11
		r := rand.New(rand.NewPCG(8, 9))
		seqs := [][]int32{randTokens(r, T, V), randTokens(r, T, V), randTokens(r, T, V)}
		full := make([][]float32, len(seqs))
		for i, s := range seqs {
			l, err := m.Forward(s, 1, T)
			if err != nil {
				t.Fatal(err)
			}
			full[i] = append([]float32(nil), l...)
		}
		// Chunk schedules per sequence: prompt sizes then single tokens.
		chunks := [][]int{{20, 1, 1, 3, 125}, {1, 1, 1, 17, 130}, {70, 70, 5, 4, 1}}
		caches := []*Cache{m.NewCache(T), m.NewCache(T), m.NewCache(T)}
		pos := make([]int, 3)
		for step := 0; step < 5; step++ {
			toks := make([][]int32, 3)
			for i := range seqs {
				toks[i] = seqs[i][pos[i] : pos[i]+chunks[i][step]]
			}
			out, err := m.Step(caches, toks, true)
			if err != nil {
				t.Fatal(err)
			}
			for i := range seqs {
				for j := range toks[i] {
					p := pos[i] + j
					if d := maxAbsDiff(out[i][j*V:(j+1)*V], full[i][p*V:(p+1)*V]); d > 1e-5 {
						t.Fatalf("tied=%v seq %d position %d (step %d): cache logits differ from forward by %.3g", tied, i, p, step, d)
					}
				}
				pos[i] += chunks[i][step]
			}
		}
		if caches[0].Len() != T {
			t.Fatalf("cache length %d, want %d", caches[0].Len(), T)
		}
		if _, err := m.Step(caches[:1], [][]int32{{1}}, false); err == nil {
			t.Fatal("Step past the cache capacity did not fail")
		}
	}
}

// TestCacheCopyFrom: a prefix computed once and copied into several caches
// continues exactly as the full forward pass of prefix + continuation.
func TestCacheCopyFrom(t *testing.T) {
	m, err := New(tinyArch(true), 2)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 4, 0.4)
	const P, T, V = 40, 60, 11
	r := rand.New(rand.NewPCG(3, 4))
	prefix := randTokens(r, P, V)
	shared := m.NewCache(P)
	if _, err := m.Step([]*Cache{shared}, [][]int32{prefix}, false); err != nil {
		t.Fatal(err)
	}
	var caches []*Cache
	var conts [][]int32
	for range 3 {
		c := m.NewCache(T)
		if err := c.CopyFrom(shared); err != nil {
			t.Fatal(err)
		}
		caches = append(caches, c)
		conts = append(conts, randTokens(r, T-P, V))
	}
	out, err := m.Step(caches, conts, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, cont := range conts {
		full, err := m.Forward(append(append([]int32(nil), prefix...), cont...), 1, T)
		if err != nil {
			t.Fatal(err)
		}
		for j := range cont {
			p := P + j
			if d := maxAbsDiff(out[i][j*V:(j+1)*V], full[p*V:(p+1)*V]); d > 1e-5 {
				t.Fatalf("continuation %d position %d: copied-cache logits differ from forward by %.3g", i, p, d)
			}
		}
	}
	if err := m.NewCache(P - 1).CopyFrom(shared); err == nil {
		t.Error("copy into a smaller cache did not fail")
	}
}

// TestBatchRowsIndependent: a batch of B sequences gives each sequence the
// logits it gets alone.
func TestBatchRowsIndependent(t *testing.T) {
	m, err := New(tinyArch(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 5, 0.4)
	r := rand.New(rand.NewPCG(1, 1))
	const B, T, V = 3, 9, 11
	toks := randTokens(r, B*T, V)
	batch, _ := m.Forward(toks, B, T)
	batch = append([]float32(nil), batch...)
	for b := 0; b < B; b++ {
		one, _ := m.Forward(toks[b*T:(b+1)*T], 1, T)
		if d := maxAbsDiff(one, batch[b*T*V:(b+1)*T*V]); d > 1e-5 {
			t.Fatalf("row %d differs by %.3g", b, d)
		}
	}
}

type recorder struct {
	seen []string
	acts map[string][]float32
}

func (r *recorder) Observe(a *Activation) {
	key := fmt.Sprintf("%d/%s", a.Layer, a.Site)
	r.seen = append(r.seen, key)
	if len(a.Data) != a.B*a.T*a.Width {
		panic(fmt.Sprintf("%s: %d values for %d×%d×%d", key, len(a.Data), a.B, a.T, a.Width))
	}
	r.acts[key] = append([]float32(nil), a.Data...)
}

func TestObserverSitesAndSkip(t *testing.T) {
	m, err := New(tinyArch(true), 4)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 6, 0.4)
	rec := &recorder{acts: map[string][]float32{}}
	m.SetObserver(rec)
	r := rand.New(rand.NewPCG(2, 2))
	toks, tg := randTokens(r, 2*6, 11), randTokens(r, 2*6, 11)
	base, err := m.ForwardLoss(toks, tg, 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := "0/layer_input 0/attn_norm 0/attn_heads 0/attn_residual 0/mlp_norm 0/mlp_act 0/layer_output " +
		"1/layer_input 1/attn_residual 1/mlp_norm 1/mlp_act 1/layer_output " +
		"2/layer_input 2/attn_norm 2/attn_heads 2/attn_residual 2/layer_output " +
		"3/layer_input 3/attn_norm 3/attn_heads 3/attn_residual 3/mlp_norm 3/mlp_act 3/layer_output 4/final_norm"
	if got := strings.Join(rec.seen, " "); got != want {
		t.Fatalf("sites:\n got %s\nwant %s", got, want)
	}
	// The layer output observed is the next layer's input.
	if d := maxAbsDiff(rec.acts["1/layer_output"], rec.acts["2/layer_input"]); d != 0 {
		t.Fatalf("layer 1 output and layer 2 input differ by %g", d)
	}
	// Between the sub-blocks: a layer without attention passes its input
	// on; one without an MLP ends there.
	if d := maxAbsDiff(rec.acts["1/layer_input"], rec.acts["1/attn_residual"]); d != 0 {
		t.Fatalf("layer 1 (no attention): residual between sub-blocks differs from the input by %g", d)
	}
	if d := maxAbsDiff(rec.acts["2/attn_residual"], rec.acts["2/layer_output"]); d != 0 {
		t.Fatalf("layer 2 (no MLP): residual between sub-blocks differs from the output by %g", d)
	}
	if d := maxAbsDiff(rec.acts["0/layer_input"], rec.acts["0/attn_residual"]); d == 0 {
		t.Fatal("layer 0: attention did not change the residual stream")
	}
	// o_proj applied to the observed heads gives the attention's contribution.
	ao := rec.acts["2/attn_heads"]
	if len(ao) != 12*2*6 {
		t.Fatalf("attn_heads has %d values", len(ao))
	}
	// Skipping a layer: its output equals its input, and the loss changes.
	if err := m.SetSkip(1); err != nil {
		t.Fatal(err)
	}
	rec.seen, rec.acts = nil, map[string][]float32{}
	skipped, err := m.ForwardLoss(toks, tg, 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(rec.acts["1/layer_input"], rec.acts["1/layer_output"]); d != 0 {
		t.Fatalf("skipped layer changed its input by %g", d)
	}
	if skipped == base {
		t.Fatal("skipping layer 1 did not change the loss")
	}
	// Backward with a skipped layer leaves that layer's gradients at zero.
	m.ZeroGrad()
	if err := m.Backward(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"model.layers.1.mlp.up_proj.weight", "model.layers.1.post_attention_layernorm.weight"} {
		for _, g := range m.Grad(n) {
			if g != 0 {
				t.Fatalf("%s has a gradient although the layer is skipped", n)
			}
		}
	}
	if err := m.SetSkip(9); err == nil {
		t.Fatal("SetSkip(9) on a 4-layer model did not fail")
	}
	m.SetSkip()
	m.SetObserver(nil)
	if l, _ := m.ForwardLoss(toks, tg, 2, 6); l != base {
		t.Fatalf("loss after clearing skips %v, want %v", l, base)
	}
}

// TestBackwardFromLogitsMatchesBackward: feeding the cross-entropy gradient
// by hand gives the same gradients as Backward.
func TestBackwardFromLogitsMatchesBackward(t *testing.T) {
	m, _ := New(tinyArch(false), 5)
	randomize(m, 7, 0.4)
	r := rand.New(rand.NewPCG(3, 3))
	const B, T, V = 2, 4, 11
	toks, tg := randTokens(r, B*T, V), randTokens(r, B*T, V)
	m.ZeroGrad()
	m.ForwardLoss(toks, tg, B, T)
	m.Backward()
	want := append([]float32(nil), m.Grads()...)
	m.ZeroGrad()
	logits, _ := m.Forward(toks, B, T)
	d := make([]float32, len(logits))
	for i := 0; i < B*T; i++ {
		row := logits[i*V : (i+1)*V]
		lse := logSumExp(row)
		for j, v := range row {
			d[i*V+j] = float32(math.Exp(float64(v)-lse)) / (B * T)
		}
		d[i*V+int(tg[i])] -= 1.0 / (B * T)
	}
	if err := m.BackwardFromLogits(d); err != nil {
		t.Fatal(err)
	}
	if diff := maxAbsDiff(m.Grads(), want); diff > 1e-6 {
		t.Fatalf("gradients differ by %g", diff)
	}
	if err := m.BackwardFromLogits(d[:5]); err == nil {
		t.Fatal("short dlogits accepted")
	}
}

func TestInputErrors(t *testing.T) {
	m, _ := New(tinyArch(true), 1)
	if _, err := m.Forward([]int32{1, 2, 3}, 2, 2); err == nil {
		t.Error("wrong token count accepted")
	}
	if _, err := m.Forward([]int32{1, 11}, 1, 2); err == nil || !strings.Contains(err.Error(), "tokens[1] = 11") {
		t.Errorf("out-of-vocabulary token: %v", err)
	}
	if err := (&Model{}).Backward(); !errors.Is(err, ErrNoForward) {
		t.Errorf("backward without forward: %v", err)
	}
	a := tinyArch(true)
	a.Layers[0].Mamba = &architecture.Mamba{Heads: 2}
	var ue *UnsupportedError
	if _, err := New(a, 1); !errors.As(err, &ue) || ue.Layer != 0 {
		t.Errorf("Mamba layer: %v", err)
	}
}

func uniformArch() *architecture.Model {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 32, Hidden: 16,
		Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 128, Rope: architecture.Rope{Theta: 10000, PartialFactor: 1},
		BOS: 1, EOS: []int{2}, DType: "float32"}
	for range 2 {
		a.Layers = append(a.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4},
			MLP:       &architecture.MLP{Width: 24, Gated: true, Activation: "silu"}})
	}
	return a
}

func TestSaveLoadRoundTrip(t *testing.T) {
	m, err := New(uniformArch(), 9)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(back.Params(), m.Params()); d != 0 {
		t.Fatalf("F32 round trip changed parameters by %g", d)
	}
	if err := m.Save(dir, checkpoint.BF16); err != nil {
		t.Fatal(err)
	}
	back, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range m.Params() {
		if d := math.Abs(float64(back.Params()[i] - v)); d > math.Abs(float64(v))/128 {
			t.Fatalf("BF16 round trip: param %d %v → %v", i, v, back.Params()[i])
		}
	}
}

// TestLoadShapeMismatch: a config.json that disagrees with the tensors is
// reported with the tensor name and both shapes.
func TestLoadShapeMismatch(t *testing.T) {
	m, _ := New(uniformArch(), 1)
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	cfg, _ := os.ReadFile(cfgPath)
	bad := strings.Replace(string(cfg), `"intermediate_size": 24`, `"intermediate_size": 20`, 1)
	if bad == string(cfg) {
		t.Fatalf("config.json has no intermediate_size 24:\n%s", cfg)
	}
	os.WriteFile(cfgPath, []byte(bad), 0o644)
	_, err := Load(dir)
	var se *ShapeError
	if !errors.As(err, &se) {
		t.Fatalf("want *ShapeError, got %v", err)
	}
	if se.Tensor != "model.layers.0.mlp.gate_proj.weight" || fmt.Sprint(se.Want) != "[20 16]" || fmt.Sprint(se.Got) != "[24 16]" {
		t.Fatalf("error names %q want %v got %v", se.Tensor, se.Want, se.Got)
	}
	t.Log(err)
	// Untied head declared but lm_head missing.
	os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), `"tie_word_embeddings": false`, `"tie_word_embeddings": false`, 1)), 0o644)
	a := uniformArch()
	a.TiedEmbeddings = true
	mt, _ := New(a, 1)
	dir2 := filepath.Join(t.TempDir(), "tied")
	mt.Save(dir2, checkpoint.F32)
	c2, _ := os.ReadFile(filepath.Join(dir2, "config.json"))
	os.WriteFile(filepath.Join(dir2, "config.json"), []byte(strings.Replace(string(c2), `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 1)), 0o644)
	_, err = Load(dir2)
	var me *MissingTensorError
	if !errors.As(err, &me) || me.Tensor != "lm_head.weight" {
		t.Fatalf("want missing lm_head.weight, got %v", err)
	}
}

func TestGenerateSampling(t *testing.T) {
	m, _ := New(uniformArch(), 3)
	randomize(m, 1, 0.5)
	ctx := context.Background()
	opt := GenerateOptions{MaxTokens: 12, Temperature: 0.9, TopP: 0.8, Seed: 42, EOS: []int{}}
	a, err := m.Generate(ctx, []int32{1, 5}, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Generate(ctx, []int32{1, 5}, opt)
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 12 {
		t.Fatalf("same seed gave %v and %v", a, b)
	}
	opt.Seed = 43
	c, _ := m.Generate(ctx, []int32{1, 5}, opt)
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Logf("seeds 42 and 43 gave the same tokens %v (possible but unlikely)", a)
	}
	// Greedy equals the argmax of the full forward at each step.
	g, _ := m.Generate(ctx, []int32{1, 5}, GenerateOptions{MaxTokens: 6, Greedy: true, EOS: []int{}})
	seq := []int32{1, 5}
	for _, id := range g {
		logits, _ := m.Forward(seq, 1, len(seq))
		if want := Argmax(logits[(len(seq)-1)*32:]); want != id {
			t.Fatalf("greedy token %d, forward argmax %d", id, want)
		}
		seq = append(seq, id)
	}
	// EOS stops generation and is not returned.
	stop, _ := m.Generate(ctx, []int32{1, 5}, GenerateOptions{MaxTokens: 6, Greedy: true, EOS: []int{int(g[2])}})
	if len(stop) != 2 {
		t.Fatalf("EOS %d: generated %v", g[2], stop)
	}
}

func TestSampleTopP(t *testing.T) {
	logits := []float32{0, 3, 2.5, -1} // probs ≈ .03 .58 .35 .01
	r := rand.New(rand.NewPCG(1, 2))
	counts := map[int32]int{}
	for range 4000 {
		counts[Sample(logits, 1, 0.5, r)]++
	}
	if len(counts) != 1 || counts[1] != 4000 {
		t.Fatalf("top-p 0.5 must keep only token 1: %v", counts)
	}
	counts = map[int32]int{}
	for range 4000 {
		counts[Sample(logits, 1, 0.9, r)]++
	}
	if counts[0] != 0 || counts[3] != 0 || counts[2] < 1200 || counts[2] > 1600 {
		t.Fatalf("top-p 0.9 must sample tokens 1 and 2 in ratio .62:.38: %v", counts)
	}
}

func ExampleModel_ForwardLoss() {
	arch := &architecture.Model{Vocab: 16, Hidden: 8, Norm: architecture.RMSNorm, NormEps: 1e-5,
		Rope: architecture.Rope{Theta: 10000}, TiedEmbeddings: true,
		Layers: []architecture.Layer{{
			Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 4},
			MLP:       &architecture.MLP{Width: 16, Gated: true, Activation: "silu"}}}}
	m, _ := New(arch, 1)
	tokens := []int32{1, 2, 3, 4}
	targets := []int32{2, 3, 4, 5}
	m.ZeroGrad()
	loss, _ := m.ForwardLoss(tokens, targets, 1, 4)
	_ = m.Backward()
	// One SGD step over the whole slab.
	for i, g := range m.Grads() {
		m.Params()[i] -= 0.1 * g
	}
	fmt.Printf("params %d, initial loss ≈ ln 16: %.2f\n", m.NumParams(), loss)
	// Output: params 728, initial loss ≈ ln 16: 2.80
}

// TestTensorSpecsMatchArchitecture cross-checks the engine's tensor list with
// the architecture package's independent one.
func TestTensorSpecsMatchArchitecture(t *testing.T) {
	archs := map[string]*architecture.Model{"tiny-tied": tinyArch(true), "tiny-untied": tinyArch(false), "uniform": uniformArch()}
	for _, name := range architecture.Presets() {
		a, err := architecture.Preset(name)
		if err != nil {
			t.Fatalf("preset %s: %v", name, err)
		}
		archs[name] = a
	}
	if dir, ok := shareddata.Dir(); ok {
		files, _ := filepath.Glob(filepath.Join(dir, "configs", "*.json"))
		for _, f := range files {
			if a, err := architecture.Load(f); err == nil {
				archs[filepath.Base(f)] = a
			}
		}
	}
	checked := 0
	for name, a := range archs {
		specs, err := TensorSpecs(a)
		if err != nil {
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		want := map[string]string{}
		for _, s := range a.Tensors() {
			want[s.Name] = fmt.Sprint(s.Shape)
		}
		if len(specs) != len(want) {
			t.Errorf("%s: engine has %d tensors, architecture %d", name, len(specs), len(want))
		}
		for _, s := range specs {
			if w, ok := want[s.Name]; !ok || w != fmt.Sprint(s.Shape) {
				t.Errorf("%s: engine tensor %s %v, architecture %q", name, s.Name, s.Shape, w)
			}
		}
		checked++
	}
	t.Logf("%d architectures cross-checked", checked)
}

// TestSavePerLayerRoundTrip: a model whose layers differ (KV heads, FFN
// width, a layer without attention, one without MLP) is saved with a
// per-layer config.json and loads back identical, computing the same logits.
func TestSavePerLayerRoundTrip(t *testing.T) {
	a := uniformArch()
	a.Hidden = 64
	a.Layers = []architecture.Layer{
		{Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 16}, MLP: &architecture.MLP{Width: 256, Gated: true, Activation: "silu"}},
		{Attention: &architecture.Attention{Heads: 4, KVHeads: 4, HeadDim: 16}, MLP: &architecture.MLP{Width: 512, Gated: true, Activation: "silu"}},
		{MLP: &architecture.MLP{Width: 256, Gated: true, Activation: "silu"}},
		{Attention: &architecture.Attention{Heads: 4, KVHeads: 1, HeadDim: 16}},
	}
	m, err := New(a, 5)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "child")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(back.Specs()), fmt.Sprint(m.Specs()); got != want {
		t.Fatalf("tensors after round trip:\n%s\nwant\n%s", got, want)
	}
	if d := maxAbsDiff(back.Params(), m.Params()); d != 0 {
		t.Fatalf("parameters changed by %g", d)
	}
	toks := []int32{1, 2, 3, 4, 5}
	l1, _ := m.Forward(toks, 1, 5)
	l1 = append([]float32(nil), l1...)
	l2, _ := back.Forward(toks, 1, 5)
	if d := maxAbsDiff(l1, l2); d != 0 {
		t.Fatalf("logits differ by %g", d)
	}
}

func ExampleModel_Generate() {
	arch := &architecture.Model{Vocab: 16, Hidden: 8, Norm: architecture.RMSNorm, NormEps: 1e-5,
		Rope: architecture.Rope{Theta: 10000}, TiedEmbeddings: true, EOS: []int{2},
		Layers: []architecture.Layer{{
			Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 4},
			MLP:       &architecture.MLP{Width: 16, Gated: true, Activation: "silu"}}}}
	m, _ := New(arch, 1)
	a, _ := m.Generate(context.Background(), []int32{1, 5}, GenerateOptions{MaxTokens: 5, Temperature: 1, TopP: 0.9, Seed: 7, EOS: []int{}})
	b, _ := m.Generate(context.Background(), []int32{1, 5}, GenerateOptions{MaxTokens: 5, Temperature: 1, TopP: 0.9, Seed: 7, EOS: []int{}})
	fmt.Println(len(a), fmt.Sprint(a) == fmt.Sprint(b))
	// Output: 5 true
}

func ExampleObserverFunc() {
	arch := &architecture.Model{Vocab: 16, Hidden: 8, Norm: architecture.RMSNorm, NormEps: 1e-5,
		Rope: architecture.Rope{Theta: 10000}, TiedEmbeddings: true,
		Layers: []architecture.Layer{{
			Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 4},
			MLP:       &architecture.MLP{Width: 16, Gated: true, Activation: "silu"}}}}
	m, _ := New(arch, 1)
	// Sum |activation| per FFN neuron (the input of down_proj).
	score := make([]float64, 16)
	m.SetObserver(ObserverFunc(func(a *Activation) {
		if a.Site != SiteMLPAct {
			return
		}
		for i, v := range a.Data {
			score[i%a.Width] += math.Abs(float64(v))
		}
	}))
	m.Forward([]int32{1, 2, 3, 4}, 2, 2)
	fmt.Println(len(score), score[0] > 0)
	// Output: 16 true
}

// TestInferenceMode: shared layer buffers give the same loss, logits and
// observations as training mode, refuse backward, and switching back
// restores training.
func TestInferenceMode(t *testing.T) {
	m, _ := New(tinyArch(false), 8)
	randomize(m, 9, 0.4)
	r := rand.New(rand.NewPCG(7, 7))
	const B, T = 2, 70
	toks, tg := randTokens(r, B*T, 11), randTokens(r, B*T, 11)
	rec := &recorder{acts: map[string][]float32{}}
	m.SetObserver(rec)
	want, _ := m.ForwardLoss(toks, tg, B, T)
	wantLogits := append([]float32(nil), m.a.logits...)
	wantActs := rec.acts
	m.SetInference(true)
	rec.acts = map[string][]float32{}
	got, err := m.ForwardLoss(toks, tg, B, T)
	if err != nil || got != want {
		t.Fatalf("inference loss %v (%v), training %v", got, err, want)
	}
	if d := maxAbsDiff(m.a.logits, wantLogits); d != 0 {
		t.Fatalf("logits differ by %g", d)
	}
	for k, v := range wantActs {
		if d := maxAbsDiff(rec.acts[k], v); d != 0 || len(rec.acts[k]) != len(v) {
			t.Fatalf("observation %s differs by %g", k, d)
		}
	}
	if err := m.Backward(); !errors.Is(err, ErrInference) {
		t.Fatalf("backward in inference mode: %v", err)
	}
	if &m.a.layers[0].h[0] != &m.a.layers[3].h[0] {
		t.Fatal("inference mode does not share layer buffers")
	}
	m.SetInference(false)
	m.ZeroGrad()
	m.ForwardLoss(toks, tg, B, T)
	if err := m.Backward(); err != nil {
		t.Fatal(err)
	}
}

// TestLoadShardedBF16: a sharded BF16 checkpoint written by checkpoint's
// test generator loads with every tensor equal to the generator's values.
func TestLoadShardedBF16(t *testing.T) {
	shape := testutil.Llama{Vocab: 40, Hidden: 16, Intermediate: 24, Heads: 4, KVHeads: 2, Layers: 3}
	specs := testutil.LlamaSpecs(shape, checkpoint.BF16)
	dir := testutil.WriteTB(t, specs, testutil.Options{Seed: 3, Shards: 3,
		Files: map[string][]byte{"config.json": testutil.LlamaConfig(shape, checkpoint.BF16)}})
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		want, err := testutil.Values(s, 3)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(m.Tensor(s.Name), want); d != 0 || len(m.Tensor(s.Name)) != len(want) {
			t.Fatalf("%s differs by %g", s.Name, d)
		}
	}
	if len(m.Specs()) != len(specs) {
		t.Fatalf("engine has %d tensors, checkpoint %d", len(m.Specs()), len(specs))
	}
}

// logSumExp returns log Σ exp(row) (reference form, float64 sum).
func logSumExp(row []float32) float64 {
	mx := float32(math.Inf(-1))
	for _, v := range row {
		mx = max(mx, v)
	}
	var s float64
	for _, v := range row {
		s += float64(expf(v - mx))
	}
	return float64(mx) + math.Log(s)
}

// TestGenerateCacheGrows: the KV cache grows as tokens come (a MaxTokens
// far past what is generated costs no memory up front), and growing it
// changes nothing: with a one-token first chunk, the cache doubles many
// times and the tokens are those of a cache sized for everything.
func TestGenerateCacheGrows(t *testing.T) {
	m, _ := New(uniformArch(), 3)
	randomize(m, 1, 0.5)
	ctx := context.Background()
	opt := GenerateOptions{MaxTokens: 40, Temperature: 0.9, TopP: 0.8, Seed: 7, EOS: []int{}}
	want, err := m.Generate(ctx, []int32{1, 5, 9}, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer func(c int) { generateCacheChunk = c }(generateCacheChunk)
	generateCacheChunk = 1
	got, err := m.Generate(ctx, []int32{1, 5, 9}, opt)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("growing cache gave %v, a full one %v", got, want)
	}
	// A huge MaxTokens stopped after a few tokens allocates only the first
	// chunk: this would need terabytes if the cache were sized up front.
	n := 0
	huge := GenerateOptions{MaxTokens: 1 << 40, Greedy: true, EOS: []int{}, OnToken: func(int32) bool { n++; return n < 5 }}
	if out, err := m.Generate(ctx, []int32{1}, huge); err != nil || len(out) != 5 {
		t.Fatalf("huge MaxTokens: %d tokens, %v", len(out), err)
	}
}
