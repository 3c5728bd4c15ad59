package groundtruth

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// TestConsumerTables checks the embedded consumer-GPU tables: every row
// parses, is on a consumer GPU of the catalog and is priced, and every
// source has a per-source cell for each metric it publishes.
func TestConsumerTables(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no consumer-GPU rows")
	}
	sources := map[string]bool{}
	for _, r := range rows {
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
		if c := estimate.GPUClass(hw); c != "consumer" {
			t.Errorf("line %d: %s is a %s GPU, not a consumer one", r.Line, r.GPU, c)
		}
		sources[r.Source] = true
	}
	res, sum := ScoreIndependent(rows)
	if sum.Priced != len(rows) {
		for _, x := range res {
			if x.Skip != "" {
				t.Errorf("line %d not priced: %s", x.Row.Line, x.Skip)
			}
		}
	}
	for src := range sources {
		for _, m := range []Metric{Throughput, TTFT} {
			if _, ok := sum.Cell("all", src, m); !ok {
				t.Errorf("no %s cell for source %s", m, src)
			}
		}
	}
	md, err := os.ReadFile("testdata/consumer_serving.md")
	if err != nil {
		t.Fatal(err)
	}
	for src := range sources {
		if !strings.Contains(string(md), "`"+src+"`") {
			t.Errorf("source %s has no provenance in consumer_serving.md", src)
		}
	}
}

// consumerREADMETable is the README's table of held-out errors on consumer
// GPUs: one row per source and metric, as validate-estimator prints them.
func consumerREADMETable(sum IndependentSummary) string {
	var b strings.Builder
	b.WriteString("  | source | metric | n | median APE | p90 APE | bias |\n  |---|---|---|---|---|---|\n")
	for _, c := range sum.Cells {
		if c.Engine != "all" || c.Source == "all" {
			continue
		}
		fmt.Fprintf(&b, "  | `%s` | %s | %d | %.1f %% | %.1f %% | %+.1f %% |\n", c.Source, c.Metric, c.N, c.Median*100, c.P90*100, c.Bias*100)
	}
	return b.String()
}

// TestConsumerREADME checks that the errors the README states for consumer
// GPUs (between the consumer-gpus markers) are the ones the embedded
// tables give with the shipped coefficients.
func TestConsumerREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("README.md not found beside the module: %v", err)
	}
	const begin, end = "  <!-- consumer-gpus -->\n", "  <!-- /consumer-gpus -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q … %q block", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	got := s[i+len(begin) : j]
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	_, sum := ScoreIndependent(rows)
	if want := consumerREADMETable(sum); got != want {
		t.Errorf("README's consumer-GPU errors are stale; replace the block with:\n%s\ngot:\n%s", want, got)
	}
}
