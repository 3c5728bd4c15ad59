package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestBenchServeTinyModel(t *testing.T) {
	dir, m := tinyModelDir(t, 64)
	code, out, errOut := genRunCLI("bench-serve", "--model", dir, "--isl", "24", "--osl", "6", "--concurrency", "3",
		"--requests", "7", "--repeats", "2", "--prefill-tokens", "32", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep bsBenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rep.Params != m.NumParams() || rep.Requests != 7 || len(rep.Runs) != 2 || rep.PeakRSSBytes <= 0 {
		t.Fatalf("report %+v", rep)
	}
	for i, r := range rep.Runs {
		if r.TTFT.Mean <= 0 || r.TTFT.P90 < r.TTFT.Mean*0.5 || r.TPOT.Mean <= 0 || r.OutputTPS <= 0 {
			t.Fatalf("run %d: %+v", i, r)
		}
		if runtime.GOOS == "linux" && (r.CPUSeconds <= 0 || r.OutputPerCPU <= 0) {
			t.Fatalf("run %d: no CPU time measured: %+v", i, r)
		}
		if r.MaxBatch > 3 {
			t.Fatalf("run %d: %d sequences in a step with concurrency 3", i, r.MaxBatch)
		}
		// 7 requests × 6 tokens in Seconds.
		if got := r.OutputTPS * r.Seconds; got < 41.9 || got > 42.1 {
			t.Fatalf("run %d: %.2f output tokens", i, got)
		}
	}
	if s := rep.Summary["output_tokens_per_s"]; s.Mean <= 0 || s.Spread < 0 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	// Human-readable table.
	code, out, errOut = genRunCLI("bench-serve", "--model", dir, "--isl", "8", "--osl", "4", "--concurrency", "2", "--repeats", "1", "--threads", "1")
	if code != 0 || !strings.Contains(out, "TTFT mean") || !strings.Contains(out, "VmHWM") || !strings.Contains(out, "1 threads") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
}

func TestBenchServeWorkloadAndErrors(t *testing.T) {
	dir, _ := tinyModelDir(t, 64)
	// A preset clipped to the model's 256-token context, few requests.
	code, out, errOut := genRunCLI("bench-serve", "--model", dir, "--workload", "game-character", "--requests", "4",
		"--concurrency", "2", "--repeats", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep bsBenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !strings.Contains(rep.Workload, "game-character") {
		t.Fatalf("%v: %+v", err, rep)
	}
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"bench-serve"}, "--model is required"},
		{[]string{"bench-serve", "--model", dir, "--workload", "nope"}, "unknown preset"},
		{[]string{"bench-serve", "--model", dir, "--workload", "chat", "--isl", "5"}, "do not combine"},
		{[]string{"bench-serve", "--model", dir, "--isl", "200", "--osl", "100"}, "exceeds the model's context of 256"},
		{[]string{"bench-serve", "--model", dir, "--concurrency", "0"}, "--concurrency"},
	}
	for _, tc := range tests {
		code, _, errOut := genRunCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, errOut, tc.msg)
		}
	}
}
