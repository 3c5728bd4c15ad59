package scenarios

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"

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
