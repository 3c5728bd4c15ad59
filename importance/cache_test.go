package importance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
)

// TestCached: the first call computes and saves; the same model and data
// reuse the file; other data, another model or force recompute.
func TestCached(t *testing.T) {
	m := model(t)
	// Cached keys on the directory's files only (HashModelDir).
	dir := t.TempDir()
	for name, body := range map[string]string{"config.json": "{}", "model.safetensors": "weights"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "s.safetensors")
	data := rows(4, 8, 3)
	o := Options{Batch: 2, NoSkipLoss: true}
	calls := 0
	o.Progress = func(progress.Event) { calls++ }
	run := func(rows [][]int32, force bool) (*Scores, bool) {
		t.Helper()
		s, reused, err := Cached(context.Background(), m, dir, rows, path, o, force)
		if err != nil {
			t.Fatal(err)
		}
		return s, reused
	}
	s, reused := run(data, false)
	want, _ := HashModelDir(dir)
	if reused || s.ModelHash != want || s.DataHash != HashRows(data) {
		t.Fatalf("first call: reused %v, hashes %q %q", reused, s.ModelHash, s.DataHash)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("not saved: %v", err)
	}
	n := calls
	if _, reused := run(data, false); !reused || calls != n {
		t.Errorf("same model and data: reused %v, %d more passes", reused, calls-n)
	}
	if _, reused := run(data, true); reused || calls == n {
		t.Error("force did not recompute")
	}
	if s, reused := run(data[:3], false); reused || s.Sequences != 3 {
		t.Errorf("other data: reused %v, %d sequences", reused, s.Sequences)
	}
	cfg := filepath.Join(dir, "config.json")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, ' '), 0o644)
	if _, reused := run(data[:3], false); reused {
		t.Error("another model's files: reused")
	}
	// A file that is not scores is the user's: kept without force.
	mine := filepath.Join(t.TempDir(), "mine.safetensors")
	os.WriteFile(mine, []byte("mine"), 0o644)
	var ee *output.ExistsError
	if _, _, err := Cached(context.Background(), m, dir, data, mine, o, false); !errors.As(err, &ee) {
		t.Errorf("over a file that is not scores: %v, want an ExistsError", err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "mine" {
		t.Errorf("the file was replaced: %q", b)
	}
	if _, _, err := Cached(context.Background(), m, dir, data, mine, o, true); err != nil {
		t.Errorf("force over a file that is not scores: %v", err)
	}
	if _, _, err := Cached(context.Background(), m, filepath.Join(dir, "none"), data, path, o, false); err == nil {
		t.Error("a missing model directory: no error")
	}
}
