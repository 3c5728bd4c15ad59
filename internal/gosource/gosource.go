// Package gosource gives the lint tests the module's non-test Go files,
// parsed: the tests that read the source (one progress type, options that
// validate, no engine or family switches, no flag names in library errors,
// one writer) walk the module through Files instead of each writing its
// own walk. It is imported only by _test files, so the binary never links
// it (cmd/autocompress's TestBinaryLinksNoTestCode).
package gosource

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// MinFiles is the fewest files Files accepts: fewer means the walk missed
// the module, and a lint that reads nothing passes whatever the code says.
const MinFiles = 50

// File is one parsed non-test Go file of the module.
type File struct {
	Path string         // the file's path on disk, absolute
	Rel  string         // its slash path from the module root: "estimate/engines.go"
	Dir  string         // its package's directory, a slash path from the module root: "estimate" ("." at the root)
	AST  *ast.File      // parsed with comments, without object resolution
	Fset *token.FileSet // shared by every File of one walk; positions name Rel
}

// Files returns every non-test Go file of the module that holds the test's
// working directory, parsed, in lexical order. It fails the test if the
// module root is not found, a file does not parse, or fewer than MinFiles
// files were found.
func Files(tb testing.TB) []File {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatalf("gosource: %v", err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		tb.Fatalf("gosource: %v", err)
	}
	files, err := Walk(root)
	if err != nil {
		tb.Fatalf("gosource: %v", err)
	}
	if len(files) < MinFiles {
		tb.Fatalf("gosource: walked only %d Go files under %s, want at least %d: the walk is broken", len(files), root, MinFiles)
	}
	return files
}

// ModuleRoot returns the nearest directory at or above dir that holds a
// go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("looking for the module root: %w", err)
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("no go.mod in %s or any directory above it", dir)
		}
		d = up
	}
}

// Walk parses every non-test Go file under the module root root, in
// lexical order, skipping what the go command skips: testdata and vendor
// directories, directories whose name starts with "." or "_", and nested
// modules (a directory with its own go.mod).
func Walk(root string) ([]File, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []File
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			if n := d.Name(); n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, File{Path: p, Rel: rel, Dir: path.Dir(rel), AST: f, Fset: fset})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the Go files under %s: %w", root, err)
	}
	return files, nil
}
