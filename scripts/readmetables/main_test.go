package main

import (
	"context"
	"flag"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

var update = flag.Bool("update", false, "rewrite ../../README.md's generated tables")

// TestReadmeTablesMatchTheirCommands (issue 17, class 6): every generated
// table of the README is what the commands printed beside it produce now
// (the published-config search table was made with no margin while the CLI
// defaults to --margin auto, and printed other children than its commands).
// -update rewrites the README, as go run ./scripts/readmetables does.
func TestReadmeTablesMatchTheirCommands(t *testing.T) {
	configs := sdtest.Require(t, "configs")
	const readme = "../../README.md"
	old, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rewrite(context.Background(), old, Env{Configs: configs, Scratch: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := output.WriteFile(readme, got, true); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(got) != string(old) {
		t.Errorf("README.md's tables differ from what their commands produce (go run ./scripts/readmetables, or this test with -update, rewrites them):\n%s", Diff(old, got))
	}
}

// TestRewriteRegion: the region keeps its text up to the last command and
// gets the generator's table after it; the rest of the file is unchanged;
// a region without commands, without an end line or of an unknown name is
// an error.
func TestRewriteRegion(t *testing.T) {
	var seen []string
	generators["test"] = func(_ context.Context, _ Env, cmds []string) (string, error) {
		seen = cmds
		return "| a |\n|---|\n| " + strings.Join(cmds, " / ") + " |\n", nil
	}
	defer delete(generators, "test")
	in := "intro\n<!-- readmetables test begin: x -->\nCommands:\n\n    autocompress one\n    autocompress two\n\n| stale |\n<!-- readmetables test end -->\noutro\n"
	want := "intro\n<!-- readmetables test begin: x -->\nCommands:\n\n    autocompress one\n    autocompress two\n\n| a |\n|---|\n| autocompress one / autocompress two |\n\n<!-- readmetables test end -->\noutro\n"
	got, err := Rewrite(context.Background(), []byte(in), Env{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if len(seen) != 2 {
		t.Errorf("commands %q", seen)
	}
	again, err := Rewrite(context.Background(), got, Env{})
	if err != nil || string(again) != want {
		t.Errorf("a second rewrite changed the file: %v\n%s", err, again)
	}
	for _, bad := range []string{
		"no region\n",
		"<!-- readmetables test begin -->\n    autocompress one\n",
		"<!-- readmetables test begin -->\nno commands\n<!-- readmetables test end -->\n",
		"<!-- readmetables nosuch begin -->\n    autocompress one\n<!-- readmetables nosuch end -->\n",
	} {
		if _, err := Rewrite(context.Background(), []byte(bad), Env{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestWhyNone: a search's refusal becomes the table's cell: the budget,
// its limit and what the space reaches, without the hints.
func TestWhyNone(t *testing.T) {
	for _, c := range []struct{ stderr, want string }{
		{"autocompress search: no candidate meets the budgets: --max-e2e 3.00 s (less the 8.2 % margin for the estimator's error) is out of reach; the smallest value the space reaches is 5.29 s; to make it feasible: a lower precision\n",
			"infeasible: --max-e2e 3.00 s (less the 8.2 % margin for the estimator's error) out of reach (the smallest the space reaches: 5.29 s)"},
		{"autocompress search: no candidate fits: even the smallest shape of the space does not fit in b200's memory with vllm; to make it feasible: a larger GPU\n",
			"infeasible: no candidate fits: even the smallest shape of the space does not fit in b200's memory with vllm"},
		{"autocompress search: --context 131072 is past the model's 8192 positions\nrun 'autocompress search -h' for usage\n",
			"refused: --context 131072 is past the model's 8192 positions"},
	} {
		if got := whyNone(c.stderr); got != c.want {
			t.Errorf("whyNone(%q) = %q, want %q", c.stderr, got, c.want)
		}
	}
}

func TestSearchArgs(t *testing.T) {
	args, err := searchArgs("autocompress search --model $C/x--Y-8B.json --gpu b200 --engine vllm --context 4096 --out o", Env{Configs: "/c", Scratch: "/s"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(args, " "); got != "search --model /c/x--Y-8B.json --gpu b200 --engine vllm --context 4096 --out /s/3" {
		t.Errorf("args %q", got)
	}
	if p, d := describe(args); p != "Y-8B" || d != "b200, context 4096, vllm" {
		t.Errorf("describe: %q, %q", p, d)
	}
	for _, bad := range []string{"autocompress estimate --out o", "autocompress search --model m", "autocompress search --strategy minitron --out o"} {
		if _, err := searchArgs(bad, Env{}, 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestReadmeSupportedListsMatchTheCode: the README's "Supported" table
// names every GPU of the catalog and no other (what --gpu accepts), and
// every precision the estimator accepts.
func TestReadmeSupportedListsMatchTheCode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string) string {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "| "+name+" | ") {
				return strings.TrimSuffix(strings.TrimPrefix(line, "| "+name+" | "), " |")
			}
		}
		t.Fatalf("README.md has no Supported row %q", name)
		return ""
	}
	gpus, _, _ := strings.Cut(row("GPUs"), "; nodes")
	var listed []string
	for _, g := range strings.Split(gpus, ", ") {
		listed = append(listed, strings.TrimSpace(g))
	}
	sort.Strings(listed)
	if want := hardware.Default().Names(); !slices.Equal(listed, want) {
		t.Errorf("README's GPUs %v, the catalog's %v", listed, want)
	}
	words := strings.FieldsFunc(row("Precisions (estimate)"), func(r rune) bool { return r == ',' || r == ' ' || r == ';' || r == '(' || r == ')' })
	for _, p := range estimate.Precisions() {
		if !slices.Contains(words, p) {
			t.Errorf("README's precisions do not name %s", p)
		}
	}
}
