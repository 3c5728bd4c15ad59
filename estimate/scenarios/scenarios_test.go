package scenarios

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate/groundtruth"
	"github.com/autocompress/autocompress/hardware"
)

// TestRunRows: good rows are priced, a bad value gives its row an error
// naming what is wrong while the others come out, and a file without the
// required columns is an error.
func TestRunRows(t *testing.T) {
	in := "id,model,gpu,engine,tp,isl,osl,concurrency,request_rate,num_requests\n" +
		"ok,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1,1024,256,16,,\n" +
		"offline,meta-llama/Meta-Llama-3.1-8B,h100-sxm,sglang,1,1024,256,,inf,100\n" +
		"gpu,meta-llama/Meta-Llama-3.1-8B,h900,vllm,1,1024,256,16,,\n" +
		"model,no/such-model,h100-sxm,vllm,1,1024,256,16,,\n" +
		"tp,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,3,1024,256,16,,\n" +
		"rate,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1,1024,256,,fast,\n" +
		"isl,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1,x,256,16,,\n"
	var out bytes.Buffer
	n, bad, err := Run(context.Background(), strings.NewReader(in), &out, hardware.Default(), nil, true)
	if err != nil || n != 7 || bad != 5 {
		t.Fatalf("Run: %d rows, %d bad, %v; want 7, 5, nil", n, bad, err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(recs) != 8 || strings.Join(recs[0], ",") != strings.Join(Out, ",") {
		t.Fatalf("output %v: %q", err, recs)
	}
	want := map[string]string{"ok": "", "offline": "", "gpu": "unknown GPU", "model": "model: ", "tp": "allows: 1, 2, 4, 8",
		"rate": "request rate", "isl": "isl: \"x\" is not an integer"}
	for _, r := range recs[1:] {
		w, ok := want[r[0]]
		if !ok {
			t.Errorf("unexpected row %q", r)
			continue
		}
		got := r[len(r)-1]
		if w == "" && (got != "" || r[1] != "true" || r[9] == "") || w != "" && (r[1] != "false" || !strings.Contains(got, w)) {
			t.Errorf("row %s: %q, want error %q", r[0], r, w)
		}
	}
	if _, _, err := Run(context.Background(), strings.NewReader("id,model,gpu\n"), &out, hardware.Default(), nil, true); err == nil || !strings.Contains(err.Error(), "engine, isl, osl") {
		t.Errorf("missing columns: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Run(ctx, strings.NewReader(in), &out, hardware.Default(), nil, true); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

func FuzzRun(f *testing.F) {
	f.Add([]byte("id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,128,16,2,,\n"))
	f.Add([]byte("id,model,gpu,engine,isl,osl\n1,x,y,z,1,1\n\"bad\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2000 {
			return
		}
		var out bytes.Buffer
		n, _, err := Run(context.Background(), bytes.NewReader(data), &out, hardware.Default(), nil, true)
		if err != nil {
			return
		}
		recs, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			t.Fatalf("output is not CSV: %v", err)
		}
		if len(recs) != n+1 {
			t.Fatalf("%d rows written, %d reported", len(recs)-1, n)
		}
	})
}

// TestPublished: TensorRT-LLM's max-load tables, priced through the
// scenario CSV, come out closer with the FP8 KV cache and the 0.95 memory
// fraction they state than at the engine's defaults, and as close as the
// direct scoring of the same rows (ScoreIndependent, which passes the same
// settings through estimate.Options).
func TestPublished(t *testing.T) {
	rows, err := groundtruth.IndependentTables()
	if err != nil {
		t.Fatal(err)
	}
	def, st, err := Published(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("defaults: n=%d median %.1f%% p90 %.1f%% bias %+.1f%%", def.N, def.Median*100, def.P90*100, def.Bias*100)
	t.Logf("stated:   n=%d median %.1f%% p90 %.1f%% bias %+.1f%%", st.N, st.Median*100, st.P90*100, st.Bias*100)
	if st.N < 500 {
		t.Errorf("only %d max-load rows priced with the stated settings", st.N)
	}
	if st.Median >= def.Median {
		t.Errorf("stated settings median %.3f not below the defaults' %.3f", st.Median, def.Median)
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
	if st.N != direct.N || math.Abs(st.Median-direct.Median) > 1e-4 {
		t.Errorf("scenario CSV n=%d median %.4f, direct scoring n=%d median %.4f: the columns do not mean what Options mean", st.N, st.Median, direct.N, direct.Median)
	}
}
