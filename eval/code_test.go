package eval

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/sandbox"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := sandbox.New("", sandbox.Limits{}); err != nil {
		var np *sandbox.NoPythonError
		var ue *sandbox.UnsupportedError
		if errors.As(err, &np) || errors.As(err, &ue) {
			t.Skipf("skipping: %v", err)
		}
		t.Fatal(err)
	}
}

// Every HumanEval canonical solution passes its tests in the sandbox, and
// every bare prompt (a function that is only a docstring) fails them. The
// 328 programs take about 20 s on two loaded cores, so -short runs them
// all too.
func TestHumanEvalCanonicalSolutionsPass(t *testing.T) {
	requirePython(t)
	p := sdtest.Require(t, "eval/humaneval.jsonl.gz")
	ts, err := LoadTask("humaneval", p)
	if err != nil {
		t.Fatal(err)
	}
	task := ts[0]
	if len(task.Items) != 164 {
		t.Fatalf("%d problems, want 164", len(task.Items))
	}
	items := task.Items
	var progs []string
	for _, it := range items {
		pr := it.Ref.(HumanEvalProblem)
		progs = append(progs, pr.Program(pr.CanonicalSolution), pr.Program(""))
	}
	pass, res, err := RunPrograms(context.Background(), progs)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		id := it.Ref.(HumanEvalProblem).TaskID
		if !pass[2*i] {
			t.Errorf("%s: the canonical solution fails (%s)\n%s", id, res[2*i].Reason, res[2*i].Stderr)
		}
		if pass[2*i+1] {
			t.Errorf("%s: the bare prompt passes", id)
		}
	}
}

// mbppKnownFailures are the reference solutions that fail their own tests,
// with why: none. All 974 of the HF-pinned mbpp.jsonl pass (problems 367
// and 927 only with their test_setup_code).
var mbppKnownFailures = map[int]string{}

// MBPP's reference code passes its own tests (test_list, after
// test_setup_code), except the problems listed in mbppKnownFailures, and no
// tests pass without code. All 974 take about 100 s on two loaded cores:
// -short runs problems 1-40 and the two with setup code.
func TestMBPPReferenceCodePasses(t *testing.T) {
	requirePython(t)
	p := sdtest.Require(t, "eval/mbpp.jsonl")
	ps, err := openMaybeGzip(p, ReadMBPP)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 974 {
		t.Fatalf("%d problems, want 974", len(ps))
	}
	ts, err := LoadTask("mbpp", p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ts[0].Items); n != 500 {
		t.Errorf("%d test problems, want 500", n)
	}
	if testing.Short() {
		// The test split's first problems, the few-shot ones and the two
		// with setup code.
		var sub []MBPPProblem
		for _, pr := range ps {
			if pr.TaskID <= 40 || pr.TestSetupCode != "" {
				sub = append(sub, pr)
			}
		}
		ps = sub
		t.Logf("-short: %d problems (task_id 1-40 and those with setup code)", len(ps))
	}
	var progs []string
	for _, pr := range ps {
		progs = append(progs, pr.Program(pr.Code), pr.Program(""))
	}
	pass, res, err := RunPrograms(context.Background(), progs)
	if err != nil {
		t.Fatal(err)
	}
	var failed []int
	for i, pr := range ps {
		if !pass[2*i] {
			failed = append(failed, pr.TaskID)
			if _, known := mbppKnownFailures[pr.TaskID]; !known {
				t.Errorf("task %d: the reference code fails its tests (%s)\n%s", pr.TaskID, res[2*i].Reason, res[2*i].Stderr)
			}
		}
		if pass[2*i+1] {
			t.Errorf("task %d: the tests pass without any code", pr.TaskID)
		}
	}
	sort.Ints(failed)
	t.Logf("%d of %d reference solutions pass; failing: %v", len(ps)-len(failed), len(ps), failed)
}

// The MBPP prompt is the harness's: three shots (problems 2-4) each ending
// "[DONE]", then the problem ending "[BEGIN]".
func TestMBPPPrompt(t *testing.T) {
	p := sdtest.Require(t, "eval/mbpp.jsonl")
	ts, err := LoadTask("mbpp", p)
	if err != nil {
		t.Fatal(err)
	}
	it := ts[0].Items[0]
	pr := it.Ref.(MBPPProblem)
	if pr.TaskID != 11 {
		t.Errorf("first test problem %d, want 11", pr.TaskID)
	}
	want := "You are an expert Python programmer, and here is your task: Write a function to find the similar elements from the given two tuple lists. Your code should pass these tests:\n\n" +
		"assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)\nassert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)\nassert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)\n[BEGIN]\n" +
		"def similar_elements(test_tup1, test_tup2):\r\n  res = tuple(set(test_tup1) & set(test_tup2))\r\n  return (res) \n[DONE]\n\nYou are an expert Python programmer, and here is your task: Write a python function to identify non-prime numbers."
	if !strings.HasPrefix(it.Context, want) {
		t.Errorf("prompt starts\n%q\nwant\n%q", it.Context[:min(len(it.Context), len(want)+20)], want)
	}
	if strings.Count(it.Context, "[DONE]") != 3 || !strings.HasSuffix(it.Context, "\n[BEGIN]") || !strings.Contains(it.Context, pr.Text) {
		t.Errorf("prompt: %q", it.Context)
	}
}

func TestCodeFormatErrors(t *testing.T) {
	he := `{"task_id": "HumanEval/0", "prompt": "def f():\n", "canonical_solution": "    return 1\n", "test": "def check(candidate):\n    assert candidate() == 1\n", "entry_point": "f"}`
	mb := func(id int) string {
		return `{"text": "Write f.", "code": "def f(): return 1", "task_id": ` + itoa(id) + `, "test_setup_code": "", "test_list": ["assert f() == 1"], "challenge_test_list": []}`
	}
	for _, tc := range []struct {
		parse func(string, *strings.Reader) error
		in    string
		want  string
	}{
		{humanEvalP, he, ""},
		{humanEvalP, "\n" + strings.Replace(he, `"entry_point": "f"`, `"entry_point": "f()"`, 1), `f:2: want a JSON object {"task_id", "prompt", "canonical_solution", "test", "entry_point"}: entry_point "f()" is not a Python function name`},
		{humanEvalP, strings.Replace(he, "def check(", "def other(", 1), "f:1: want a JSON object"},
		{humanEvalP, `[1, 2]`, "f:1: want a JSON object"},
		{humanEvalP, "", "f: no problems"},
		{mbppP, mb(2) + "\n" + mb(3) + "\n" + mb(4) + "\n" + mb(11), ""},
		{mbppP, mb(2) + "\n" + mb(2), "f:2: task_id 2 again (first on line 1)"},
		{mbppP, mb(11), "f: no problem with task_id 2: the three-shot prompt uses problems 2, 3 and 4"},
		{mbppP, mb(2) + "\n" + mb(3) + "\n" + mb(4), "f: no test problems (task_id 11–510)"},
		{mbppP, `{"task_id": 5, "text": "t", "test_list": []}`, "f:1: want a JSON object {\"task_id\": N, \"text\": ..., \"code\": ..., \"test_list\": [...], ...}: text and at least one test are required"},
		{mbppP, `{"task_id": "5"}`, "f:1: want a JSON object"},
	} {
		err := tc.parse("f", strings.NewReader(tc.in))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%.40q: %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func humanEvalP(n string, r *strings.Reader) error { _, err := ParseHumanEval(n, r); return err }
func mbppP(n string, r *strings.Reader) error      { _, err := ParseMBPP(n, r); return err }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func FuzzParseHumanEval(f *testing.F) {
	f.Add(`{"task_id": "HumanEval/0", "prompt": "def f():\n", "test": "def check(c):\n    pass\n", "entry_point": "f"}`)
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseHumanEval("f", strings.NewReader(s))
		if err != nil {
			return
		}
		for i, it := range tk.Items {
			p, ok := it.Ref.(HumanEvalProblem)
			if !ok || it.Context != p.Prompt || !pyIdent.MatchString(p.EntryPoint) {
				t.Fatalf("item %d: %+v", i, it)
			}
		}
	})
}

func FuzzParseMBPP(f *testing.F) {
	rec := func(id string) string {
		return `{"text": "Write f.", "code": "def f(): return 1", "task_id": ` + id + `, "test_list": ["assert f() == 1"]}`
	}
	f.Add(rec("2") + "\n" + rec("3") + "\n" + rec("4") + "\n" + rec("11") + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseMBPP("f", strings.NewReader(s))
		if err != nil {
			return
		}
		for i, it := range tk.Items {
			p, ok := it.Ref.(MBPPProblem)
			if !ok || p.TaskID < mbppTestFrom || p.TaskID > mbppTestTo || !strings.HasSuffix(it.Context, "[BEGIN]") {
				t.Fatalf("item %d: %+v", i, it)
			}
		}
	})
}
