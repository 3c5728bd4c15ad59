package estimate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/gosource"
)

// tableFiles hold the engine tables, the only code that names engines to
// tell them apart.
var tableFiles = map[string]bool{
	"estimate/engines.go": true, // the serving engines' facts
	"export/engines.go":   true, // what each engine loads
}

// datasetReaders translate public datasets, whose rows name the engine
// they were measured with; they may compare a row's engine (an llama.cpp
// row of Argonne's is one sequence, ...) but switch on none.
const datasetReaders = "estimate/groundtruth/"

// TestNoEngineSwitches walks every non-test Go file of the module and fails
// on code that tells engines apart by name outside the tables: a case
// clause, or an == / != comparison, on an engine constant
// (estimate.VLLM, ...) or an engine name or alias as a string ("vllm",
// "llama.cpp", "hf", ...). Such code is what made llama.cpp the silent
// default of every engine it did not name; a fact about an engine belongs
// in its entry (estimate.EngineSpec, export.Capabilities).
func TestNoEngineSwitches(t *testing.T) {
	names := map[string]bool{}
	for _, n := range estimate.Engines() {
		names[n] = true
		s, _ := estimate.Engine(n).Spec()
		for _, a := range s.Aliases {
			names[a] = true
		}
	}
	for _, n := range export.Engines() {
		names[n] = true
	}
	consts := engineConsts(t, "engines.go") // this package's table
	if len(consts) < len(estimate.Engines()) {
		t.Fatalf("found %d engine constants in estimate/engines.go, want at least %d", len(consts), len(estimate.Engines()))
	}
	for _, src := range gosource.Files(t) {
		rel, f, fset := src.Rel, src.AST, src.Fset
		if tableFiles[rel] {
			continue
		}
		estName := "" // how the file refers to package estimate
		if f.Name.Name == "estimate" && src.Dir == "estimate" {
			estName = "."
		}
		for _, im := range f.Imports {
			if im.Path.Value == `"github.com/autocompress/autocompress/estimate"` {
				estName = "estimate"
				if im.Name != nil {
					estName = im.Name.Name
				}
			}
		}
		// engine reports whether e names an engine, and how.
		engine := func(e ast.Expr) (string, bool) {
			switch x := e.(type) {
			case *ast.BasicLit:
				if x.Kind != token.STRING {
					return "", false
				}
				v, err := strconv.Unquote(x.Value)
				return x.Value, err == nil && names[strings.ToLower(v)]
			case *ast.Ident:
				return x.Name, estName == "." && consts[x.Name]
			case *ast.SelectorExpr:
				id, ok := x.X.(*ast.Ident)
				if !ok {
					return "", false
				}
				return id.Name + "." + x.Sel.Name, estName != "" && id.Name == estName && consts[x.Sel.Name]
			}
			return "", false
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CaseClause:
				for _, e := range x.List {
					if s, ok := engine(e); ok {
						t.Errorf("%s:%d: case %s switches on an engine's name: make it a fact of the engine's entry (estimate/engines.go, export/engines.go)", rel, fset.Position(e.Pos()).Line, s)
					}
				}
			case *ast.BinaryExpr:
				if (x.Op != token.EQL && x.Op != token.NEQ) || strings.HasPrefix(rel, datasetReaders) {
					return true
				}
				for _, e := range []ast.Expr{x.X, x.Y} {
					if s, ok := engine(e); ok {
						t.Errorf("%s:%d: %s %s tests an engine's name: make it a fact of the engine's entry (estimate/engines.go, export/engines.go)", rel, fset.Position(e.Pos()).Line, x.Op, s)
					}
				}
			}
			return true
		})
	}
}

// engineConsts returns the names of the constants of type Engine declared
// in the table file.
func engineConsts(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			v := sp.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Engine" {
				for _, n := range v.Names {
					out[n.Name] = true
				}
			}
		}
	}
	return out
}
