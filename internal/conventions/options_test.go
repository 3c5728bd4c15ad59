package conventions

import (
	"go/ast"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/gosource"
)

// exempt are the options structs without a Validate, each with the reason.
var exempt = map[string]string{
	"pipeline.Options":           "its one checkable field, Until, can only be checked against the stages: Run does (*UntilError)",
	"architecture.ConfigOptions": "its one checkable field, Format, is checked by Model.Config (a *FormatError); architecture/write.go is the model families' file",
	"testutil.Options":           "a test fixture generator (checkpoint/testutil), not library options",
}

// isOptions matches the names of options structs.
var isOptions = regexp.MustCompile(`(Options|Config|Opts)$`)

// TestEveryOptionsStructValidates lists every exported options struct of the
// module (a struct type named …Options or …Config) and checks each has a
// Validate method, or is exempt with a reason; and that no Validate (nor an
// EnsureDefaults) names a command-line flag: the library names its options,
// the CLI maps them to flags.
func TestEveryOptionsStructValidates(t *testing.T) {
	files := gosource.Files(t)
	fset := files[0].Fset
	type pkgInfo struct {
		structs map[string]token.Pos
		methods map[string]map[string]*ast.FuncDecl // receiver type -> method -> decl
	}
	pkgs := map[string]*pkgInfo{}
	for _, file := range files {
		f := file.AST
		if f.Name.Name == "main" {
			continue
		}
		p := pkgs[f.Name.Name+"@"+file.Dir]
		if p == nil {
			p = &pkgInfo{structs: map[string]token.Pos{}, methods: map[string]map[string]*ast.FuncDecl{}}
			pkgs[f.Name.Name+"@"+file.Dir] = p
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() || !isOptions.MatchString(ts.Name.Name) {
						continue
					}
					if _, ok := ts.Type.(*ast.StructType); ok {
						p.structs[ts.Name.Name] = ts.Pos()
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				id, ok := typ.(*ast.Ident)
				if !ok {
					continue
				}
				if p.methods[id.Name] == nil {
					p.methods[id.Name] = map[string]*ast.FuncDecl{}
				}
				p.methods[id.Name][d.Name.Name] = d
			}
		}
	}
	var found []string
	flagLit := regexp.MustCompile(`--[a-z]`)
	for key, p := range pkgs {
		pkg := key[:strings.Index(key, "@")]
		for name, pos := range p.structs {
			full := pkg + "." + name
			found = append(found, full)
			v := p.methods[name]["Validate"]
			if v == nil {
				if _, ok := exempt[full]; !ok {
					t.Errorf("%s: %s has no Validate method (pebble's habit: EnsureDefaults and Validate on every options struct)", fset.Position(pos), full)
				}
				continue
			}
			if why, ok := exempt[full]; ok {
				t.Errorf("%s has a Validate now: remove its exemption (%s)", full, why)
			}
			for _, m := range []string{"Validate", "EnsureDefaults"} {
				d := p.methods[name][m]
				if d == nil {
					continue
				}
				ast.Inspect(d, func(n ast.Node) bool {
					if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if s, err := strconv.Unquote(lit.Value); err == nil && flagLit.MatchString(s) {
							t.Errorf("%s: %s.%s names a command-line flag in %q: name the option", fset.Position(lit.Pos()), full, m, s)
						}
					}
					return true
				})
			}
		}
	}
	sort.Strings(found)
	if len(found) < 20 {
		t.Fatalf("found only %d options structs: %v", len(found), found)
	}
	for name := range exempt {
		if sort.SearchStrings(found, name) == len(found) || found[sort.SearchStrings(found, name)] != name {
			t.Errorf("exempt %s is not an options struct any more: remove it", name)
		}
	}
	t.Logf("%d options structs: %s", len(found), strings.Join(found, ", "))
}
