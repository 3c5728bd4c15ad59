package architecture_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/internal/gosource"
)

// familyNames are what a family switch tests: the registered classes and
// model types, and the names of the class constants (architecture.Llama, ...).
type familyNames struct {
	values map[string]bool // "LlamaForCausalLM", "llama", ...
	consts map[string]bool // "Llama", "DeciLM", ...
}

func builtinFamilyNames(t *testing.T) familyNames {
	t.Helper()
	n := familyNames{values: map[string]bool{}, consts: map[string]bool{}}
	for _, f := range architecture.Families() {
		n.values[f.Arch] = true
		n.values[f.ModelType] = true
	}
	for _, c := range []string{"Llama", "Mistral", "Qwen2", "Qwen3", "Qwen3MoE", "Mixtral", "NemotronH", "DeciLM", "GptOss"} {
		n.consts[c] = true
	}
	return n
}

// familySwitches lists, as "line N: what", every switch on a model's
// Arch or ModelType and every case or ==/!= comparison against a class
// name, a model_type or a class constant in f (inside package architecture
// the constants are bare identifiers).
func familySwitches(fset *token.FileSet, f *ast.File, names familyNames) []string {
	var out []string
	pkg := f.Name.Name
	named := func(e ast.Expr) (string, bool) {
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(x.Value)
			return s, err == nil && names.values[s]
		case *ast.Ident:
			return x.Name, pkg == "architecture" && names.consts[x.Name]
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "architecture" && names.consts[x.Sel.Name] {
				return "architecture." + x.Sel.Name, true
			}
		}
		return "", false
	}
	familyField := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		return ok && (s.Sel.Name == "Arch" || s.Sel.Name == "ModelType")
	}
	report := func(p token.Pos, format string, a ...any) {
		pos := fset.Position(p)
		out = append(out, fmt.Sprintf("line %d: ", pos.Line)+fmt.Sprintf(format, a...))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SwitchStmt:
			if x.Tag != nil && familyField(x.Tag) {
				report(x.Pos(), "switch on %s", exprString(x.Tag))
			}
		case *ast.CaseClause:
			for _, e := range x.List {
				if s, ok := named(e); ok {
					report(e.Pos(), "case %s", s)
				}
			}
		case *ast.BinaryExpr:
			if x.Op != token.EQL && x.Op != token.NEQ {
				break
			}
			for _, e := range []ast.Expr{x.X, x.Y} {
				if s, ok := named(e); ok {
					report(x.Pos(), "comparison with %s", s)
				}
			}
		}
		return true
	})
	return out
}

func exprString(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		return exprString(s.X) + "." + s.Sel.Name
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "expression"
}

// TestNoFamilySwitchOutsideFamilyFiles: what differs between model families
// is written only in architecture/family_*.go; no other source file of the
// module switches on a model's class or model_type or compares it with a
// family's name, so adding a family never means editing them.
func TestNoFamilySwitchOutsideFamilyFiles(t *testing.T) {
	names := builtinFamilyNames(t)
	checked := 0
	for _, f := range gosource.Files(t) {
		if f.Dir == "architecture" && strings.HasPrefix(path.Base(f.Rel), "family_") {
			continue // the family files are where families differ
		}
		checked++
		for _, s := range familySwitches(f.Fset, f.AST, names) {
			t.Errorf("%s: %s: family-specific code belongs in architecture/family_*.go (a Family field)", f.Rel, s)
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d source files of the module", checked)
	}
}

// TestFamilySwitchDetector: the lint above finds each form it forbids and
// passes what it allows.
func TestFamilySwitchDetector(t *testing.T) {
	names := builtinFamilyNames(t)
	cases := []struct {
		src  string
		want int
	}{
		{`package p; func f(m *M) { switch m.Arch { case "x": } }`, 1},
		{`package p; func f(m *M) bool { return m.ModelType == "nemotron-nas" }`, 1},
		{`package p; func f(m *M) bool { return m.Arch != architecture.Llama }`, 1},
		{`package p; func f(s string) { switch s { case "MixtralForCausalLM", "qwen3": } }`, 2},
		{`package architecture; func f(m *Model) bool { return m.Arch == NemotronH }`, 1},
		{`package p; func f(m *M) bool { return m.Arch == "" || m.Family().Hybrid }`, 0},
		{`package p; var x = M{Arch: architecture.Llama, ModelType: "llama"}`, 0},
		{`package p; func f(m *M) bool { return Llama == 1 }`, 0}, // not the architecture constant outside package architecture
	}
	for _, tc := range cases {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := familySwitches(fset, f, names); len(got) != tc.want {
			t.Errorf("%s: found %q, want %d findings", tc.src, got, tc.want)
		}
	}
}

// TestFamiliesComplete: every registered family has every part Register
// requires and a class constant the lint knows, and looks up by class and
// by model_type.
func TestFamiliesComplete(t *testing.T) {
	names := builtinFamilyNames(t)
	fs := architecture.Families()
	if len(fs) != len(names.consts) {
		t.Errorf("%d families registered, %d class constants known to the lint: add the new constant to builtinFamilyNames", len(fs), len(names.consts))
	}
	for _, f := range fs {
		if f.Read == nil || f.Write == nil || f.Tensors == nil || f.LayerPrefix == "" || f.EpsKey == "" {
			t.Errorf("%s: incomplete family %+v", f.Arch, f)
		}
		if g, ok := architecture.Lookup(f.Arch); !ok || g.ModelType != f.ModelType {
			t.Errorf("Lookup(%s) = %v, %v", f.Arch, g.Arch, ok)
		}
		if g, ok := architecture.LookupModelType(f.ModelType); !ok || g.Arch != f.Arch {
			t.Errorf("LookupModelType(%s) = %v, %v", f.ModelType, g.Arch, ok)
		}
		if !f.Engine.Runs && f.Engine.Reason == "" {
			t.Errorf("%s: the native engine does not run it but no reason is given", f.Arch)
		}
	}
	if err := architecture.Register(fs[0]); err == nil {
		t.Error("registering a family twice was accepted")
	}
	if err := architecture.Register(architecture.Family{Arch: "HalfForCausalLM", ModelType: "half"}); err == nil || !strings.Contains(err.Error(), "Read") {
		t.Errorf("a family without Read, Write and Tensors: %v", err)
	}
}
