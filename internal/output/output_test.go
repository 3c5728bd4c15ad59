package output_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/autocompress/autocompress/internal/output"
)

// withUmask runs f under the given umask (not in parallel: the umask is per process).
func withUmask(t *testing.T, mask int, f func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// entries lists dir, to check that nothing temporary is left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestModesHonourUmask(t *testing.T) {
	for _, tc := range []struct {
		umask          int
		file, dir, sub os.FileMode
	}{
		{0o022, 0o644, 0o755, 0o755},
		{0o002, 0o664, 0o775, 0o775},
		{0o077, 0o600, 0o700, 0o700},
	} {
		withUmask(t, tc.umask, func() {
			root := t.TempDir()
			f := filepath.Join(root, "a.json")
			if err := output.WriteFile(f, []byte("{}\n"), false); err != nil {
				t.Fatal(err)
			}
			if got := perm(t, f); got != tc.file {
				t.Errorf("umask %#o: file mode %#o, want %#o", tc.umask, got, tc.file)
			}
			d, err := output.NewDir(filepath.Join(root, "out"), false)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(d.Path(), "sub"), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := d.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := perm(t, d.Dest()); got != tc.dir {
				t.Errorf("umask %#o: directory mode %#o, want %#o", tc.umask, got, tc.dir)
			}
		})
	}
}

// A file that replaces another keeps its permissions, whatever the umask
// (calibrate rewriting the committed estimate/coefficients.json).
func TestReplaceKeepsMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o664, 0o600, 0o755} {
		withUmask(t, 0o077, func() {
			p := filepath.Join(t.TempDir(), "coefficients.json")
			if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
			if err := output.WriteFile(p, []byte("new"), true); err != nil {
				t.Fatal(err)
			}
			if got := perm(t, p); got != mode {
				t.Errorf("mode after replace %#o, want %#o", got, mode)
			}
			if b, _ := os.ReadFile(p); string(b) != "new" {
				t.Errorf("content %q", b)
			}
		})
	}
}

func TestExistingNeedsForce(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "f")
	os.WriteFile(f, []byte("mine"), 0o644)
	var ee *output.ExistsError
	if err := output.WriteFile(f, []byte("x"), false); !errors.As(err, &ee) || ee.Path != f || !strings.Contains(err.Error(), "already exists") || strings.Contains(err.Error(), "--") {
		t.Fatalf("WriteFile over an existing file: %v", err)
	}
	if err := output.Free(f, false); !errors.As(err, &ee) || ee.Path != f {
		t.Fatalf("Free of an existing file: %v", err)
	}
	if err := output.Free(f, true); err != nil {
		t.Fatalf("Free with force: %v", err)
	}
	if err := output.Free(filepath.Join(root, "none", "x"), false); err != nil {
		t.Fatalf("Free of a missing path: %v", err)
	}
	d := filepath.Join(root, "d")
	os.Mkdir(d, 0o755)
	os.WriteFile(filepath.Join(d, "unrelated.txt"), []byte("keep"), 0o644)
	if _, err := output.NewDir(d, false); !errors.As(err, &ee) {
		t.Fatalf("NewDir over an existing directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "unrelated.txt")); string(b) != "keep" {
		t.Fatal("existing directory touched")
	}
	// A destination that appears while the output is built is not clobbered.
	g := filepath.Join(root, "g")
	w, err := output.CreateFile(g, false)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(g, []byte("theirs"), 0o644)
	if err := w.Commit(); !errors.As(err, &ee) {
		t.Fatalf("Commit over a file created meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(g); string(b) != "theirs" {
		t.Fatal("file created meanwhile was replaced")
	}
	if got := entries(t, root); strings.Join(got, ",") != "d,f,g" {
		t.Errorf("left behind: %v", got)
	}
}

// Concurrent writers of one path use distinct temporary names: each commit is
// whole, and nothing temporary remains.
func TestUniqueTemporaryNames(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "plan.json")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	ws := make([]*output.File, 8)
	for i := range ws {
		w, err := output.CreateFile(p, true)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	names := map[string]bool{}
	for _, w := range ws {
		if names[w.Name()] {
			t.Fatalf("temporary name %s reused", w.Name())
		}
		names[w.Name()] = true
	}
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.Write([]byte(strings.Repeat(string(rune('a'+i)), 1000))); err != nil {
				errs[i] = err
				return
			}
			errs[i] = w.Commit()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	b, _ := os.ReadFile(p)
	if len(b) != 1000 || strings.Count(string(b), string(b[:1])) != 1000 {
		t.Errorf("mixed content: %.40q", b)
	}
	if got := entries(t, root); len(got) != 1 {
		t.Errorf("left behind: %v", got)
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	root := t.TempDir()
	w, err := output.CreateFile(filepath.Join(root, "f"), false)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("partial"))
	w.Abort()
	w.Abort()
	if err := w.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	d, err := output.NewDir(filepath.Join(root, "d"), false)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path(), "x"), []byte("partial"), 0o644)
	d.Abort()
	if err := d.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if got := entries(t, root); len(got) != 0 {
		t.Errorf("left behind: %v", got)
	}
}

func TestForceReplacesDirectory(t *testing.T) {
	root := t.TempDir()
	dest := filepath.Join(root, "model")
	os.Mkdir(dest, 0o755)
	os.WriteFile(filepath.Join(dest, "old.txt"), []byte("old"), 0o644)
	d, err := output.NewDir(dest, true)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path(), "new.txt"), []byte("new"), 0o644)
	if _, err := os.Stat(filepath.Join(dest, "old.txt")); err != nil {
		t.Fatal("destination replaced before Commit")
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dest); strings.Join(got, ",") != "new.txt" {
		t.Errorf("after replace: %v", got)
	}
	if got := entries(t, root); strings.Join(got, ",") != "model" {
		t.Errorf("left behind: %v", got)
	}
}
