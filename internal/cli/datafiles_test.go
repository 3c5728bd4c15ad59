package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/eval"
)

// --data means input files, a list, in every command that takes it.
func TestDataIsAFileList(t *testing.T) {
	n := 0
	for name, c := range commands {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.Flags(fs)
		f := fs.Lookup("data")
		if f == nil {
			continue
		}
		n++
		if _, ok := f.Value.(*fileList); ok {
			continue
		}
		// Another list type (the pipeline's config flags) must mean the same:
		// repeatable and comma-separated.
		f.Value.Set("a.txt,b.txt")
		f.Value.Set("c.txt")
		if got := f.Value.String(); got != "a.txt,b.txt,c.txt" {
			t.Errorf("%s --data (%T) given \"a.txt,b.txt\" then \"c.txt\" holds %q, not the three files", name, f.Value, got)
		}
	}
	if n < 3 {
		t.Errorf("only %d commands take --data; expected eval, importance and train at least", n)
	}
}

// eval scores several --data files and pools them: the pooled NLL is the sum
// of the single-file NLLs.
func TestEvalPoolsFiles(t *testing.T) {
	dir := evalModel(t)
	a := evalWrite(t, "a.txt", []byte(evalText))
	b := evalWrite(t, "b.txt", []byte(strings.ToUpper(evalText)))
	one := func(args ...string) eval.ModelReport {
		t.Helper()
		code, out, errs := evalRun(append([]string{"eval", "--model", dir, "--seq-len", "32", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var r eval.ModelReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ra, rb := one("--data", a), one("--data", b)
	for _, args := range [][]string{{"--data", a + "," + b}, {"--data", a, "--data", b}, {"--data", a, b}} {
		p := one(args...)
		if p.Tokens != ra.Tokens+rb.Tokens || math.Abs(p.NLL-(ra.NLL+rb.NLL)) > 1e-9*p.NLL || len(p.Data) != 2 {
			t.Errorf("%v: pooled %d tokens, NLL %v, data %v; want %d, %v and both files", args, p.Tokens, p.NLL, p.Data, ra.Tokens+rb.Tokens, ra.NLL+rb.NLL)
		}
	}
}

// TestSearchAndImportanceReadTheSameData: search's measured-proxy rows and
// importance's calibration rows come from one reader (dataset.Rows): the
// same --data forms (parent:SPLIT, token ids, text), rows of --seq-len+1
// ids, and --seq-len past the model's positions a usage error in both.
func TestSearchAndImportanceReadTheSameData(t *testing.T) {
	dir, m, err := searchModel(ParentModel)
	if err != nil {
		t.Fatal(err)
	}
	ids := evalWrite(t, "a.ids", []byte("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34\n"))
	rows, err := searchRows(context.Background(), dir, m, []string{ids, "parent:validation"}, false, false, "", 32, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5", len(rows))
	}
	for i, r := range rows {
		if len(r) != 33 {
			t.Fatalf("row %d holds %d ids, want --seq-len+1 = 33", i, len(r))
		}
	}
	if rows[0][0] != 1 || rows[0][32] != 33 || rows[1][0] != 33 || rows[1][1] != 34 || rows[1][2] != int32(m.EOS[0]) {
		t.Errorf("the id file is not first, separated by end-of-text: %v %v", rows[0], rows[1][:3])
	}
	if _, err := searchRows(context.Background(), dir, m, []string{"parent:validation"}, false, false, "", m.MaxPositions+1, 1); !errors.As(err, new(*UsageError)) {
		t.Errorf("--seq-len past the positions: %v, want a usage error", err)
	}
	if _, err := searchRows(context.Background(), dir, m, []string{"parent:dev"}, false, false, "", 32, 1); !errors.As(err, new(*UsageError)) {
		t.Errorf("unknown split: %v, want a usage error", err)
	}
	out := filepath.Join(t.TempDir(), "s.safetensors")
	code, _, stderr := evalRun("importance", "--model", ParentModel, "--out", out, "--data", "parent:dev")
	if code != 2 || !strings.Contains(stderr, "unknown split") {
		t.Errorf("importance --data parent:dev: exit %d: %s", code, stderr)
	}
	code, _, stderr = evalRun("importance", "--model", ParentModel, "--out", out, "--data", "parent:validation", "--seq-len", fmt.Sprint(m.MaxPositions+1))
	if code != 2 || !strings.Contains(stderr, "max_position_embeddings") {
		t.Errorf("importance past the positions: exit %d: %s", code, stderr)
	}
}

// TestRunUntilUnknownIsUsage: demo (and run) --until with no such stage is a usage
// error (pipeline.UntilError) before anything is created.
func TestRunUntilUnknownIsUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := evalRun("demo", "--dir", dir, "--until", "polish")
	if code != 2 || !strings.Contains(stderr, `--until "polish": not a stage`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the run directory was created: %v", err)
	}
}
