package engine

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// moeArch is uniformArch with every MLP replaced by an MoE block of the
// given class (Mixtral or Qwen3-MoE; Qwen3-MoE with qk-norm), experts and
// top-k; raw is its config.json extras (norm_topk_prob).
func moeArch(class, typ string, experts, topK int, raw map[string]any) *architecture.Model {
	a := uniformArch()
	a.Arch, a.ModelType, a.Raw = class, typ, raw
	for i := range a.Layers {
		l := &a.Layers[i]
		at := *l.Attention
		at.QKNorm = typ == "qwen3_moe"
		l.Attention = &at
		l.MLP = nil
		l.MoE = &architecture.MoE{Experts: experts, TopK: topK, ExpertWidth: 12, Gated: true, Activation: "silu"}
	}
	return a
}

func moeTokens(n, vocab int, seed int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32((i*7 + seed*13 + i*i) % vocab)
	}
	return t
}

// TestMoEOneExpertIsDense: an MoE block with one expert and top-k 1 is the
// dense MLP with that expert's weights (its weight is exactly 1), bit for
// bit, for both routing rules.
func TestMoEOneExpertIsDense(t *testing.T) {
	for _, c := range []struct{ class, typ string }{{architecture.Mixtral, "mixtral"}, {architecture.Qwen3MoE, "qwen3_moe"}} {
		a := moeArch(c.class, c.typ, 1, 1, nil)
		m, err := New(a, 3)
		if err != nil {
			t.Fatal(err)
		}
		d := uniformArch()
		d.Arch, d.ModelType = c.class, c.typ
		if c.typ == "qwen3_moe" {
			d.Arch, d.ModelType = architecture.Qwen3, "qwen3"
			d.TiedEmbeddings = false
		}
		for i := range d.Layers {
			at := *d.Layers[i].Attention
			at.QKNorm = c.typ == "qwen3_moe"
			d.Layers[i].Attention = &at
			d.Layers[i].MLP.Width = 12
		}
		if c.typ == "mixtral" {
			d.Arch, d.ModelType = "LlamaForCausalLM", "llama"
		}
		dm, err := NewZero(d)
		if err != nil {
			t.Fatal(err)
		}
		// Copy every tensor by layer and kind: mlp_X is expert 0's expert_X,
		// the MLP's norm the MoE block's.
		for _, s := range dm.Specs() {
			kind, block := s.kind, s.block
			if len(kind) > 4 && kind[:4] == "mlp_" {
				kind = "expert_" + kind[4:]
			}
			if block == architecture.BlockMLP {
				block = architecture.BlockMoE
			}
			var src string
			for _, ms := range m.Specs() {
				if ms.layer == s.layer && ms.kind == kind && ms.block == block {
					src = ms.Name
				}
			}
			if src == "" {
				t.Fatalf("%s: no MoE tensor for %s", c.class, s.Name)
			}
			copy(dm.Tensor(s.Name), m.Tensor(src))
		}
		// The router is 1 × hidden: any weights route to the one expert.
		tokens := moeTokens(2*9, a.Vocab, 1)
		got, err := m.Forward(tokens, 2, 9)
		if err != nil {
			t.Fatal(err)
		}
		want, err := dm.Forward(tokens, 2, 9)
		if err != nil {
			t.Fatal(err)
		}
		bitEqual(t, c.class+" one expert vs dense", got, want)
	}
}

// TestMoEMappedAndCache: a bf16 MoE checkpoint read in place gives the
// logits of the same checkpoint converted to float32, bit for bit; the
// KV-cache path gives the full forward pass's logits; the float32 model
// trains (Backward, BackwardFromLogits) while the mapped one, like every
// model read in place, has no backward (ErrMapped).
func TestMoEMappedAndCache(t *testing.T) {
	a := moeArch(architecture.Qwen3MoE, "qwen3_moe", 4, 2, map[string]any{"norm_topk_prob": true})
	dir := filepath.Join(t.TempDir(), "moe")
	if err := Init(context.Background(), a, dir, InitOptions{Seed: 5, DType: checkpoint.BF16}); err != nil {
		t.Fatal(err)
	}
	ref, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !ref.arch.MoERouter().Renormalize {
		t.Fatal("norm_topk_prob true in config.json did not reach the router rule")
	}
	mm, err := LoadWith(dir, LoadOptions{Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	const B, T = 2, 7
	tokens := moeTokens(B*T, a.Vocab, 2)
	want, err := ref.Forward(tokens, B, T)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)
	got, err := mm.Forward(tokens, B, T)
	if err != nil {
		t.Fatal(err)
	}
	bitEqual(t, "mapped bf16 MoE", got, want)

	V := a.Vocab
	c := ref.NewCache(T)
	var worst float64
	for i := range T {
		out, err := ref.Step([]*Cache{c}, [][]int32{{tokens[i]}}, false)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(out[0], want[i*V:(i+1)*V]))
	}
	if worst > 1e-5 {
		t.Errorf("KV-cache decode of an MoE model: max |Δlogit| = %.3g against the forward pass", worst)
	}

	if _, err := ref.ForwardLoss(tokens, tokens, B, T); err != nil {
		t.Fatal(err)
	}
	ref.ZeroGrad()
	if err := ref.Backward(); err != nil {
		t.Errorf("Backward on an MoE model: %v", err)
	}
	var norm float64
	for _, g := range ref.Grads() {
		norm += float64(g) * float64(g)
	}
	if !(norm > 0) {
		t.Errorf("Backward on an MoE model left the gradients at %v", norm)
	}
	if err := ref.BackwardFromLogits(make([]float32, B*T*V)); err != nil {
		t.Errorf("BackwardFromLogits on an MoE model: %v", err)
	}
	if _, err := mm.Forward(tokens, B, T); err != nil {
		t.Fatal(err)
	}
	if err := mm.BackwardFromLogits(make([]float32, B*T*V)); !errors.Is(err, ErrMapped) {
		t.Errorf("BackwardFromLogits on a mapped MoE model = %v, want ErrMapped", err)
	}
}

// TestExpertStats: the routing statistics count every row k times per MoE
// layer, and REAP's saliency is the mean of gate × output norm over the
// rows an expert received, checked against the observed routing.
func TestExpertStats(t *testing.T) {
	a := moeArch(architecture.Mixtral, "mixtral", 4, 2, nil)
	m, err := New(a, 9)
	if err != nil {
		t.Fatal(err)
	}
	st := NewExpertStats(len(a.Layers))
	var sum [4]float64
	var cnt [4]int
	m.SetObserver(ObserverFunc(func(x *Activation) {
		st.Observe(x)
		if x.Site == SiteMoERouting && x.Layer == 1 {
			if x.Width != 4 || len(x.Data) != x.B*x.T*4 {
				t.Errorf("router logits %d wide, %d values", x.Width, len(x.Data))
			}
			for i, e := range x.Routing.Experts {
				sum[e] += float64(x.Routing.Weights[i] * x.Routing.OutputNorms[i])
				cnt[e]++
			}
			for i := 0; i < len(x.Routing.Weights); i += 2 {
				if s := x.Routing.Weights[i] + x.Routing.Weights[i+1]; math.Abs(float64(s)-1) > 1e-6 {
					t.Errorf("Mixtral row %d: weights sum to %v, want 1 (renormalised)", i/2, s)
				}
			}
		}
	}))
	const B, T = 3, 8
	if _, err := m.Forward(moeTokens(B*T, a.Vocab, 3), B, T); err != nil {
		t.Fatal(err)
	}
	for l := range a.Layers {
		var n int64
		var f float64
		for e, c := range st.Counts[l] {
			n += c
			f += st.Frequency(l)[e]
		}
		if st.Rows[l] != B*T || n != 2*B*T || math.Abs(f-2) > 1e-12 {
			t.Errorf("layer %d: %d rows, %d routings, frequencies sum to %v (want %d, %d, 2)", l, st.Rows[l], n, f, B*T, 2*B*T)
		}
	}
	for e, r := range st.REAP(1) {
		want := 0.0
		if cnt[e] > 0 {
			want = sum[e] / float64(cnt[e])
		}
		if math.Abs(r-want) > 1e-6*math.Max(1, want) || r <= 0 && cnt[e] > 0 {
			t.Errorf("expert %d: REAP %v, want %v", e, r, want)
		}
	}
}

// TestMoERefused: MoE blocks the engine does not run are refused by Check
// with what they have.
func TestMoERefused(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(x *architecture.MoE)
		want string
	}{
		{"top-k above experts", func(x *architecture.MoE) { x.TopK = 5 }, "top-k"},
		{"shared expert", func(x *architecture.MoE) { x.SharedWidth = 8 }, "shared"},
		{"biases", func(x *architecture.MoE) { x.ExpertBias = true }, "biases"},
	} {
		a := moeArch(architecture.Mixtral, "mixtral", 4, 2, nil)
		c.edit(a.Layers[1].MoE)
		err := Check(a)
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Layer != 1 || !contains(err.Error(), c.want) {
			t.Errorf("%s: Check = %v, want an *UnsupportedError for layer 1 naming %q", c.name, err, c.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestMoEParityTorch compares the engine's logits on small random
// Mixtral and Qwen3-MoE checkpoints (with and without norm_topk_prob)
// with testdata/moe_reference.py, which re-states transformers' modeling
// code for those classes in plain torch (Debian's /usr/bin/python3 with
// torch; skipped without them): max |Δlogit| ≤ 1e-4 · max |logit|.
func TestMoEParityTorch(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is absent: the MoE parity against torch is not checked (install Debian's python3 and python3-torch)", python)
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (%v): the MoE parity against torch is not checked (install python3-torch)", python, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "moe_reference.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, class, typ string
		experts, topK    int
		raw              map[string]any
	}{
		{"mixtral", architecture.Mixtral, "mixtral", 4, 2, nil},
		{"qwen3-moe", architecture.Qwen3MoE, "qwen3_moe", 6, 3, nil},
		{"qwen3-moe-norm-topk", architecture.Qwen3MoE, "qwen3_moe", 6, 3, map[string]any{"norm_topk_prob": true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := moeArch(c.class, c.typ, c.experts, c.topK, c.raw)
			base := t.TempDir()
			dir := filepath.Join(base, "ckpt")
			m := routedModel(t, a)
			if err := m.Save(dir, checkpoint.F32); err != nil {
				t.Fatal(err)
			}
			const B, T = 2, 11
			tokens := moeTokens(B*T, a.Vocab, 4)
			tj, _ := json.Marshal(map[string]any{"B": B, "T": T, "tokens": tokens})
			tokPath, outPath := filepath.Join(base, "tokens.json"), filepath.Join(base, "out.json")
			if err := os.WriteFile(tokPath, tj, 0o666); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(python, "-B", script, dir, tokPath, outPath)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("moe_reference.py: %v\n%s", err, out)
			}
			data, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatal(err)
			}
			var ref struct{ Logits []float32 }
			if err := json.Unmarshal(data, &ref); err != nil {
				t.Fatal(err)
			}
			got, err := m.Forward(tokens, B, T)
			if err != nil {
				t.Fatal(err)
			}
			if len(ref.Logits) != len(got) {
				t.Fatalf("reference has %d logits, the engine %d", len(ref.Logits), len(got))
			}
			var scale float64
			for _, v := range ref.Logits {
				scale = max(scale, math.Abs(float64(v)))
			}
			rel := maxAbsDiff(got, ref.Logits) / scale
			if rel > 1e-4 {
				t.Errorf("max |Δlogit| / max |logit| = %.3g > 1e-4", rel)
			}
			t.Logf("%s: max |Δlogit| / max |logit| = %.3g (max |logit| %.3g)", c.name, rel, scale)
		})
	}
}

// routedModel is a model of a with seed 11's weights scaled to std 0.4
// (Init's 0.02 × 20) and norm weights 1 + 0.1·(j mod 5), so that routing
// and logits are far from uniform: the MoE parity tests' fixture.
func routedModel(t *testing.T, a *architecture.Model) *Model {
	t.Helper()
	m, err := New(a, 11)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Params() {
		m.Params()[i] *= 20
	}
	for _, s := range m.Specs() {
		if s.isNorm() {
			w := m.Tensor(s.Name)
			for j := range w {
				w[j] = 1 + 0.1*float32(j%5)
			}
		}
	}
	return m
}
