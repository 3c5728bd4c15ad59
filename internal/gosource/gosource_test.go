package gosource

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write creates each file of tree (slash path -> content) under dir.
func write(t *testing.T, dir string, tree map[string]string) {
	t.Helper()
	for rel, src := range tree {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWalk: Walk parses the non-test Go files and skips what the go
// command skips, with slash paths from the root and one shared FileSet
// whose positions name them.
func TestWalk(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"go.mod":                 "module example.com/m\n",
		"a.go":                   "package m\n",
		"a_test.go":              "package m\n",
		"notes.txt":              "not Go\n",
		"sub/b.go":               "package sub\n\n// B is one.\nconst B = 1\n",
		"sub/deep/c.go":          "package deep\n",
		"sub/testdata/t.go":      "package broken(\n",
		"vendor/v/v.go":          "package v\n",
		".hidden/h.go":           "package h\n",
		"_skip/s.go":             "package s\n",
		"nested/go.mod":          "module example.com/nested\n",
		"nested/n.go":            "package n\n",
		"sub/deep/c_gen_test.go": "package deep\n",
	})
	files, err := Walk(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Rel+" in "+f.Dir+" package "+f.AST.Name.Name)
		if f.Fset != files[0].Fset {
			t.Errorf("%s has a FileSet of its own", f.Rel)
		}
		if f.Path != filepath.Join(root, filepath.FromSlash(f.Rel)) {
			t.Errorf("%s: Path %s", f.Rel, f.Path)
		}
		if pos := f.Fset.Position(f.AST.Package); pos.Filename != f.Rel {
			t.Errorf("%s: positions name %q", f.Rel, pos.Filename)
		}
	}
	want := []string{"a.go in . package m", "sub/b.go in sub package sub", "sub/deep/c.go in sub/deep package deep"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("walked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(files) == 3 && len(files[1].AST.Comments) != 1 {
		t.Errorf("sub/b.go: %d comments, want its one (parsed with comments)", len(files[1].AST.Comments))
	}
}

// TestWalkParseError: a file that does not parse fails the walk, naming it.
func TestWalkParseError(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"go.mod": "module example.com/m\n", "x/bad.go": "package x\nfunc (\n"})
	if _, err := Walk(root); err == nil || !strings.Contains(err.Error(), "x/bad.go:") {
		t.Errorf("Walk of a broken file: %v, want an error naming x/bad.go", err)
	}
}

// TestModuleRoot: the root is found from a directory below it, and a
// directory with no go.mod above it is an error.
func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{"go.mod": "module example.com/m\n", "a/b/c.go": "package b\n"})
	got, err := ModuleRoot(filepath.Join(root, "a", "b"))
	if err != nil || got != root {
		t.Errorf("ModuleRoot(a/b) = %q, %v, want %q", got, err, root)
	}
	// This package's own module: the repository's go.mod two levels up.
	want, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ModuleRoot("."); err != nil || got != want {
		t.Errorf("ModuleRoot(.) = %q, %v, want %q", got, err, want)
	}
	outside := t.TempDir()
	for d := outside; filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			t.Skipf("%s holds a go.mod, above the temporary directory", d)
		}
	}
	if got, err := ModuleRoot(outside); err == nil {
		t.Errorf("ModuleRoot of a directory outside any module = %q, want an error", got)
	}
}

// TestFiles: the module's own walk finds this file and no test file.
func TestFiles(t *testing.T) {
	files := Files(t)
	seen := false
	for _, f := range files {
		if f.Rel == "internal/gosource/gosource.go" {
			seen = true
		}
		if strings.HasSuffix(f.Rel, "_test.go") {
			t.Errorf("walked the test file %s", f.Rel)
		}
	}
	if !seen {
		t.Errorf("the walk of %d files missed internal/gosource/gosource.go", len(files))
	}
}
