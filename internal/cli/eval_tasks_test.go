package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
		{"unknown task", []string{"eval", "--model", dir, "--task", "arc=x"}, 2, `unknown task "arc" (known: ` + strings.Join(eval.TaskList(), ", ") + "; suites: avg8)"},
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
