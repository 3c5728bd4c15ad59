package scenarios

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"slices"
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

// FuzzRun feeds arbitrary bytes to Run: it never panics, and what it
// accepts is what it says: a header of known columns only (no misspelled
// column silently ignored), valid CSV throughout, one output row per input
// record, and an error value on every row whose field count differs from
// the header's.
func FuzzRun(f *testing.F) {
	f.Add([]byte("id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,128,16,2,,\n"))
	f.Add([]byte("id,model,gpu,engine,isl,osl\n1,x,y,z,1,1\n\"bad\n"))
	f.Add([]byte("id,model,gpu,engine,isl,osl,max_num_seq,kv_type\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,8192,256,8,fp8\n"))
	f.Add([]byte("id,model,gpu,engine,isl,osl,concurrency\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,8192\nb,\"x,y,z,1,1,1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2000 {
			return
		}
		var out bytes.Buffer
		n, _, err := Run(context.Background(), bytes.NewReader(data), &out, hardware.Default(), nil, true)
		if err != nil {
			return
		}
		in := csv.NewReader(bytes.NewReader(data))
		in.FieldsPerRecord = -1
		recs, err := in.ReadAll()
		if err != nil {
			t.Fatalf("accepted input that is not CSV: %v", err)
		}
		for i, h := range recs[0] {
			if h = strings.ToLower(strings.TrimSpace(h)); i == 0 {
				h = strings.TrimPrefix(h, "\ufeff")
			}
			if !slices.Contains(In, strings.TrimSpace(h)) {
				t.Fatalf("accepted an unknown column %q", h)
			}
		}
		got, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			t.Fatalf("output is not CSV: %v", err)
		}
		if len(got) != n+1 || n != len(recs)-1 {
			t.Fatalf("%d rows written, %d reported, %d records read", len(got)-1, n, len(recs)-1)
		}
		for i, r := range recs[1:] {
			if len(r) != len(recs[0]) && got[i+1][len(Out)-1] == "" {
				t.Fatalf("record %d has %d fields for %d columns but no error", i+1, len(r), len(recs[0]))
			}
		}
	})
}

// TestRunRefusesWhatItWouldIgnore (issue 17, class 7): a misspelled or
// unknown column, a repeated or empty one, and a file that is not CSV are
// errors naming the line (and the closest known column); a short or long
// row gets an error naming its line while the others come out.
func TestRunRefusesWhatItWouldIgnore(t *testing.T) {
	const base = "id,model,gpu,engine,isl,osl,concurrency"
	const ok = "a,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1024,64,4"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"misspelled optional", base + ",max_num_seq\n" + ok + ",8\n", `unknown column "max_num_seq" (did you mean "max_num_seqs"?)`},
		{"misspelled kv", base + ",kv_type\n" + ok + ",fp8\n", `unknown column "kv_type" (did you mean "kv_dtype"?)`},
		{"unknown extra", base + ",colour\n" + ok + ",red\n", `unknown column "colour" (known: id, model`},
		{"repeated", base + ",isl\n" + ok + ",5\n", `column "isl" appears twice`},
		{"empty name", base + ",\n" + ok + ",\n", "column 8 has no name"},
		{"unterminated quote", base + "\n" + ok + "\nb,\"meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1024,64,4\n", "line 3"},
		{"stray quote", base + "\n" + ok + "\nb,meta\"llama,h100-sxm,vllm,1024,64,4\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, _, err := Run(context.Background(), strings.NewReader(tc.in), &out, hardware.Default(), nil, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v; want an error containing %q", err, tc.want)
			}
		})
	}
	in := base + "\n" + ok + "\nshort,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1024\nlong," + ok[2:] + ",9\n" + strings.Replace(ok, "a,", "c,", 1) + "\n"
	var out bytes.Buffer
	n, bad, err := Run(context.Background(), strings.NewReader(in), &out, hardware.Default(), nil, true)
	if err != nil || n != 4 || bad != 2 {
		t.Fatalf("Run: %d rows, %d bad, %v; want 4, 2, nil", n, bad, err)
	}
	recs, _ := csv.NewReader(&out).ReadAll()
	want := map[string]string{"a": "", "short": "line 3: 5 fields, but the header has 7 columns", "long": "line 4: 8 fields, but the header has 7 columns", "c": ""}
	for _, r := range recs[1:] {
		if w, got := want[r[0]], r[len(r)-1]; w == "" && got != "" || !strings.Contains(got, w) {
			t.Errorf("row %s: error %q, want %q", r[0], got, w)
		}
	}
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

// TestRunSettingsBounded (issue 17, class 5): every numeric column is
// range-checked before use; a value past its bound is the row's error,
// not a price computed from a wrapped or absurd number.
func TestRunSettingsBounded(t *testing.T) {
	const huge = "9223372036854775807"
	in := "id,model,gpu,engine,isl,osl,concurrency,num_requests,max_num_seqs,max_batched_tokens,context,gpus,tp\n"
	row := func(id string, col int) string {
		f := []string{id, "meta-llama/Meta-Llama-3.1-8B", "h100-sxm", "llamacpp", "100", "10", "4", "", "", "", "", "", ""}
		f[col] = huge
		return strings.Join(f, ",") + "\n"
	}
	want := map[string]string{"isl": "input length", "osl": "output length", "concurrency": "concurrency", "num_requests": "num_requests",
		"max_num_seqs": "max_num_seqs: must be an integer from 1 to 65536", "max_batched_tokens": "max_batched_tokens: must be an integer from 1 to 67108864",
		"context": "context: must be an integer from 1 to 67108864", "gpus": "gpus: 9223372036854775807 GPUs per node, more than 1024", "tp": "tp must be from 1 to 1024"}
	cols := strings.Split(strings.TrimSpace(in), ",")
	for i, c := range cols[4:] {
		in += row(c, i+4)
	}
	var out bytes.Buffer
	n, bad, err := Run(context.Background(), strings.NewReader(in), &out, hardware.Default(), nil, true)
	if err != nil || n != len(want) || bad != n {
		t.Fatalf("Run: %d rows, %d bad, %v; want %d, all bad", n, bad, err, len(want))
	}
	recs, _ := csv.NewReader(&out).ReadAll()
	for _, r := range recs[1:] {
		if got := r[len(r)-1]; !strings.Contains(got, want[r[0]]) {
			t.Errorf("row %s: error %q, want %q", r[0], got, want[r[0]])
		}
	}
}
