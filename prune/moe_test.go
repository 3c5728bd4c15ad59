package prune

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// gptOssCfg is a small gpt-oss: fused, biased experts and a biased router.
func gptOssCfg() map[string]any {
	return map[string]any{
		"architectures": []string{"GptOssForCausalLM"}, "model_type": "gpt_oss",
		"vocab_size": 64, "hidden_size": 32, "intermediate_size": 12,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
		"num_hidden_layers": 2, "layer_types": []string{"sliding_attention", "full_attention"},
		"sliding_window": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "experts_per_token": 2,
		"rms_norm_eps": 1e-5, "rope_theta": 150000.0, "max_position_embeddings": 256,
		"tie_word_embeddings": false, "torch_dtype": "bfloat16", "attention_bias": true, "hidden_act": "silu",
	}
}

// nemotronMoECfg is a small Nemotron-3 hybrid: Mamba2, attention and
// LatentMoE layers with a shared expert and a sigmoid router's score
// correction.
func nemotronMoECfg() map[string]any {
	c := nemotronHCfg()
	c["hybrid_override_pattern"] = "ME*E"
	c["num_hidden_layers"] = 4
	c["n_routed_experts"] = 4
	c["num_experts_per_tok"] = 2
	c["moe_intermediate_size"] = 8
	c["moe_shared_expert_intermediate_size"] = 12
	c["moe_latent_size"] = 16
	c["n_shared_experts"] = 1
	c["n_group"] = 1
	c["topk_group"] = 1
	delete(c, "intermediate_size")
	return c
}

// moeSynths are the MoE naming schemes the pruner reads: Mixtral
// (block_sparse_moe.experts.E.w1/w2/w3 + block_sparse_moe.gate),
// Qwen3-MoE (mlp.experts.E.*_proj + mlp.gate), gpt-oss (fused
// mlp.experts.gate_up_proj/down_proj with biases + mlp.router) and
// Nemotron-3 (mixer.experts.E.up/down_proj + mixer.gate with its
// e_score_correction_bias, shared experts and latent projections).
func moeSynths() []synth {
	mx := mixtralCfg()
	mx["num_local_experts"] = 4
	qm := qwen3MoECfg()
	qm["num_experts"] = 4
	return []synth{
		{name: "mixtral", cfg: mx, dtype: checkpoint.BF16},
		{name: "qwen3-moe", cfg: qm, dtype: checkpoint.BF16, shards: 2},
		{name: "gpt-oss", cfg: gptOssCfg(), dtype: checkpoint.BF16},
		{name: "nemotron-3-moe", cfg: nemotronMoECfg(), dtype: checkpoint.BF16},
	}
}

// expertsPlan keeps experts of every MoE layer of m.
func expertsPlan(m *architecture.Model, experts []int) *Plan {
	p := &Plan{Version: 1, Engine: "vllm"}
	for i, l := range m.Layers {
		if l.MoE != nil {
			p.Layers = append(p.Layers, LayerPlan{Layer: i, Experts: experts})
		}
	}
	return p
}

// TestPruneExperts removes experts 0 and 2 of 4 in every naming scheme
// and checks, by the test's own reading of the names, that each child
// expert tensor is the kept parent expert's, that router rows (and
// biases, score corrections, stacked expert rows) follow the experts,
// that shared experts and latent projections are whole, and that the
// config states the kept count.
func TestPruneExperts(t *testing.T) {
	keep := []int{1, 3} // child expert 0 is parent 1, child 1 is parent 3
	countKey := map[string]string{"mixtral": "num_local_experts", "qwen3-moe": "num_experts", "gpt-oss": "num_local_experts", "nemotron-3-moe": "n_routed_experts"}
	for _, s := range moeSynths() {
		t.Run(s.name, func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			out, res := runPrune(t, dir, expertsPlan(parent, keep), "vllm")
			pv, ps := readAll(t, dir)
			cv, cs := readAll(t, out)
			var cfg map[string]any
			b, err := os.ReadFile(filepath.Join(out, "config.json"))
			must(t, err)
			must(t, json.Unmarshal(fixNonFinite(b), &cfg))
			if cfg[countKey[s.name]] != 2.0 || cfg["num_experts_per_tok"] != 2.0 {
				t.Errorf("config: %s = %v, num_experts_per_tok = %v; want 2 and 2", countKey[s.name], cfg[countKey[s.name]], cfg["num_experts_per_tok"])
			}
			if len(res.Layout.Notes) != 0 {
				t.Errorf("notes %q, want none (top-k 2 of 2 kept)", res.Layout.Notes)
			}
			for name, got := range cv {
				src, rows := name, []int(nil)
				for ci, pe := range keep {
					if r := fmt.Sprintf("experts.%d.", ci); strings.Contains(name, r) {
						src = strings.Replace(name, r, fmt.Sprintf("experts.%d.", pe), 1)
					}
				}
				switch {
				case strings.HasSuffix(name, ".gate.weight") && !strings.Contains(name, "shared"),
					strings.HasSuffix(name, "router.weight"), strings.HasSuffix(name, "router.bias"),
					strings.HasSuffix(name, "e_score_correction_bias"),
					strings.HasSuffix(name, "experts.gate_up_proj"), strings.HasSuffix(name, "experts.down_proj"),
					strings.HasSuffix(name, "experts.gate_up_proj_bias"), strings.HasSuffix(name, "experts.down_proj_bias"):
					rows = keep
				}
				want, shape := refTake(pv[src], ps[src], rows, nil)
				if !reflect.DeepEqual(shape, cs[name]) {
					t.Errorf("%s: shape %v, want %v (from %s)", name, cs[name], shape, src)
				} else if k, ok := equalF32(got, want); !ok {
					t.Errorf("%s: differs from %s rows %v at %d", name, src, rows, k)
				}
			}
			// Every parent tensor of a kept expert, and every other parent
			// tensor, has a child.
			n := 0
			for name := range pv {
				if strings.Contains(name, "experts.0.") || strings.Contains(name, "experts.2.") {
					continue
				}
				n++
			}
			if n != len(cv) {
				t.Errorf("child has %d tensors, want %d (the parent's less experts 0 and 2)", len(cv), n)
			}
			child, err := architecture.Load(out)
			must(t, err)
			if err := child.CheckShapes(cs, nil); err != nil {
				t.Errorf("child config vs tensors: %v", err)
			}
		})
	}
}

// TestExpertGolden pins an expert-pruned child of each naming scheme
// (config.json, files, every tensor's shape and hash); go test ./prune
// -run TestExpertGolden -update rewrites them.
func TestExpertGolden(t *testing.T) {
	for _, s := range moeSynths() {
		t.Run(s.name, func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			out, _ := runPrune(t, dir, expertsPlan(parent, []int{0, 2, 3}), "vllm")
			got := goldenOf(t, out)
			path := filepath.Join("testdata", "golden", "experts-"+s.name+".json")
			gb, err := json.MarshalIndent(got, "", "  ")
			must(t, err)
			gb = append(gb, '\n')
			if *update {
				must(t, os.WriteFile(path, gb, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./prune -run TestExpertGolden -update)", err)
			}
			if !bytes.Equal(gb, want) {
				t.Errorf("the child differs from %s:\n%s", path, gb)
			}
		})
	}
}

// TestKeepEverythingMoEAndHybrid: a plan that keeps everything (no
// entries, and every expert and Mamba head listed) reproduces an MoE or
// hybrid parent's tensors bit for bit.
func TestKeepEverythingMoEAndHybrid(t *testing.T) {
	ss := append(moeSynths(), synths()[5])
	for _, s := range ss {
		dir, parent := writeSynth(t, s)
		full := &Plan{Version: 1}
		for i, l := range parent.Layers {
			lp := LayerPlan{Layer: i}
			if l.MoE != nil {
				lp.Experts = seqN(l.MoE.Experts)
			}
			if l.Mamba != nil {
				lp.MambaHeads = seqN(l.Mamba.Heads)
			}
			full.Layers = append(full.Layers, lp)
		}
		for pi, p := range []*Plan{{Version: 1}, full} {
			t.Run(fmt.Sprintf("%s/%d", s.name, pi), func(t *testing.T) {
				out, _ := runPrune(t, dir, p, "")
				compareTensorsBitForBit(t, dir, out)
			})
		}
	}
}

// TestExpertPlanRefusals: plans that remove every expert of a layer, keep
// fewer experts than the router's top-k, differ per layer, or name experts
// a layer lacks are refused with what is valid; lower_top_k lowers the
// top-k with a note.
func TestExpertPlanRefusals(t *testing.T) {
	s := moeSynths()[1] // Qwen3-MoE, 4 layers of 4 experts, top-2
	cfg := configBytes(t, s.cfg)
	m, err := architecture.FromConfig(cfg)
	must(t, err)
	hy, err := architecture.FromConfig(configBytes(t, nemotronHCfg()))
	must(t, err)
	all := func(e []int) []LayerPlan {
		var out []LayerPlan
		for i := range 4 {
			out = append(out, LayerPlan{Layer: i, Experts: e})
		}
		return out
	}
	cases := []struct {
		name  string
		model *architecture.Model
		plan  Plan
		want  []string // substrings of the error, "" for none
	}{
		{"every expert removed", m, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Experts: []int{}}}},
			[]string{"layer 0: experts: empty list would remove every routed expert", "keep at least num_experts_per_tok"}},
		{"fewer than top-k", m, Plan{Version: 1, Layers: all([]int{2})},
			[]string{"keeps 1 routed experts but the router sends every token to num_experts_per_tok = 2: keep at least 2", "lower_top_k"}},
		{"out of range", m, Plan{Version: 1, Layers: all([]int{1, 4})},
			[]string{"index 4 out of range: the layer has 4 routed experts (valid indices 0 to 3)"}},
		{"per-layer counts", m, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Experts: []int{0, 1}}, {Layer: 1, Experts: []int{0, 1, 2}}}},
			[]string{"layer 1: experts: keeps 3 routed experts but layer 0 keeps 2", "no engine loads per-layer expert counts"}},
		{"per-layer counts padded", m, Plan{Version: 1, OutputFormat: FormatPadded, Layers: []LayerPlan{{Layer: 2, Experts: []int{0, 1}}}},
			[]string{"layer 2: experts: keeps 2 routed experts but layer 0 keeps 4"}},
		{"no MoE block", hy, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Experts: []int{0}}}},
			[]string{"layer 0: experts: the layer has no MoE block"}},
		{"neurons of an MoE layer", m, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, Neurons: []int{0}}}},
			[]string{"list the routed experts it keeps in \"experts\""}},
		{"unsorted", m, Plan{Version: 1, Layers: all([]int{2, 1})}, []string{"not sorted ascending"}},
		{"mamba heads uneven", hy, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeads: []int{0, 1, 2, 4}}}},
			[]string{"the same number must be kept in each of the 2 groups (n_groups): group 0 keeps 3, group 1 keeps 1"}},
		{"more mamba heads than a group has", hy, Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeads: []int{0, 9}}}},
			[]string{"index 9 out of range (mamba_num_heads 8)"}},
		{"lower_top_k", m, Plan{Version: 1, LowerTopK: true, Layers: all([]int{3})}, []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lay, err := Resolve(c.model, &c.plan)
			if c.want[0] == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				x := lay.Child.Layers[0].MoE
				if x.Experts != 1 || x.TopK != 1 || len(lay.Notes) != 4 || !strings.Contains(lay.Notes[0], "num_experts_per_tok lowered from 2 to 1") {
					t.Errorf("child MoE %+v, notes %q; want 1 expert, top-1 and a note per layer", *x, lay.Notes)
				}
				return
			}
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve = %v, want a *PlanError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestGroupedRouterExperts: a router with n_group groups of experts keeps
// the same number in each.
func TestGroupedRouterExperts(t *testing.T) {
	c := nemotronMoECfg()
	c["n_group"] = 2
	m, err := architecture.FromConfig(configBytes(t, c))
	must(t, err)
	p := &Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, Experts: []int{0, 1, 2}}, {Layer: 3, Experts: []int{0, 1, 2}}}}
	if _, err := Resolve(m, p); err == nil || !strings.Contains(err.Error(), "n_group") {
		t.Errorf("Resolve = %v, want the n_group rule", err)
	}
	p = &Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, Experts: []int{0, 3}}, {Layer: 3, Experts: []int{1, 2}}}}
	if _, err := Resolve(m, p); err != nil {
		t.Errorf("one expert per group: %v", err)
	}
}

// TestMambaHeadDim prunes Mamba heads group-aware and the channels within
// every head (Minitron-SSM's head_dim pruning) and checks every Mamba
// tensor against the test's own reading of the mixer's layout: in_proj
// rows [z | x | B | C | dt], conv1d channels [x | B | C], the gated norm
// over x, out_proj columns over x; B, C and the per-head A_log, D and
// dt_bias follow the heads only.
func TestMambaHeadDim(t *testing.T) {
	s := synths()[5] // Nemotron-H: 8 Mamba heads of 4 channels in 2 groups, state 4
	dir, _ := writeSynth(t, s)
	heads := map[int][]int{0: {0, 2, 5, 6}, 2: {1, 3, 4, 7}, 4: {0, 1, 4, 5}}
	chans := []int{1, 3}
	p := &Plan{Version: 1, Engine: "vllm"}
	for _, l := range []int{0, 2, 4} {
		p.Layers = append(p.Layers, LayerPlan{Layer: l, MambaHeads: heads[l], MambaHeadDim: chans})
	}
	out, _ := runPrune(t, dir, p, "vllm")
	pv, ps := readAll(t, dir)
	cv, cs := readAll(t, out)
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	must(t, err)
	must(t, json.Unmarshal(fixNonFinite(b), &cfg))
	if cfg["mamba_head_dim"] != 2.0 || cfg["mamba_num_heads"] != 4.0 || cfg["n_groups"] != 2.0 {
		t.Errorf("config: mamba_head_dim %v, mamba_num_heads %v, n_groups %v; want 2, 4, 2", cfg["mamba_head_dim"], cfg["mamba_num_heads"], cfg["n_groups"])
	}
	const hd, dIn, gs = 4, 32, 8
	x := func(hs []int, base int) []int {
		var r []int
		for _, h := range hs {
			for _, c := range chans {
				r = append(r, base+h*hd+c)
			}
		}
		return r
	}
	plus := func(hs []int, base int) []int {
		var r []int
		for _, h := range hs {
			r = append(r, base+h)
		}
		return r
	}
	for _, l := range []int{0, 2, 4} {
		hs := heads[l]
		pre := fmt.Sprintf("backbone.layers.%d.mixer.", l)
		in := append(append(append(x(hs, 0), x(hs, dIn)...), seqFrom(2*dIn, 2*gs)...), plus(hs, 2*dIn+2*gs)...)
		conv := append(x(hs, 0), seqFrom(dIn, 2*gs)...)
		for name, sel := range map[string][2][]int{
			"in_proj.weight": {in, nil}, "conv1d.weight": {conv, nil}, "conv1d.bias": {conv, nil},
			"norm.weight": {x(hs, 0), nil}, "out_proj.weight": {nil, x(hs, 0)},
			"A_log": {hs, nil}, "D": {hs, nil}, "dt_bias": {hs, nil},
		} {
			want, shape := refTake(pv[pre+name], ps[pre+name], sel[0], sel[1])
			if !reflect.DeepEqual(shape, cs[pre+name]) {
				t.Errorf("%s%s: shape %v, want %v", pre, name, cs[pre+name], shape)
			} else if k, ok := equalF32(cv[pre+name], want); !ok {
				t.Errorf("%s%s: differs at %d", pre, name, k)
			}
		}
	}
	m, err := architecture.FromConfig(configBytes(t, s.cfg))
	must(t, err)
	for _, c := range []struct {
		plan Plan
		want string
	}{
		{Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeadDim: []int{1, 4}}}}, "mamba_head_dim: index 4 out of range (mamba_head_dim 4: channels 0 to 3 within each head)"},
		{Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeadDim: []int{1, 2}}}}, "layer 2: mamba_head_dim: keeps 4 channels per Mamba head but layer 0 keeps 2"},
		{Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, MambaHeadDim: []int{1}}}}, "layer 1: mamba_head_dim: the layer has no Mamba block"},
		{Plan{Version: 1, Layers: []LayerPlan{{Layer: 0, MambaHeadDim: []int{}}}}, "empty list would remove every channel of the Mamba heads"},
	} {
		if _, err := Resolve(m, &c.plan); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve = %v, want %q", err, c.want)
		}
	}
}

// TestPruneExpertsHidden prunes the hidden size together with experts in
// every MoE naming scheme and checks each MoE tensor of the child by the
// test's own reading of its name: the router keeps the experts' rows and
// the kept channels' columns, an expert's input projections the kept
// columns and its output projection the kept rows (gpt-oss's stacked
// down_proj [experts, width, hidden] along its last dimension), the shared
// experts and LatentMoE projections likewise on their model side, and
// LatentMoE's routed experts, which work in the latent width, whole.
func TestPruneExpertsHidden(t *testing.T) {
	keep := []int{1, 3}
	hid := []int{0, 1, 2, 4, 5, 6, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19, 20, 22, 23, 24, 25, 26, 28, 29} // 24 of 32
	for _, s := range moeSynths() {
		t.Run(s.name, func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			plan := expertsPlan(parent, keep)
			plan.Hidden = hid
			out, _ := runPrune(t, dir, plan, "vllm")
			pv, ps := readAll(t, dir)
			cv, cs := readAll(t, out)
			latent := s.name == "nemotron-3-moe" // its synth's experts work in moe_latent_size
			checked := 0
			for name, got := range cv {
				src := name
				for ci, pe := range keep {
					if r := fmt.Sprintf("experts.%d.", ci); strings.Contains(name, r) {
						src = strings.Replace(name, r, fmt.Sprintf("experts.%d.", pe), 1)
					}
				}
				perExpert := src != name
				var rows, cols, inner []int
				switch {
				case strings.Contains(name, "shared_experts.") && strings.HasSuffix(name, "down_proj.weight"),
					strings.HasSuffix(name, "fc2_latent_proj.weight"):
					rows = hid
				case strings.Contains(name, "shared_experts."), strings.HasSuffix(name, "fc1_latent_proj.weight"):
					cols = hid
				case strings.HasSuffix(name, "router.weight"), strings.HasSuffix(name, ".gate.weight"):
					rows, cols = keep, hid
				case strings.HasSuffix(name, "router.bias"), strings.HasSuffix(name, "e_score_correction_bias"),
					strings.HasSuffix(name, "experts.gate_up_proj_bias"):
					rows = keep
				case strings.HasSuffix(name, "experts.gate_up_proj"), strings.HasSuffix(name, "experts.down_proj_bias"):
					rows, cols = keep, hid
				case strings.HasSuffix(name, "experts.down_proj"):
					rows, inner = keep, hid
				case perExpert && !latent && (strings.HasSuffix(name, "w2.weight") || strings.HasSuffix(name, "down_proj.weight")):
					rows = hid
				case perExpert && !latent:
					cols = hid
				case perExpert:
				default:
					continue // outside the MoE block: other tests check those
				}
				checked++
				want, shape := refTake(pv[src], ps[src], rows, cols)
				if inner != nil {
					want, shape = refTakeLast(want, shape, inner)
				}
				if !reflect.DeepEqual(shape, cs[name]) {
					t.Errorf("%s: shape %v, want %v (from %s)", name, cs[name], shape, src)
				} else if k, ok := equalF32(got, want); !ok {
					t.Errorf("%s: differs from %s (rows %v, cols %v, last %v) at %d", name, src, rows, cols, inner, k)
				}
			}
			if checked == 0 {
				t.Fatal("no MoE tensor checked")
			}
			child, err := architecture.Load(out)
			must(t, err)
			if child.Hidden != len(hid) {
				t.Errorf("child hidden %d, want %d", child.Hidden, len(hid))
			}
			if err := child.CheckShapes(cs, nil); err != nil {
				t.Errorf("child config vs tensors: %v", err)
			}
		})
	}
}

// refTakeLast keeps the indices idx (-1: a zero) of the last dimension of
// a 3-D tensor.
func refTakeLast(in []float32, shape []int64, idx []int) ([]float32, []int64) {
	d2 := int(shape[2])
	var out []float32
	for r := 0; r < len(in)/d2; r++ {
		for _, c := range idx {
			if c < 0 {
				out = append(out, 0)
			} else {
				out = append(out, in[r*d2+c])
			}
		}
	}
	shp := append([]int64(nil), shape...)
	shp[2] = int64(len(idx))
	return out, shp
}
