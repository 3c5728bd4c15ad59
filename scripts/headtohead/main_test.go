package main

import (
	"strings"
	"testing"

	"github.com/autocompress/autocompress/report"
)

// TestMeasuredCell: the cell shows the conservative figure with the range
// over invocations, and a budget counts as met only when the conservative
// figure meets it (a median inside the budget is not enough).
func TestMeasuredCell(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tpot := report.Budget{Name: "tpot", Unit: "ms", Max: true, Limit: 2.2, Estimated: f(2.1),
		Measured: f(3.08), Invocations: 3, MeasuredMin: f(0.85), MeasuredMax: f(3.08), MeasuredMedian: f(2.0), MeasuredSpread: f(1.1)}
	mem := report.Budget{Name: "memory", Unit: "MiB", Max: true, Limit: 58, Estimated: f(44),
		Measured: f(43.7), Invocations: 3, MeasuredMin: f(43.5), MeasuredMax: f(43.7), MeasuredMedian: f(43.6), MeasuredSpread: f(0.005)}
	old := report.Budget{Name: "throughput", Unit: "tok/s", Limit: 1500, Estimated: f(1600), Measured: f(1683)}
	for _, tc := range []struct {
		b    report.Budget
		want string
	}{
		{tpot, "3.08 (0.85–3.08 over 3) (missed) unstable ⚑"},
		{mem, "43.7 (43.5–43.7 over 3)"},
		{old, "1683"},
	} {
		if got := measuredCell(tc.b); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.b.Name, got, tc.want)
		}
	}
	if allMet(&report.Data{Budgets: []report.Budget{tpot, mem}}) || !allMet(&report.Data{Budgets: []report.Budget{mem, old}}) {
		t.Error("allMet: want false with the TPOT whose worst invocation misses, true without it")
	}
	if allMet(&report.Data{Budgets: []report.Budget{{Name: "tpot", Max: true, Limit: 2, Estimated: f(1)}}}) {
		t.Error("allMet: an unmeasured budget counts as met")
	}
}

// TestConfigDeployment: a config's deployment keeps its workload, budgets
// and settings, takes the parent given and the tokens only when set, and a
// config without a parent is refused.
func TestConfigDeployment(t *testing.T) {
	c, err := configDeployment("../moe/pipeline.yaml", "/models/moe", false, 7)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "/models/moe" || c.Budgets.MaxParams != "1.6M" || c.Workload.Concurrency != 4 || c.Distill.Engine != "torch" || c.Distill.Tokens != 400000 {
		t.Errorf("config: model %q, budgets %+v, concurrency %d, distill %+v", c.Model, c.Budgets, c.Workload.Concurrency, c.Distill)
	}
	if c, err = configDeployment("../moe/pipeline.yaml", "/models/moe", true, 7); err != nil || c.Distill.Tokens != 7 {
		t.Errorf("tokens set: %d, %v; want 7", c.Distill.Tokens, err)
	}
	if c, err := configDeployment("../moe/latency.yaml", "/models/moe", false, 0); err != nil || c.Budgets.MaxTPOT != "0.8x" || c.Budgets.MaxParams != "" || c.Measure.Invocations != 3 {
		t.Errorf("latency.yaml: budgets %+v, measure %+v, %v; want TPOT ≤ 0.8x alone, 3 invocations", c.Budgets, c.Measure, err)
	}
	if _, err := configDeployment("../moe/pipeline.yaml", "", false, 0); err == nil || !strings.Contains(err.Error(), "-model") {
		t.Errorf("no parent: %v, want an error naming -model", err)
	}
}

// TestSelectDeployments: -only keeps the named deployments in their places
// (their run directories stay d1, d3), and a prefix that names none is an
// error listing them.
func TestSelectDeployments(t *testing.T) {
	got, err := selectDeployments(deployments, "latency, throughput")
	if err != nil || len(got) != 2 || got[0].n != 1 || got[1].n != 3 || got[1].name != "throughput: batch" {
		t.Fatalf("latency,throughput: %+v, %v", got, err)
	}
	if all, err := selectDeployments(deployments, ""); err != nil || len(all) != 3 {
		t.Errorf("no -only: %d deployments, %v", len(all), err)
	}
	if _, err := selectDeployments(deployments, "latency,speed"); err == nil || !strings.Contains(err.Error(), `"speed"`) || !strings.Contains(err.Error(), "memory: long context") {
		t.Errorf("unknown prefix: %v", err)
	}
}
