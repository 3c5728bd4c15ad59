package search

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/prune"
)

// TestExpertSpace: an MoE parent's space holds routed-expert counts from
// the parent's down, never below the top-k or the minimum width, in both
// strategies; a dense parent's holds none.
func TestExpertSpace(t *testing.T) {
	caps, _ := export.ForEngine(estimate.VLLM)
	cases := []struct {
		preset  string
		uniform bool
		want    []int
	}{
		{"mistralai/Mixtral-8x7B-v0.1", false, []int{8, 7, 6, 5, 4, 3, 2}},
		{"mistralai/Mixtral-8x7B-v0.1", true, []int{8, 7, 6, 5}},
		{"Qwen/Qwen3-30B-A3B", false, []int{128, 120, 104, 88, 80, 64, 48, 32}},
		{"nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", true, []int{512, 480, 448, 416, 384, 352, 320}},
		{"meta-llama/Meta-Llama-3.1-8B", false, nil},
	}
	for _, c := range cases {
		sp, err := NewSpace(preset(t, c.preset), SpaceOptions{Engine: estimate.VLLM, ServeOn: caps, Uniform: c.uniform})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sp.Experts, c.want) {
			t.Errorf("%s (uniform %v): experts %v, want %v", c.preset, c.uniform, sp.Experts, c.want)
		}
	}
}

// TestExpertPlan: a candidate that keeps fewer experts plans the same
// count in every MoE layer, by index without scores and the highest
// scored with them; prune resolves the plan to the search's child.
func TestExpertPlan(t *testing.T) {
	parent := preset(t, "Qwen/Qwen3-30B-A3B")
	caps, _ := export.ForEngine(estimate.VLLM)
	sp, err := NewSpace(parent, SpaceOptions{Engine: estimate.VLLM, ServeOn: caps})
	if err != nil {
		t.Fatal(err)
	}
	c := &Candidate{Hidden: parent.Hidden, Heads: parent.Layers[0].Attention.Heads}
	for _, l := range parent.Layers {
		c.Layers = append(c.Layers, LayerShape{KVGroups: l.Attention.KVHeads, Experts: 64})
	}
	if sp.IsParent(c) || !strings.Contains(sp.Describe(c), "experts 128→64") {
		t.Errorf("Describe = %q, IsParent %v", sp.Describe(c), sp.IsParent(c))
	}
	for _, scored := range []bool{false, true} {
		if scored {
			es := &importance.ExpertScores{Kind: importance.ExpertREAP, Layers: make([][]float64, len(parent.Layers))}
			for l := range es.Layers {
				es.Layers[l] = make([]float64, 128)
				for e := range es.Layers[l] {
					es.Layers[l][e] = float64((e*37 + l) % 128) // a permutation per layer
				}
			}
			sp.ExpertScores = es
		}
		p, err := sp.Plan(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Layers) != len(parent.Layers) {
			t.Fatalf("plan has %d layer entries, want %d", len(p.Layers), len(parent.Layers))
		}
		for _, lp := range p.Layers {
			if len(lp.Experts) != 64 || !slices.IsSorted(lp.Experts) {
				t.Fatalf("layer %d keeps %v", lp.Layer, lp.Experts)
			}
			if scored {
				for _, e := range lp.Experts {
					if (e*37+lp.Layer)%128 < 64 {
						t.Fatalf("layer %d keeps expert %d, scored below the 64 kept", lp.Layer, e)
					}
				}
			} else if lp.Experts[63] != 63 {
				t.Fatalf("layer %d keeps %v, want 0..63", lp.Layer, lp.Experts)
			}
		}
		lay, err := prune.Resolve(parent, p)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(lay.Child.Layers, sp.Model(c).Layers) {
			t.Errorf("prune's child differs from the search's")
		}
	}
}

// TestB200NemotronSuperCutsExperts: Nemotron-3-Super on one B200 with vLLM
// at 128K context in 178 GB (the README's case) does not fit whole; both
// strategies fit it by cutting routed experts, the same count in every
// MoE layer, and the child loads in vLLM. Estimated, not measured.
func TestB200NemotronSuperCutsExperts(t *testing.T) {
	parent := preset(t, "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	caps, _ := export.ForEngine(estimate.VLLM)
	w := wl(t, "long-context-coding")
	for _, strategy := range []string{AutoCompress, Minitron} {
		req := Request{Parent: parent, GPU: gpu(t, "b200"), Engine: estimate.VLLM, ServeOn: caps, Workload: w,
			Budgets: Budgets{MaxMemory: 178e9}, TP: 1, Precisions: []string{"bf16"}, MaxModelLen: 131072, Strategy: strategy, TopK: 3}
		rep, err := Execute(context.Background(), req)
		if err != nil {
			t.Fatalf("%s: %v", strategy, err)
		}
		best := rep.Result.Best
		child := rep.Space.Model(&best)
		n := -1
		for _, l := range child.Layers {
			if l.MoE != nil {
				if n >= 0 && l.MoE.Experts != n {
					t.Fatalf("%s: per-layer expert counts %d and %d", strategy, n, l.MoE.Experts)
				}
				n = l.MoE.Experts
			}
		}
		if n <= 0 || n >= 512 || best.Costs.MemoryBytes > 178e9 || !caps.Loads(child, 1) {
			t.Errorf("%s: %d experts, %.1f GB: want fewer than 512 within 178 GB, loadable", strategy, n, best.Costs.MemoryBytes/1e9)
		}
		if !slices.ContainsFunc(rep.Result.Notes, func(s string) bool { return strings.Contains(s, "plan keeps the lowest-index experts") }) {
			t.Errorf("%s: no note that a config's plan keeps experts by index: %q", strategy, rep.Result.Notes)
		}
	}
}

// TestExecuteExpertScores: the request's expert scores rank the experts
// (the proxy says where they come from); scores for another shape are an
// *ExpertScoresError naming what does not fit.
func TestExecuteExpertScores(t *testing.T) {
	parent := preset(t, "mistralai/Mixtral-8x7B-v0.1")
	caps, _ := export.ForEngine(estimate.VLLM)
	es := &importance.ExpertScores{Kind: importance.ExpertFrequency, Tokens: 1000, Source: "test", Layers: make([][]float64, len(parent.Layers))}
	for l := range es.Layers {
		es.Layers[l] = []float64{8, 1, 7, 2, 6, 3, 5, 4}
	}
	req := Request{Parent: parent, GPU: gpu(t, "h100-sxm"), Engine: estimate.VLLM, ServeOn: caps, Workload: wl(t, "chat"),
		Budgets: Budgets{MaxMemory: 70e9}, TP: 1, Precisions: []string{"bf16"}, Strategy: AutoCompress, TopK: 2, ExpertScores: es}
	rep, err := Execute(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Result.Notes, func(s string) bool { return strings.Contains(s, "routing frequency over 1000 tokens") }) {
		t.Errorf("notes %q do not name the expert scores", rep.Result.Notes)
	}
	p, err := rep.Space.Plan(&rep.Result.Best, nil)
	if err != nil {
		t.Fatal(err)
	}
	cut := 0
	for _, lp := range p.Layers {
		if lp.Experts == nil {
			continue
		}
		cut++
		want, err := prune.TopK([]float32{8, 1, 7, 2, 6, 3, 5, 4}, len(lp.Experts))
		if err != nil || !reflect.DeepEqual(lp.Experts, want) {
			t.Errorf("layer %d keeps %v, not the highest-scored experts %v", lp.Layer, lp.Experts, want)
		}
	}
	if cut == 0 {
		t.Errorf("the 70 GB budget cut no experts of Mixtral-8x7B (%s): the test does not test the ranking", rep.Space.Describe(&rep.Result.Best))
	}
	es.Layers[3] = es.Layers[3][:7]
	_, err = Execute(context.Background(), req)
	var ee *ExpertScoresError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "layer 3: 7 expert scores, the layer has 8 routed experts") {
		t.Errorf("Execute with short scores = %v, want an *ExpertScoresError", err)
	}
}

// TestMambaHeadDimSpace: a hybrid parent's space holds Mamba head
// dimensions (global, in steps of 8) in both strategies, and a candidate
// that cuts them plans channels prune resolves to the search's child.
func TestMambaHeadDimSpace(t *testing.T) {
	parent := preset(t, "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	caps, _ := export.ForEngine(estimate.VLLM)
	for _, c := range []struct {
		uniform bool
		want    []int
	}{{false, []int{64, 48, 32, 16}}, {true, []int{64, 56, 48, 40}}} {
		sp, err := NewSpace(parent, SpaceOptions{Engine: estimate.VLLM, ServeOn: caps, Uniform: c.uniform})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sp.MambaHeadDim, c.want) {
			t.Errorf("uniform %v: Mamba head dims %v, want %v", c.uniform, sp.MambaHeadDim, c.want)
		}
	}
	sp, err := NewSpace(parent, SpaceOptions{Engine: estimate.VLLM, ServeOn: caps})
	if err != nil {
		t.Fatal(err)
	}
	c := &Candidate{Hidden: parent.Hidden, Heads: 32}
	for _, l := range parent.Layers {
		var s LayerShape
		switch {
		case l.Mamba != nil:
			s.MambaHeads, s.MambaHeadDim = 128, 48
		case l.Attention != nil:
			s.KVGroups = l.Attention.KVHeads
		}
		c.Layers = append(c.Layers, s)
	}
	if d := sp.Describe(c); !strings.Contains(d, "Mamba head_dim 64→48") {
		t.Errorf("Describe = %q", d)
	}
	p, err := sp.Plan(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	lay, err := prune.Resolve(parent, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lay.Child.Layers, sp.Model(c).Layers) || lay.Child.Layers[0].Mamba.HeadDim != 48 {
		t.Errorf("prune's child differs from the search's (Mamba %+v)", *lay.Child.Layers[0].Mamba)
	}
	if !caps.Loads(sp.Model(c), 1) {
		t.Errorf("vLLM does not load the head_dim-48 child: %v", caps.Check(sp.Model(c), 1).Violations)
	}
}

// TestMambaHeadDimByChannelScores: with channel scores, a head_dim cut
// keeps the channel positions that score highest over all heads (the same
// in every head), and the proxy prices it by the share of channel scores
// those positions hold, as it prices a head cut by the heads' share.
func TestMambaHeadDimByChannelScores(t *testing.T) {
	parent := preset(t, "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
	caps, _ := export.ForEngine(estimate.VLLM)
	sp, err := NewSpace(parent, SpaceOptions{Engine: estimate.VLLM, ServeOn: caps})
	if err != nil {
		t.Fatal(err)
	}
	n := len(parent.Layers)
	s := &importance.Scores{MambaHeads: make([][]float64, n), MambaHeadChannels: make([][]float64, n), LayerBI: make([]float64, n)}
	ml := -1
	for i, l := range parent.Layers {
		s.LayerBI[i] = 1
		x := l.Mamba
		if x == nil {
			continue
		}
		if ml < 0 {
			ml = i
		}
		// Channel position j of every head scores 1 + (j*37 mod HeadDim):
		// the best positions are not the lowest indices.
		ch := make([]float64, x.Heads*x.HeadDim)
		for h := range x.Heads {
			for j := range x.HeadDim {
				ch[h*x.HeadDim+j] = 1 + float64((j*37)%x.HeadDim)
			}
		}
		s.MambaHeadChannels[i] = ch
		s.MambaHeads[i] = make([]float64, x.Heads)
		for h := range s.MambaHeads[i] {
			s.MambaHeads[i][h] = 1
		}
	}
	x := parent.Layers[ml].Mamba
	c := &Candidate{Hidden: parent.Hidden, Heads: 32}
	for _, l := range parent.Layers {
		var ls LayerShape
		switch {
		case l.Mamba != nil:
			ls.MambaHeads, ls.MambaHeadDim = x.Heads, 48
		case l.Attention != nil:
			ls.KVGroups = l.Attention.KVHeads
		}
		c.Layers = append(c.Layers, ls)
	}
	p, err := sp.Plan(c, s)
	if err != nil {
		t.Fatal(err)
	}
	chans := s.MambaChannelScores(ml, x.Heads)
	want, err := prune.TopK(f32(chans), 48)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, lp := range p.Layers {
		if lp.Layer == ml {
			got = lp.MambaHeadDim
		}
	}
	if !reflect.DeepEqual(got, want) || reflect.DeepEqual(got, seq(48)) {
		t.Errorf("layer %d keeps channels %v, want the highest-scoring %v", ml, got, want)
	}
	px, err := NewProxy(parent, s)
	if err != nil {
		t.Fatal(err)
	}
	var kept, total float64
	for j, v := range chans {
		total += v
		if slices.Contains(want, j) {
			kept += v
		}
	}
	if g := px.Mamba(ml, x.Heads, 48); math.Abs(g-kept/total) > 1e-12 {
		t.Errorf("proxy share of head_dim 48 = %.6f, the kept channels hold %.6f of the scores", g, kept/total)
	}
	// Without channel scores the prior prices it.
	s.MambaHeadChannels = nil
	px, err = NewProxy(parent, s)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := px.Mamba(ml, x.Heads, 48), prior(48, x.HeadDim); math.Abs(g-w) > 1e-12 {
		t.Errorf("without channel scores: %.6f, want the prior %.6f", g, w)
	}
}
