package progress

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/gosource"
)

// isProgressName matches a parameter or field that carries progress.
var isProgressName = regexp.MustCompile(`(?i)progress|^pf$`)

// TestOneProgressType: across the module, every function parameter and
// struct field that carries progress is a progress.Func, no package declares
// a progress type of its own or writes terminal codes (only Terminal draws), and every exported function that reports
// progress (a progress.Func parameter, or an options struct with one) takes
// a context.Context first (constructors, New…, excepted: the method that
// runs the work takes it). A new callback shape or a function that cannot be
// cancelled fails here.
func TestOneProgressType(t *testing.T) {
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	files := gosource.Files(t)
	fset := files[0].Fset
	pkgs := map[string][]*ast.File{} // directory -> files
	for _, f := range files {
		if filepath.Dir(f.Path) == self { // this package
			continue
		}
		pkgs[f.Dir] = append(pkgs[f.Dir], f.AST)
	}
	if len(pkgs) < 20 {
		t.Fatalf("found only %d packages in the module", len(pkgs))
	}
	isFunc := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && x.Name == "progress" && s.Sel.Name == "Func"
	}
	checked := 0
	for _, files := range pkgs {
		// Struct types of the package that carry progress.
		withProgress := map[string]bool{}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.TypeSpec:
					if isProgressName.MatchString(n.Name.Name) {
						t.Errorf("%s: type %s: a progress type of its own; report through progress.Func", fset.Position(n.Pos()), n.Name.Name)
					}
					if st, ok := n.Type.(*ast.StructType); ok {
						for _, fl := range st.Fields.List {
							for _, name := range fl.Names {
								if !isProgressName.MatchString(name.Name) {
									continue
								}
								checked++
								withProgress[n.Name.Name] = true
								if !isFunc(fl.Type) {
									t.Errorf("%s: field %s.%s is not a progress.Func", fset.Position(name.Pos()), n.Name.Name, name.Name)
								}
							}
						}
					}
				case *ast.BasicLit:
					// Only Terminal draws: no terminal codes elsewhere.
					if n.Kind == token.STRING {
						if v, err := strconv.Unquote(n.Value); err == nil && (strings.Contains(v, "\x1b[") || strings.HasPrefix(v, "\r") && len(v) > 1 && !strings.HasPrefix(v, "\r\n")) {
							t.Errorf("%s: %q draws on a terminal: report through progress.Func and let progress.Terminal draw", fset.Position(n.Pos()), v)
						}
					}
				case *ast.FuncType:
					for _, fl := range n.Params.List {
						for _, name := range fl.Names {
							if isProgressName.MatchString(name.Name) {
								checked++
								if !isFunc(fl.Type) {
									t.Errorf("%s: parameter %s is not a progress.Func", fset.Position(name.Pos()), name.Name)
								}
							}
						}
					}
				}
				return true
			})
		}
		// Exported functions that report progress take a context first.
		for _, f := range files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				// A constructor (New…) keeps the options for the method
				// that runs the work, which takes the context.
				if !ok || !fd.Name.IsExported() || strings.HasPrefix(fd.Name.Name, "New") {
					continue
				}
				reports := false
				for _, fl := range fd.Type.Params.List {
					typ := fl.Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok && withProgress[id.Name] || isFunc(fl.Type) {
						reports = true
					}
				}
				if !reports {
					continue
				}
				ps := fd.Type.Params.List
				first := ""
				if len(ps) > 0 {
					if s, ok := ps[0].Type.(*ast.SelectorExpr); ok {
						if x, ok := s.X.(*ast.Ident); ok {
							first = x.Name + "." + s.Sel.Name
						}
					}
				}
				if first != "context.Context" {
					t.Errorf("%s: %s reports progress but does not take a context.Context first", fset.Position(fd.Pos()), fd.Name.Name)
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked only %d progress parameters and fields: the test no longer finds them", checked)
	}
}
