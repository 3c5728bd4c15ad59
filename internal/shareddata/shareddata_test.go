package shareddata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The environment variable decides where the data is (so go test's cache,
// which keys on the variables a test reads, reruns when it changes), and
// scripts/test.sh sets it and the stamp for every run.
func TestDirFollowsTheEnvironment(t *testing.T) {
	t.Setenv("AUTOCOMPRESS_SHARED_DATA", "absent")
	if _, ok := Dir(); ok {
		t.Error(`AUTOCOMPRESS_SHARED_DATA=absent found a folder`)
	}
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "x.csv"), []byte("a\n"), 0o644)
	t.Setenv("AUTOCOMPRESS_SHARED_DATA", d)
	if got, ok := Dir(); !ok || got != d {
		t.Errorf("Dir() = %q, %v; want %q", got, ok, d)
	}
	if p, ok := Path("x.csv"); !ok || p != filepath.Join(d, "x.csv") {
		t.Errorf("Path(x.csv) = %q, %v", p, ok)
	}
	root, ok := ModuleRoot()
	if !ok {
		t.Fatal("no module root")
	}
	sh, err := os.ReadFile(filepath.Join(root, "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"export AUTOCOMPRESS_SHARED_DATA\n", "export AUTOCOMPRESS_SHARED_DATA_STAMP\n", `| "$summary"`} {
		if !strings.Contains(string(sh), v) {
			t.Errorf("scripts/test.sh lacks %q", v)
		}
	}
}
