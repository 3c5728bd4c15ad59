package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneEngineRulesFirst: prune takes an engine list or "all" as
// validate does, and checks the child's config against every engine
// before writing any weight: a child llama.cpp cannot load (pruned query
// heads break its head_dim rule) fails with nothing written, not even a
// temporary directory or a progress bar.
func TestPruneEngineRulesFirst(t *testing.T) {
	parent := pruneParent(t)
	plan := pruneWriteFile(t, "plan.json", `{"version": 1, "output_format": "decilm",
	  "layers": [{"layer": 0, "heads": [0,2,4,6]}, {"layer": 1, "heads": [1,3,5,7]}, {"layer": 2, "heads": [0,3,4,7]}]}`)
	for _, eng := range []string{"llamacpp", "vllm,llamacpp", "all"} {
		parentDir := t.TempDir()
		out := filepath.Join(parentDir, "child")
		code, _, errs := pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out, "--engine", eng)
		if code != 1 || !strings.Contains(errs, "would not load in llamacpp, nothing written") || !strings.Contains(errs, "head-dim") {
			t.Errorf("--engine %s: exit %d, %q", eng, code, errs)
		}
		if strings.Contains(errs, "prune ") && strings.Contains(errs, "B/") {
			t.Errorf("--engine %s: weights were streamed before the check: %q", eng, errs)
		}
		if ents, _ := os.ReadDir(parentDir); len(ents) != 0 {
			t.Errorf("--engine %s: %d entries left beside --out", eng, len(ents))
		}
	}
	out := filepath.Join(t.TempDir(), "child")
	code, stdout, errs := pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out, "--engine", "vllm,sglang")
	if code != 0 || !strings.Contains(stdout, "validated for vllm,sglang") {
		t.Errorf("vllm,sglang: exit %d, %s%s", code, stdout, errs)
	}
	if code, _, errs := pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out+"2", "--engine", "vllm,tgi"); code != 2 || !strings.Contains(errs, "tgi") {
		t.Errorf("unknown engine in a list: exit %d, %q", code, errs)
	}
}

// TestValidateNoArchitecturesCLI: validate fails a config.json without
// "architectures" for the serving engines.
func TestValidateNoArchitecturesCLI(t *testing.T) {
	parent := pruneParent(t)
	cfg, err := os.ReadFile(filepath.Join(parent, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(cfg)
	i := strings.Index(s, `"architectures"`)
	j := strings.Index(s[i:], "],")
	if i < 0 || j < 0 {
		t.Fatalf("no architectures in %s", s)
	}
	os.WriteFile(filepath.Join(parent, "config.json"), []byte(s[:i]+s[i+j+2:]), 0o644)
	code, stdout, _ := pruneRunCLI("validate", "--model", parent, "--engine", "vllm,hf")
	if code != 1 || !strings.Contains(stdout, `config.json has no "architectures"; vllm picks the model class from architectures[0]: add "architectures": ["LlamaForCausalLM"] [architectures]`) ||
		!strings.Contains(stdout, "hf: , 3 layers: OK") {
		t.Errorf("exit %d\n%s", code, stdout)
	}
}
