package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/eval"
)

// TestEvalSuiteSetting: eval.suite is checked before any stage: NAME=DIR
// with a known suite and an existing directory.
func TestEvalSuiteSetting(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ spec, want string }{
		{"avg8=" + dir, ""},
		{"avg8", "want NAME=DIR with NAME one of avg8"},
		{"avg9=" + dir, `unknown suite "avg9" (known: avg8)`},
		{"avg8=" + dir + "/absent", "not a directory"},
	} {
		err := evalSuiteError(tc.spec)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// TestSuiteTable: the report's suite rows carry every model's score, a
// dash where a test was not measured with the reason, and the models at
// chance.
func TestSuiteTable(t *testing.T) {
	rep := &eval.Report{Models: []eval.ModelReport{
		{Model: "parent", Tasks: []eval.TaskResult{{Task: "arc_challenge", Chance: 0.2559, Metrics: []eval.Metric{{Name: "acc_norm", Value: 0.30, Stderr: 0.013}}}}},
		{Model: "child", Tasks: []eval.TaskResult{{Task: "arc_challenge", Chance: 0.2559, Metrics: []eval.Metric{{Name: "acc_norm", Value: 0.26, Stderr: 0.0128}}}}},
	}}
	ss, err := rep.ScoreSuite("avg8", []eval.Unavailable{{Task: "ifeval", Reason: "scored on generated text"}})
	if err != nil {
		t.Fatal(err)
	}
	rep.Suite = ss
	tab := evalTable(rep).Suite
	if tab == nil || tab.Name != "avg8" || len(tab.Rows) != 8 || len(tab.Average) != 2 {
		t.Fatalf("%+v", tab)
	}
	for _, r := range tab.Rows {
		switch r.Task {
		case "arc_challenge":
			if r.Values[0] == nil || r.Values[0].Value != 0.30 || r.Values[1].Value != 0.26 || r.Note != "at chance: child" {
				t.Errorf("arc row %+v", r)
			}
		case "ifeval":
			if r.Values[0] != nil || r.Note != "unavailable: scored on generated text" {
				t.Errorf("ifeval row %+v", r)
			}
		}
	}
	if tab.Average[1].Value != 0.26 || tab.Measured[1] != 1 {
		t.Errorf("average %+v measured %v", tab.Average, tab.Measured)
	}
}

// TestEvalSuiteFilesInKey: the eval stage's key hashes the suite's files,
// not only the NAME=DIR setting, so a changed, added or removed file reruns
// it instead of reusing scores of other data.
func TestEvalSuiteFilesInKey(t *testing.T) {
	dir := t.TempDir()
	arc := filepath.Join(dir, "arc_challenge_test.jsonl")
	key := func() string {
		t.Helper()
		c := DemoConfig()
		c.Eval.Suite = "avg8=" + dir
		st, err := Stages(c, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Name == StageEval {
				k, _, err := stageKey(s, map[string]string{})
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
		}
		t.Fatal("no eval stage")
		return ""
	}
	empty := key()
	if err := os.WriteFile(arc, []byte(`{"id":"a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	added := key()
	if err := os.WriteFile(arc, []byte(`{"id":"b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := key()
	if err := os.Remove(arc); err != nil {
		t.Fatal(err)
	}
	if empty == added || added == changed {
		t.Errorf("eval key did not follow the suite's files: empty %s, added %s, changed %s", empty, added, changed)
	}
	if got := key(); got != empty {
		t.Errorf("eval key after removing the file %s, want the empty directory's %s", got, empty)
	}
	if got := eval.SuiteFiles("avg8", dir); len(got) != 0 {
		t.Errorf("SuiteFiles of an empty directory: %v", got)
	}
}
