package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/gosource"
)

// commandDirs are the packages that speak in flags: the commands and the
// tools run by hand. Every other package is library and names its own
// settings; a command maps them to flags (internal/cli).
var commandDirs = []string{"internal/cli", "cmd", "scripts", "internal/browsertest"}

// inCommandDir reports whether the package directory dir (a slash path
// from the module root) is one of commandDirs or below one.
func inCommandDir(dir string) bool {
	for _, c := range commandDirs {
		if dir == c || strings.HasPrefix(dir, c+"/") {
			return true
		}
	}
	return false
}

// flagName matches a long flag as our commands spell them, --name, or as
// a format builds one, --%s.
var flagName = regexp.MustCompile(`(^|[\s(\["'])--([a-z][a-z0-9-]*|%[sqv])`)

// errorStrings returns, for the Go file src, every string literal that
// makes an error's text: the format or text of errors.New and fmt.Errorf,
// and every literal inside an Error() string method, with its position.
func errorStrings(fset *token.FileSet, f *ast.File) map[token.Pos]string {
	out := map[token.Pos]string{}
	lits := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
				if s, err := strconv.Unquote(l.Value); err == nil {
					out[l.Pos()] = s
				}
			}
			return true
		})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv != nil && n.Name.Name == "Error" && n.Type.Params.NumFields() == 0 && n.Type.Results.NumFields() == 1 {
				if id, ok := n.Type.Results.List[0].Type.(*ast.Ident); ok && id.Name == "string" && n.Body != nil {
					lits(n.Body)
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "errors" && sel.Sel.Name == "New" || x.Name == "fmt" && sel.Sel.Name == "Errorf") {
					for _, a := range n.Args {
						lits(a)
					}
				}
			}
		}
		return true
	})
	return out
}

// TestLibraryErrorsNameNoFlags: no library package's error text names one
// of our flags (--model, --seq-len, …). A library error says what was wrong
// in the library's terms (a budget's name, a setting, a field); the
// command that has a flag for it rewrites the message (internal/cli).
func TestLibraryErrorsNameNoFlags(t *testing.T) {
	files := 0
	for _, f := range gosource.Files(t) {
		if inCommandDir(f.Dir) {
			continue
		}
		files++
		for pos, s := range errorStrings(f.Fset, f.AST) {
			if m := flagName.FindString(s); m != "" {
				t.Errorf("%s: a library error names the flag %s: %q", f.Fset.Position(pos), strings.TrimLeft(m, " \t\n(['\""), s)
			}
		}
	}
	if files < 100 {
		t.Fatalf("read %d library files, want the module's (at least 100)", files)
	}
}

// TestErrorStringsFindsFlags: the scan sees flags in errors.New,
// fmt.Errorf and Error methods, and not in other strings.
func TestErrorStringsFindsFlags(t *testing.T) {
	src := `package p
import ("errors"; "fmt")
type E struct{}
func (E) Error() string { return "pass --force to replace it" }
var a = errors.New("give --model")
var b = fmt.Errorf("x %s", "--seq-len")
var d = fmt.Errorf("--%s exceeds", "max-ttft")
var c = "--not-an-error"
func (E) String() string { return "--nor-this" }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, s := range errorStrings(fset, f) {
		if m := flagName.FindString(s); m != "" {
			found = append(found, strings.TrimSpace(m))
		}
	}
	if len(found) != 4 {
		t.Errorf("found %q, want --force, --model, --seq-len and --%%s", found)
	}
}
