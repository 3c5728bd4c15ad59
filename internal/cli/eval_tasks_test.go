package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/eval"
)

// TestEvalBuildAndTasks: --build writes a suite (and refuses to overwrite
// it without --force); two models side by side on the suite and a LAMBADA
// file, in text and JSON.
func TestEvalBuildAndTasks(t *testing.T) {
	a, b := evalModel(t), evalModel(t)
	text := evalWrite(t, "held-out.txt", []byte(strings.Repeat(evalText+"\n\n", 20)))
	suite := filepath.Join(t.TempDir(), "suite.jsonl")
	code, out, errs := evalRun("eval", "--build", suite, "--data", text, "--items", "4")
	if code != 0 || !strings.Contains(out, "4 cloze and 4 choice items") {
		t.Fatalf("build: exit %d\n%s%s", code, out, errs)
	}
	first, _ := os.ReadFile(suite)
	if code, _, errs = evalRun("eval", "--build", suite, "--data", text, "--items", "4"); code != 1 || !strings.Contains(errs, "--force") {
		t.Errorf("overwrite without --force: exit %d %s", code, errs)
	}
	if code, _, errs = evalRun("eval", "--build", suite, "--data", text, "--items", "4", "--force"); code != 0 {
		t.Fatalf("--force: exit %d %s", code, errs)
	}
	if again, _ := os.ReadFile(suite); string(again) != string(first) {
		t.Error("the same seed built another suite")
	}
	lam := evalWrite(t, "lambada.jsonl", []byte(`{"text": "It is a truth universally acknowledged"}`+"\n"+`{"text": "a single man in possession of a good fortune"}`+"\n"))
	args := []string{"eval", "--model", a, "--model", b, "--task", "suite=" + suite, "--task", "lambada=" + lam, "--limit", "3"}
	code, out, errs = evalRun(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"suite/cloze", "suite/choice", "lambada", "acc_norm", "perplexity", " ± ", "parameters"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = evalRun(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Models) != 2 || len(rep.Models[1].Tasks) != 3 || rep.Models[0].Tasks[0].Items != 3 || rep.Models[0].Tasks[2].Items != 2 {
		t.Fatalf("report: %+v", rep)
	}
	if m := rep.Models[0].Tasks[1].Metrics; len(m) != 2 || m[0].Name != "acc" || m[0].Stderr < 0 {
		t.Errorf("choice metrics %+v", m)
	}
}

func TestEvalTaskErrors(t *testing.T) {
	dir := evalModel(t)
	bad := evalWrite(t, "bad.jsonl", []byte(`{"text": "a b"}`+"\n"+`{"txt": "c d"}`+"\n"))
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown task", []string{"eval", "--model", dir, "--task", "nosuchtask=x"}, 2, `unknown task "nosuchtask" (known: ` + strings.Join(eval.TaskList(), ", ") + "; suites: avg8)"},
		{"no path", []string{"eval", "--model", dir, "--task", "lambada"}, 2, "want NAME=PATH"},
		{"format", []string{"eval", "--model", dir, "--task", "lambada=" + bad}, 1, bad + `:2: the JSON object has no "text" field`},
		{"split", []string{"eval", "--model", dir, "--data", "parent:dev"}, 2, "want parent:test, parent:validation, parent:train-sample or parent:train"},
		{"build without data", []string{"eval", "--build", filepath.Join(t.TempDir(), "s.jsonl")}, 2, "--build needs --data"},
		{"limit", []string{"eval", "--model", dir, "--task", "lambada=" + bad, "--limit", "-1"}, 2, "--limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := evalRun(tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d (want %d), stderr %q, want %q", code, tc.code, errs, tc.msg)
			}
		})
	}
}

// TestEvalInterrupted: a cancelled run exits 130.
func TestEvalInterrupted(t *testing.T) {
	dir := evalModel(t)
	lam := evalWrite(t, "lambada.jsonl", []byte(`{"text": "It is a truth universally acknowledged"}`+"\n"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := Run(ctx, []string{"eval", "--model", dir, "--task", "lambada=" + lam}, strings.NewReader(""), &out, &errb); code != 130 {
		t.Errorf("exit %d, want 130: %s", code, errb.String())
	}
}

// The generation tasks run from the command line: GSM8K, HumanEval and
// MBPP files (made up, in the real formats) on a small random model, whose
// scores are 0 but whose report has the tasks' metrics and item counts.
func TestEvalGenerationTasks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: the code tasks' sandbox runs on Linux only")
	}
	dir := evalModel(t)
	gsm := evalWrite(t, "gsm8k.jsonl", []byte(`{"question": "Tom has 3 apples and buys 2 more. How many?", "answer": "3 + 2 = <<3+2=5>>5\n#### 5"}`+"\n"+
		`{"question": "A box holds 1,000 pins. How many in 2 boxes?", "answer": "2 * 1000 = <<2*1000=2000>>2000\n#### 2,000"}`+"\n"))
	he := evalWrite(t, "humaneval.jsonl", []byte(`{"task_id": "X/0", "prompt": "def add(a, b):\n    \"\"\"Add.\"\"\"\n", "canonical_solution": "    return a + b\n", "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"}`+"\n"))
	var mb strings.Builder
	for _, id := range []string{"2", "3", "4", "11"} {
		mb.WriteString(`{"text": "Write a function f.", "code": "def f():\r\n  return 1", "task_id": ` + id + `, "test_setup_code": "", "test_list": ["assert f() == 1", "assert f() == 1", "assert f() == 1"], "challenge_test_list": []}` + "\n")
	}
	mbpp := evalWrite(t, "mbpp.jsonl", []byte(mb.String()))
	code, out, errs := evalRun("eval", "--model", dir, "--task", "gsm8k="+gsm, "--task", "humaneval="+he, "--task", "mbpp="+mbpp, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []struct {
		task    string
		items   int
		metrics []string
	}{
		{"gsm8k", 2, []string{"exact_match,strict-match", "exact_match,flexible-extract"}},
		{"humaneval", 1, []string{"pass@1"}},
		{"mbpp", 1, []string{"pass@1"}},
	}
	if len(rep.Models) != 1 || len(rep.Models[0].Tasks) != len(want) {
		t.Fatalf("report: %s", out)
	}
	for i, w := range want {
		got := rep.Models[0].Tasks[i]
		if got.Task != w.task || got.Items != w.items || got.Kind != "generation" || len(got.Metrics) != len(w.metrics) {
			t.Errorf("task %d: %+v, want %s with %d items and metrics %v", i, got, w.task, w.items, w.metrics)
			continue
		}
		for k, m := range w.metrics {
			if got.Metrics[k].Name != m || got.Metrics[k].Value < 0 || got.Metrics[k].Value > 1 {
				t.Errorf("%s metric %d: %+v, want %s in [0, 1]", w.task, k, got.Metrics[k], m)
			}
		}
	}
}

// A model directory without tokenizer.json cannot run a generation task:
// the error names the directory and the flag that supplies a tokenizer,
// before any generation; a GSM8K file in another format names its line.
func TestEvalGenerationErrors(t *testing.T) {
	dir := evalModel(t)
	if err := os.Remove(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	gsm := evalWrite(t, "gsm8k.jsonl", []byte(`{"question": "q?", "answer": "1\n#### 1"}`+"\n"))
	code, _, errs := evalRun("eval", "--model", dir, "--task", "gsm8k="+gsm)
	if code != 1 || !strings.Contains(errs, "has no tokenizer.json: pass --tokenizer") {
		t.Errorf("no tokenizer: exit %d, stderr %q", code, errs)
	}
	bad := evalWrite(t, "bad.jsonl", []byte(`{"question": "q?", "answer": "1\n#### 1"}`+"\n"+`{"text": "a lambada line"}`+"\n"))
	code, _, errs = evalRun("eval", "--model", evalModel(t), "--task", "gsm8k="+bad)
	if code != 1 || !strings.Contains(errs, bad+`:2: want a JSON object {"question": "...", "answer": "... #### N"}`) {
		t.Errorf("wrong format: exit %d, stderr %q", code, errs)
	}
}
