package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeasureBinary: the measure stage runs bench-serve with this binary
// whatever it is named (a renamed autocompress measured in process before,
// so its report had no peak memory); only go test binaries measure in
// process.
func TestMeasureBinary(t *testing.T) {
	for _, c := range []struct {
		path string
		test bool
	}{
		{"/usr/local/bin/autocompress", false},
		{"/tmp/ac-h2h", false},
		{`C:\tools\ac.exe`, false},
		{"/tmp/go-build1/b001/cli.test", true},
		{`C:\x\cli.test.exe`, true},
		{"/tmp/testdata", false},
	} {
		if got := isTestBinary(c.path); got != c.test {
			t.Errorf("isTestBinary(%q) = %v, want %v", c.path, got, c.test)
		}
	}
	self, err := measureBinary()
	if err != nil || self != "" {
		t.Errorf("under go test: measureBinary() = %q, %v; want in process", self, err)
	}
}

// TestRunDirRefusesForeignFolder (issue 17, class 9): run --dir over a
// folder that is not a run directory (here a checkpoint) is a usage error
// naming --dir, with --force too, and the folder gains nothing (it used to
// gain .lock and 01-importance/).
func TestRunDirRefusesForeignFolder(t *testing.T) {
	ckpt := t.TempDir()
	if err := os.WriteFile(filepath.Join(ckpt, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--force"}} {
		code, _, errs := evalRun(append([]string{"demo", "--dir", ckpt}, extra...)...)
		if code != 2 || !strings.Contains(errs, "--dir") || !strings.Contains(errs, ckpt) || !strings.Contains(errs, "not a run directory") {
			t.Errorf("demo --dir CHECKPOINT %v: exit %d (want 2 naming --dir): %s", extra, code, errs)
		}
		if ents, _ := os.ReadDir(ckpt); len(ents) != 1 {
			t.Errorf("the refused folder now holds %d entries", len(ents))
		}
	}
}

// TestRunInfeasibleBudgetBeforeImportance (class 9): a budget no child of
// the search space meets is refused before importance runs (it used to run
// importance for 12 s before search said no in 0.1 s), and leaves no run
// directory behind.
func TestRunInfeasibleBudgetBeforeImportance(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, _, errs := evalRun("demo", "--dir", dir, "--max-memory", "1MiB")
	if code != 1 || !strings.Contains(errs, "stage search") || !strings.Contains(errs, "memory") {
		t.Fatalf("an impossible memory budget: exit %d (want 1, naming the search and the budget): %s", code, errs)
	}
	if strings.Contains(errs, "importance] running") {
		t.Errorf("importance ran before the search refused the budget:\n%s", errs)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused run left %s (%v)", dir, err)
	}
}
