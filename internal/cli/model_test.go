package cli

import (
	"errors"
	"github.com/autocompress/autocompress/modelref"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckpointDir(t *testing.T) {
	d, err := checkpointDir(ParentModel)
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d, "config.json")); err != nil {
		t.Fatalf("parent dir %s lacks config.json: %v", d, err)
	}
	tmp := t.TempDir()
	os.WriteFile(filepath.Join(tmp, "config.json"), []byte(trainConfig), 0o644)
	if got, err := checkpointDir(tmp); err != nil || got != tmp {
		t.Fatalf("checkpointDir(%s) = %q, %v", tmp, got, err)
	}
	file := filepath.Join(tmp, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, bad := range []string{"", filepath.Join(tmp, "missing"), file, t.TempDir(), "meta-llama/Llama-2-7b-hf"} {
		_, err := checkpointDir(bad)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("checkpointDir(%q) = %v, want a usage error", bad, err)
		}
	}
}

// --model parent works in every command that describes a model, also from
// the repository root where ./parent is the Go package; inspect --model list
// lists exactly what estimate accepts.
func TestModelParentAndList(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, args := range [][]string{
		{"inspect", "--model", "parent"},
		{"estimate", "--model", "parent", "--gpu", "h100", "--engine", "vllm", "--isl", "128", "--osl", "32", "--concurrency", "1"},
	} {
		code, out, errs := evalRun(args...)
		if code != 0 || !strings.Contains(out, "parent") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := evalRun("inspect", "--model", "list")
	if code != 0 {
		t.Fatalf("inspect --model list: exit %d: %s", code, errs)
	}
	listed := strings.Fields(out)
	if !slices.Equal(listed, modelref.Names()) {
		t.Errorf("inspect --model list = %v, want modelref.Names() %v", listed, modelref.Names())
	}
	for _, n := range listed {
		code, _, errs := evalRun("estimate", "--model", n, "--gpu", "h200", "--engine", "vllm", "--isl", "128", "--osl", "32", "--concurrency", "1", "--analytic")
		if code == 2 {
			t.Errorf("estimate refuses listed model %s: %s", n, errs)
		}
	}
}
