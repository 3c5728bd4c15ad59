package cli

import (
	"errors"
	"os"
	"path/filepath"
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
	if got, err := checkpointDir(tmp); err != nil || got != tmp {
		t.Fatalf("checkpointDir(%s) = %q, %v", tmp, got, err)
	}
	file := filepath.Join(tmp, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, bad := range []string{"", filepath.Join(tmp, "missing"), file} {
		_, err := checkpointDir(bad)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("checkpointDir(%q) = %v, want a usage error", bad, err)
		}
	}
}
