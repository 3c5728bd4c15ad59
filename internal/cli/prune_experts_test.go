package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/prune"
)

// mixtralParent writes a small Mixtral checkpoint of 4 experts, top-2.
func mixtralParent(t *testing.T) string {
	t.Helper()
	cfg := map[string]any{"architectures": []string{"MixtralForCausalLM"}, "model_type": "mixtral",
		"vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 2, "num_key_value_heads": 1,
		"head_dim": 8, "num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2, "torch_dtype": "bfloat16"}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := architecture.FromConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	var specs []checkpoint.TensorSpec
	for _, ts := range m.Tensors() {
		specs = append(specs, checkpoint.TensorSpec{Name: ts.Name, DType: checkpoint.BF16, Shape: ts.Shape})
	}
	dir := filepath.Join(t.TempDir(), "mixtral")
	if err := testutil.Write(dir, specs, testutil.Options{Seed: 3, Files: map[string][]byte{"config.json": b}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPruneCommandKeepExperts: --keep-experts keeps the highest-ranked
// experts of every MoE layer by --expert-scores, or by the structural
// prior (said on stderr); fewer than the top-k needs --lower-top-k, and
// the note says the top-k was lowered; scores for another shape are a
// usage error.
func TestPruneCommandKeepExperts(t *testing.T) {
	parent := mixtralParent(t)
	dir := t.TempDir()
	es := &importance.ExpertScores{Kind: importance.ExpertREAP, Tokens: 10, Source: "test", Layers: [][]float64{{1, 4, 2, 3}, {4, 3, 2, 1}}}
	scores := filepath.Join(dir, "experts.safetensors")
	if err := es.Save(scores); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "child")
	planOut := filepath.Join(dir, "plan.json")
	code, _, stderr := pruneRunCLI("prune", "--model", parent, "--keep-experts", "2", "--expert-scores", scores, "--write-plan", planOut, "--out", out, "--engine", "vllm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(planOut)
	if err != nil {
		t.Fatal(err)
	}
	var plan struct{ Layers []struct{ Experts []int } }
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan.Layers) != 2 || !equalInts(plan.Layers[0].Experts, []int{1, 3}) || !equalInts(plan.Layers[1].Experts, []int{0, 1}) {
		t.Errorf("plan %s: want experts [1 3] and [0 1]", b)
	}
	child, err := architecture.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if x := child.Layers[0].MoE; x.Experts != 2 || x.TopK != 2 {
		t.Errorf("child MoE %+v", *x)
	}

	code, _, stderr = pruneRunCLI("prune", "--model", parent, "--keep-experts", "1", "--out", filepath.Join(dir, "c1"))
	if code != 1 || !strings.Contains(stderr, "keep at least 2") || !strings.Contains(stderr, "structural prior") {
		t.Errorf("1 expert of top-2: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := pruneRunCLI("prune", "--model", parent, "--keep-experts", "1", "--lower-top-k", "--out", filepath.Join(dir, "c2"))
	if code != 0 || !strings.Contains(stdout, "num_experts_per_tok lowered from 2 to 1") {
		t.Errorf("--lower-top-k: exit %d: %s %s", code, stdout, stderr)
	}
	es.Layers[1] = es.Layers[1][:3]
	if err := es.Save(scores); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr = pruneRunCLI("prune", "--model", parent, "--keep-experts", "2", "--expert-scores", scores, "--out", filepath.Join(dir, "c3")); code != 2 || !strings.Contains(stderr, "layer 1: 3 expert scores") {
		t.Errorf("short scores: exit %d: %s", code, stderr)
	}
	if code, _, stderr = pruneRunCLI("prune", "--model", parent, "--expert-scores", scores, "--plan", planOut, "--out", filepath.Join(dir, "c4")); code != 2 {
		t.Errorf("--expert-scores without --keep-experts: exit %d: %s", code, stderr)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSearchMoECheckpointStructuralExperts: search on an MoE checkpoint
// (no expert scores) ranks the experts by the structural prior of its
// weights, says so, and its plan keeps the experts that prior ranks
// highest; prune applies the plan.
func TestSearchMoECheckpointStructuralExperts(t *testing.T) {
	parent := mixtralParent(t)
	m, err := architecture.Load(parent)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "search")
	p := m.Params()
	code, stdout, stderr := pruneRunCLI("search", "--model", parent, "--gpu", "h100-sxm", "--engine", "vllm", "--precision", "bf16",
		"--isl", "64", "--osl", "16", "--concurrency", "1", "--max-params", strconv.FormatInt(p.Total*3/4, 10), "--out", out)
	if code != 0 {
		t.Fatalf("search: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "structural prior (router row norm × expert weight norm") {
		t.Errorf("search does not say how experts were ranked:\n%s", stdout)
	}
	b, err := os.ReadFile(filepath.Join(out, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Layers []struct {
			Layer   int
			Experts []int
		}
	}
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	es, err := importance.StructuralExperts(context.Background(), parent, m)
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, lp := range plan.Layers {
		if lp.Experts == nil {
			continue
		}
		cut = true
		sc := make([]float32, 4)
		for i, v := range es.Layers[lp.Layer] {
			sc[i] = float32(v)
		}
		want, err := prune.TopK(sc, len(lp.Experts))
		if err != nil || !equalInts(lp.Experts, want) {
			t.Errorf("layer %d keeps %v, the structural prior's top %v", lp.Layer, lp.Experts, want)
		}
	}
	if !cut {
		t.Fatalf("the parameter budget cut no experts:\n%s", stdout)
	}
	if code, _, stderr := pruneRunCLI("prune", "--model", parent, "--plan", filepath.Join(out, "plan.json"), "--out", filepath.Join(t.TempDir(), "child")); code != 0 {
		t.Errorf("prune of the search's plan: exit %d: %s", code, stderr)
	}
}
