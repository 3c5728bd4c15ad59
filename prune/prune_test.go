package prune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestIdentity: a plan that keeps everything reproduces the parent bit for
// bit — every safetensors file (header and data), the index and the aux
// files — and a config that reads back as the same model.
func TestIdentity(t *testing.T) {
	for _, s := range synths() {
		t.Run(s.name, func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			out, _ := runPrune(t, dir, &Plan{Version: 1}, "")
			compareDirsBitForBit(t, dir, out)
			compareConfigs(t, dir, out)
			child, err := architecture.Load(out)
			must(t, err)
			parent.Raw, child.Raw, parent.Name, child.Name = nil, nil, "", ""
			if !reflect.DeepEqual(parent, child) {
				t.Errorf("child model differs from parent:\n got %+v\nwant %+v", child, parent)
			}
		})
	}
	t.Run("stories260K", func(t *testing.T) {
		dir := sdtest.Require(t, "models/stories260K")
		src := stageStories(t, dir)
		out, _ := runPrune(t, src, &Plan{Version: 1}, "hf")
		compareDirsBitForBit(t, src, out)
		compareConfigs(t, src, out)
	})
}

// stageStories copies the stories260K HF files (config + safetensors) into a
// temp dir so that the llama2.c files beside them are not involved.
func stageStories(t testing.TB, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "stories260K")
	must(t, os.MkdirAll(dst, 0o755))
	must(t, checkpoint.CopyFiles(dst, dir, []string{"config.json", "model.safetensors"}))
	return dst
}

func compareDirsBitForBit(t *testing.T, a, b string) {
	t.Helper()
	ents, err := os.ReadDir(a)
	must(t, err)
	for _, e := range ents {
		if e.Name() == "config.json" {
			continue
		}
		x, err := os.ReadFile(filepath.Join(a, e.Name()))
		must(t, err)
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		if err != nil {
			t.Errorf("child lacks %s: %v", e.Name(), err)
			continue
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs (%d vs %d bytes)", e.Name(), len(x), len(y))
		}
	}
	compareTensorsBitForBit(t, a, b)
}

// compareConfigs checks that the child's config.json keeps every key of the
// parent's with the same value. Keys the writer adds are class defaults made
// explicit (attention_bias, use_sliding_window, ...); the callers check that
// both configs read back as the same model.
func compareConfigs(t *testing.T, a, b string) {
	t.Helper()
	var x, y map[string]any
	for _, c := range []struct {
		dir string
		v   *map[string]any
	}{{a, &x}, {b, &y}} {
		data, err := os.ReadFile(filepath.Join(c.dir, "config.json"))
		must(t, err)
		must(t, json.Unmarshal(fixNonFinite(data), c.v))
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || !reflect.DeepEqual(v, w) {
			t.Errorf("config.json %s: %v, parent %v", k, w, v)
		}
	}
	for k, w := range y {
		if _, ok := x[k]; !ok {
			t.Logf("config.json makes %s explicit: %v", k, w)
		}
	}
}

func compareTensorsBitForBit(t *testing.T, a, b string) {
	t.Helper()
	ra, err := checkpoint.Open(a)
	must(t, err)
	defer ra.Close()
	rb, err := checkpoint.Open(b)
	must(t, err)
	defer rb.Close()
	if len(ra.Tensors()) != len(rb.Tensors()) {
		t.Fatalf("%d tensors, want %d", len(rb.Tensors()), len(ra.Tensors()))
	}
	for _, ti := range ra.Tensors() {
		x, err := ra.Bytes(ti.Name)
		must(t, err)
		y, err := rb.Bytes(ti.Name)
		if err != nil {
			t.Errorf("child: %v", err)
			continue
		}
		if !bytes.Equal(x, y) {
			t.Errorf("tensor %s differs", ti.Name)
		}
	}
}

// refChild computes, independently of the pruner's name rules, the expected
// child tensors from the parent's tensors by their architecture Kind and the
// plan (native format, no padding).
func refChild(t *testing.T, parent *architecture.Model, p *Plan, vals map[string][]float32, shapes map[string][]int64) map[string][]float32 {
	t.Helper()
	removed := map[int]bool{}
	lp := map[int]LayerPlan{}
	for _, l := range p.Layers {
		removed[l.Layer] = l.Remove
		lp[l.Layer] = l
	}
	newIndex := map[int]int{}
	n := 0
	for i := range parent.Layers {
		if !removed[i] {
			newIndex[i] = n
			n++
		}
	}
	hid := p.Hidden
	out := map[string][]float32{}
	layerRe := regexp.MustCompile(`layers\.(\d+)\.`)
	for _, ts := range parent.Tensors() {
		name := ts.Name
		var rows, cols []int
		var l LayerPlan
		if ts.Layer >= 0 {
			if removed[ts.Layer] {
				continue
			}
			l = lp[ts.Layer]
			name = layerRe.ReplaceAllString(name, "layers."+strconv.Itoa(newIndex[ts.Layer])+".")
		}
		pl := architecture.Layer{}
		if ts.Layer >= 0 {
			pl = parent.Layers[ts.Layer]
		}
		headRows := func() []int {
			heads := l.Heads
			if heads == nil {
				heads = seqN(pl.Attention.Heads)
				if l.KVHeads != nil {
					per := pl.Attention.Heads / pl.Attention.KVHeads
					heads = nil
					for _, g := range l.KVHeads {
						for j := 0; j < per; j++ {
							heads = append(heads, g*per+j)
						}
					}
				}
			}
			var r []int
			for _, h := range heads {
				for d := 0; d < pl.Attention.HeadDim; d++ {
					r = append(r, h*pl.Attention.HeadDim+d)
				}
			}
			return r
		}
		kvRows := func() []int {
			kv := l.KVHeads
			if kv == nil {
				kv = seqN(pl.Attention.KVHeads)
			}
			var r []int
			for _, h := range kv {
				for d := 0; d < pl.Attention.HeadDim; d++ {
					r = append(r, h*pl.Attention.HeadDim+d)
				}
			}
			return r
		}
		neurons := func() []int {
			if l.Neurons == nil {
				return seqN(pl.MLP.Width)
			}
			return l.Neurons
		}
		mambaX := func(base int) []int {
			mh := l.MambaHeads
			if mh == nil {
				mh = seqN(pl.Mamba.Heads)
			}
			var r []int
			for _, h := range mh {
				for d := 0; d < pl.Mamba.HeadDim; d++ {
					r = append(r, base+h*pl.Mamba.HeadDim+d)
				}
			}
			return r
		}
		mambaHeads := func(base int) []int {
			mh := l.MambaHeads
			if mh == nil {
				mh = seqN(pl.Mamba.Heads)
			}
			var r []int
			for _, h := range mh {
				r = append(r, base+h)
			}
			return r
		}
		kind := ts.Kind
		bias := false
		if kind != "mamba_dt_bias" && strings.HasSuffix(kind, "_bias") {
			kind, bias = strings.TrimSuffix(kind, "_bias"), true
		}
		switch kind {
		case "embedding", "lm_head":
			cols = hid
		case "norm":
			rows = hid
		case "attn_q":
			rows, cols = headRows(), hid
		case "attn_k", "attn_v":
			rows, cols = kvRows(), hid
		case "attn_o":
			rows, cols = hid, headRows()
		case "attn_q_norm", "attn_k_norm":
		case "mlp_gate", "mlp_up":
			rows, cols = neurons(), hid
		case "mlp_down":
			rows, cols = hid, neurons()
		case "mamba_in":
			di, gs := pl.Mamba.DInner(), pl.Mamba.Groups*pl.Mamba.StateSize
			rows = append(append(mambaX(0), mambaX(di)...), seqFrom(2*di, 2*gs)...)
			rows = append(rows, mambaHeads(2*di+2*gs)...)
			cols = hid
		case "mamba_conv":
			di, gs := pl.Mamba.DInner(), pl.Mamba.Groups*pl.Mamba.StateSize
			rows = append(mambaX(0), seqFrom(di, 2*gs)...)
		case "mamba_dt_bias", "mamba_a_log", "mamba_d":
			rows = mambaHeads(0)
		case "mamba_norm":
			rows = mambaX(0)
		case "mamba_out":
			rows, cols = hid, mambaX(0)
		case "moe_router", "expert_gate", "expert_up", "expert_down", "shared_gate", "shared_up", "shared_down":
			// carried through (the plans here do not prune hidden with MoE)
		default:
			t.Fatalf("refChild: kind %s not handled", ts.Kind)
		}
		if bias {
			cols = nil
		}
		v, _ := refTake(vals[ts.Name], shapes[ts.Name], rows, cols)
		out[name] = v
	}
	return out
}

func seqN(n int) []int { return seqFrom(0, n) }

func seqFrom(base, n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = base + i
	}
	return r
}

// TestPruneSlices prunes each synthetic architecture along every axis it
// has and checks shapes, config and every value against refChild.
func TestPruneSlices(t *testing.T) {
	hidden := []int{0, 2, 3, 5, 8, 9, 10, 13, 14, 17, 20, 21, 24, 27, 30, 31}
	cases := []struct {
		synth int
		plan  Plan
	}{
		// Llama GQA: 8 heads in 4 groups of 2; keep 1 per group; drop a layer.
		{0, Plan{Version: 1, Hidden: hidden, Layers: []LayerPlan{
			{Layer: 0, Heads: ints(1, 2, 5, 7), Neurons: seqFrom(4, 24)},
			{Layer: 1, Heads: ints(0, 3, 4, 6), Neurons: seqFrom(10, 24)},
			{Layer: 2, Remove: true},
			{Layer: 3, Heads: ints(0, 2, 4, 6), Neurons: seqFrom(0, 24)},
		}}},
		// Uniform KV-group removal (same in every layer) is native.
		{0, Plan{Version: 1, Layers: []LayerPlan{
			{Layer: 0, KVHeads: ints(0, 2)}, {Layer: 1, KVHeads: ints(1, 3)},
			{Layer: 2, KVHeads: ints(0, 1)}, {Layer: 3, KVHeads: ints(2, 3), Heads: ints(4, 5, 6, 7)},
		}}},
		// Tied embeddings with hidden pruning: one tensor, sliced once.
		{1, Plan{Version: 1, Hidden: hidden, Layers: []LayerPlan{{Layer: 1, Remove: true}, {Layer: 3, Remove: true}}}},
		// Sharded: drop layers so that shards change content.
		{2, Plan{Version: 1, Hidden: hidden[:8], Layers: []LayerPlan{{Layer: 0, Remove: true}, {Layer: 1, Remove: true}}}},
		// Qwen3: qk-norm weights (per head_dim) are unchanged by head pruning.
		{3, Plan{Version: 1, Hidden: hidden, Layers: []LayerPlan{
			{Layer: 0, Heads: ints(0, 3, 5, 6)}, {Layer: 1, Heads: ints(0, 2, 4, 6)},
			{Layer: 2, Heads: ints(1, 3, 5, 7)}, {Layer: 3, Heads: ints(1, 2, 4, 7)},
		}}},
		// Qwen2 with qkv bias, tied, 8 heads in 2 groups of 4.
		{4, Plan{Version: 1, Hidden: hidden, Layers: []LayerPlan{
			{Layer: 0, Heads: ints(0, 1, 4, 5), Neurons: seqFrom(0, 32)},
			{Layer: 1, Heads: ints(2, 3, 6, 7), Neurons: seqFrom(16, 32)},
			{Layer: 2, Heads: ints(0, 3, 4, 7), Neurons: seqFrom(8, 32)},
			{Layer: 3, Heads: ints(0, 1, 5, 6), Neurons: seqFrom(1, 32)},
		}}},
		// Nemotron-H: Mamba heads (8 in 2 groups) and hidden; drop an MLP layer.
		{5, Plan{Version: 1, Hidden: hidden, Layers: []LayerPlan{
			{Layer: 0, MambaHeads: ints(0, 2, 5, 6)},
			{Layer: 1, Heads: ints(0, 2)},
			{Layer: 2, MambaHeads: ints(1, 3, 4, 7)},
			{Layer: 3, Remove: true},
			{Layer: 4, MambaHeads: ints(0, 1, 4, 5)},
			{Layer: 5, Neurons: seqFrom(3, 20)},
		}}},
		// MoE layers: attention heads pruned, experts carried through.
		{6, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Heads: ints(0, 2, 4, 6)}, {Layer: 1, Heads: ints(0, 2, 4, 6)},
			{Layer: 2, Remove: true}, {Layer: 3, Heads: ints(1, 3, 5, 7)}}}},
		{7, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Heads: ints(0, 2, 4, 6)}, {Layer: 1, Heads: ints(0, 2, 4, 6)},
			{Layer: 2, Heads: ints(0, 2, 4, 6)}, {Layer: 3, Heads: ints(1, 3, 5, 7)}}}},
	}
	ss := synths()
	for i, c := range cases {
		s := ss[c.synth]
		t.Run(fmt.Sprintf("%d-%s", i, s.name), func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			plan := c.plan
			out, res := runPrune(t, dir, &plan, "vllm")
			pv, ps := readAll(t, dir)
			cv, cs := readAll(t, out)
			want := refChild(t, parent, &plan, pv, ps)
			if len(cv) != len(want) {
				t.Errorf("child has %d tensors, want %d", len(cv), len(want))
			}
			for name, w := range want {
				got, ok := cv[name]
				if !ok {
					t.Errorf("child lacks %s", name)
					continue
				}
				if k, ok := equalF32(got, w); !ok {
					t.Errorf("%s %v: values differ at %d", name, cs[name], k)
				}
			}
			child, err := architecture.Load(out)
			if err != nil {
				t.Fatalf("child config: %v", err)
			}
			if err := child.CheckShapes(cs, nil); err != nil {
				t.Errorf("child config vs tensors: %v", err)
			}
			if !reflect.DeepEqual(child.Layers, res.Layout.Child.Layers) || child.Hidden != res.Layout.Child.Hidden {
				t.Errorf("config reads back as %+v, want %+v", child.Layers, res.Layout.Child.Layers)
			}
			if s.shards > 1 {
				checkShardsLike(t, dir, out, res)
			}
			for _, aux := range []string{"tokenizer.json", "generation_config.json"} {
				if _, err := os.Stat(filepath.Join(out, aux)); err != nil {
					t.Errorf("aux file not copied: %v", err)
				}
			}
		})
	}
}

// checkShardsLike verifies that each child tensor sits in the shard of its
// parent tensor (renumbered when shards empty out).
func checkShardsLike(t *testing.T, parentDir, childDir string, res *Result) {
	t.Helper()
	rp, err := checkpoint.Open(parentDir)
	must(t, err)
	defer rp.Close()
	rc, err := checkpoint.Open(childDir)
	must(t, err)
	defer rc.Close()
	if !rc.Sharded() && len(res.Files) > 1 {
		t.Fatalf("child not sharded")
	}
	parentShardOfChildShard := map[string]string{}
	re := regexp.MustCompile(`layers\.(\d+)\.`)
	for _, ti := range rc.Tensors() {
		src := ti.Name
		if m := re.FindStringSubmatch(ti.Name); m != nil {
			ci, _ := strconv.Atoi(m[1])
			src = re.ReplaceAllString(ti.Name, "layers."+strconv.Itoa(res.Layout.Layers[ci].Parent)+".")
		}
		cf, pf := filepath.Base(rc.Shard(ti.Name)), filepath.Base(rp.Shard(src))
		if prev, ok := parentShardOfChildShard[cf]; ok && prev != pf {
			t.Errorf("child shard %s mixes tensors of parent shards %s and %s", cf, prev, pf)
		}
		parentShardOfChildShard[cf] = pf
	}
}

// TestDeciLM: per-layer KV groups, FFN widths and removed sub-blocks of a
// Llama child become DeciLM block_configs; FFN widths are zero-padded up to
// multiples of 256 and ffn_mult round-trips through the engines' rule.
func TestDeciLM(t *testing.T) {
	cfg := llamaCfg(false)
	cfg["intermediate_size"] = 600
	cfg["hidden_size"] = 64
	cfg["head_dim"] = 8
	s := synth{name: "llama-decilm", cfg: cfg, dtype: checkpoint.BF16}
	dir, _ := writeSynth(t, s)
	plan := &Plan{Version: 1, OutputFormat: "decilm", Layers: []LayerPlan{
		{Layer: 0, Neurons: seqFrom(0, 300)},
		{Layer: 1, KVHeads: ints(0, 1), Heads: ints(0, 1, 2, 3)},
		{Layer: 2, RemoveAttention: true, Neurons: seqFrom(100, 500)},
		{Layer: 3, RemoveMLP: true, KVHeads: ints(1, 3), Heads: ints(2, 3, 6, 7)},
	}}
	_, err := Prune(context.Background(), Options{Model: dir, Plan: plan, Out: filepath.Join(t.TempDir(), "x")})
	if err == nil || !strings.Contains(err.Error(), "query heads") {
		t.Fatalf("DeciLM needs global query heads; got %v", err)
	}
	plan.Layers[1] = LayerPlan{Layer: 1, KVHeads: ints(0, 1, 2, 3), Heads: ints(0, 2, 4, 6)}
	plan.Layers[0].Heads = ints(1, 3, 5, 7)
	plan.Layers[3].Heads = ints(2, 3, 6, 7)
	plan.Layers[3].KVHeads = ints(1, 3)
	// SGLang refuses the per-layer KV groups (4, 4, -, 2): nothing written.
	if err := pruneErr(t, dir, withEngine(plan, "sglang")); !strings.Contains(err.Error(), "[decilm-uniform-kv]") || !strings.Contains(err.Error(), "layer 3") {
		t.Errorf("sglang with per-layer KV groups: %v", err)
	}
	for _, engine := range []string{"vllm", "trtllm"} {
		t.Run(engine, func(t *testing.T) {
			out, res := runPrune(t, dir, plan, engine)
			child, err := architecture.Load(out)
			must(t, err)
			if child.Arch != "DeciLMForCausalLM" {
				t.Fatalf("arch %s", child.Arch)
			}
			wantWidths := []int{512, 768, 512, 0}
			wantKV := []int{4, 4, 0, 2}
			for i, l := range child.Layers {
				w, kv := 0, 0
				if l.MLP != nil {
					w = l.MLP.Width
				}
				if l.Attention != nil {
					kv = l.Attention.KVHeads
					if l.Attention.Heads != 4 {
						t.Errorf("layer %d: %d heads", i, l.Attention.Heads)
					}
				}
				if w != wantWidths[i] || kv != wantKV[i] {
					t.Errorf("layer %d: width %d kv %d, want %d %d", i, w, kv, wantWidths[i], wantKV[i])
				}
			}
			pv, _ := readAll(t, dir)
			cv, cs := readAll(t, out)
			// Layer 0 gate: 300 kept neurons then 212 zero rows.
			g, shp := refTake(pv["model.layers.0.mlp.gate_proj.weight"], []int64{600, 64}, padList(seqFrom(0, 300), 512), nil)
			if k, ok := equalF32(cv["model.layers.0.mlp.gate_proj.weight"], g); !ok {
				t.Errorf("layer 0 gate differs at %d (shape %v vs %v)", k, cs["model.layers.0.mlp.gate_proj.weight"], shp)
			}
			d, _ := refTake(pv["model.layers.2.mlp.down_proj.weight"], []int64{64, 600}, nil, padList(seqFrom(100, 500), 512))
			if k, ok := equalF32(cv["model.layers.2.mlp.down_proj.weight"], d); !ok {
				t.Errorf("layer 2 down differs at %d", k)
			}
			for _, gone := range []string{"model.layers.2.self_attn.q_proj.weight", "model.layers.2.input_layernorm.weight",
				"model.layers.3.mlp.up_proj.weight", "model.layers.3.post_attention_layernorm.weight"} {
				if _, ok := cv[gone]; ok {
					t.Errorf("%s should be removed (no_op drops the block and its norm)", gone)
				}
			}
			k, _ := refTake(pv["model.layers.3.self_attn.k_proj.weight"], []int64{32, 64}, append(seqFrom(8, 8), seqFrom(24, 8)...), nil)
			if i, ok := equalF32(cv["model.layers.3.self_attn.k_proj.weight"], k); !ok {
				t.Errorf("layer 3 k_proj differs at %d", i)
			}
			_ = res
			// A DeciLM parent: the identity plan reproduces it bit for bit,
			// and it can be pruned further (layer 1 keeps half its FFN).
			again, _ := runPrune(t, out, &Plan{Version: 1}, engine)
			compareDirsBitForBit(t, out, again)
			twice, _ := runPrune(t, out, &Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, Neurons: seqFrom(0, 384)}, {Layer: 3, Remove: true}}}, engine)
			c2, err := architecture.Load(twice)
			must(t, err)
			if len(c2.Layers) != 3 || c2.Layers[1].MLP.Width != 512 || c2.Arch != "DeciLMForCausalLM" {
				t.Errorf("re-pruned DeciLM: %d layers, layer 1 width %d", len(c2.Layers), c2.Layers[1].MLP.Width)
			}
		})
	}
}

// TestDeciLMEngineRules: the same DeciLM child loads in some engines and
// not in others; prune refuses to write it for those.
func TestDeciLMEngineRules(t *testing.T) {
	cfg := llamaCfg(false)
	cfg["intermediate_size"] = 600
	dir, _ := writeSynth(t, synth{name: "llama", cfg: cfg, dtype: checkpoint.BF16})
	// Query-head pruning makes head_dim (4) differ from hidden/heads (32/4).
	headPruned := &Plan{Version: 1, OutputFormat: "decilm", Layers: []LayerPlan{
		{Layer: 0, Heads: ints(0, 2, 4, 6)}, {Layer: 1, Heads: ints(0, 2, 4, 6)},
		{Layer: 2, Heads: ints(1, 3, 5, 7), RemoveMLP: true}, {Layer: 3, Heads: ints(0, 2, 4, 6)},
	}}
	err := pruneErr(t, dir, withEngine(headPruned, "llamacpp"))
	if !strings.Contains(err.Error(), "[head-dim]") {
		t.Errorf("llamacpp: %v", err)
	}
	runPrune(t, dir, headPruned, "vllm")
	// Without head pruning llama.cpp loads it.
	ffnOnly := &Plan{Version: 1, OutputFormat: "decilm", Layers: []LayerPlan{
		{Layer: 0, Neurons: seqFrom(0, 200)}, {Layer: 2, RemoveAttention: true}, {Layer: 3, KVHeads: ints(0, 3)},
	}}
	err = pruneErr(t, dir, withEngine(ffnOnly, "llamacpp"))
	if !strings.Contains(err.Error(), "query heads") {
		t.Errorf("kv removal without matching heads must fail: %v", err)
	}
	ffnOnly.Layers = ffnOnly.Layers[:2]
	// With the remote-code files added, transformers can load it.
	code := t.TempDir()
	var extra []string
	for _, f := range []string{"configuration_decilm.py", "modeling_decilm.py"} {
		must(t, os.WriteFile(filepath.Join(code, f), []byte("# remote code\n"), 0o644))
		extra = append(extra, filepath.Join(code, f))
	}
	hfOut := filepath.Join(t.TempDir(), "hf")
	if _, err := Prune(context.Background(), Options{Model: dir, Plan: withEngine(ffnOnly, "hf"), Out: hfOut, ExtraFiles: extra}); err != nil {
		t.Errorf("hf with remote code: %v", err)
	} else if _, err := os.Stat(filepath.Join(hfOut, "modeling_decilm.py")); err != nil {
		t.Error("remote code not copied")
	}
	// llama.cpp's converter takes a DeciLM vocabulary other than 128256
	// only from a Llama BPE tokenizer (byte_fallback): the synthetic
	// parent's byte-level one fails, a Llama 2 style one converts.
	if err := pruneErr(t, dir, withEngine(ffnOnly, "llamacpp")); !strings.Contains(err.Error(), "[decilm-tokenizer]") {
		t.Errorf("llamacpp with a byte-level BPE tokenizer: %v", err)
	}
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	must(t, os.WriteFile(tok, []byte(`{"model": {"type": "BPE", "byte_fallback": true}, "decoder": {"type": "Sequence"}}`), 0o644))
	if _, err := Prune(context.Background(), Options{Model: dir, Plan: withEngine(ffnOnly, "llamacpp"), Out: filepath.Join(t.TempDir(), "cpp"), ExtraFiles: []string{tok}}); err != nil {
		t.Errorf("llamacpp with a Llama BPE tokenizer: %v", err)
	}
	for _, e := range []string{"vllm", "sglang", "trtllm", "hf"} {
		if e == "hf" {
			// transformers needs the remote-code files the parent lacks.
			err := pruneErr(t, dir, withEngine(ffnOnly, e))
			if !strings.Contains(err.Error(), "[remote-code]") {
				t.Errorf("hf: %v", err)
			}
			continue
		}
		runPrune(t, dir, ffnOnly, e)
	}
	// Qwen3 has qk-norm: no DeciLM.
	qdir, _ := writeSynth(t, synths()[3])
	err = pruneErr(t, qdir, &Plan{Version: 1, OutputFormat: "decilm"})
	if !strings.Contains(err.Error(), "Llama-family") {
		t.Errorf("qwen3 decilm: %v", err)
	}
}

func withEngine(p *Plan, e string) *Plan {
	c := *p
	c.Engine = e
	return &c
}

func padList(idx []int, n int) []int {
	out := append([]int(nil), idx...)
	for len(out) < n {
		out = append(out, -1)
	}
	return out
}

// TestPrunePlanErrors: plans the parent cannot take are refused before
// anything is written, naming the layer and the field.
func TestPrunePlanErrors(t *testing.T) {
	dir, _ := writeSynth(t, synths()[0])
	cases := []struct {
		name string
		plan Plan
		want []string
	}{
		{"hidden out of range", Plan{Version: 1, Hidden: ints(0, 40)}, []string{"hidden", "40", "out of range"}},
		{"layer out of range", Plan{Version: 1, Layers: []LayerPlan{{Layer: 9, Remove: true}}}, []string{"layer 9", "out of range"}},
		{"head out of range", Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, Heads: ints(0, 8)}}}, []string{"layer 1", "heads", "8"}},
		{"neuron out of range", Plan{Version: 1, Layers: []LayerPlan{{Layer: 2, Neurons: ints(1, 48)}}}, []string{"layer 2", "neurons", "48"}},
		{"uneven groups", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Heads: ints(0, 1, 2, 4)}}}, []string{"layer 0", "heads", "same number"}},
		{"head of removed group", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, KVHeads: ints(0, 1), Heads: ints(0, 4)}}}, []string{"layer 0", "group 2"}},
		{"remove all layers", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Remove: true}, {Layer: 1, Remove: true}, {Layer: 2, Remove: true}, {Layer: 3, Remove: true}}}, []string{"every layer"}},
		{"per-layer widths native", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Neurons: seqFrom(0, 10)}}}, []string{"neurons", "decilm", "padded"}},
		{"sub-block native", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, RemoveMLP: true}}}, []string{"layer 0", "not expressible"}},
		{"decilm uniform llama", Plan{Version: 1, OutputFormat: "decilm"}, nil},
		{"mamba on llama", Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeads: ints(0)}}}, []string{"layer 0", "mamba_heads", "no Mamba"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "child")
			_, err := Prune(context.Background(), Options{Model: dir, Plan: &c.plan, Out: out})
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *PlanError: %v", err, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("output written despite the error")
			}
		})
	}
}

// TestPruneCheckpointErrors: broken parents are reported with the tensor,
// file and byte offset, and nothing is written.
func TestPruneCheckpointErrors(t *testing.T) {
	s := synths()[0]
	t.Run("truncated", func(t *testing.T) {
		dir, _ := writeSynth(t, s)
		f := filepath.Join(dir, "model.safetensors")
		st, err := os.Stat(f)
		must(t, err)
		must(t, os.Truncate(f, st.Size()-100))
		err = pruneErr(t, dir, &Plan{Version: 1})
		t.Log(err)
		for _, w := range []string{"model.safetensors", "lm_head.weight", "offset"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	})
	t.Run("shape unlike config", func(t *testing.T) {
		dir, _ := writeSynth(t, s)
		cfg := llamaCfg(false)
		cfg["intermediate_size"] = 40
		must(t, os.WriteFile(filepath.Join(dir, "config.json"), configBytes(t, cfg), 0o644))
		err := pruneErr(t, dir, &Plan{Version: 1})
		for _, w := range []string{"model.layers.0.mlp.gate_proj.weight", "byte offset", "[48 32]", "[40 32]"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	})
	t.Run("tensor missing", func(t *testing.T) {
		dir, _ := writeSynth(t, s)
		cfg := llamaCfg(false)
		cfg["num_hidden_layers"] = 5
		must(t, os.WriteFile(filepath.Join(dir, "config.json"), configBytes(t, cfg), 0o644))
		err := pruneErr(t, dir, &Plan{Version: 1})
		if !strings.Contains(err.Error(), "model.layers.4.self_attn.q_proj.weight is missing") {
			t.Errorf("error %q does not name the missing tensor", err)
		}
	})
	t.Run("engine cannot load", func(t *testing.T) {
		dir, _ := writeSynth(t, s)
		// llama.cpp's DeciLM converter derives head_dim = hidden/heads; a
		// hidden-pruned DeciLM child breaks that.
		plan := &Plan{Version: 1, OutputFormat: "decilm", Engine: "llamacpp", Hidden: seqFrom(0, 24),
			Layers: []LayerPlan{{Layer: 0, RemoveMLP: true}}}
		err := pruneErr(t, dir, plan)
		for _, w := range []string{"llamacpp", "head_dim", "[head-dim]"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	})
}

func pruneErr(t *testing.T, dir string, p *Plan) error {
	t.Helper()
	parent := t.TempDir()
	out := filepath.Join(parent, "child")
	_, err := Prune(context.Background(), Options{Model: dir, Plan: p, Out: out})
	if err == nil {
		t.Fatal("no error")
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 0 {
		t.Errorf("output left behind after an error: %v", ents)
	}
	return err
}

// TestOutputSafety: an existing output is not replaced without Force, and
// an interrupted run leaves neither the output nor its temporary directory.
func TestOutputSafety(t *testing.T) {
	dir, _ := writeSynth(t, synths()[2])
	parent := t.TempDir()
	out := filepath.Join(parent, "child")
	must(t, os.MkdirAll(out, 0o755))
	must(t, os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644))
	_, err := Prune(context.Background(), Options{Model: dir, Plan: &Plan{Version: 1}, Out: out})
	var ee *checkpoint.ExistsError
	if !errors.As(err, &ee) {
		t.Fatalf("want *checkpoint.ExistsError, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "keep")); err != nil {
		t.Fatal("existing output touched")
	}
	if _, err := Prune(context.Background(), Options{Model: dir, Plan: &Plan{Version: 1}, Out: out, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "keep")); err == nil {
		t.Fatal("--force did not replace the output")
	}

	// Cancel after the first tensor: its progress event cancels.
	ctx, cancel := context.WithCancel(context.Background())
	out2 := filepath.Join(parent, "child2")
	_, err = Prune(ctx, Options{Model: dir, Plan: &Plan{Version: 1, Hidden: seqFrom(0, 16)}, Out: out2,
		Progress: func(progress.Event) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if e.Name() != "child" {
			t.Errorf("interrupted run left %s", e.Name())
		}
	}
}

// TestStories260K prunes the real tiny Llama along every axis and checks the
// values against the independent slicing.
func TestStories260K(t *testing.T) {
	src := stageStories(t, sdtest.Require(t, "models/stories260K"))
	parent, err := architecture.Load(src)
	must(t, err)
	// 8 heads in 4 KV groups of 2: keep one per group; hidden 64 → 48;
	// FFN 172 → 128; drop layer 2.
	var hidden []int
	for i := 0; i < 64; i++ {
		if i%4 != 3 {
			hidden = append(hidden, i)
		}
	}
	plan := &Plan{Version: 1, Hidden: hidden}
	for l := 0; l < 5; l++ {
		if l == 2 {
			plan.Layers = append(plan.Layers, LayerPlan{Layer: l, Remove: true})
			continue
		}
		plan.Layers = append(plan.Layers, LayerPlan{Layer: l, Heads: ints(0, 3, 4, 7), Neurons: seqFrom(l*10, 128)})
	}
	out, _ := runPrune(t, src, plan, "hf")
	pv, ps := readAll(t, src)
	cv, cs := readAll(t, out)
	want := refChild(t, parent, plan, pv, ps)
	for name, w := range want {
		if k, ok := equalF32(cv[name], w); !ok {
			t.Errorf("%s %v differs at %d", name, cs[name], k)
		}
	}
	child, err := architecture.Load(out)
	must(t, err)
	if child.Hidden != 48 || len(child.Layers) != 4 || child.Layers[0].Attention.Heads != 4 || child.Layers[0].Attention.KVHeads != 4 ||
		child.Layers[0].Attention.HeadDim != 8 || child.Layers[0].MLP.Width != 128 || !child.TiedEmbeddings {
		t.Errorf("child shape %+v", child)
	}
	if _, ok := cv["lm_head.weight"]; ok {
		t.Error("tied child stores lm_head.weight")
	}
}
