package eval

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", p, got, want)
	}
}

// TestHarnessScriptGolden: the emitted harness commands, for vLLM inside
// the harness and for a served endpoint.
func TestHarnessScriptGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		o    HarnessOptions
	}{
		{"lmeval/vllm.sh", HarnessOptions{Suite: "avg8", Model: "/models/child", Output: "out/lm-eval"}},
		{"lmeval/endpoint.sh", HarnessOptions{Suite: "avg8", Model: "child", Endpoint: "http://127.0.0.1:8000/v1/completions", Tokenizer: "/models/child dir", Output: "out", Limit: 50}},
	} {
		s, err := HarnessScript(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, tc.file, s)
	}
	var ue *UnknownTaskError
	if _, err := HarnessScript(HarnessOptions{Suite: "avg9", Model: "m", Output: "o"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "avg8") {
		t.Errorf("unknown suite: %v, want an *UnknownTaskError naming avg8", err)
	}
	for _, o := range []HarnessOptions{
		{Suite: "avg8", Output: "o"},
		{Suite: "avg8", Model: "m", Output: "o", Limit: -1},
		{Suite: "avg8", Model: "m", Output: "o", Endpoint: "127.0.0.1:8000"},
	} {
		if _, err := HarnessScript(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestHarnessScriptShots: every test runs once, with --num_fewshot
// exactly where the harness's default differs from ours.
func TestHarnessScriptShots(t *testing.T) {
	s, _ := HarnessScript(HarnessOptions{Suite: "avg8", Model: "m", Output: "o"})
	runs := strings.Split(s, "lm_eval --model")[1:]
	seen := map[string]int{}
	for _, r := range runs {
		shots := -1
		if i := strings.Index(r, "--num_fewshot "); i >= 0 {
			shots = int(r[i+len("--num_fewshot ")] - '0')
		}
		i := strings.Index(r, "--tasks ")
		tasks := strings.Fields(r[i+len("--tasks "):])[0]
		for _, task := range strings.Split(tasks, ",") {
			seen[task]++
			st := suiteTestByHarness(task)
			eff := shots
			if shots < 0 {
				eff = harnessDefaultShots[task]
			}
			if st == nil || eff != st.Shots {
				t.Errorf("%s runs %d-shot, want %+v", task, eff, st)
			}
		}
	}
	for _, st := range Suites["avg8"].Tests {
		if seen[st.Harness] != 1 {
			t.Errorf("%s runs %d times", st.Harness, seen[st.Harness])
		}
	}
}

// TestImportHarness reads results files in the harness's own layout
// (testdata/lmeval: a vLLM run of the avg8 suite at its default shots,
// and MMLU 5-shot; the layout is lm_eval/evaluator.py's results_dict)
// into the suite table.
func TestImportHarness(t *testing.T) {
	rep, err := ImportHarness([]string{"testdata/lmeval/child_default-shots.json", "testdata/lmeval/child_mmlu-5shot.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Models) != 1 || rep.Models[0].Model != "/models/child" {
		t.Fatalf("models %+v", rep.Models)
	}
	ss, err := rep.ScoreSuite("avg8", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]float64{
		"gsm8k": {0.062168309325246395, 0.006651035644531674}, "arc_challenge": {0.36006825938566556, 0.014027516814585188},
		"winogrande": {0.6006314127861089, 0.013764933546717614}, "humaneval": {0.16463414634146342, 0.02906420790698508},
		"mbpp": {0.262, 0.019684688820194713}, "mmlu": {0.31021222048140436, 0.0038800912537838063},
		"truthfulqa_mc2": {0.3771593357217336, 0.013970212871006294}, "ifeval": {0.2310536044362292, 0.018138201544524484},
	}
	var sum, ss2 float64
	for _, r := range ss.Rows {
		w := want[r.Task]
		m := r.Scores[0]
		if m == nil || m.Value != w[0] || m.Stderr != w[1] {
			t.Errorf("%s: %+v, want %v", r.Task, m, w)
			continue
		}
		sum += w[0]
		ss2 += w[1] * w[1]
	}
	if ss.Measured[0] != 8 || math.Abs(ss.Average[0].Value-sum/8) > 1e-15 || math.Abs(ss.Average[0].Stderr-math.Sqrt(ss2)/8) > 1e-15 {
		t.Errorf("average %+v of %d", ss.Average[0], ss.Measured)
	}
	// MMLU's subjects sit under its categories, not beside the tasks run.
	var mmlu *TaskResult
	for i, tr := range rep.Models[0].Tasks {
		if strings.HasPrefix(tr.Task, "mmlu_") {
			t.Errorf("subtask %s at the top level", tr.Task)
		}
		if tr.Task == "mmlu" {
			mmlu = &rep.Models[0].Tasks[i]
		}
	}
	if mmlu == nil || len(mmlu.Subtasks) != 2 || len(mmlu.Subtasks[1].Subtasks) != 2 || mmlu.Items != 509 {
		t.Errorf("mmlu %+v", mmlu)
	}
	// IFEval's instruction-level "N/A" standard error reads as none.
	for _, tr := range rep.Models[0].Tasks {
		if tr.Task == "ifeval" {
			if m, ok := tr.Metric("inst_level_strict_acc"); !ok || m.Value != 0.3585131894484412 || m.Stderr != 0 {
				t.Errorf("ifeval inst_level_strict_acc %+v", m)
			}
		}
		if tr.Task == "gsm8k" {
			if _, ok := tr.Metric("exact_match,flexible-extract"); !ok {
				t.Errorf("gsm8k metrics %+v", tr.Metrics)
			}
		}
	}
}

// TestImportSideBySide: labels name the models, files of one label merge,
// and a test one model lacks is a gap in its column, not in the other's.
func TestImportSideBySide(t *testing.T) {
	rep, err := ImportHarness([]string{"parent=testdata/lmeval/child_default-shots.json",
		"child=testdata/lmeval/child_default-shots.json", "child=testdata/lmeval/child_mmlu-5shot.json"})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rep.ScoreSuite("avg8", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ss.Models, ",") != "parent,child" {
		t.Fatalf("models %v", ss.Models)
	}
	for _, r := range ss.Rows {
		if r.Task == "mmlu" && (r.Scores[0] != nil || r.Scores[1] == nil) {
			t.Errorf("mmlu scores %v", r.Scores)
		}
	}
	var b strings.Builder
	if err := ss.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "lmeval/avg8_imported.txt", b.String())
}

// TestImportErrors: what is wrong and where.
func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ body, want string }{
		{"{\n  \"results\": {\n    \"x\": {\"acc,none\": 0.5,}\n  }\n}", ":3: want lm-evaluation-harness's results file"},
		{`{"versions": {}}`, `no "results"`},
		{`{"results": {"arc_easy": {"acc,none": "high"}}}`, `results.arc_easy["acc,none"] = "high": want a number`},
		{`[1, 2]`, "want lm-evaluation-harness's results file"},
	} {
		p := filepath.Join(dir, "r.json")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ImportHarness([]string{p})
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a *FormatError with %q", tc.body, err, tc.want)
		}
	}
	if _, err := ImportHarness([]string{filepath.Join(dir, "absent.json")}); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzImportHarness(f *testing.F) {
	b, _ := os.ReadFile("testdata/lmeval/child_mmlu-5shot.json")
	f.Add(string(b))
	f.Add(`{"results": {"a": {"acc,none": 1, "acc_stderr,none": "N/A"}}, "group_subtasks": {"a": ["a"]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		hr, err := parseHarness("f", []byte(s))
		if err != nil {
			return
		}
		if _, err := harnessTasks("f", hr); err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatal(err)
			}
		}
	})
}

// TestLoadSuite: on the shared data, avg8 loads the log-likelihood tests
// and names the others unavailable with the reason, in the suite's order.
func TestLoadSuite(t *testing.T) {
	dir := filepath.Dir(sdtest.Require(t, "eval/arc_challenge_test.jsonl"))
	tasks, un, err := LoadSuite("avg8", dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range tasks {
		got = append(got, tk.Name)
	}
	var missing []string
	for _, u := range un {
		missing = append(missing, u.Task)
		if u.Reason == "" {
			t.Errorf("%s: no reason", u.Task)
		}
	}
	// The tests this build scores depend on which task kinds are
	// registered (generation-scored ones come with the generation kind).
	for _, st := range Suites["avg8"].Tests {
		_, known := TaskKinds[st.Task]
		if known != contains(got, st.Task) || known == contains(missing, st.Task) {
			t.Errorf("%s: loaded %v, unavailable %v, registered %v", st.Task, got, missing, known)
		}
	}
	if len(got)+len(missing) != 8 {
		t.Errorf("%d loaded + %d unavailable, want 8", len(got), len(missing))
	}
	var ue *UnknownTaskError
	if _, _, err := LoadSuite("avg9", dir); !errors.As(err, &ue) {
		t.Errorf("unknown suite: %v", err)
	}
}

// TestScoreSuiteChance: a score within two standard errors of chance is
// marked, unavailable tests say why, and the average counts only what was
// measured.
func TestScoreSuiteChance(t *testing.T) {
	rep := &Report{Models: []ModelReport{
		{Model: "parent", Tasks: []TaskResult{{Task: "arc_challenge", Items: 1172, Chance: 0.2559, Metrics: []Metric{{Name: "acc_norm", Value: 0.26, Stderr: 0.0128}}},
			{Task: "winogrande", Items: 1267, Chance: 0.5, Metrics: []Metric{{Name: "acc", Value: 0.56, Stderr: 0.0139}}}}},
		{Model: "child", Tasks: []TaskResult{{Task: "arc_challenge", Items: 1172, Chance: 0.2559, Metrics: []Metric{{Name: "acc_norm", Value: 0.25, Stderr: 0.0126}}},
			{Task: "winogrande", Items: 1267, Chance: 0.5, Metrics: []Metric{{Name: "acc", Value: 0.51, Stderr: 0.0140}}}}},
	}}
	ss, err := rep.ScoreSuite("avg8", []Unavailable{{Task: "gsm8k", Reason: "scored on generated text; the generation kind is not in this build"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ss.Rows {
		switch r.Task {
		case "arc_challenge":
			if !r.AtChance[0] || !r.AtChance[1] {
				t.Errorf("arc at chance %v", r.AtChance)
			}
		case "winogrande":
			if r.AtChance[0] || !r.AtChance[1] {
				t.Errorf("winogrande at chance %v", r.AtChance)
			}
		case "gsm8k":
			if !strings.Contains(r.Unavailable, "generation") {
				t.Errorf("gsm8k %q", r.Unavailable)
			}
		case "mmlu":
			if r.Unavailable != "not measured" {
				t.Errorf("mmlu %q", r.Unavailable)
			}
		}
	}
	if ss.Measured[0] != 2 || math.Abs(ss.Average[0].Value-0.41) > 1e-12 {
		t.Errorf("average %+v of %d", ss.Average, ss.Measured)
	}
	var b strings.Builder
	if err := ss.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "avg8_chance.txt", b.String())
}
