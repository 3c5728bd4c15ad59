package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// TestValidateAllDeciLMChildHF (issue 17, class 11): validate --engine all
// failed every DeciLM child for hf. The verdict is right: transformers has
// no built-in DeciLM (model_type nemotron-nas is not in
// CONFIG_MAPPING_NAMES, models/auto/configuration_auto.py), so
// AutoConfig.from_pretrained loads it only through auto_map, whose modules
// dynamic_module_utils.get_class_from_dynamic_module reads from the
// checkpoint directory. prune writes the configuration module itself
// (issue 19), but transformers' AutoModelForCausalLM needs a modeling module
// too, which is not ours to ship, and llama.cpp's converter refuses the
// embedded parent's byte-level tokenizer for a DeciLM child (issue 19). So:
// hf fails for the remote code and nothing else, llama.cpp for its
// tokenizer rule, the other engines pass, the output says how to add the
// modeling module, and with it (or with auto_map naming a Hub repository)
// hf passes.
func TestValidateAllDeciLMChildHF(t *testing.T) {
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1, OutputFormat: "decilm"}
	for l := range 8 {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Neurons: indices(256 * (1 + l%2))})
	}
	child := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: child}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := evalRun("validate", "--model", child, "--engine", "all")
	if code != 1 || !strings.Contains(errs, "2 of 6 engine(s)") {
		t.Fatalf("validate --engine all: exit %d, want 1 with hf and llamacpp failing:\n%s%s", code, out, errs)
	}
	engine := ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "  ") {
			engine, _, _ = strings.Cut(line, ":")
		}
		switch {
		case !strings.HasPrefix(line, "  ") && (engine == "hf" || engine == "llamacpp"):
			if !strings.Contains(line, "FAIL") {
				t.Errorf("%s: %s", engine, line)
			}
		case strings.HasPrefix(line, "  error: ") && engine == "llamacpp":
			if !strings.HasSuffix(line, "[decilm-tokenizer]") {
				t.Errorf("llamacpp: a violation other than the tokenizer: %s", line)
			}
		case strings.HasPrefix(line, "  error: "):
			if !strings.HasSuffix(line, "[remote-code]") {
				t.Errorf("%s: a violation other than the remote code: %s", engine, line)
			}
		case strings.HasPrefix(line, "  hint: "):
			if !strings.Contains(line, "--add-files modeling_decilm.py") {
				t.Errorf("hint: %s", line)
			}
		case strings.HasPrefix(line, "  warning: "):
		default:
			if !strings.HasSuffix(line, ": OK") {
				t.Errorf("not OK: %s", line)
			}
		}
	}
	if !strings.Contains(out, "  hint: ") {
		t.Errorf("no hint for the remote code:\n%s", out)
	}

	// With a modeling module added when pruning, prune names it in
	// auto_map and hf loads it.
	modeling := filepath.Join(t.TempDir(), "modeling_decilm.py")
	if err := os.WriteFile(modeling, []byte("# remote code\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withCode := filepath.Join(t.TempDir(), "with-code")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: withCode, ExtraFiles: []string{modeling}}); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := evalRun("validate", "--model", withCode, "--engine", "hf,vllm,sglang,trtllm,native"); code != 0 {
		t.Errorf("with the remote code: exit %d:\n%s%s", code, out, errs)
	}
	// auto_map naming a Hub repository ("repo--module.Class"): transformers
	// fetches the modules from there.
	hub := filepath.Join(t.TempDir(), "hub")
	if err := os.CopyFS(hub, os.DirFS(child)); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(hub, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.ReplaceAll(string(cfg), `"AutoConfig": "configuration_decilm.DeciLMConfig"`,
		`"AutoConfig": "configuration_decilm.DeciLMConfig", "AutoModelForCausalLM": "nvidia/Llama-3_1-Nemotron-51B-Instruct--modeling_decilm.DeciLMForCausalLM"`))
	if err := os.WriteFile(filepath.Join(hub, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := evalRun("validate", "--model", hub, "--engine", "hf"); code != 0 {
		t.Errorf("auto_map naming a Hub repository: exit %d:\n%s%s", code, out, errs)
	}
}
