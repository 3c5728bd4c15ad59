package search

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
)

// TestSpaceProposesOnlyLoadableShapes: every candidate the autocompress
// space can assemble (any allowed global shape, any option per layer
// within the removal caps) loads in the serve-on engine, for every
// engine: the loaders' DeciLM rules (export.Capabilities) shape the space,
// not only the final check. The rules bite: SGLang's KV groups are one
// global choice, vLLM's and SGLang's layer 0 keeps its attention,
// llama.cpp has no MLP-only removal, and TensorRT-LLM, which has none of
// those rules, gets all three kinds of option.
func TestSpaceProposesOnlyLoadableShapes(t *testing.T) {
	parent := llama8B(t).Clone()
	parent.Layers = parent.Layers[:6]
	for _, eng := range estimate.Engines() {
		t.Run(eng, func(t *testing.T) {
			sp, err := NewSpace(parent, SpaceOptions{Engine: estimate.Engine(eng)})
			if err != nil {
				t.Fatal(err)
			}
			if !sp.PerLayer {
				t.Fatalf("%s: a Llama-3.1 parent (vocabulary 128256) has no per-layer space", eng)
			}
			e := &evaluator{sp: sp}
			gs := e.globals()
			if len(gs) == 0 {
				t.Fatal("no global shape")
			}
			rng := rand.New(rand.NewPCG(19, uint64(len(eng))))
			var perLayerKV, firstAttnRemoved, mlpOnly bool
			for gi, g := range gs {
				if gi%3 != 0 && gi != len(gs)-1 {
					continue // a third of them: the property is per option
				}
				menus := make([][]LayerShape, len(parent.Layers))
				for l := range menus {
					menus[l] = e.shapes(nil, l, g)
					for _, s := range menus[l] {
						if l == 0 && !s.Removed && s.KVGroups == 0 {
							firstAttnRemoved = true
						}
						if s.KVGroups > 0 && s.MLP == 0 {
							mlpOnly = true
						}
					}
				}
				for range 12 {
					c := Candidate{Hidden: g.hidden, Heads: g.heads, Layers: make([]LayerShape, len(menus))}
					var cut cuts
					kvs := map[int]bool{}
					for l, opts := range menus {
						s := opts[rng.IntN(len(opts))]
						if x := cut.add(shapeCuts(&parent.Layers[l], s)); x.over(sp.MaxRemoved) {
							s = opts[0]
						} else {
							cut = x
						}
						c.Layers[l] = s
						if s.KVGroups > 0 {
							kvs[s.KVGroups] = true
						}
					}
					perLayerKV = perLayerKV || len(kvs) > 1
					if m := sp.Model(&c); !sp.ServeOn.Loads(m, sp.TP) {
						t.Fatalf("%s: the space holds %s, which it does not load: %v", eng, sp.Describe(&c), sp.ServeOn.Check(m, sp.TP).Violations)
					}
				}
			}
			want := map[string][3]bool{ // per-layer KV, first-layer attention removal, MLP-only removal
				"vllm": {true, false, true}, "sglang": {false, false, true}, "trtllm": {true, true, true},
				"llamacpp": {true, true, false}, "native": {true, true, true},
			}
			if w, ok := want[eng]; ok && [3]bool{perLayerKV, firstAttnRemoved, mlpOnly} != w {
				t.Errorf("%s: per-layer KV %v, layer-0 attention removal %v, MLP-only removal %v; want %v",
					eng, perLayerKV, firstAttnRemoved, mlpOnly, w)
			}
			caps, _ := export.ForEngine(estimate.Engine(eng))
			if sp.UniformKV != (caps.DeciLMUniformKV != nil) || (sp.KeepAttention != nil) != (caps.DeciLMFirstAttention != nil) ||
				sp.AttentionNeedsMLP != (caps.DeciLMAttentionNeedsFFN != nil) {
				t.Errorf("%s: the space's rules (uniform KV %v, kept attention %v, attention needs MLP %v) are not the engine's", eng, sp.UniformKV, sp.KeepAttention, sp.AttentionNeedsMLP)
			}
		})
	}
}

// TestNoPerLayerForLlamaCPPTokenizer: llama.cpp's converter takes a
// DeciLM child's tokenizer as it is only for vocabulary 128256, so the
// embedded parent (vocabulary 4096, byte-level BPE) gets no per-layer
// space for llamacpp, and says why; for vLLM it does.
func TestNoPerLayerForLlamaCPPTokenizer(t *testing.T) {
	m := embedded(t)
	sp, err := NewSpace(m, SpaceOptions{Engine: estimate.LlamaCPP})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range sp.Notes {
		found = found || strings.Contains(n, "[decilm-tokenizer]")
	}
	if sp.PerLayer || !found {
		t.Errorf("llamacpp, vocabulary %d: per layer %v, notes %q", m.Vocab, sp.PerLayer, sp.Notes)
	}
	if sp, err := NewSpace(m, SpaceOptions{Engine: estimate.VLLM}); err != nil || !sp.PerLayer {
		t.Errorf("vllm: per layer %v (%v)", sp != nil && sp.PerLayer, err)
	}
}
