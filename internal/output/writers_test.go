package output_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCalls are the os functions that create or move files. Outside this
// package they may only write inside a directory that an output.Dir owns
// (its Path), and such a call says so with an "//output:inside" comment on
// its line; a file that is not an output (scratch space removed on return,
// an append-only log, a cache updated in place) says why with
// "//output:not-an-output: <reason>"; everything else goes through
// CreateFile, WriteFile or NewDir.
var writeCalls = map[string]bool{
	"Rename": true, "WriteFile": true, "Create": true, "CreateTemp": true, "MkdirTemp": true, "OpenFile": true,
}

// TestWritersUseTheHelper walks every non-test Go file of the module and
// fails on a stray os.Rename, os.WriteFile, os.Create, os.CreateTemp,
// os.MkdirTemp or os.OpenFile: a hand-written atomic write (with its own
// temporary name, mode and durability) or a direct write of an output path.
func TestWritersUseTheHelper(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	self, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") || p == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		osName := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"os"` {
				osName = "os"
				if im.Name != nil {
					osName = im.Name.Name
				}
			}
		}
		if osName == "" {
			return nil
		}
		marked := map[int]bool{}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//output:inside") || strings.HasPrefix(c.Text, "//output:not-an-output: ") && len(c.Text) > len("//output:not-an-output: ")+10 {
					marked[fset.Position(c.Pos()).Line] = true
				}
			}
		}
		rel, _ := filepath.Rel(root, p)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == osName && writeCalls[sel.Sel.Name] {
				line := fset.Position(sel.Pos()).Line
				if !marked[line] {
					t.Errorf("%s:%d: os.%s outside internal/output: write outputs with output.CreateFile, output.WriteFile or output.NewDir (or mark a write inside an output.Dir's Path with //output:inside, or a file that is no output with //output:not-an-output: <reason>)", rel, line, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked only %d Go files under %s: the walk is broken", files, root)
	}
}
