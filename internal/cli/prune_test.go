package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/prune"
)

// pruneParent writes a small synthetic Llama (8 heads in 4 KV groups,
// hidden 32, FFN 600) in two shards.
func pruneParent(t *testing.T) string {
	t.Helper()
	m := testutil.Llama{Vocab: 64, Hidden: 32, Intermediate: 600, Heads: 8, KVHeads: 4, HeadDim: 4, Layers: 3}
	dir := filepath.Join(t.TempDir(), "parent")
	err := testutil.Write(dir, testutil.LlamaSpecs(m, checkpoint.BF16), testutil.Options{Shards: 2,
		Files: map[string][]byte{"config.json": testutil.LlamaConfig(m, checkpoint.BF16), "tokenizer.json": []byte("{}")}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func pruneRunCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func pruneWriteFile(t *testing.T, name, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPruneCommand(t *testing.T) {
	parent := pruneParent(t)
	plan := pruneWriteFile(t, "plan.json", `{"version": 1, "hidden": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23],
	  "layers": [{"layer": 0, "heads": [0,2,4,6]}, {"layer": 1, "heads": [1,3,5,7]}, {"layer": 2, "heads": [0,3,4,7]}]}`)
	out := filepath.Join(t.TempDir(), "child")
	code, stdout, stderr := pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out, "--engine", "vllm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "validated for vllm") || !strings.Contains(stdout, "hidden 24") {
		t.Errorf("stdout: %s", stdout)
	}
	if !strings.Contains(stderr, "prune [") {
		t.Errorf("no progress bar on stderr: %q", stderr)
	}
	child, err := architecture.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if child.Hidden != 24 || child.Layers[0].Attention.Heads != 4 || child.Layers[0].Attention.HeadDim != 4 {
		t.Errorf("child %+v", child.Layers[0].Attention)
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); err != nil {
		t.Error("tokenizer not copied")
	}

	// Existing output without --force: exit 1, untouched.
	code, _, stderr = pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out)
	if code != 1 || !strings.Contains(stderr, "--force") {
		t.Errorf("existing output: exit %d, %s", code, stderr)
	}
	// --format padded with per-layer widths, --json.
	plan2 := pruneWriteFile(t, "plan2.json", `{"version": 1, "layers": [{"layer": 0, "neurons": [0, 5, 9]}, {"layer": 2, "remove": true}]}`)
	code, stdout, stderr = pruneRunCLI("prune", "--model", parent, "--plan", plan2, "--out", out, "--force", "--format", "padded", "--json")
	if code != 0 {
		t.Fatalf("padded: exit %d: %s", code, stderr)
	}
	var doc struct {
		Format string
		Layers []struct {
			Parent   int
			MLPWidth int `json:"mlp_width"`
			Padded   bool
		}
		Files []string
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if doc.Format != "padded" || len(doc.Layers) != 2 || doc.Layers[0].MLPWidth != 600 || !doc.Layers[0].Padded || doc.Layers[1].Parent != 1 {
		t.Errorf("json %+v", doc)
	}
	// TP 3 cannot split 8 heads: refused, nothing written.
	out3 := filepath.Join(t.TempDir(), "tp3")
	code, _, stderr = pruneRunCLI("prune", "--model", parent, "--plan", plan2, "--out", out3, "--format", "padded", "--engine", "vllm", "--tp", "3")
	if _, err := os.Stat(out3); code != 1 || !strings.Contains(stderr, "[tp-heads]") || err == nil {
		t.Errorf("--tp 3: exit %d: %s", code, stderr)
	}
	// Native cannot hold per-layer widths: exit 1 with the plan error.
	code, _, stderr = pruneRunCLI("prune", "--model", parent, "--plan", plan2, "--out", out, "--force")
	if code != 1 || !strings.Contains(stderr, "layer 1") && !strings.Contains(stderr, "layer 0") {
		t.Errorf("native per-layer: exit %d: %s", code, stderr)
	}
}

func TestPruneCommandUsage(t *testing.T) {
	parent := pruneParent(t)
	plan := pruneWriteFile(t, "plan.json", `{"version": 1}`)
	cases := [][]string{
		{"prune", "--plan", plan, "--out", "x"},
		{"prune", "--model", parent, "--out", "x"},
		{"prune", "--model", parent, "--plan", plan},
		{"prune", "--model", parent, "--plan", plan, "--out", "x", "--engine", "ollama"},
		{"prune", "--model", parent, "--plan", plan, "--out", "x", "--format", "gguf"},
		{"prune", "--model", "/nonexistent", "--plan", plan, "--out", "x"},
		{"prune", "--model", parent, "--plan", plan, "--out", "x", "extra"},
		{"prune", "--model", parent, "--plan", plan, "--out", "x", "--tp", "-2"},
	}
	for _, c := range cases {
		if code, _, stderr := pruneRunCLI(c...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", c, code, stderr)
		}
	}
	bad := pruneWriteFile(t, "bad.json", `{"version": 1, "layers": [{"layer": 0, "heads": [3, 1]}]}`)
	code, _, stderr := pruneRunCLI("prune", "--model", parent, "--plan", bad, "--out", filepath.Join(t.TempDir(), "o"))
	if code != 1 || !strings.Contains(stderr, "layer 0: heads: not sorted") {
		t.Errorf("bad plan: exit %d: %s", code, stderr)
	}
}

func TestValidateCommand(t *testing.T) {
	parent := pruneParent(t)
	code, stdout, stderr := pruneRunCLI("validate", "--model", parent, "--engine", "all")
	if code != 0 {
		t.Fatalf("parent: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, e := range []string{"vllm: LlamaForCausalLM, 3 layers: OK", "llamacpp:", "hf:", "sglang:", "trtllm:"} {
		if !strings.Contains(stdout, e) {
			t.Errorf("stdout lacks %q:\n%s", e, stdout)
		}
	}
	// A DeciLM child with pruned query heads: fine for vLLM, not llama.cpp.
	plan := pruneWriteFile(t, "plan.json", `{"version": 1, "output_format": "decilm",
	  "layers": [{"layer": 0, "heads": [0,2,4,6], "neurons": [1,2,3]}, {"layer": 1, "heads": [1,3,5,7], "remove_mlp": true}, {"layer": 2, "heads": [0,3,4,7]}]}`)
	out := filepath.Join(t.TempDir(), "deci")
	if code, _, stderr := pruneRunCLI("prune", "--model", parent, "--plan", plan, "--out", out, "--engine", "vllm"); code != 0 {
		t.Fatalf("prune: %s", stderr)
	}
	code, stdout, stderr = pruneRunCLI("validate", "--model", out, "--engine", "vllm,llamacpp")
	if code != 1 || !strings.Contains(stdout, "vllm: DeciLMForCausalLM, 3 layers: OK") || !strings.Contains(stdout, "[head-dim]") ||
		!strings.Contains(stderr, "1 of 2 engine(s)") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = pruneRunCLI("validate", "--model", out, "--engine", "llamacpp", "--json")
	var reps []struct {
		Engine     string
		Violations []struct {
			Layer int
			Rule  string
		}
	}
	if err := json.Unmarshal([]byte(stdout), &reps); err != nil || code != 1 || len(reps) != 1 || len(reps[0].Violations) == 0 || reps[0].Violations[0].Rule != "head-dim" {
		t.Errorf("json: exit %d err %v: %s", code, err, stdout)
	}
	// Broken tensors: shape unlike the config.
	cfg, _ := os.ReadFile(filepath.Join(parent, "config.json"))
	os.WriteFile(filepath.Join(parent, "config.json"), []byte(strings.Replace(string(cfg), `"intermediate_size": 600`, `"intermediate_size": 512`, 1)), 0o644)
	code, stdout, _ = pruneRunCLI("validate", "--model", parent, "--engine", "hf")
	if code != 1 || !strings.Contains(stdout, "layer 0: tensor model.layers.0.mlp.gate_proj.weight: shape [600 32]") {
		t.Errorf("shape mismatch: exit %d\n%s", code, stdout)
	}
	// Tensor parallelism: 8 heads do not split over TP 3.
	code, stdout, _ = pruneRunCLI("validate", "--model", out, "--engine", "vllm", "--tp", "3")
	if code != 1 || !strings.Contains(stdout, "[tp-heads]") {
		t.Errorf("--tp 3: exit %d\n%s", code, stdout)
	}
	for _, c := range [][]string{{"validate", "--model", parent, "--engine", "vllm", "--tp", "-1"}, {"validate", "--engine", "vllm"}, {"validate", "--model", parent}, {"validate", "--model", parent, "--engine", "x"}} {
		if code, _, _ := pruneRunCLI(c...); code != 2 {
			t.Errorf("%v: exit %d, want 2", c, code)
		}
	}
}

// TestPruneCommandScores builds the plan from an importance file and the
// --keep-* targets, prunes by it, and --write-plan saves it (never over a
// file without --force).
func TestPruneCommandScores(t *testing.T) {
	parent := pruneParent(t) // 3 layers, hidden 32, 8 heads in 4 groups, FFN 600
	sc := &importance.Scores{KVHeads: []int{4, 4, 4}, LayerBI: []float64{0.5, 0.1, 0.9},
		LayerSkipLoss: []float64{0, 0, 0}, Version: importance.Version}
	for i := 0; i < 32; i++ {
		sc.Hidden = append(sc.Hidden, float64((i*7)%32))
	}
	for l := 0; l < 3; l++ {
		var h, hc, n []float64
		for i := 0; i < 8; i++ {
			h = append(h, float64((i+l)%8))
		}
		for i := 0; i < 32; i++ {
			hc = append(hc, 1)
		}
		for i := 0; i < 600; i++ {
			n = append(n, float64((i*13+l)%600))
		}
		sc.Heads = append(sc.Heads, h)
		sc.HeadChannels = append(sc.HeadChannels, hc)
		sc.Neurons = append(sc.Neurons, n)
	}
	scores := filepath.Join(t.TempDir(), "scores.safetensors")
	if err := sc.Save(scores); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "child")
	planOut := filepath.Join(t.TempDir(), "plan.json")
	code, stdout, stderr := pruneRunCLI("prune", "--model", parent, "--scores", scores, "--keep-hidden", "24", "--keep-heads", "4",
		"--keep-ffn", "512", "--drop-layers", "1", "--write-plan", planOut, "--out", out, "--engine", "sglang")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "2 layers, hidden 24") {
		t.Errorf("stdout: %s", stdout)
	}
	// The plan written is package prune's uniform plan (TestUniformPlan
	// checks what it keeps).
	p, err := prune.LoadPlan(planOut)
	if err != nil {
		t.Fatal(err)
	}
	want, err := prune.UniformPlan(parent, scores, prune.Uniform{Hidden: 24, Heads: 4, Neurons: 512, DropLayers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("--write-plan wrote %+v, want prune.UniformPlan's %+v", p, want)
	}
	// An existing --write-plan file is the user's: replaced only with --force,
	// and refused before any child is written.
	mine := filepath.Join(t.TempDir(), "mine.json")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "child2")
	again := []string{"prune", "--model", parent, "--scores", scores, "--keep-heads", "4", "--write-plan", mine, "--out", out2}
	code, _, stderr = pruneRunCLI(again...)
	if code != 1 || !strings.Contains(stderr, "already exists") || !strings.Contains(stderr, "--force") {
		t.Errorf("--write-plan over an existing file: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(mine); string(b) != "mine" {
		t.Errorf("--write-plan replaced the user's file without --force: %q", b)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a refused --write-plan still wrote the child")
	}
	if code, _, stderr = pruneRunCLI(append(again, "--force")...); code != 0 {
		t.Fatalf("--write-plan --force: exit %d: %s", code, stderr)
	}
	if _, err := prune.LoadPlan(mine); err != nil {
		t.Errorf("--force did not write the plan: %v", err)
	}
	// Targets without --scores, or both --plan and --scores: usage errors.
	if code, _, _ := pruneRunCLI("prune", "--model", parent, "--plan", planOut, "--scores", scores, "--out", out); code != 2 {
		t.Errorf("--plan with --scores: exit %d", code)
	}
	if code, _, _ := pruneRunCLI("prune", "--model", parent, "--plan", planOut, "--keep-ffn", "3", "--out", out); code != 2 {
		t.Errorf("--keep-ffn without --scores: exit %d", code)
	}
}
