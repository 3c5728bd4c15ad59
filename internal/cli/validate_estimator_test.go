package cli

import (
	"context"
	"math"
	"testing"

	"github.com/autocompress/autocompress/estimate/groundtruth"
)

// TestScenarioSettingsCheck: TensorRT-LLM's max-load tables, priced through
// the batch CSV, come out closer with the FP8 KV cache and the 0.95 memory
// fraction they state than at the engine's defaults, and as close as the
// direct scoring of the same rows (ScoreIndependent, which passes the same
// settings through estimate.Options).
func TestScenarioSettingsCheck(t *testing.T) {
	rows, err := groundtruth.IndependentTables()
	if err != nil {
		t.Fatal(err)
	}
	st, err := scenarioSettingsCheck(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("defaults: n=%d median %.1f%% p90 %.1f%% bias %+.1f%%", st.Defaults.N, st.Defaults.Median*100, st.Defaults.P90*100, st.Defaults.Bias*100)
	t.Logf("stated:   n=%d median %.1f%% p90 %.1f%% bias %+.1f%%", st.Stated.N, st.Stated.Median*100, st.Stated.P90*100, st.Stated.Bias*100)
	if st.Stated.N < 500 {
		t.Errorf("only %d max-load rows priced with the stated settings", st.Stated.N)
	}
	if st.Stated.Median >= st.Defaults.Median {
		t.Errorf("stated settings median %.3f not below the defaults' %.3f", st.Stated.Median, st.Defaults.Median)
	}
	var apes []float64
	res, _ := groundtruth.ScoreIndependent(rows)
	for _, r := range res {
		if r.Skip != "" || r.Row.Mode != groundtruth.ModeOffline {
			continue
		}
		for _, e := range r.Errors {
			if e.Metric == groundtruth.Throughput {
				apes = append(apes, e.APE)
			}
		}
	}
	direct := groundtruth.SummariseAPE(apes, apes)
	// The CSV rounds output_tok_s to 0.1 tok/s.
	if st.Stated.N != direct.N || math.Abs(st.Stated.Median-direct.Median) > 1e-4 {
		t.Errorf("scenario CSV n=%d median %.4f, direct scoring n=%d median %.4f: the columns do not mean what Options mean", st.Stated.N, st.Stated.Median, direct.N, direct.Median)
	}
}
