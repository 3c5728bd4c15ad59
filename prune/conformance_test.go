package prune

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
	"github.com/autocompress/autocompress/parent"
)

// loaders are the re-statements of loadersim_test.go, by export's engine
// name.
var loaders = map[string]func(c *child, dir string) outcome{
	"vllm":     func(c *child, _ string) outcome { return vllmLoad(c) },
	"sglang":   func(c *child, _ string) outcome { return sglangLoad(c) },
	"trtllm":   func(c *child, _ string) outcome { return trtllmLoad(c) },
	"llamacpp": func(c *child, dir string) outcome { return llamacppLoad(c, tokenizerOf(dir)) },
}

// A conformance kind is one output prune writes: a parent and a plan.
type conformanceKind struct {
	name   string
	parent func(t *testing.T) string
	plan   Plan
	// want is, for the variant with every file a loader needs beside the
	// weights (configuration module, Llama BPE tokenizer), the rule each
	// engine's loader breaks ("" loads): loaders.md §3's table, checked
	// here against the re-statements so that they cannot drift together
	// with the validators.
	want map[string]string
}

func embeddedParent(t *testing.T) string {
	d, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func synthParent(i int) func(t *testing.T) string {
	return func(t *testing.T) string { d, _ := writeSynth(t, synths()[i]); return d }
}

func allLoad() map[string]string {
	return map[string]string{"vllm": "", "sglang": "", "trtllm": "", "llamacpp": ""}
}

func except(rules map[string]string) map[string]string {
	m := allLoad()
	for k, v := range rules {
		m[k] = v
	}
	return m
}

func conformanceKinds() []conformanceKind {
	emb := embeddedParent
	eachLayer := func(n int, f func(l int) LayerPlan) []LayerPlan {
		var out []LayerPlan
		for l := range n {
			out = append(out, f(l))
		}
		return out
	}
	deci := func(layers ...LayerPlan) Plan { return Plan{Version: 1, OutputFormat: FormatDeciLM, Layers: layers} }
	return []conformanceKind{
		{"uniform", emb, Plan{Version: 1, Layers: eachLayer(8, func(l int) LayerPlan { return LayerPlan{Layer: l, Neurons: seqFrom(0, 256)} })}, allLoad()},
		{"decilm, uniform KV", emb, deci(eachLayer(8, func(l int) LayerPlan { return LayerPlan{Layer: l, Neurons: seqFrom(0, 256*(1+l%2))} })...), allLoad()},
		{"decilm, varying KV", emb, deci(eachLayer(8, func(l int) LayerPlan {
			if l == 3 {
				return LayerPlan{Layer: l, KVHeads: ints(0), Heads: ints(0, 1, 2, 3)}
			}
			return LayerPlan{Layer: l, Heads: ints(0, 1, 4, 5)}
		})...), except(map[string]string{"sglang": "decilm-uniform-kv", "llamacpp": "head-dim"})},
		{"first-layer attention removed", emb, deci(LayerPlan{Layer: 0, RemoveAttention: true}),
			except(map[string]string{"vllm": "decilm-first-attention", "sglang": "decilm-first-attention"})},
		{"last-layer attention removed", emb, deci(LayerPlan{Layer: 7, RemoveAttention: true}), allLoad()},
		{"last-layer MLP removed", emb, deci(LayerPlan{Layer: 7, RemoveMLP: true}), except(map[string]string{"llamacpp": "decilm-attention-needs-ffn"})},
		{"MLP-only removal", emb, deci(LayerPlan{Layer: 3, RemoveMLP: true}), except(map[string]string{"llamacpp": "decilm-attention-needs-ffn"})},
		{"padded", emb, Plan{Version: 1, OutputFormat: FormatPadded, Layers: []LayerPlan{{Layer: 0, RemoveAttention: true}, {Layer: 3, RemoveMLP: true},
			{Layer: 5, KVHeads: ints(1), Heads: ints(4, 5, 6, 7)}}}, allLoad()},
		{"qwen3", synthParent(3), Plan{Version: 1, Layers: eachLayer(4, func(l int) LayerPlan { return LayerPlan{Layer: l, Neurons: seqFrom(0, 32)} })}, allLoad()},
		{"qwen3 padded", synthParent(3), Plan{Version: 1, OutputFormat: FormatPadded, Layers: []LayerPlan{{Layer: 1, Neurons: seqFrom(0, 32)}, {Layer: 2, RemoveAttention: true}}}, allLoad()},
		{"nemotron-h", synthParent(5), Plan{Version: 1, Layers: []LayerPlan{
			{Layer: 0, MambaHeads: ints(0, 2, 5, 6)}, {Layer: 2, MambaHeads: ints(1, 3, 4, 7)}, {Layer: 3, Remove: true}, {Layer: 4, MambaHeads: ints(0, 1, 4, 5)}}}, allLoad()},
	}
}

// conformanceVariants are the files beside a child's weights: as prune
// wrote them (its configuration module beside a DeciLM child, the
// parent's tokenizer), without the configuration module or the module it
// imports, and with a
// Llama 2 style BPE tokenizer instead of the parent's (the one llama.cpp's
// DeciLM converter takes for a vocabulary other than 128256). An empty
// text removes the file.
var conformanceVariants = []struct {
	name  string
	files map[string]string
}{
	{"as written", nil},
	{"without the configuration module", map[string]string{"configuration_decilm.py": "", "block_config.py": ""}},
	{"without the module the configuration module imports", map[string]string{"block_config.py": ""}},
	{"with a Llama BPE tokenizer", map[string]string{
		"tokenizer.json": `{"model": {"type": "BPE", "byte_fallback": true}, "decoder": {"type": "Sequence"}}`}},
}

// TestLoaderConformance: for every output kind (uniform, DeciLM with
// uniform and varying KV groups, first- and last-layer removals, MLP-only
// removal, padded, Qwen3, Nemotron-H) and every serving engine, what the
// engine's loader does with the child, reproduced from its source
// (loadersim_test.go), agrees with export.ValidateDir: the child loads and
// computes the intended model exactly when the report is OK, and when it
// does not, the report names the rule the loader breaks. The loaders'
// verdicts on the complete variant are pinned to loaders.md's table.
func TestLoaderConformance(t *testing.T) {
	for _, k := range conformanceKinds() {
		t.Run(k.name, func(t *testing.T) {
			written := filepath.Join(t.TempDir(), "child")
			p := k.plan
			if _, err := Prune(context.Background(), Options{Model: k.parent(t), Plan: &p, Out: written}); err != nil {
				t.Fatal(err)
			}
			for vi, v := range conformanceVariants {
				dir := written
				if v.files != nil {
					dir = filepath.Join(t.TempDir(), "variant")
					must(t, os.CopyFS(dir, os.DirFS(written)))
					for name, text := range v.files {
						if f := filepath.Join(dir, name); text == "" {
							if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
								t.Fatal(err)
							}
						} else {
							must(t, os.WriteFile(f, []byte(text), 0o644))
						}
					}
				}
				c, err := readChild(dir)
				must(t, err)
				for _, e := range sortedKeys(loaders) {
					sim := loaders[e](c, dir)
					rep, err := export.ValidateDir(dir, e)
					must(t, err)
					if sim.ok() != rep.OK() || !sim.ok() && !hasRule(rep, sim.rule) {
						t.Errorf("%s, %s: the loader %s, but validate says OK %v: %v", v.name, e, describe(sim), rep.OK(), rep.Violations)
					}
					t.Logf("%s, %s: %s", v.name, e, describe(sim))
					if vi == len(conformanceVariants)-1 && sim.rule != k.want[e] {
						t.Errorf("%s, %s: the loader %s; loaders.md says %q", v.name, e, describe(sim), k.want[e])
					}
				}
			}
		})
	}
}

// TestLoaderConformancePublished: children of the published configs
// (../shared/data/configs), written as config.json alone: the loaders'
// config reading, with the files beside it assumed present, agrees with
// export.ValidateConfig for every engine.
func TestLoaderConformancePublished(t *testing.T) {
	load := func(t *testing.T, name string) *architecture.Model {
		m, err := architecture.Load(sdtest.Require(t, "configs/"+name))
		must(t, err)
		return m.Clone()
	}
	llama := func(edit func(m *architecture.Model)) func(t *testing.T) *architecture.Model {
		return func(t *testing.T) *architecture.Model {
			m := load(t, "meta-llama--Meta-Llama-3.1-8B.json")
			for i := range m.Layers {
				m.Layers[i].MLP.Width = 14336 - 1024*(i%4)
			}
			edit(m)
			return m
		}
	}
	cases := []struct {
		name  string
		model func(t *testing.T) *architecture.Model
		want  map[string]string
		edit  func(cfg map[string]any) // of the written config.json, if any
	}{
		{"Llama-3.1-8B DeciLM, uniform KV", llama(func(m *architecture.Model) {}), allLoad(), nil},
		{"Llama-3.1-8B DeciLM, varying KV", llama(func(m *architecture.Model) { m.Layers[5].Attention.KVHeads = 4 }),
			except(map[string]string{"sglang": "decilm-uniform-kv"}), nil},
		{"Llama-3.1-8B DeciLM, first-layer attention removed", llama(func(m *architecture.Model) { m.Layers[0].Attention = nil }),
			except(map[string]string{"vllm": "decilm-first-attention", "sglang": "decilm-first-attention"}), nil},
		{"Llama-3.1-8B DeciLM, last-layer MLP removed", llama(func(m *architecture.Model) { m.Layers[len(m.Layers)-1].MLP = nil }),
			except(map[string]string{"llamacpp": "decilm-attention-needs-ffn"}), nil},
		{"Llama-3.1-8B DeciLM, MLP width 8192 in layer 0 (ffn_mult 3.0)", llama(func(m *architecture.Model) { m.Layers[0].MLP.Width = 8192 }), allLoad(), nil},
		{"Llama-3.1-8B DeciLM, ffn_mult 3.0 in layer 0 rewritten as 3 (Go's encoding/json)", llama(func(m *architecture.Model) { m.Layers[0].MLP.Width = 8192 }),
			except(map[string]string{"llamacpp": "decilm-ffn-mult-float"}), func(cfg map[string]any) {}},
		{"Llama-3.1-8B DeciLM, a block with intermediate_size alone", llama(func(m *architecture.Model) {}),
			except(map[string]string{"llamacpp": "decilm-ffn-mult-only"}), // prune's module derives ffn_mult for the others
			func(cfg map[string]any) {
				ffn := cfg["block_configs"].([]any)[3].(map[string]any)["ffn"].(map[string]any)
				delete(ffn, "ffn_mult")
				ffn["intermediate_size"] = 12288
			}},
		{"Llama-3.1-8B DeciLM, a block with intermediate_size alone, not a multiple of 256", llama(func(m *architecture.Model) {}),
			except(map[string]string{"sglang": "decilm-ffn-mult-only", "trtllm": "decilm-ffn-mult-only", "llamacpp": "decilm-ffn-mult-only"}),
			func(cfg map[string]any) {
				ffn := cfg["block_configs"].([]any)[3].(map[string]any)["ffn"].(map[string]any)
				delete(ffn, "ffn_mult")
				ffn["intermediate_size"] = 12300
			}},
		{"Qwen3-8B uniform", func(t *testing.T) *architecture.Model {
			m := load(t, "Qwen--Qwen3-8B.json")
			for i := range m.Layers {
				m.Layers[i].MLP.Width = 8192
			}
			return m
		}, allLoad(), nil},
		{"Nemotron-H-56B", func(t *testing.T) *architecture.Model { return load(t, "nvidia--Nemotron-H-56B-Base-8K.json") }, allLoad(), nil},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			b, err := cs.model(t).Config(architecture.ConfigOptions{})
			must(t, err)
			if cs.edit != nil {
				var cfg map[string]any
				must(t, json.Unmarshal(b, &cfg))
				cs.edit(cfg)
				b, err = json.Marshal(cfg)
				must(t, err)
			}
			c, err := childOfConfig(b)
			must(t, err)
			for _, e := range sortedKeys(loaders) {
				sim := loaders[e](c, "")
				rep, err := export.ValidateConfig(b, e)
				must(t, err)
				if sim.ok() != rep.OK() || !sim.ok() && !hasRule(rep, sim.rule) {
					t.Errorf("%s: the loader %s, but validate says OK %v: %v", e, describe(sim), rep.OK(), rep.Violations)
				}
				t.Logf("%s: %s", e, describe(sim))
				if sim.rule != cs.want[e] {
					t.Errorf("%s: the loader %s; loaders.md says %q", e, describe(sim), cs.want[e])
				}
			}
		})
	}
}

func hasRule(r *export.Report, rule string) bool {
	return slices.ContainsFunc(r.Violations, func(v export.Violation) bool { return v.Rule == rule })
}

func describe(o outcome) string {
	if o.ok() {
		return "loads it and computes the intended model"
	}
	return "fails [" + o.rule + "]: " + o.what
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
