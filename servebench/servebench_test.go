package servebench

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/workload"
)

// TestSpreadOfValues checks the summary statistics against values
// worked out by hand (quartiles by linear interpolation between order
// statistics, as numpy.percentile's default).
func TestSpreadOfValues(t *testing.T) {
	tests := []struct {
		xs                       []float64
		median, lo, hi, sp, riqr float64
	}{
		{[]float64{5, 1, 4, 2, 3}, 3, 1, 5, 4.0 / 3, 2.0 / 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4, 3 / 2.5, (3.25 - 1.75) / 2.5},
		{[]float64{7}, 7, 7, 7, 0, 0},
		{[]float64{10, 10, 11}, 10, 10, 11, 0.1, 0.05},
		{[]float64{0, 0}, 0, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		s := SpreadOfValues(tc.xs)
		got := []float64{s.Median, s.Min, s.Max, s.Spread, s.RelIQR}
		want := []float64{tc.median, tc.lo, tc.hi, tc.sp, tc.riqr}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("%v: got median, min, max, spread, rel IQR = %v, want %v", tc.xs, got, want)
				break
			}
		}
	}
}

func tinyModel(t *testing.T) *engine.Model {
	t.Helper()
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 64, Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 256,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}}
	for range 2 {
		a.Layers = append(a.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 8},
			MLP:       &architecture.MLP{Width: 32, Gated: true, Activation: "silu"}})
	}
	m, err := engine.New(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRun checks the work done, the progress calls and cancellation.
func TestRun(t *testing.T) {
	m := tinyModel(t)
	w := workload.FixedClosed(10, 5, 2)
	w.NumRequests = 6
	warm, measured := 0, 0
	rep, err := Run(context.Background(), m, &w, Options{Repeats: 3, MaxWarmup: 2}, func(p Progress) {
		if p.Warmup {
			warm++
		} else {
			measured++
			if p.Of != 3 || p.Run != measured {
				t.Errorf("progress %+v", p)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if warm != 2 || measured != 3 || len(rep.Runs) != 3 || rep.WarmupRuns != 2 || rep.Requests != 6 {
		t.Fatalf("warm-ups %d, measured %d, report %+v", warm, measured, rep)
	}
	for _, r := range rep.Runs {
		if r.OutputToks != 30 || r.InputToks != 60 || r.MaxBatch > 2 || r.TPOT.Mean <= 0 || r.TTFT.Mean <= 0 {
			t.Fatalf("run %+v", r)
		}
	}
	if rep.Summary["tpot_mean_s"].Median <= 0 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, m, &w, Options{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
}
