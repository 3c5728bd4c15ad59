package output_test

import (
	"go/ast"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/gosource"
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
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range gosource.Files(t) {
		if p := filepath.Dir(src.Path); p == self || strings.HasPrefix(p, self+string(filepath.Separator)) {
			continue // this package, and below it
		}
		rel, f, fset := src.Rel, src.AST, src.Fset
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
			continue
		}
		marked := map[int]bool{}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//output:inside") || strings.HasPrefix(c.Text, "//output:not-an-output: ") && len(c.Text) > len("//output:not-an-output: ")+10 {
					marked[fset.Position(c.Pos()).Line] = true
				}
			}
		}
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
	}
}
