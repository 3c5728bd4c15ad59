package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/browsertest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func sample(t testing.TB) *Data {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sample.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sample(t)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./report -run Golden -update)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("Markdown differs from %s (go test ./report -update to accept):\n%s", golden, b.String())
	}
}

func TestHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	d := sample(t)
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, id := range []string{"chart-shape-ffn", "chart-shape-heads", "chart-pareto-0", "chart-memory", "chart-training"} {
		if !strings.Contains(html, `id="`+id+`"`) {
			t.Errorf("chart %s missing", id)
		}
	}
	if n := strings.Count(html, "<svg"); n != 5 {
		t.Errorf("%d inline SVGs, want 5", n)
	}
	// Nothing may be fetched at view time.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(html); m != "" {
		t.Errorf("the page references an outside resource: %s", m)
	}
	// The measured range over invocations is on the page, each number
	// marked so that CheckNumbers compares it with the JSON.
	for _, path := range []string{"budgets.1.measured", "budgets.1.measured_min", "budgets.1.measured_max", "budgets.1.measured_median"} {
		if !strings.Contains(html, `data-json="`+path+`"`) {
			t.Errorf("%s is not on the page", path)
		}
	}
	if !strings.Contains(html, "unstable on this machine") {
		t.Error("the TPOT row's invocations spread 30 %, but the page does not call it unstable")
	}
	browsertest.CheckNumbers(t, html, d, FormatNumber)
}

func TestBudgetFlags(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		b        Budget
		disagree bool
	}{
		{Budget{Estimated: f(10), Measured: f(10.9)}, false},
		{Budget{Estimated: f(10), Measured: f(12)}, true},
		{Budget{Estimated: f(10)}, false},
	} {
		if got := tc.b.Disagrees(Tolerance); got != tc.disagree {
			t.Errorf("%+v: Disagrees = %v", tc.b, got)
		}
	}
	for _, tc := range []struct {
		b        Budget
		unstable bool
	}{
		{Budget{Measured: f(16.3), Invocations: 3, MeasuredMin: f(12.1), MeasuredMax: f(16.3), MeasuredSpread: f(0.3)}, true},
		{Budget{Measured: f(16.3), Invocations: 3, MeasuredMin: f(15.9), MeasuredMax: f(16.3), MeasuredSpread: f(0.025)}, false},
		{Budget{Measured: f(16.3), Invocations: 1, MeasuredMin: f(16.3), MeasuredMax: f(16.3), MeasuredSpread: f(0)}, false},
		{Budget{Measured: f(16.3)}, false}, // a report from before invocations were repeated
	} {
		if got := tc.b.Unstable(Tolerance); got != tc.unstable {
			t.Errorf("%+v: Unstable = %v", tc.b, got)
		}
	}
	if !(Budget{Max: true, Limit: 5}).Met(5) || (Budget{Max: true, Limit: 5}).Met(5.1) || !(Budget{Limit: 5}).Met(6) {
		t.Error("Met")
	}
}

func TestEmptyDataRenders(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, &Data{Title: "empty"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No chart data") {
		t.Error("an empty report should say it has no charts")
	}
	b.Reset()
	if err := WriteMarkdown(&b, &Data{Title: "empty"}); err != nil {
		t.Fatal(err)
	}
}

func TestReadJSONUnknownField(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"title": "x", "budgts": []}`))
	if err == nil || !strings.Contains(err.Error(), "budgts") {
		t.Fatalf("err = %v, want one naming the unknown field", err)
	}
}
