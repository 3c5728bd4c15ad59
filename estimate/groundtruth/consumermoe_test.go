package groundtruth

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// TestLlamaCPPMoETables checks the embedded llama.cpp MoE tables: every
// row parses, is on a consumer GPU of the catalog, is priced, and every
// source has provenance in llamacpp_moe.md and a cell per test group it
// publishes.
func TestLlamaCPPMoETables(t *testing.T) {
	rows, err := LlamaCPPMoETables()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no llama.cpp MoE rows")
	}
	groups := map[string]map[string]bool{}
	for i := range rows {
		r := &rows[i]
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
		if c := estimate.GPUClass(hw); c != "consumer" {
			t.Errorf("line %d: %s is a %s GPU, not a consumer one", r.Line, r.GPU, c)
		}
		if groups[r.Source] == nil {
			groups[r.Source] = map[string]bool{}
		}
		groups[r.Source][MoETest(r)] = true
	}
	res, cells, err := ScoreLlamaCPPMoE(rows, estimate.DefaultCoeffs())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range res {
		if !(x.Predicted > 0) {
			t.Errorf("line %d: predicted %g tok/s", x.Row.Line, x.Predicted)
		}
	}
	md, err := os.ReadFile("testdata/llamacpp_moe.md")
	if err != nil {
		t.Fatal(err)
	}
	for src, tests := range groups {
		if !strings.Contains(string(md), "`"+src+"`") {
			t.Errorf("source %s has no provenance in llamacpp_moe.md", src)
		}
		for test := range tests {
			if _, ok := MoECellFor(cells, src, test); !ok {
				t.Errorf("no %s cell for source %s", test, src)
			}
			if _, ok := MoECellFor(cells, "all", test); !ok {
				t.Errorf("no %s cell for all sources", test)
			}
		}
	}
}

// TestLlamaCPPMoEHeldOut prices the published rows (never fitted) with the
// shipped coefficients. Bounds: decode (tg) and small-step prompt rows
// (pp-step: the experts a step of up to MoEStepTokens tokens touches)
// within 15 % median over every source; and the step model's growth from
// one token per step to MoEStepTokens within 25 % of the measured growth
// (Qwen3-30B-A3B, 128 experts, 8 per token: a step of 64 tokens touches
// ~126 experts per layer, 16× one token's 8, not 64×): a model that
// streamed every expert at every step, or each token's experts apart,
// misses it by far more.
func TestLlamaCPPMoEHeldOut(t *testing.T) {
	rows, err := LlamaCPPMoETables()
	if err != nil {
		t.Fatal(err)
	}
	res, cells, err := ScoreLlamaCPPMoE(rows, estimate.DefaultCoeffs())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%-18s %-20s %-9s %s%-4d ub %-4d pub %8.2f pred %8.2f (%+5.1f%%)", r.Row.Source, r.Row.Model, r.Row.Precision, r.Row.Test, r.Row.Tokens, r.Row.Ubatch, r.Row.TokS, r.Predicted, 100*(r.Predicted/r.Row.TokS-1))
	}
	for _, test := range []string{"tg", "pp-step"} {
		c, ok := MoECellFor(cells, "all", test)
		if !ok {
			t.Fatalf("no %s cell", test)
		}
		t.Logf("all %s: n=%d median %.1f%% p90 %.1f%% bias %+.1f%%", test, c.N, 100*c.Median, 100*c.P90, 100*c.Bias)
		if c.N < 6 || c.Median > 0.15 {
			t.Errorf("%s: n=%d median %.1f%%, bound ≤ 15%%", test, c.N, 100*c.Median)
		}
	}
	var one, most *MoEResult
	for i := range res {
		r := &res[i]
		if r.Row.Model != "Qwen/Qwen3-30B-A3B" || MoETest(r.Row) != "pp-step" {
			continue
		}
		if one == nil || r.Row.Ubatch < one.Row.Ubatch {
			one = r
		}
		if most == nil || r.Row.Ubatch > most.Row.Ubatch {
			most = r
		}
	}
	if one == nil || one.Row.Ubatch != 1 || most.Row.Ubatch != MoEStepTokens {
		t.Fatalf("Qwen3-30B-A3B pp-step rows at 1 and %d tokens per step not found", MoEStepTokens)
	}
	meas, pred := most.Row.TokS/one.Row.TokS, most.Predicted/one.Predicted
	t.Logf("tokens/s from 1 to %d tokens per step: measured ×%.2f, predicted ×%.2f", MoEStepTokens, meas, pred)
	if pred/meas > 1.25 || pred/meas < 0.8 {
		t.Errorf("growth from 1 to %d tokens per step: predicted ×%.2f, measured ×%.2f (bound ±25 %%)", MoEStepTokens, pred, meas)
	}
}

// TestLlamaCPPMoEMXFP4 checks that gpt-oss on llama.cpp is priced in its
// MXFP4_MOE GGUF: its weights are within 2 % of the file's size as
// llama-bench prints it, the rows' decode step streams under half the
// bytes the same model priced at F16 would (experts at 4.25 bits, the rest
// Q8_0: 2.57 GB against 7.22 GB), and its decode is predicted no slower
// than 0.8 × the published figure (experts at 16 bits would predict it
// ~2.8× slower).
func TestLlamaCPPMoEMXFP4(t *testing.T) {
	rows, err := LlamaCPPMoETables()
	if err != nil {
		t.Fatal(err)
	}
	var gptoss []LlamaBenchRow
	for _, r := range rows {
		if r.Model == "openai/gpt-oss-20b" && r.Test == BenchTG {
			if r.Precision != "mxfp4_moe" {
				t.Errorf("line %d: gpt-oss row in %s, want mxfp4_moe", r.Line, r.Precision)
			}
			gptoss = append(gptoss, r)
		}
	}
	if len(gptoss) == 0 {
		t.Fatal("no gpt-oss decode rows")
	}
	f16 := append([]LlamaBenchRow(nil), gptoss[0])
	f16[0].Precision = "f16"
	res, _, err := ScoreLlamaCPPMoE(append(gptoss, f16...), estimate.DefaultCoeffs())
	if err != nil {
		t.Fatal(err)
	}
	ref := res[len(res)-1].StreamedGB
	// llama-bench's size column for "gpt-oss 20B MXFP4 MoE": 11.27 GiB
	// (llama.cpp PR #15451's tables; the same file in every source here).
	const publishedGiB = 11.27
	for _, r := range res[:len(res)-1] {
		if math.Abs(r.WeightGiB/publishedGiB-1) > 0.02 {
			t.Errorf("line %d: weights priced at %.2f GiB, the GGUF holds %.2f GiB", r.Row.Line, r.WeightGiB, publishedGiB)
		}
		if r.StreamedGB > 0.5*ref {
			t.Errorf("line %d: a decode step streams %.2f GB, F16 %.2f GB: experts not priced in MXFP4", r.Row.Line, r.StreamedGB, ref)
		}
		if r.Predicted < 0.8*r.Row.TokS {
			t.Errorf("line %d: predicted %.1f tok/s, published %.1f", r.Row.Line, r.Predicted, r.Row.TokS)
		}
	}
}

// moeREADMETable is the README's table of the llama.cpp MoE check, as
// validate-estimator prints it.
func moeREADMETable(cells []MoECell) string {
	var b strings.Builder
	b.WriteString("  | held-out source | test | n | median APE | p90 APE | bias |\n  |---|---|---|---|---|---|\n")
	for _, c := range cells {
		src := "`" + c.Source + "`"
		if c.Source == "all" {
			src = "all sources"
		}
		fmt.Fprintf(&b, "  | %s | %s | %d | %.1f %% | %.1f %% | %+.1f %% |\n", src, c.Test, c.N, c.Median*100, c.P90*100, c.Bias*100)
	}
	return b.String()
}

// TestLlamaCPPMoEREADME checks that the errors the README states for the
// llama.cpp MoE rows (between the llamacpp-moe markers) are the ones the
// embedded tables give with the shipped coefficients.
func TestLlamaCPPMoEREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("README.md not found beside the module: %v", err)
	}
	const begin, end = "  <!-- llamacpp-moe -->\n", "  <!-- /llamacpp-moe -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q … %q block", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	rows, err := LlamaCPPMoETables()
	if err != nil {
		t.Fatal(err)
	}
	_, cells, err := ScoreLlamaCPPMoE(rows, estimate.DefaultCoeffs())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s[i+len(begin):j], moeREADMETable(cells); got != want {
		t.Errorf("README's llama.cpp MoE errors are stale; replace the block with:\n%s\ngot:\n%s", want, got)
	}
}
