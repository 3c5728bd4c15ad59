package prune_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/prune"
)

// The toy family is added here, in one place, as a new family would be in
// architecture/family_toy.go: its config keys (ffn_size), its tensor names
// (tok_embeddings, blocks.N.attn.wq, ...) and its facts. Nothing else in
// the module knows it.
const (
	toyArch   = "ToyForCausalLM"
	toyNoRun  = "ToyMambaForCausalLM"
	toyReason = "toy Mamba2 mixers"
)

func toyFamily(arch, modelType string, engineRuns bool) architecture.Family {
	f := architecture.Family{
		Arch: arch, ModelType: modelType,
		Defaults: architecture.Defaults{RopeTheta: 10000, NormEps: 1e-5, KVHeads: -1, MaxPositions: 256},
		Read: func(c *architecture.ConfigReader, m *architecture.Model) {
			n := c.NumLayers()
			heads, kv, hd := c.AttentionShape(m)
			ffn := c.RequiredInt("ffn_size")
			if ffn <= 0 && c.Err() == nil {
				c.Fail("ffn_size", "want a positive width, got %d", ffn)
			}
			if c.Err() != nil {
				return
			}
			m.Layers = make([]architecture.Layer, n)
			for i := range m.Layers {
				m.Layers[i] = architecture.Layer{
					Attention: &architecture.Attention{Heads: heads, KVHeads: kv, HeadDim: hd},
					MLP:       &architecture.MLP{Width: ffn, Gated: true, Activation: c.String("act", "silu")},
				}
			}
		},
		Write: func(w *architecture.ConfigWriter) error {
			b := w.Blocks()
			if b.MLP == nil || b.MoE != nil {
				return &architecture.FormatError{Format: architecture.Native, Layer: -1, Msg: "toy layers have a gated MLP"}
			}
			w.Set("ffn_size", b.MLP.Width)
			w.Set("act", b.MLP.Activation)
			return nil
		},
		Tensors: func(m *architecture.Model, t *architecture.TensorList) {
			h, v := int64(m.Hidden), int64(m.Vocab)
			t.Add("tok_embeddings.weight", -1, "embedding", v, h)
			for i, l := range m.Layers {
				p := fmt.Sprintf("blocks.%d.", i)
				a, x := l.Attention, l.MLP
				q, kv, w := int64(a.Heads*a.HeadDim), int64(a.KVHeads*a.HeadDim), int64(x.Width)
				t.Norm(p+"ln_attn.weight", i, architecture.BlockAttention, h)
				t.Add(p+"attn.wq.weight", i, "attn_q", q, h)
				t.Add(p+"attn.wk.weight", i, "attn_k", kv, h)
				t.Add(p+"attn.wv.weight", i, "attn_v", kv, h)
				t.Add(p+"attn.wo.weight", i, "attn_o", h, q)
				t.Norm(p+"ln_ffn.weight", i, architecture.BlockMLP, h)
				t.Add(p+"ffn.w_gate.weight", i, "mlp_gate", w, h)
				t.Add(p+"ffn.w_up.weight", i, "mlp_up", w, h)
				t.Add(p+"ffn.w_down.weight", i, "mlp_down", h, w)
			}
			t.Add("ln_out.weight", -1, "norm", h)
			if !m.TiedEmbeddings {
				t.Add("output.weight", -1, "lm_head", v, h)
			}
		},
		LayerPrefix: "blocks.", EpsKey: "norm_eps",
		Engine: architecture.EngineSupport{Runs: engineRuns},
	}
	if !engineRuns {
		f.Engine.Reason = toyReason
	}
	return f
}

var registerToys = sync.OnceValue(func() error {
	return errors.Join(architecture.Register(toyFamily(toyArch, "toy", true)),
		architecture.Register(toyFamily(toyNoRun, "toy_mamba", false)))
})

func toyConfig(arch, modelType string) map[string]any {
	return map[string]any{
		"architectures": []string{arch}, "model_type": modelType,
		"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 3,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4, "ffn_size": 24,
		"norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 64,
		"tie_word_embeddings": false, "torch_dtype": "float32", "initializer_range": 0.02,
	}
}

// TestToyFamilyFromOnePlace adds a family with its own config keys and
// tensor names from one Register call, then reads its config.json, writes
// it back, lists its tensors, prunes a synthetic checkpoint of it (hidden
// channels, heads, neurons and a whole layer) and runs the child in the
// native engine: the pruner, the config writer and the engine take
// everything from the family entry.
func TestToyFamilyFromOnePlace(t *testing.T) {
	if err := registerToys(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := json.Marshal(toyConfig(toyArch, "toy"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := architecture.FromConfig(cfg)
	if err != nil {
		t.Fatalf("reading the toy config: %v", err)
	}
	if m.Arch != toyArch || len(m.Layers) != 3 || m.Layers[0].MLP.Width != 24 || m.Layers[2].Attention.KVHeads != 2 || m.NormEps != 1e-5 {
		t.Fatalf("read %s with %d layers, first %+v / %+v", m.Arch, len(m.Layers), *m.Layers[0].Attention, *m.Layers[0].MLP)
	}

	// Written back: the family's own keys, the shared ones, and the keys
	// it does not own (initializer_range) kept.
	out, err := m.Config(architecture.ConfigOptions{})
	if err != nil {
		t.Fatalf("writing the toy config: %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"ffn_size": 24.0, "act": "silu", "norm_eps": 1e-5, "num_key_value_heads": 2.0, "initializer_range": 0.02, "model_type": "toy"} {
		if !reflect.DeepEqual(back[k], want) {
			t.Errorf("written config: %s = %v, want %v", k, back[k], want)
		}
	}
	if _, ok := back["rms_norm_eps"]; ok {
		t.Error("written config has rms_norm_eps; the toy family's epsilon key is norm_eps")
	}
	m2, err := architecture.FromConfig(out)
	if err != nil {
		t.Fatalf("reading the written config back: %v", err)
	}
	if !reflect.DeepEqual(m2.Layers, m.Layers) {
		t.Errorf("round trip changed the layers")
	}

	// The tensors, named by the family.
	var names []string
	var specs []checkpoint.TensorSpec
	for _, ts := range m.Tensors() {
		names = append(names, ts.Name)
		specs = append(specs, checkpoint.TensorSpec{Name: ts.Name, DType: checkpoint.F32, Shape: ts.Shape})
	}
	wantFirst := []string{"tok_embeddings.weight", "blocks.0.ln_attn.weight", "blocks.0.attn.wq.weight", "blocks.0.attn.wk.weight",
		"blocks.0.attn.wv.weight", "blocks.0.attn.wo.weight", "blocks.0.ln_ffn.weight", "blocks.0.ffn.w_gate.weight"}
	if len(names) != 2+3*9+1 || !reflect.DeepEqual(names[:len(wantFirst)], wantFirst) || names[len(names)-1] != "output.weight" {
		t.Fatalf("tensors: %q", names)
	}
	tied := m.Clone()
	tied.TiedEmbeddings = true
	if h := tied.LMHead(); h.Name != "output.weight" || h.Kind != "lm_head" {
		t.Errorf("LMHead of the tied toy = %+v, want output.weight", h)
	}
	if p := m.Params(); p.Total != 40*16*2+16+3*(2*16+16*16+2*8*16+16*16+3*24*16) {
		t.Errorf("parameters %d", p.Total)
	}

	// A synthetic checkpoint, pruned.
	parentDir := filepath.Join(dir, "parent")
	if err := testutil.Write(parentDir, specs, testutil.Options{Seed: 3, Files: map[string][]byte{"config.json": cfg}}); err != nil {
		t.Fatal(err)
	}
	hidden := []int{0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 15}
	neurons := []int{0, 2, 3, 5, 7, 8, 11, 13, 17, 19, 20, 23}
	plan := &prune.Plan{Version: 1, Hidden: hidden, Layers: []prune.LayerPlan{
		{Layer: 0, Heads: []int{1, 2}, Neurons: neurons},
		{Layer: 1, Remove: true},
		{Layer: 2, Heads: []int{0, 3}, Neurons: neurons},
	}}
	childDir := filepath.Join(dir, "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: parentDir, Plan: plan, Out: childDir}); err != nil {
		t.Fatalf("pruning the toy checkpoint: %v", err)
	}
	child, err := architecture.Load(childDir)
	if err != nil {
		t.Fatal(err)
	}
	a, x := child.Layers[1].Attention, child.Layers[1].MLP
	if child.Arch != toyArch || child.Hidden != 12 || len(child.Layers) != 2 || a.Heads != 2 || a.KVHeads != 2 || x.Width != 12 {
		t.Fatalf("child %s: hidden %d, %d layers, layer 1 %+v / %+v", child.Arch, child.Hidden, len(child.Layers), *a, *x)
	}
	raw, err := os.ReadFile(filepath.Join(childDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"ffn_size": 12`) {
		t.Errorf("child config.json does not hold ffn_size 12:\n%s", raw)
	}

	// The child runs in the native engine, and its weights are the
	// parent's selected rows and columns.
	if err := engine.Check(child); err != nil {
		t.Fatalf("engine.Check(toy child): %v", err)
	}
	pm, err := engine.Load(parentDir)
	if err != nil {
		t.Fatalf("loading the toy parent in the engine: %v", err)
	}
	cm, err := engine.Load(childDir)
	if err != nil {
		t.Fatalf("loading the toy child in the engine: %v", err)
	}
	up, cup := pm.Tensor("blocks.2.ffn.w_up.weight"), cm.Tensor("blocks.1.ffn.w_up.weight")
	for r, n := range neurons {
		for c, h := range hidden {
			if got, want := cup[r*12+c], up[n*16+h]; got != want {
				t.Fatalf("child blocks.1.ffn.w_up[%d][%d] = %v, want the parent's blocks.2 [%d][%d] = %v", r, c, got, n, h, want)
			}
		}
	}
	wq, cwq := pm.Tensor("blocks.2.attn.wq.weight"), cm.Tensor("blocks.1.attn.wq.weight")
	for r := range 8 { // heads 0 and 3, head_dim 4
		src := []int{0, 1, 2, 3, 12, 13, 14, 15}[r]
		if got, want := cwq[r*12], wq[src*16]; got != want {
			t.Fatalf("child wq row %d = %v, want parent row %d = %v", r, got, src, want)
		}
	}
	// A fresh toy model in the engine: norms (named ln_*) start at 1.
	fresh, err := engine.New(child, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"blocks.0.ln_attn.weight", "blocks.1.ln_ffn.weight", "ln_out.weight"} {
		for i, v := range fresh.Tensor(name) {
			if v != 1 {
				t.Fatalf("engine.New: %s[%d] = %v, want 1 (a norm weight)", name, i, v)
			}
		}
	}
	logits, err := cm.Forward([]int32{1, 5, 7, 2}, 1, 4)
	if err != nil {
		t.Fatalf("running the toy child: %v", err)
	}
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("logit %d is %v", i, v)
		}
	}
}

// TestToyFamilyEngineFact: what the native engine runs is the family's
// Engine fact; a family it cannot run is refused from the description
// alone, with the family's reason.
func TestToyFamilyEngineFact(t *testing.T) {
	if err := registerToys(); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(toyConfig(toyNoRun, "toy_mamba"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := architecture.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ue *engine.UnsupportedError
	if err := engine.Check(m); !errors.As(err, &ue) || !strings.Contains(err.Error(), toyNoRun) || !strings.Contains(err.Error(), toyReason) {
		t.Errorf("engine.Check(%s) = %v, want an *UnsupportedError naming the family and its reason", toyNoRun, err)
	}
}
