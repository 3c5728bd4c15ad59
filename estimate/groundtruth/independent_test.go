package groundtruth

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture/published"
)

const indepHeader = "source_id,engine,engine_version,model,gpu,tp,precision,kv_dtype,isl,osl,mode,concurrency,request_rate,num_requests,output_tok_s,ttft_ms,tpot_ms,note\n"

func TestReadIndependent(t *testing.T) {
	in := "# comment line\n" + indepHeader +
		"s,trtllm,1.0,meta-llama/Llama-3.1-8B,h200,1,fp8,fp8,128,128,offline,,,30000,27911,,,a note\n" +
		"s,TensorRT-LLM,0.14,meta-llama/Llama-3.1-8B,h100-sxm,1,bf16,bf16,467,256,poisson,,2,500,504,23,8,\n" +
		"s,vllm,0.9,meta-llama/Llama-3.1-8B,h100-sxm,1,bf16,,1000,1000,closed,64,,,,120,15,\"quoted, note\"\n"
	rows, err := ReadIndependent(strings.NewReader(in), "t.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rows))
	}
	r := rows[1]
	if r.Engine != "trtllm" || r.Mode != ModePoisson || r.RequestRate != 2 || r.NumRequests != 500 ||
		r.TTFTms != 23 || r.TPOTms != 8 || r.OutputTokS != 504 || r.ISL != 467 || r.OSL != 256 || r.Line != 4 {
		t.Errorf("row 2 = %+v", r)
	}
	if rows[2].Concurrency != 64 || rows[2].Note != "quoted, note" || rows[2].KVDType != "" {
		t.Errorf("row 3 = %+v", rows[2])
	}

	bad := map[string]string{
		"missing column":  "source_id,engine\ns,trtllm\n",
		"bad engine":      indepHeader + "s,tgi,1,m,h200,1,fp8,fp8,1,1,offline,,,1,1,,,\n",
		"offline rate":    indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,2,1,1,,,\n",
		"closed no conc":  indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,closed,,,1,1,,,\n",
		"poisson no rate": indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,poisson,,,1,1,,,\n",
		"bad mode":        indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,burst,,,1,1,,,\n",
		"no metric":       indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,,1,,,,\n",
		"zero isl":        indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,0,1,offline,,,1,1,,,\n",
		"fractional tp":   indepHeader + "s,vllm,1,m,h200,1.5,fp8,fp8,1,1,offline,,,1,1,,,\n",
		"negative":        indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,,1,-5,,,\n",
		"nan":             indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,,1,NaN,,,\n",
		"empty":           "",
		"bad quote":       indepHeader + "s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,,1,1,,,\"x\n",
	}
	for name, in := range bad {
		_, err := ReadIndependent(strings.NewReader(in), "bad.csv")
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: got %v, want a *ParseError", name, err)
		}
	}
	// The error names the offending line (comments count).
	_, err = ReadIndependent(strings.NewReader("# c\n"+indepHeader+"s,vllm,1,m,h200,1,fp8,fp8,1,1,offline,,,1,1,,,\ns,vllm,1,m,h200,0,fp8,fp8,1,1,offline,,,1,1,,,\n"), "l.csv")
	if err == nil || !strings.Contains(err.Error(), "l.csv:4:") {
		t.Errorf("error %v does not name line 4", err)
	}
}

// TestIndependentTablesFile checks the embedded data against the file on disk
// and its provenance rules: every row is a known source, GPU and model.
func TestIndependentTablesFile(t *testing.T) {
	rows, err := IndependentTables()
	if err != nil {
		t.Fatal(err)
	}
	disk, err := ReadIndependentFile("testdata/independent_serving.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(disk) || len(rows) < 500 {
		t.Fatalf("embedded %d rows, file %d; want the same and ≥ 500", len(rows), len(disk))
	}
	md, err := os.ReadFile("testdata/independent_serving.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.Source]++
		if !bytes.Contains(md, []byte(r.Source)) {
			t.Errorf("line %d: source %q has no provenance in independent_serving.md", r.Line, r.Source)
		}
		if _, ok := published.DescribePublished(r.Model); !ok {
			t.Errorf("line %d: model %q cannot be described", r.Line, r.Model)
		}
	}
	t.Logf("rows per source: %v", seen)
}

// Bounds of TestIndependentTables: what the CURRENT estimator (shipped
// coefficients) scores on the held-out tables, plus a margin of about a
// fifth, so that a regression fails. They are NOT accuracy targets; they are
// loose because the estimator is far off on parts of these tables. Measured
// on 2026-11-29 at HEAD 65bbdc2 (and, in brackets, on the working tree with
// the integrator's uncommitted coefficient changes):
//
//   - output throughput, 613 rows (541 offline max-load rows of trtllm-bench
//     v0.17, v1.0 and a later per-GPU table, 72 Triton v0.14 rows): median
//     APE 12.3 % (13.0 %), p90 31.3 % (33.0 %), median signed error −5 % —
//     under-predicted on Hopper FP8, worst at 128/128 and at TP 4–8;
//     over-predicted for MoE (Qwen3-30B-A3B NVFP4, gpt-oss MXFP4) on
//     B200/GB200 and for Mistral-7B at 20000/2000;
//   - TPOT (mean ITL), 72 Triton rows: median 20.9 % (21.4 %), p90 98 % (106 %);
//   - TTFT, 72 Triton rows: median 346 % (343 %), p90 849 % (1448 %), 7 rows
//     predicted saturated (+Inf). The trtllm family's fitted alpha0 (87 ms
//     per request, fitted on trtllm-serve runs) is 4–5× the whole TTFT
//     Triton reports for Llama-3.1-8B at low load (17–23 ms).
var independentBounds = map[Metric]struct{ median, p90 float64 }{
	Throughput: {0.16, 0.40},
	TPOT:       {0.27, 1.30},
	TTFT:       {4.20, 20.0},
}

// TestIndependentTables scores the shipped estimator on the independent
// published tables (held out of every fit) and logs a per-row table.
func TestIndependentTables(t *testing.T) {
	rows, err := IndependentTables()
	if err != nil {
		t.Fatal(err)
	}
	res, sum := ScoreIndependent(rows)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-21s %-36s %-12s %2s %-5s %5s/%-5s %-7s %6s %-10s %10s %10s %8s %6s %8s  %s\n",
		"source", "model", "gpu", "tp", "prec", "isl", "osl", "mode", "rate", "metric", "published", "predicted", "error",
		"run", "step_ms", "step %: compute/weights/kv/comm/overhead")
	for _, r := range res {
		row := r.Row
		if r.Skip != "" {
			fmt.Fprintf(&b, "%-21s %-36s %-12s %2d %-5s %5d/%-5d %-7s %6g SKIP: %s\n", row.Source, row.Model, row.GPU, row.TP,
				row.Precision, row.ISL, row.OSL, row.Mode, row.RequestRate, r.Skip)
			continue
		}
		for _, e := range r.Errors {
			st := r.Step
			tot := st.Total() / 100
			fmt.Fprintf(&b, "%-21s %-36s %-12s %2d %-5s %5d/%-5d %-7s %6g %-10s %10.1f %10.1f %+7.1f%% %6.0f %8.2f  %.0f/%.0f/%.0f/%.0f/%.0f\n", row.Source, row.Model, row.GPU, row.TP,
				row.Precision, row.ISL, row.OSL, row.Mode, row.RequestRate, e.Metric, e.Published, e.Predicted, 100*(e.Predicted/e.Published-1),
				r.Running, 1000*st.Total(), st.Compute/tot, st.Weights/tot, st.KV/tot, st.Comm/tot, (st.Overhead+st.State)/tot)
		}
	}
	fmt.Fprintf(&b, "\n%d rows, %d priced, %d predicted saturated; %s\n", sum.Rows, sum.Priced, sum.Saturated, sum.Skipped)
	fmt.Fprintf(&b, "%-8s %-21s %-10s %4s %8s %8s %8s %5s\n", "engine", "source", "metric", "n", "median", "p90", "bias", "inf")
	for _, c := range sum.Cells {
		fmt.Fprintf(&b, "%-8s %-21s %-10s %4d %7.1f%% %7.1f%% %+7.1f%% %5d\n", c.Engine, c.Source, c.Metric, c.N, 100*c.Median, 100*c.P90, 100*c.Bias, c.Unbounded)
	}
	// Sensitivity: trtllm-bench reports output tokens over the whole run
	// (makespan); the estimator's offline OutputTokS is the steady rate. The
	// makespan of N requests with c running is ≈ (N + c)/x, i.e. E2E + Queue
	// of the offline prediction (Queue is half the drain, N/2x).
	var span []float64
	for _, r := range res {
		if r.Skip != "" || r.Row.Mode != ModeOffline || r.Row.OutputTokS <= 0 || r.Row.NumRequests <= 0 {
			continue
		}
		n := float64(r.Row.NumRequests)
		x := r.Errors[0].Predicted / float64(r.Row.OSL)
		span = append(span, n/(n+math.Max(r.Running, 1))*x*float64(r.Row.OSL)/r.Row.OutputTokS-1)
	}
	med, _ := quantiles(span)
	fmt.Fprintf(&b, "offline throughput as makespan N·osl/((N+running)/x): median signed error %+.1f%% over %d rows\n", 100*med, len(span))
	t.Log(b.String())

	if sum.Priced < sum.Rows*9/10 {
		t.Errorf("only %d of %d rows priced (%s)", sum.Priced, sum.Rows, sum.Skipped)
	}
	for m, bound := range independentBounds {
		c, ok := sum.Cell("all", "all", m)
		if !ok {
			t.Errorf("no %s cell", m)
			continue
		}
		if !(c.Median <= bound.median) || !(c.P90 <= bound.p90) || math.IsNaN(c.Median) {
			t.Errorf("%s: median APE %.1f%%, p90 %.1f%% over %d rows; bound %.0f%% / %.0f%%",
				m, 100*c.Median, 100*c.P90, c.N, 100*bound.median, 100*bound.p90)
		}
	}
}

// TestScoreIndependentSkips checks that rows the estimator cannot describe
// are counted, not scored, and that an offline row is scored on throughput.
func TestScoreIndependentSkips(t *testing.T) {
	in := indepHeader +
		"s,trtllm,1,unknown/model,h200,1,fp8,fp8,128,128,offline,,,100,1000,,,\n" +
		"s,trtllm,1,meta-llama/Llama-3.1-8B,no-such-gpu,1,fp8,fp8,128,128,offline,,,100,1000,,,\n" +
		"s,trtllm,1,meta-llama/Meta-Llama-3.1-405B,l40s,1,bf16,bf16,128,128,offline,,,100,1000,,,\n" +
		"s,trtllm,1,meta-llama/Llama-3.1-8B,h200,1,fp8,fp8,128,128,offline,,,1000,1000,,,\n"
	rows, err := ReadIndependent(strings.NewReader(in), "s.csv")
	if err != nil {
		t.Fatal(err)
	}
	res, sum := ScoreIndependent(rows)
	if sum.Priced != 1 || sum.Skipped["model not described"] != 1 || sum.Skipped["unknown GPU"] != 1 ||
		sum.Skipped["does not fit per the estimator"] != 1 {
		t.Fatalf("summary %+v", sum)
	}
	r := res[3]
	if len(r.Errors) != 1 || r.Errors[0].Metric != Throughput || !(r.Errors[0].Predicted > 1000) {
		t.Fatalf("8B on H200 offline: %+v", r)
	}
	want := math.Abs(r.Errors[0].Predicted-1000) / 1000
	if math.Abs(r.Errors[0].APE-want) > 1e-12 {
		t.Errorf("APE %g, want %g", r.Errors[0].APE, want)
	}
	c, ok := sum.Cell("trtllm", "all", Throughput)
	if !ok || c.N != 1 || c.Median != want || c.Bias <= 0 {
		t.Errorf("cell %+v", c)
	}
}

func FuzzReadIndependent(f *testing.F) {
	f.Add([]byte(indepHeader + "s,trtllm,1,meta-llama/Llama-3.1-8B,h200,1,fp8,fp8,128,128,offline,,,100,1000,,,\n"))
	f.Add([]byte(indepHeader + "s,trtllm,1,meta-llama/Llama-3.1-8B,h200,1,bf16,bf16,467,16,poisson,,4,500,63,58,20,\n"))
	f.Add([]byte("# c\n" + indepHeader + "s,vllm,1,m,h200,1,fp8,,1,1,closed,3,,,,5,5,\"a,b\"\n"))
	f.Add([]byte("a,b\n\"x,1\n"))
	// A quoted field left open at EOF: csv.Reader.FieldPos must not be
	// called after a failed Read (it panicked once).
	f.Add([]byte(indepHeader + "\"000"))
	if b, err := os.ReadFile("testdata/independent_serving.csv"); err == nil {
		f.Add(b[:min(len(b), 3000)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadIndependent(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.TP < 1 || r.ISL < 1 || r.OSL < 1 || r.OutputTokS < 0 || r.TTFTms < 0 || r.TPOTms < 0 ||
				(r.OutputTokS == 0 && r.TTFTms == 0 && r.TPOTms == 0) {
				t.Fatalf("accepted an invalid row %+v", r)
			}
			switch r.Mode {
			case ModeOffline, ModeClosed, ModePoisson:
			default:
				t.Fatalf("accepted mode %q", r.Mode)
			}
		}
		if len(rows) <= 4 {
			ScoreIndependent(rows)
		}
	})
}
