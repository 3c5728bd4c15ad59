package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// commandDirs are the packages that speak in flags: the commands and the
// tools run by hand. Every other package is library and names its own
// settings; a command maps them to flags (internal/cli).
var commandDirs = []string{"internal/cli", "cmd", "scripts", "internal/browsertest"}

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
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			for _, c := range commandDirs {
				if rel == c {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for pos, s := range errorStrings(fset, f) {
			if m := flagName.FindString(s); m != "" {
				t.Errorf("%s: a library error names the flag %s: %q", fset.Position(pos), strings.TrimLeft(m, " \t\n(['\""), s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
