package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/eval"
)

// evalSuiteDir writes a small avg8 directory: ARC-Challenge, Winogrande
// and TruthfulQA files by their published names (the other tests' files
// are absent).
func evalSuiteDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"arc_challenge_test.jsonl": `{"id":"a","question":{"stem":"What falls?","choices":[{"text":"rain","label":"A"},{"text":"a man","label":"B"}]},"answerKey":"A"}` + "\n" +
			`{"id":"b","question":{"stem":"Who owns a fortune?","choices":[{"text":"a single man","label":"1"},{"text":"wife","label":"2"},{"text":"truth","label":"3"}]},"answerKey":"1"}` + "\n",
		"winogrande_dev.jsonl": `{"qID":"q","sentence":"The man wanted a wife because _ was single.","option1":"the man","option2":"the wife","answer":"1"}` + "\n",
		"truthfulqa_mc.json":   `[{"question":"Is it a truth?","mc1_targets":{"It is a truth.":1,"No.":0},"mc2_targets":{"It is a truth.":1,"It is.":1,"No.":0}}]`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEvalSuiteNative: --task avg8=DIR scores what this build and DIR
// allow, side by side, and names every test it could not score.
func TestEvalSuiteNative(t *testing.T) {
	a, b := evalModel(t), evalModel(t)
	dir := evalSuiteDir(t)
	code, out, errs := evalRun("eval", "--model", a, "--model", b, "--task", "avg8="+dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"avg8: the paper's eight tests", "arc_challenge", "winogrande", "truthfulqa_mc2", "unavailable: no mmlu in " + dir, "unavailable:", "average", "of the tests measured"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = evalRun("eval", "--model", a, "--model", b, "--task", "avg8="+dir, "--json")
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, errs)
	}
	var rep eval.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Suite == nil || len(rep.Suite.Rows) != 8 || len(rep.Suite.Models) != 2 || rep.Suite.Measured[0] != 3 || rep.Suite.Measured[1] != 3 {
		t.Fatalf("suite %+v", rep.Suite)
	}
	for _, r := range rep.Suite.Rows {
		measured := r.Scores[0] != nil
		if measured == (r.Unavailable != "") {
			t.Errorf("%s: scores %v, unavailable %q", r.Task, r.Scores, r.Unavailable)
		}
	}
}

// TestEvalEmitAndImport: --engine lm-eval --emit writes the harness's
// commands (not over an existing file without --force), and --import
// reads the harness's results back into the suite's table.
func TestEvalEmitAndImport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lm")
	code, out, errs := evalRun("eval", "--engine", "lm-eval", "--emit", dir, "--model", "/models/child")
	if code != 0 || !strings.Contains(out, "lm_eval.sh") {
		t.Fatalf("emit: exit %d\n%s%s", code, out, errs)
	}
	script := filepath.Join(dir, "lm_eval.sh")
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	want, err := eval.HarnessScript(eval.HarnessOptions{Suite: "avg8", Model: "/models/child", Output: filepath.Join(dir, "results")})
	if err != nil || string(b) != want {
		t.Errorf("lm_eval.sh is not eval.HarnessScript's (%v):\n%s", err, b)
	}
	if st, _ := os.Stat(script); st.Mode()&0o100 == 0 {
		t.Errorf("lm_eval.sh mode %v: not executable", st.Mode())
	}
	if code, _, errs = evalRun("eval", "--engine", "lm-eval", "--emit", dir, "--model", "/models/child"); code != 1 || !strings.Contains(errs, "--force") {
		t.Errorf("again without --force: exit %d %s", code, errs)
	}
	if code, _, errs = evalRun("eval", "--engine", "lm-eval", "--emit", dir, "--model", "m", "--endpoint", "http://h:8000/v1/completions", "--force"); code != 0 {
		t.Errorf("--force: exit %d %s", code, errs)
	}
	if b, _ := os.ReadFile(script); !strings.Contains(string(b), "local-completions") {
		t.Errorf("--endpoint: %s", b)
	}

	fix := filepath.Join("..", "..", "eval", "testdata", "lmeval")
	code, out, errs = evalRun("eval", "--import", "parent="+filepath.Join(fix, "child_default-shots.json"),
		"--import", "child="+filepath.Join(fix, "child_default-shots.json"), "--import", "child="+filepath.Join(fix, "child_mmlu-5shot.json"))
	if code != 0 {
		t.Fatalf("import: exit %d: %s", code, errs)
	}
	for _, w := range []string{"avg8:", "parent", "child", "0.3601 ± 0.0140", "0.3102 ± 0.0039", "average", "parent 7 of 8"} {
		if !strings.Contains(out, w) {
			t.Errorf("import output lacks %q:\n%s", w, out)
		}
	}
	bad := evalWrite(t, "results.json", []byte("{\n\"results\": [}\n"))
	if code, _, errs = evalRun("eval", "--import", bad); code != 1 || !strings.Contains(errs, "results.json:2:") {
		t.Errorf("broken results: exit %d %s", code, errs)
	}
}

// TestEvalSuiteUsage: wrong combinations are usage errors (exit 2) that
// say what is wanted.
func TestEvalSuiteUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--engine", "vllm", "--model", "m"}, "want native, lm-eval or"},
		{[]string{"eval", "--emit", "d", "--model", "m", "--task", "avg8=x"}, "--emit goes with --engine lm-eval"},
		{[]string{"eval", "--engine", "lm-eval", "--model", "m"}, "needs --emit DIR"},
		{[]string{"eval", "--engine", "lm-eval", "--emit", "d", "--model", "parent"}, "embedded parent"},
		{[]string{"eval", "--engine", "lm-eval", "--emit", "d", "--model", "m", "--task", "mmlu=x"}, "takes a suite: avg8"},
		{[]string{"eval", "--import", "r.json", "--task", "arc_easy=x"}, "takes a suite: avg8"},
		{[]string{"eval", "--model", "parent", "--task", "avg9=d"}, "suites: avg8"},
	} {
		code, _, errs := evalRun(tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}
