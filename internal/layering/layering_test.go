package layering

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/autocompress/autocompress"

// allowed is every package of the module and the module packages it may
// import (its non-test imports), grouped by layer, lowest first. A new
// package or a new edge is added here on purpose, with the layer it
// belongs to; an edge upward (a lower layer importing a higher one) does
// not belong here at all.
var allowed = map[string][]string{
	// Leaves: shared helpers and facts with no project imports.
	"internal/output":            {},
	"internal/progress":          {"internal/human"},
	"internal/fastmath":          {},
	"internal/human":             {},
	"internal/conventions":       {},
	"internal/suggest":           {},
	"internal/parallel":          {},
	"internal/shareddata":        {},
	"internal/sandbox":           {},
	"internal/shareddata/sdtest": {"internal/shareddata"},
	"internal/browsertest":       {},
	"internal/layering":          {},
	"internal/gosource":          {}, // the lint tests' walk of the module; tests import it, the binary never
	"architecture":               {},
	"architecture/published":     {"architecture"},
	"hardware":                   {"internal/suggest"},
	"workload":                   {},
	"corpus":                     {},
	"report":                     {"internal/human"},
	"engine/blas/internal/avx2":  {},
	"engine/blas":                {"engine/blas/internal/avx2"},

	// Model files and text.
	"checkpoint":              {"internal/output"},
	"checkpoint/testutil":     {"checkpoint"},
	"tokenizer":               {"internal/output", "internal/progress"},
	"parent":                  {"checkpoint", "corpus", "internal/output"},
	"parent/internal/gentext": {"parent"},
	"modelref":                {"architecture", "architecture/published", "parent"},
	"dataset":                 {"architecture", "corpus", "parent", "tokenizer", "workload"},

	// Pricing a deployment.
	"estimate":             {"architecture", "hardware", "workload"},
	"estimate/groundtruth": {"architecture", "architecture/published", "estimate", "hardware", "workload"},
	"estimate/scenarios":   {"estimate", "estimate/groundtruth", "hardware", "internal/suggest", "modelref", "workload"},
	"export":               {"architecture", "checkpoint", "engine", "estimate"}, // engine: the native engine's own check of what it runs (Capabilities.Runs)

	// Running models.
	"engine":             {"architecture", "checkpoint", "engine/blas", "internal/fastmath", "internal/parallel", "internal/progress"},
	"servebench":         {"engine", "engine/blas", "internal/progress", "workload"},
	"estimate/nativecal": {"architecture", "checkpoint", "engine", "engine/blas", "estimate", "hardware", "internal/output", "internal/progress", "servebench", "workload"},
	"eval":               {"corpus", "engine", "engine/blas", "internal/progress", "internal/sandbox"},
	"importance":         {"architecture", "checkpoint", "dataset", "engine", "internal/output", "internal/progress"},
	"torchref":           {},
	"train":              {"architecture", "checkpoint", "corpus", "dataset", "engine", "internal/output", "internal/progress", "tokenizer"},

	// Compressing: pruning, the search, recovery.
	"prune":            {"architecture", "checkpoint", "export", "importance", "internal/progress", "prune/remotecode"},
	"prune/remotecode": {},
	"proxy":            {"engine", "engine/blas", "internal/parallel", "internal/progress", "prune"},
	"search":           {"architecture", "checkpoint", "engine", "estimate", "export", "hardware", "importance", "internal/human", "internal/progress", "proxy", "prune", "workload"},
	"distill":          {"architecture", "checkpoint", "dataset", "engine", "export", "internal/fastmath", "internal/output", "internal/parallel", "internal/progress", "parent", "tokenizer", "train"},
	"job":              {"architecture", "checkpoint", "dataset", "distill", "engine", "importance", "internal/output", "internal/progress", "torchref", "train"},
	"search/trained":   {"dataset", "distill", "engine", "internal/progress", "proxy", "prune", "search", "train"},

	// Glue: the pipeline, the commands.
	"pipeline": {"architecture", "checkpoint", "corpus", "dataset", "distill", "engine", "estimate", "eval", "export", "hardware", "importance", "internal/human", "internal/output", "job", "internal/progress", "modelref", "prune", "report", "search", "search/trained", "servebench", "tokenizer", "train", "workload"},
	"internal/cli": {"architecture", "checkpoint", "corpus", "dataset", "distill", "engine", "engine/blas", "estimate",
		"estimate/groundtruth", "estimate/nativecal", "estimate/scenarios", "eval", "export", "hardware", "importance",
		"internal/human", "internal/output", "internal/progress", "internal/shareddata", "job", "modelref", "parent", "pipeline", "prune", "search",
		"search/trained", "servebench", "tokenizer", "train", "workload"},
	"cmd/autocompress": {"internal/cli"},

	// Tools run by hand.
	"scripts/headtohead":   {"internal/output", "pipeline", "report"},
	"scripts/testsummary":  {},
	"scripts/readmetables": {"estimate", "internal/cli", "internal/output", "internal/shareddata", "search"},
}

// imports lists every package of the module with its module imports (non-test
// files of the default build), by path relative to the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := rel(f[0])
		if !ok {
			t.Fatalf("go list gave a package outside the module: %q", line)
		}
		got[pkg] = []string{}
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				got[pkg] = append(got[pkg], r)
			}
		}
	}
	if len(got) < 30 {
		t.Fatalf("go list gave %d packages:\n%s", len(got), out)
	}
	return got
}

// check compares the module's import graph got with the table may and
// returns every difference in words, and every edge the table allows and
// the module has.
func check(got, may map[string][]string) (problems, edges []string) {
	var pkgs []string
	for p := range got {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		allow, ok := may[p]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s is not in the layering table: add it, in its layer, with the packages it may import (%s)", p, strings.Join(got[p], ", ")))
			continue
		}
		in := map[string]bool{}
		for _, a := range allow {
			in[a] = true
		}
		has := map[string]bool{}
		for _, imp := range got[p] {
			has[imp] = true
			if !in[imp] {
				problems = append(problems, fmt.Sprintf("%s imports %s, an edge the layering table does not allow", p, imp))
			}
		}
		for _, a := range allow {
			if has[a] {
				edges = append(edges, p+" → "+a)
			} else {
				problems = append(problems, fmt.Sprintf("the layering table allows %s → %s, but %s no longer imports it: remove the edge from the table", p, a, p))
			}
		}
	}
	var gone []string
	for p := range may {
		if _, ok := got[p]; !ok {
			gone = append(gone, fmt.Sprintf("the layering table lists %s, which is not a package of the module: remove it", p))
		}
	}
	sort.Strings(gone)
	return append(problems, gone...), edges
}

// TestLayering: every package's module imports are among those the table
// allows, every package is in the table, and every allowed edge exists (a
// gone edge is removed from the table, so that it cannot come back
// unnoticed). The verbose log names each allowed edge.
func TestLayering(t *testing.T) {
	problems, edges := check(imports(t), allowed)
	for _, p := range problems {
		t.Error(p)
	}
	for _, e := range edges {
		t.Logf("allowed: %s", e)
	}
}

// TestCheck: check finds an edge the table does not allow, a package the
// table lacks, an allowed edge that is gone and a listed package that is
// not there, and passes a graph equal to its table.
func TestCheck(t *testing.T) {
	may := map[string][]string{"a": {}, "b": {"a"}, "c": {"a", "b"}}
	if p, e := check(map[string][]string{"a": {}, "b": {"a"}, "c": {"b", "a"}}, may); len(p) != 0 || len(e) != 3 {
		t.Errorf("the table's own graph: problems %q, edges %q", p, e)
	}
	p, _ := check(map[string][]string{"a": {"c"}, "b": {}, "d": {}}, may)
	want := []string{
		"a imports c, an edge the layering table does not allow",
		"the layering table allows b → a, but b no longer imports it: remove the edge from the table",
		"package d is not in the layering table: add it, in its layer, with the packages it may import ()",
		"the layering table lists c, which is not a package of the module: remove it",
	}
	if strings.Join(p, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(p, "\n"), strings.Join(want, "\n"))
	}
}

// TestLayeringForbidden names the edges the layering exists to keep out:
// each was once there, and each would make a lower layer depend on a
// higher one.
func TestLayeringForbidden(t *testing.T) {
	for _, e := range []struct{ from, to, why string }{
		{"modelref", "estimate/groundtruth", "the --model resolver reads the published shapes from architecture/published"},
		{"search", "distill", "the search receives its trained measurer (search/trained) from the caller"},
		{"search", "train", "the search receives its trained measurer (search/trained) from the caller"},
		{"report", "pipeline", "the report is a pure function of its data"},
	} {
		for _, a := range allowed[e.from] {
			if a == e.to {
				t.Errorf("the layering table allows %s → %s: %s", e.from, e.to, e.why)
			}
		}
	}
}
