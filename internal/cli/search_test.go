package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/importance"
	parentpkg "github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// TestSearchCommand: the outputs are written, plan.json goes through
// prune's validator, config.json prices with estimate, the summary names
// the binding budget, and the command refuses to overwrite.
func TestSearchCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s")
	args := []string{"search", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "rtx-5070", "--engine", "llamacpp",
		"--precision", "q4_k_m", "--workload", "game-character", "--max-memory", "11GiB", "--max-e2e", "3s", "--out", out}
	code, stdout, stderr := pruneRunCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"binding budget", "structural prior", "llama-server", "per layer", "max-e2e"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"plan.json", "config.json", "serving.json", "pareto.csv", "topk.csv", "summary.txt", "summary.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	plan, err := prune.LoadPlan(filepath.Join(out, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	parent, _ := architecture.Load("meta-llama/Meta-Llama-3.1-8B")
	lay, err := prune.Resolve(parent, plan)
	if err != nil {
		t.Fatalf("prune refuses the plan: %v", err)
	}
	child, err := architecture.Load(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(child.Layers) != len(lay.Child.Layers) || child.Hidden != lay.Child.Hidden {
		t.Errorf("config.json (%d layers, hidden %d) differs from the plan's child (%d, %d)", len(child.Layers), child.Hidden, len(lay.Child.Layers), lay.Child.Hidden)
	}
	var sum struct {
		Chosen struct {
			Costs struct {
				E2E    float64 `json:"e2e_s"`
				Memory float64 `json:"memory_bytes"`
			} `json:"costs"`
			Settings struct {
				MaxNumSeqs int `json:"max_num_seqs"`
			} `json:"settings"`
		} `json:"chosen"`
		Binding string `json:"binding_budget"`
	}
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Binding == "" || sum.Chosen.Costs.E2E > 3 || sum.Chosen.Costs.Memory > 11<<30 {
		t.Errorf("summary.json: %+v", sum)
	}
	// estimate prices the child's config.json independently, with the chosen slots.
	code, est, stderr := pruneRunCLI("estimate", "--model", filepath.Join(out, "config.json"), "--gpu", "rtx-5070", "--engine", "llamacpp",
		"--precision", "q4_k_m", "--workload", "game-character", "--analytic", "--json", "--max-num-seqs", itoa(sum.Chosen.Settings.MaxNumSeqs))
	if code != 0 {
		t.Fatalf("estimate of the child: exit %d: %s", code, stderr)
	}
	var ej struct {
		Analytic struct {
			E2E float64 `json:"e2e_ms"`
		} `json:"analytic"`
	}
	if err := json.Unmarshal([]byte(est), &ej); err != nil || ej.Analytic.E2E <= 0 {
		t.Fatalf("estimate --json: %v: %s", err, est)
	}
	if math.Abs(ej.Analytic.E2E/1e3-sum.Chosen.Costs.E2E) > 1e-3*sum.Chosen.Costs.E2E {
		t.Errorf("estimate prices the child's E2E at %.1f ms, the search at %.1f ms", ej.Analytic.E2E, 1e3*sum.Chosen.Costs.E2E)
	}
	if code, _, stderr := pruneRunCLI(args...); code != ExistsExit || !strings.Contains(stderr, "--force") {
		t.Errorf("existing --out: exit %d: %s", code, stderr)
	}
	if code, _, stderr := pruneRunCLI(append(args, "--force", "--strategy", "minitron")...); code != 0 && code != 1 {
		t.Errorf("--force minitron: exit %d: %s", code, stderr)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestSearchBadInput: every bad input is exit 2 with a message naming the
// problem; an infeasible search is exit 1 naming the binding budget.
func TestSearchBadInput(t *testing.T) {
	base := []string{"search", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "rtx-5090", "--engine", "vllm", "--workload", "chat"}
	out := filepath.Join(t.TempDir(), "o")
	// Scores of another model: the embedded parent's directory, a hash that is not its.
	pdir, err := checkpointDir(ParentModel)
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := architecture.Load(pdir)
	s := &importance.Scores{ModelHash: "0123456789abcdef", DataHash: "x", Hidden: make([]float64, pm.Hidden), Version: importance.Version}
	for range pm.Layers {
		s.Heads = append(s.Heads, make([]float64, 8))
		s.HeadChannels = append(s.HeadChannels, make([]float64, 8*24))
		s.KVHeads = append(s.KVHeads, 2)
		s.Neurons = append(s.Neurons, make([]float64, 512))
		s.LayerBI = append(s.LayerBI, 0.1)
		s.LayerSkipLoss = append(s.LayerSkipLoss, 0.1)
		s.AttnBI = append(s.AttnBI, 0.1)
		s.MLPBI = append(s.MLPBI, 0.1)
		s.AttnSkipLoss = append(s.AttnSkipLoss, 0.1)
		s.MLPSkipLoss = append(s.MLPSkipLoss, 0.1)
	}
	scores := filepath.Join(t.TempDir(), "scores.safetensors")
	if err := s.Save(scores); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown unit", []string{"--max-memory", "13.96GiBs", "--out", out}, 2, "--max-memory"},
		{"bare memory", []string{"--max-memory", "13.96", "--out", out}, 2, "GiB"},
		{"unknown latency unit", []string{"--max-e2e", "11.5h", "--out", out}, 2, "--max-e2e"},
		{"throughput without unit", []string{"--min-throughput", "2000", "--out", out}, 2, "tok/s"},
		{"no budget", []string{"--out", out}, 2, "budget"},
		{"p90 without latency", []string{"--max-params", "3B", "--p90", "--out", out}, 2, "--p90"},
		{"ttft over e2e", []string{"--max-ttft", "2s", "--max-e2e", "1s", "--out", out}, 2, "--max-ttft"},
		{"serve-on contradicts engine", []string{"--max-params", "3B", "--serve-on", "sglang", "--out", out}, 2, "contradicts"},
		{"keep-layers out of range", []string{"--max-params", "3B", "--keep-layers", "0,32", "--out", out}, 2, "out of range"},
		{"keep-layers not a number", []string{"--max-params", "3B", "--keep-layers", "0,x", "--out", out}, 2, "--keep-layers"},
		{"keep-layers with minitron", []string{"--max-params", "3B", "--keep-layers", "0", "--strategy", "minitron", "--out", out}, 2, "minitron"},
		{"unknown strategy", []string{"--max-params", "3B", "--strategy", "greedy", "--out", out}, 2, "--strategy"},
		{"unknown precision", []string{"--max-params", "3B", "--precision", "fp7", "--out", out}, 2, "--precision"},
		{"importance on a preset", []string{"--max-params", "3B", "--importance", scores, "--out", out}, 2, "checkpoint directory"},
		{"infeasible", []string{"--max-tpot", "0.1ms", "--out", out}, 1, "max-tpot"},
	}
	for _, c := range cases {
		code, _, stderr := pruneRunCLI(append(append([]string(nil), base...), c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", c.name, code, c.code, stderr, c.want)
		}
	}
	// Hash mismatch on a checkpoint directory.
	code, _, stderr := pruneRunCLI("search", "--model", ParentModel, "--gpu", "cpu-local", "--engine", "native", "--isl", "128", "--osl", "32",
		"--max-params", "2M", "--importance", scores, "--out", out)
	if code != 2 || !strings.Contains(stderr, "another model") {
		t.Errorf("hash mismatch: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed search left --out behind")
	}
}

// TestSearchTopKTrainTokens: minitron with --data trains each top-k
// candidate for --topk-train-tokens and says so, counting the tokens; 0
// ranks untrained and says that; too little data for training is a usage
// error naming the flag.
func TestSearchTopKTrainTokens(t *testing.T) {
	docs, err := parentpkg.SplitDocs("", "validation")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, d := range docs {
		text.WriteString(d.Text + "\n")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "val.txt")
	if err := os.WriteFile(data, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// A workload within the parent's 512 positions (the default, chat, is
	// refused by the context rule).
	base := []string{"search", "--model", "parent", "--gpu", "cpu-local", "--engine", "native", "--strategy", "minitron",
		"--isl", "128", "--osl", "64", "--concurrency", "4",
		"--max-params", "3M", "--data", data, "--rows", "4", "--seq-len", "32", "--top-k", "2", "--json"}
	for _, tc := range []struct {
		tokens string
		want   string
	}{{"512", "tokens of distillation from the parent"}, {"0", "without training"}} {
		out := filepath.Join(dir, "s"+tc.tokens)
		code, stdout, stderr := pruneRunCLI(append(base, "--topk-train-tokens", tc.tokens, "--out", out)...)
		if code != 0 {
			t.Fatalf("--topk-train-tokens %s: exit %d: %s", tc.tokens, code, stderr)
		}
		var sum struct {
			Tokens int64    `json:"selection_tokens"`
			Notes  []string `json:"notes"`
		}
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if notes := strings.Join(sum.Notes, "\n"); !strings.Contains(notes, tc.want) {
			t.Errorf("--topk-train-tokens %s: notes lack %q:\n%s", tc.tokens, tc.want, notes)
		}
		if sum.Tokens <= 0 || tc.tokens == "512" && sum.Tokens < 2*512 {
			t.Errorf("--topk-train-tokens %s: %d selection tokens", tc.tokens, sum.Tokens)
		}
	}
	code, _, stderr := pruneRunCLI(append(base[:len(base)-7], "--rows", "100000", "--seq-len", "32", "--top-k", "2", "--out", filepath.Join(dir, "x"))...)
	if code != 2 || !strings.Contains(stderr, "--topk-train-tokens") {
		t.Errorf("too little data: exit %d: %s", code, stderr)
	}
}
