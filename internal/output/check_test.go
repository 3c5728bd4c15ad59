package output

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: Check refuses, before any work, an output that exists (without
// force) or could not be written (a parent that is a file, a directory
// without write permission), accepts one whose parent is still to be
// created, and leaves nothing behind.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ee *ExistsError
	if err := Check(file, false); !errors.As(err, &ee) {
		t.Errorf("existing file without force: %v", err)
	}
	if err := Check(file, true); err != nil {
		t.Errorf("existing file with force: %v", err)
	}
	if err := Check(filepath.Join(dir, "new", "deeper", "o.json"), false); err != nil {
		t.Errorf("parent to be created: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Check created the parent: %v", err)
	}
	if err := Check(filepath.Join(file, "sub", "o.json"), false); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("parent is a file: %v", err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 { // root writes anywhere
		if err := Check(filepath.Join(ro, "o.json"), false); err == nil {
			t.Error("read-only directory accepted")
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left behind: %v", ents)
	}
}
