package servebench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
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
	rep, err := Run(context.Background(), m, &w, Options{Repeats: 3, MaxWarmup: 2}, func(e progress.Event) {
		switch {
		case e.State == progress.Running && e.Phase == "warm-up":
			warm++
		case e.State == progress.Note:
			measured++
			if want := fmt.Sprintf("run %d/3: ", measured); !strings.HasPrefix(e.Msg, want) {
				t.Errorf("note %q, want it to begin %q", e.Msg, want)
			}
		default:
			t.Errorf("event %+v", e)
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

// TestRunSequenceLimit: MaxNumSeqs caps the sequences in a step and the
// KV cache held at once, the queueing shows in TTFT, and the report says
// the settings it ran under.
func TestRunSequenceLimit(t *testing.T) {
	m := tinyModel(t)
	w := workload.FixedClosed(24, 8, 8)
	w.NumRequests = 16
	o := Options{Repeats: 1, MaxWarmup: 2, PrefillTokens: 64}
	all, err := Run(context.Background(), m, &w, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.MaxNumSeqs = 2
	two, err := Run(context.Background(), m, &w, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.MaxNumSeqs != 8 || two.MaxNumSeqs != 2 || two.MaxBatchedTokens != 64 {
		t.Fatalf("settings reported: %d and %d sequences, %d tokens; want 8, 2, 64", all.MaxNumSeqs, two.MaxNumSeqs, two.MaxBatchedTokens)
	}
	a, b := all.Runs[0], two.Runs[0]
	if a.MaxBatch != 8 || b.MaxBatch > 2 {
		t.Errorf("sequences in one step: %d without a limit, %d with 2", a.MaxBatch, b.MaxBatch)
	}
	if b.PeakKV*4 != a.PeakKV {
		t.Errorf("peak KV %d bytes with 2 slots, %d with 8: want a quarter", b.PeakKV, a.PeakKV)
	}
	// Each request's TTFT includes its wait for one of 2 slots behind 6
	// other clients' requests: at least the time to serve one request.
	if b.TTFT.Mean < 2*a.TTFT.Mean && b.TTFT.Mean < b.E2E.Mean/2 {
		t.Errorf("TTFT mean %.4f s with 2 slots, %.4f s with 8 (E2E %.4f s): the queueing is not counted", b.TTFT.Mean, a.TTFT.Mean, b.E2E.Mean)
	}
}

// TestWorkload: the one bench-serve workload builder's request count and
// context rules.
func TestWorkload(t *testing.T) {
	chat, err := workload.Preset("chat")
	if err != nil {
		t.Fatal(err)
	}
	fixed := workload.FixedClosed(100, 20, 8)
	for _, tc := range []struct {
		name     string
		w        workload.Workload
		requests int
		rule     workload.ContextRule
		wantN    int
		wantCtx  int
		wantErr  bool
	}{
		{"fixed, default count", fixed, 0, workload.ContextRule{MaxPositions: 256}, 128, 120, false},
		{"fixed, given count", fixed, 32, workload.ContextRule{MaxPositions: 256}, 32, 120, false},
		{"preset keeps its default", chat, 0, workload.ContextRule{AllowLong: true}, 0, chat.MaxContext(), false},
		{"too long for the model", fixed, 0, workload.ContextRule{MaxPositions: 64}, 0, 0, true},
		{"too long, allowed", fixed, 0, workload.ContextRule{MaxPositions: 64, AllowLong: true}, 128, 120, false},
	} {
		w, c, err := Workload(tc.w, tc.requests, tc.rule)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if w.NumRequests != tc.wantN || w.ContextLimit != tc.wantCtx || c.Tokens != tc.wantCtx {
			t.Errorf("%s: %d requests, context %d (%d); want %d and %d", tc.name, w.NumRequests, w.ContextLimit, c.Tokens, tc.wantN, tc.wantCtx)
		}
	}
}
