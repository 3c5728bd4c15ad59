package cli

import (
	"encoding/json"
	"flag"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/eval"
)

// --data means input files, a list, in every command that takes it.
func TestDataIsAFileList(t *testing.T) {
	n := 0
	for name, c := range commands {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.Flags(fs)
		f := fs.Lookup("data")
		if f == nil {
			continue
		}
		n++
		if _, ok := f.Value.(*fileList); ok {
			continue
		}
		// Another list type (the pipeline's config flags) must mean the same:
		// repeatable and comma-separated.
		f.Value.Set("a.txt,b.txt")
		f.Value.Set("c.txt")
		if got := f.Value.String(); got != "a.txt,b.txt,c.txt" {
			t.Errorf("%s --data (%T) given \"a.txt,b.txt\" then \"c.txt\" holds %q, not the three files", name, f.Value, got)
		}
	}
	if n < 3 {
		t.Errorf("only %d commands take --data; expected eval, importance and train at least", n)
	}
}

// eval scores several --data files and pools them: the pooled NLL is the sum
// of the single-file NLLs.
func TestEvalPoolsFiles(t *testing.T) {
	dir := evalModel(t)
	a := evalWrite(t, "a.txt", []byte(evalText))
	b := evalWrite(t, "b.txt", []byte(strings.ToUpper(evalText)))
	one := func(args ...string) eval.ModelReport {
		t.Helper()
		code, out, errs := evalRun(append([]string{"eval", "--model", dir, "--seq-len", "32", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var r eval.ModelReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ra, rb := one("--data", a), one("--data", b)
	for _, args := range [][]string{{"--data", a + "," + b}, {"--data", a, "--data", b}, {"--data", a, b}} {
		p := one(args...)
		if p.Tokens != ra.Tokens+rb.Tokens || math.Abs(p.NLL-(ra.NLL+rb.NLL)) > 1e-9*p.NLL || len(p.Data) != 2 {
			t.Errorf("%v: pooled %d tokens, NLL %v, data %v; want %d, %v and both files", args, p.Tokens, p.NLL, p.Data, ra.Tokens+rb.Tokens, ra.NLL+rb.NLL)
		}
	}
}
