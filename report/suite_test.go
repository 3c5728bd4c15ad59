package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/browsertest"
)

// TestEvalSuiteOnPage: a suite's table is on the page and in the
// Markdown, every number marked with its JSON path and equal to it; a
// test not measured shows a dash and its reason, and the models at chance
// are named.
func TestEvalSuiteOnPage(t *testing.T) {
	d := sample(t)
	n := len(d.Eval.Models)
	vals := func(v, se float64) []*EvalValue {
		out := make([]*EvalValue, n)
		for i := range out {
			out[i] = &EvalValue{Value: v - 0.01*float64(i), StdErr: se}
		}
		return out
	}
	avg := make([]EvalValue, n)
	measured := make([]int, n)
	for i := range avg {
		avg[i], measured[i] = EvalValue{Value: 0.3, StdErr: 0.01}, 2
	}
	d.Eval.Suite = &EvalSuite{Name: "avg8", About: "the paper's eight tests", Measured: measured, Average: avg, Rows: []EvalSuiteRow{
		{Category: "reasoning", Task: "gsm8k", Metric: "exact_match,strict-match", Shots: 8, Values: make([]*EvalValue, n), Note: "unavailable: scored on generated text"},
		{Category: "reasoning", Task: "arc_challenge", Metric: "acc_norm", Values: vals(0.2637, 0.0129), Chance: 0.2559, Note: "at chance: child"},
		{Category: "knowledge", Task: "mmlu", Metric: "acc", Shots: 5, Values: vals(0.3363, 0.004), Chance: 0.25},
	}}
	page := html(t, d)
	for _, w := range []string{"<h3>avg8</h3>", "unavailable: scored on generated text", "at chance: child", `data-json="eval.suite.rows.1.values.0.value"`, `data-json="eval.suite.average.0.stderr"`, "not comparable with a full average"} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	browsertest.CheckNumbers(t, page, d, FormatNumber)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"### avg8", "| reasoning | gsm8k | exact_match,strict-match | 8 | — |", "| average | | | |", "at chance: child"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("the Markdown lacks %q:\n%s", w, md.String())
		}
	}
}
