package groundtruth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
)

// TestLoadAndCalibrate: the user's rows alone are loaded and fitted; with
// validation every fitted family carries its held-out errors; a required
// folder without the sample, or no usable row, is an error saying so.
func TestLoadAndCalibrate(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "mine.csv")
	var b strings.Builder
	b.WriteString("engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\n")
	for _, c := range []string{"1", "4", "16", "64"} {
		b.WriteString("vllm,h100-sxm,meta-llama/Llama-3.1-8B,bf16,auto,1,1024,256," + c + ",60,9,\n")
		b.WriteString("vllm,h200,meta-llama/Llama-3.1-8B,bf16,auto,1,1024,256," + c + ",50,7,\n")
	}
	if err := os.WriteFile(user, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(filepath.Join(dir, "none"), true, user); err == nil || !strings.Contains(err.Error(), SharedSample) {
		t.Errorf("a required folder without the sample: %v", err)
	}
	ps, _, err := Load(filepath.Join(dir, "none"), false, user)
	if err != nil || len(ps) != 8 {
		t.Fatalf("the default folder absent, user rows: %d rows, %v", len(ps), err)
	}
	empty := filepath.Join(dir, "empty.csv")
	os.WriteFile(empty, []byte("engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\n"), 0o644)
	if _, _, err := Load("", false, empty); err == nil || !strings.Contains(err.Error(), "no usable measurement rows") {
		t.Errorf("no rows: %v", err)
	}
	cf, err := Calibrate(context.Background(), ps, estimate.PriorCoeffs(), 40, false)
	if err != nil {
		t.Fatal(err)
	}
	if co, ok := cf.Families["vllm"]; !ok || co.Rows == 0 || co.ErrTPOT != 0 {
		t.Errorf("without validation: vllm %+v", co)
	}
	cf, err = Calibrate(context.Background(), ps, estimate.PriorCoeffs(), 40, true)
	if err != nil {
		t.Fatal(err)
	}
	if co := cf.Families["vllm"]; co.ErrTPOT <= 0 || co.ErrTTFT <= 0 || co.ErrTPOTP90 < co.ErrTPOT {
		t.Errorf("with validation: vllm errors TPOT %v (p90 %v), TTFT %v", co.ErrTPOT, co.ErrTPOTP90, co.ErrTTFT)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Calibrate(ctx, ps, estimate.PriorCoeffs(), 40, true); err == nil {
		t.Error("cancelled: no error")
	}
}
