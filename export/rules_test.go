package export

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
)

// TestEveryEstimatorEngineHasRules: every engine the estimator prices has
// load rules, so a search for any --engine can ask what it loads.
func TestEveryEstimatorEngineHasRules(t *testing.T) {
	for _, n := range estimate.Engines() {
		e, err := estimate.LookupEngine(n)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := ForEngine(e)
		if !ok {
			t.Errorf("estimator engine %s has no export rules", n)
			continue
		}
		if _, err := Lookup(c.Name); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, ok := ForEngine("nope"); ok {
		t.Error("an unknown engine has rules")
	}
}

// notPriced are the engines this table holds that the estimator prices
// no server for: transformers ("hf") loads checkpoints.
var notPriced = map[string]bool{"hf": true}

// TestTablesNameTheSameEngines: this table and the estimator's
// (estimate.EngineSpec) name the same engines, but for notPriced, join
// both ways, and agree on which engines shard layers by TP.
func TestTablesNameTheSameEngines(t *testing.T) {
	for _, n := range Engines() {
		c, _ := Lookup(n)
		e, ok := c.Engine()
		if ok == notPriced[n] {
			t.Errorf("export engine %s: estimator engine %v, want %v", n, ok, !notPriced[n])
			continue
		}
		if !ok {
			continue
		}
		back, ok := ForEngine(e)
		if !ok || back.Name != n {
			t.Errorf("%s: ForEngine(%s) = %s, %v", n, e, back.Name, ok)
		}
		spec, _ := e.Spec()
		if spec.ShardsTP != c.ShardsTP {
			t.Errorf("%s: estimate says ShardsTP %v, export %v", n, spec.ShardsTP, c.ShardsTP)
		}
	}
	if len(Engines()) != len(estimate.Engines())+len(notPriced) {
		t.Errorf("export names %v, the estimator %v", Engines(), estimate.Engines())
	}
}

func llama(t *testing.T, layers int, mod func(m *architecture.Model)) *architecture.Model {
	t.Helper()
	m, err := architecture.Load("meta-llama/Meta-Llama-3.1-8B")
	if err != nil {
		t.Fatal(err)
	}
	m = m.Clone()
	m.Layers = m.Layers[:layers]
	if mod != nil {
		mod(m)
	}
	return m
}

// TestLoadsAgreesWithValidators: the fast predicate and the validators'
// reports come from the same rules, on shapes each engine accepts and
// refuses.
func TestLoadsAgreesWithValidators(t *testing.T) {
	qwen, err := architecture.Load("Qwen/Qwen3-8B")
	if err != nil {
		t.Fatal(err)
	}
	nemo, err := architecture.Load("nvidia/Nemotron-H-56B-Base-8K")
	if err != nil {
		t.Fatal(err)
	}
	perLayerQwen := qwen.Clone()
	perLayerQwen.Layers[3].MLP.Width = 4096
	cases := []struct {
		name string
		m    *architecture.Model
		tp   int
		want map[string]bool // engine → loads
	}{
		{"uniform llama", llama(t, 4, nil), 1, map[string]bool{"vllm": true, "sglang": true, "trtllm": true, "llamacpp": true, "hf": true, "native": true}},
		{"per-layer FFN ×256", llama(t, 4, func(m *architecture.Model) { m.Layers[1].MLP.Width = 7168 }), 1,
			map[string]bool{"vllm": true, "sglang": true, "trtllm": true, "llamacpp": true, "hf": true, "native": true}},
		{"per-layer FFN not ×256", llama(t, 4, func(m *architecture.Model) { m.Layers[1].MLP.Width = 7000 }), 1,
			map[string]bool{"vllm": false, "sglang": false, "trtllm": false, "llamacpp": false, "hf": false, "native": false}},
		{"per-layer query heads", llama(t, 4, func(m *architecture.Model) { m.Layers[1].Attention.Heads = 16 }), 1,
			map[string]bool{"vllm": false, "llamacpp": false, "native": false}},
		{"per-layer KV groups", llama(t, 4, func(m *architecture.Model) { m.Layers[2].Attention.KVHeads = 4 }), 1,
			map[string]bool{"vllm": true, "sglang": false, "trtllm": true, "llamacpp": true, "native": true}},
		{"attention removed in layer 0", llama(t, 4, func(m *architecture.Model) { m.Layers[0].Attention = nil }), 1,
			map[string]bool{"vllm": false, "sglang": false, "trtllm": true, "llamacpp": true, "hf": true, "native": true}},
		{"layer 0 without attention or MLP, then attention removed in layer 1", llama(t, 4, func(m *architecture.Model) {
			m.Layers[0].Attention, m.Layers[0].MLP, m.Layers[1].Attention = nil, nil, nil
		}), 1, map[string]bool{"vllm": false, "sglang": false, "trtllm": true}},
		{"attention removed in layer 2", llama(t, 4, func(m *architecture.Model) { m.Layers[2].Attention = nil }), 1,
			map[string]bool{"vllm": true, "sglang": true, "trtllm": true, "llamacpp": true}},
		{"MLP removed in layer 2", llama(t, 4, func(m *architecture.Model) { m.Layers[2].MLP = nil }), 1,
			map[string]bool{"vllm": true, "sglang": true, "trtllm": true, "llamacpp": false, "hf": true, "native": true}},
		{"KV groups not divisible by TP", llama(t, 4, func(m *architecture.Model) {
			for i := range m.Layers {
				m.Layers[i].Attention.KVHeads = 4
			}
		}), 8, map[string]bool{"vllm": true, "sglang": true}}, // 8 % 4 == 0: replicated evenly
		{"KV groups 3 at TP 2", llama(t, 4, func(m *architecture.Model) {
			for i := range m.Layers {
				m.Layers[i].Attention.Heads, m.Layers[i].Attention.KVHeads = 24, 3
			}
		}), 2, map[string]bool{"vllm": false, "trtllm": false, "llamacpp": true}},
		{"qwen3 uniform", qwen, 1, map[string]bool{"vllm": true, "native": true}},
		{"qwen3 per-layer", perLayerQwen, 1, map[string]bool{"vllm": false, "llamacpp": false, "native": false}},
		{"nemotron-h", nemo, 1, map[string]bool{"vllm": true, "trtllm": true, "native": true}}, // the native engine runs its Mamba2 mixers (forward)
	}
	for _, c := range cases {
		for e, want := range c.want {
			caps, err := Lookup(e)
			if err != nil {
				t.Fatal(err)
			}
			got := caps.Loads(c.m, c.tp)
			rep := caps.Check(c.m, c.tp)
			if got != want {
				t.Errorf("%s on %s: Loads = %v, want %v (%v)", c.name, e, got, want, rep.Violations)
			}
			if got != rep.OK() {
				t.Errorf("%s on %s: Loads = %v but the validator says OK = %v: %v", c.name, e, got, rep.OK(), rep.Violations)
			}
			if vm, err := ValidateModel(c.m, e); err != nil || c.tp <= 1 && vm.OK() != got {
				t.Errorf("%s on %s: ValidateModel OK = %v, Loads = %v (%v)", c.name, e, vm.OK(), got, err)
			}
		}
	}
}

func TestPerLayer(t *testing.T) {
	qwen, _ := architecture.Load("Qwen/Qwen3-8B")
	nemo, _ := architecture.Load("nvidia/Nemotron-H-56B-Base-8K")
	for _, e := range Engines() {
		c, _ := Lookup(e)
		if !c.PerLayer(llama(t, 4, nil)) {
			t.Errorf("%s: a Llama parent has no per-layer shapes", e)
		}
		if c.PerLayer(qwen) || c.PerLayer(nemo) {
			t.Errorf("%s: per-layer shapes for Qwen3 or Nemotron-H", e)
		}
	}
}

// TestLoaderRulesCiteTheirSource: every loader rule of the table has an
// id, says what the loader does with the function, the file (a path) and
// the commit read, and says how to fix the child; one id means one rule.
func TestLoaderRulesCiteTheirSource(t *testing.T) {
	source := regexp.MustCompile(`[\w./-]+\.(py|cpp)[^()]*, [0-9a-f]{8}\)`)                     // (file, commit)
	function := regexp.MustCompile(`[A-Z]\w*\.(__init__|forward|[gs]et_\w+)\b|\bllm_build_\w+`) // Class.method or graph builder
	seen := map[string]string{}
	n := 0
	for _, e := range Engines() {
		c, _ := Lookup(e)
		v := reflect.ValueOf(c)
		for i := range v.NumField() {
			var lr *LoaderRule
			switch x := v.Field(i).Interface().(type) {
			case *LoaderRule:
				lr = x
			case *TokenizerRule:
				if x != nil {
					lr = &x.LoaderRule
				}
			}
			if lr == nil {
				continue
			}
			n++
			field := v.Type().Field(i).Name
			if lr.ID == "" || lr.Fix == "" || !source.MatchString(lr.Does) || !function.MatchString(lr.Does) {
				t.Errorf("%s.%s: id %q, fix %q, does %q: want an id, a fix and a citation (function, file, commit)", e, field, lr.ID, lr.Fix, lr.Does)
			}
			if f, ok := seen[lr.ID]; ok && f != field {
				t.Errorf("rule id %s names both %s and %s", lr.ID, f, field)
			}
			seen[lr.ID] = field
		}
	}
	if n < 6 {
		t.Errorf("%d loader rules in the table, want at least 6", n)
	}
}
