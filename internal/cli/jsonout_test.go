package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneJSONWriter keeps --json output on one writer with named types:
// no command builds its own json.Encoder or encodes a map literal.
func TestOneJSONWriter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") || p == "jsonout.go" {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "json" && n.Sel.Name == "NewEncoder" {
					t.Errorf("%s: json.NewEncoder: write --json output with writeJSON (jsonout.go)", fset.Position(n.Pos()))
				}
			case *ast.CompositeLit:
				if m, ok := n.Type.(*ast.MapType); ok {
					if v, ok := m.Value.(*ast.InterfaceType); ok && len(v.Methods.List) == 0 || isIdent(m.Value, "any") {
						t.Errorf("%s: map[string]any literal: give --json output a named struct", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
