package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/hardware"
)

func estRunCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestEstimateNoFlags(t *testing.T) {
	code, out, errs := estRunCLI(t, "estimate")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Meta-Llama-3.1-8B", "h100-sxm", "vllm", "weights", "KV cache: 128.0 KiB/token", "TTFT", "TPOT", "Throughput", "chat"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestEstimateLlamaServerSlots: llama.cpp estimates show the slots, the
// per-step batch and the slot queue; beyond the slots the queue is reported
// by both paths and the analytic and simulated TTFT agree within 15 %.
func TestEstimateLlamaServerSlots(t *testing.T) {
	code, out, errs := estRunCLI(t, "estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "rtx-4090", "--engine", "llamacpp",
		"--precision", "q4_k_m", "--workload", "game-character", "--max-num-seqs", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Scheduling (llama-server): 8 slots (-np 8), n_batch 2048", "n_ubatch 512",
		"requests beyond the 8 slots queue for one", "ms simulated", "prompt wait for n_batch room"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = estRunCLI(t, "estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "rtx-4090", "--engine", "llamacpp",
		"--precision", "q4_k_m", "--workload", "game-character", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v estJSONOut
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Family != "llamacpp-cuda" || v.Latency == nil || v.Analytic == nil {
		t.Fatalf("unexpected JSON: %s", out)
	}
	if r := v.Analytic.TTFTms / v.Latency.TTFTms; r < 1/1.15 || r > 1.15 {
		t.Errorf("TTFT analytic %.1f ms vs simulated %.1f ms", v.Analytic.TTFTms, v.Latency.TTFTms)
	}
	if r := v.Analytic.TPOTms / v.Latency.TPOTms; r < 1/1.15 || r > 1.15 {
		t.Errorf("TPOT analytic %.2f ms vs simulated %.2f ms", v.Analytic.TPOTms, v.Latency.TPOTms)
	}
}

func TestEstimateJSON(t *testing.T) {
	code, out, errs := estRunCLI(t, "estimate", "--gpu", "h200", "--precision", "fp8", "--isl", "2048", "--osl", "256", "--concurrency", "32", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v estJSONOut
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !v.Fits || v.Latency == nil || v.Latency.TPOTms <= 0 || v.Memory.KVBytesPerToken != 128<<10 || v.Memory.Precision != "fp8" {
		t.Errorf("unexpected JSON: %+v", v)
	}
}

func TestEstimateErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"estimate", "--gpu", "h900"}, 2, "rtx-4090"},
		{[]string{"estimate", "--engine", "tgi"}, 2, "sglang"},
		{[]string{"estimate", "--precision", "int3"}, 2, "q4_k_m"},
		{[]string{"estimate", "--model", "no/such-model"}, 2, "Meta-Llama-3.1-8B"},
		{[]string{"estimate", "--isl", "0", "--osl", "10"}, 2, "input length"},
		{[]string{"estimate", "--isl", "100"}, 2, "--osl"},
		{[]string{"estimate", "--isl", "10", "--osl", "10", "--rate", "-3"}, 2, "rate"},
		{[]string{"estimate", "--model", "meta-llama/Meta-Llama-3.1-70B", "--precision", "fp8", "--isl", "16000", "--osl", "100"}, 1, "short by"},
		{[]string{"estimate", "--scenarios", "x.csv"}, 2, "--out"},
	} {
		code, _, errs := estRunCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

func TestEstimateGPUFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mygpu.yaml")
	if err := os.WriteFile(p, []byte("name: lab-card\nmemory_gib: 48\nbandwidth_gbs: 1000\nbf16_tflops: 300\nfp8_tflops: 600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := estRunCLI(t, "estimate", "--gpu-file", p, "--gpu", "lab-card", "--isl", "512", "--osl", "64", "--concurrency", "4")
	if code != 0 || !strings.Contains(out, "lab-card") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
}

// TestScenariosRoundTrip writes a scenario file with good and bad rows and
// checks that every row comes back, bad ones with an error.
func TestScenariosRoundTrip(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.csv")
	out := filepath.Join(dir, "out.csv")
	data := "id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests\n" +
		"a,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,16,,\n" +
		"b,meta-llama/Meta-Llama-3.1-70B,h200,trtllm,fp8,2,2048,512,,2.5,200\n" +
		"c,meta-llama/Meta-Llama-3.1-8B,rtx-4090,llamacpp,q4_k_m,1,512,128,1,,\n" +
		"d,meta-llama/Meta-Llama-3.1-8B,h900,vllm,bf16,1,1024,256,16,,\n" +
		"e,meta-llama/Meta-Llama-3.1-70B,h100-sxm,vllm,fp8,1,16000,100,1,,\n" +
		"f,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,x,256,16,,\n" +
		"g,meta-llama/Meta-Llama-3.1-8B,h100-sxm,sglang,bf16,1,1024,256,,inf,100\n"
	if err := os.WriteFile(in, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := estRunCLI(t, "estimate", "--scenarios", in, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != strings.Join(scenarioOut, ",") {
		t.Fatalf("header %v", recs[0])
	}
	if len(recs) != 8 {
		t.Fatalf("%d rows, want 7 + header", len(recs)-1)
	}
	byID := map[string][]string{}
	for _, r := range recs[1:] {
		byID[r[0]] = r
	}
	for _, id := range []string{"a", "b", "c", "g"} {
		r := byID[id]
		if r[1] != "true" || r[len(r)-1] != "" || r[9] == "" {
			t.Errorf("row %s: %v", id, r)
		}
	}
	for id, want := range map[string]string{"d": "unknown GPU", "e": "short by", "f": "not an integer"} {
		r := byID[id]
		if r[1] != "false" || !strings.Contains(r[len(r)-1], want) {
			t.Errorf("row %s: %v, want error containing %q", id, r, want)
		}
	}
}

func FuzzEstimateScenarios(f *testing.F) {
	f.Add([]byte("id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,128,16,2,,\n"))
	f.Add([]byte("id,model,gpu,engine,isl,osl\n1,x,y,z,1,1\n\"bad\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 2000 {
			return
		}
		var out bytes.Buffer
		n, _, err := EstimateScenarios(context.Background(), bytes.NewReader(data), &out, hardware.Default(), nil, true)
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

func TestValidateEstimatorNeedsData(t *testing.T) {
	code, _, errs := estRunCLI(t, "validate-estimator", "--data", t.TempDir())
	if code == 0 || !strings.Contains(errs, "aiconfigurator_silicon_sample.csv") {
		t.Errorf("exit %d, %s", code, errs)
	}
}

// writeUserMeasurements writes a small user measurement file (Llama-3.1-8B
// on vLLM, two GPUs, four concurrencies) into dir and returns its path.
func writeUserMeasurements(t *testing.T, dir string) string {
	t.Helper()
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
	return user
}

func TestCalibrateUserFile(t *testing.T) {
	dir := t.TempDir()
	user := writeUserMeasurements(t, dir)
	out := filepath.Join(dir, "coeffs.json")
	code, stdout, errs := estRunCLI(t, "calibrate", "--data", dir+"/none", "--user", user, "--iter", "60", "--out", out, "--no-validate")
	if code == 0 {
		t.Fatalf("a missing --data folder should fail: %s", stdout)
	}
	code, _, errs = estRunCLI(t, "calibrate", "--user", user, "--user-only", "--iter", "60", "--out", out, "--no-validate")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
	code, _, errs = estRunCLI(t, "estimate", "--coeffs", out, "--isl", "1024", "--osl", "256", "--concurrency", "4")
	if code != 0 {
		t.Fatalf("estimate with fitted coefficients: %s", errs)
	}
}

// TestValidateEstimatorIndependentChecks runs validate-estimator on a user
// file alone (no shared data) and checks that the two checks on published
// data nobody fits — the TensorRT-LLM tables and the engines' KV-capacity
// logs, both embedded — are printed and are valid JSON (no NaN or Inf).
func TestValidateEstimatorIndependentChecks(t *testing.T) {
	dir := t.TempDir()
	user := writeUserMeasurements(t, dir)
	code, out, errs := estRunCLI(t, "validate-estimator", "--user-only", "--user", user, "--iter", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Independent published tables, never fitted", "trtllm-perf-v0.17", "KV capacity against published engine start-up logs", "Qwen/Qwen3-235B-A22B-FP8"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = estRunCLI(t, "validate-estimator", "--user-only", "--user", user, "--iter", "10", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var doc struct {
		Overall     []map[string]any `json:"overall"`
		Independent struct {
			Rows  int              `json:"rows"`
			Cells []map[string]any `json:"cells"`
		} `json:"independent"`
		KV struct {
			Scored  int              `json:"scored"`
			Results []map[string]any `json:"results"`
		} `json:"kv_capacity"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if len(doc.Overall) == 0 || doc.Independent.Rows < 100 || len(doc.Independent.Cells) == 0 || doc.KV.Scored == 0 || len(doc.KV.Results) == 0 {
		t.Errorf("--json document incomplete: %d overall cells, %d independent rows, %d KV rows scored", len(doc.Overall), doc.Independent.Rows, doc.KV.Scored)
	}
}

// TestEstimateKernelFactors checks that the text output names the fitted
// kernel factors a deployment uses: block-scaled FP8, and weight-only
// kernels for FP4 weights on a GPU without FP4 tensor cores (not on one with).
func TestEstimateKernelFactors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		not  bool
	}{
		{[]string{"--model", "Qwen/Qwen3-235B-A22B", "--gpu", "h200", "--engine", "vllm", "--precision", "fp8-block", "--tp", "4"}, "fp8-block kernels", false},
		{[]string{"--model", "openai/gpt-oss-120b", "--gpu", "h100-sxm", "--engine", "vllm", "--precision", "mxfp4"}, "weight-only kernels", false},
		{[]string{"--model", "openai/gpt-oss-120b", "--gpu", "b200", "--engine", "vllm", "--precision", "mxfp4"}, "weight-only kernels", true},
	} {
		args := append([]string{"estimate", "--isl", "1024", "--osl", "256", "--concurrency", "8"}, tc.args...)
		code, out, errs := estRunCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		if strings.Contains(out, tc.want) == tc.not {
			t.Errorf("%v: output containing %q is %v, want %v:\n%s", tc.args, tc.want, !tc.not, tc.not, out)
		}
	}
}

func TestCheckpointPrecision(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want string
	}{
		{`{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}`, "fp8-block"},
		{`{"quant_method": "fp8", "activation_scheme": "dynamic"}`, "fp8"},
		{`{"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}`, "mxfp4"},
		{`{"quant_method": "awq", "bits": 4, "group_size": 128}`, "int4-awq"},
		{`{"quant_method": "gptq", "bits": 4}`, "int4-gptq"},
		{`{"quant_method": "gptq", "bits": 8}`, ""},
		{`{"quant_method": "modelopt", "quant_algo": "NVFP4"}`, "nvfp4"},
		{`{"quant_method": "bitsandbytes"}`, ""},
	} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(`{"quantization_config": `+tc.q+`}`), &raw); err != nil {
			t.Fatal(err)
		}
		if got := checkpointPrecision(raw); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.q, got, tc.want)
		}
	}
	if got := checkpointPrecision(map[string]any{}); got != "" {
		t.Errorf("no quantization_config: %q", got)
	}
}

// TestScenariosSettingsColumns: the optional setting columns mean what the
// flags of the same name mean (each row equals the single estimate run with
// those flags), and a bad value in any of them gives that row an error
// naming the column while the other rows come out.
func TestScenariosSettingsColumns(t *testing.T) {
	head := "id,model,gpu,engine,precision,tp,isl,osl,concurrency,request_rate,num_requests,kv_dtype,mem_fraction,max_num_seqs,max_batched_tokens,context,gpus\n"
	good := []struct {
		row   string
		flags []string
	}{
		{"base,meta-llama/Meta-Llama-3.1-8B,h100-sxm,trtllm,fp8,1,1024,256,,inf,500,,,,,,", nil},
		{"kv,meta-llama/Meta-Llama-3.1-8B,h100-sxm,trtllm,fp8,1,1024,256,,inf,500,fp8,0.95,,,,1", []string{"--kv-dtype", "fp8", "--mem-fraction", "0.95"}},
		{"seqs,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,64,,,,,32,4096,2048,", []string{"--max-num-seqs", "32", "--max-batched-tokens", "4096", "--context", "2048"}},
		{"llama,meta-llama/Meta-Llama-3.1-8B,rtx-4090,llamacpp,q4_k_m,1,512,128,4,,,q8_0,,4,1024,4096,", []string{"--kv-dtype", "q8_0", "--max-num-seqs", "4", "--max-batched-tokens", "1024", "--context", "4096"}},
	}
	bad := map[string]string{
		"bad-kv,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,fp7,,,,,":      "kv_dtype",
		"bad-frac,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,1.5,,,,":    "mem_fraction",
		"bad-seqs,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,0,,,":      "max_num_seqs",
		"bad-tok,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,,many,,":    "max_batched_tokens",
		"bad-ctx,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,,,1000,":    "context",
		"bad-gpus,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,,,,8":      "gpus",
		"bad-kvpool,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,q4_0,,,,,": "q4_0",
	}
	var b strings.Builder
	b.WriteString(head)
	for _, g := range good {
		b.WriteString(g.row + "\n")
	}
	for r := range bad {
		b.WriteString(r + "\n")
	}
	var out bytes.Buffer
	n, nbad, err := EstimateScenarios(context.Background(), strings.NewReader(b.String()), &out, hardware.Default(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(good)+len(bad) || nbad != len(bad) {
		t.Fatalf("%d rows, %d bad; want %d, %d", n, nbad, len(good)+len(bad), len(bad))
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string][]string{}
	for _, r := range recs[1:] {
		byID[r[0]] = r
	}
	col := func(name string) int {
		for i, c := range scenarioOut {
			if c == name {
				return i
			}
		}
		t.Fatalf("no output column %s", name)
		return 0
	}
	for r, want := range bad {
		id, _, _ := strings.Cut(r, ",")
		got := byID[id]
		if got[1] != "false" || !strings.Contains(got[len(got)-1], want) {
			t.Errorf("row %s: %v, want an error naming %q", id, got, want)
		}
	}
	// Each good row equals the single-run estimate with the flags.
	for _, g := range good {
		f := strings.Split(g.row, ",")
		got := byID[f[0]]
		if got[1] != "true" {
			t.Fatalf("row %s: %v", f[0], got)
		}
		args := []string{"estimate", "--json", "--analytic", "--model", f[1], "--gpu", f[2], "--engine", f[3], "--precision", f[4], "--tp", f[5], "--isl", f[6], "--osl", f[7]}
		if f[9] != "" {
			args = append(args, "--rate", f[9], "--num-requests", f[10])
		} else {
			args = append(args, "--concurrency", f[8])
		}
		code, js, errs := estRunCLI(t, append(args, g.flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var e struct {
			Memory struct {
				KVCapacityTokens float64 `json:"kv_capacity_tokens"`
				MaxConcurrency   int     `json:"max_concurrency"`
			} `json:"memory"`
			Analytic struct {
				TPOTms     float64 `json:"tpot_ms"`
				OutputTokS float64 `json:"output_tok_s"`
			} `json:"analytic"`
		}
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			want string
		}{
			{"kv_capacity_tokens", fmtTokens(e.Memory.KVCapacityTokens)},
			{"max_concurrency", strconv.Itoa(e.Memory.MaxConcurrency)},
			{"tpot_ms", ff(e.Analytic.TPOTms, 3)},
			{"output_tok_s", ff(e.Analytic.OutputTokS, 1)},
		} {
			if got[col(c.name)] != c.want {
				t.Errorf("row %s %s = %s, the flags give %s", f[0], c.name, got[col(c.name)], c.want)
			}
		}
	}
	// The settings change what they should: FP8 KV and the 0.95 fraction
	// more than double TRT-LLM's KV tokens; max_num_seqs caps concurrency.
	kvTok := func(id string) float64 {
		v, err := strconv.ParseFloat(byID[id][col("kv_capacity_tokens")], 64)
		if err != nil {
			t.Fatalf("row %s: %v", id, err)
		}
		return v
	}
	if r := kvTok("kv") / kvTok("base"); r < 2 || r > 2.3 {
		t.Errorf("fp8 KV at 0.95 / bf16 KV at 0.9: %.2f× the tokens, want ~2.1×", r)
	}
	if mc := byID["seqs"][col("max_concurrency")]; mc != "32" {
		t.Errorf("max_num_seqs 32: max_concurrency %s", mc)
	}
}

// TestCalibrateUserChild: calibrate --user fits rows whose model is a child
// given as a config path (relative to the measurement file) or a checkpoint
// directory; before, every such row was skipped as "model not described".
func TestCalibrateUserChild(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 9216,
"num_hidden_layers": 20, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 128256,
"rms_norm_eps": 1e-5, "hidden_act": "silu", "torch_dtype": "bfloat16"}`
	ck := filepath.Join(dir, "child-ckpt")
	if err := os.MkdirAll(ck, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "child.json"), filepath.Join(ck, "config.json")} {
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString("engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\n")
	for _, c := range []string{"1", "4", "16", "64"} {
		b.WriteString("vllm,h100-sxm,child.json,bf16,auto,1,1024,256," + c + ",40,6,\n")
		b.WriteString("vllm,h200," + ck + ",bf16,auto,1,1024,256," + c + ",35,5,\n")
	}
	user := filepath.Join(dir, "child.csv")
	if err := os.WriteFile(user, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs := estRunCLI(t, "calibrate", "--user", user, "--user-only", "--iter", "60", "--no-validate", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "8 measurement rows usable") || strings.Contains(errs, "not described") {
		t.Errorf("stderr: %s", errs)
	}
	var cf struct {
		Families map[string]struct {
			Rows int `json:"rows"`
		} `json:"families"`
	}
	if err := json.Unmarshal([]byte(stdout), &cf); err != nil {
		t.Fatal(err)
	}
	if cf.Families["vllm"].Rows != 8 {
		t.Errorf("vllm fitted on %d rows, want the 8 child rows", cf.Families["vllm"].Rows)
	}
}
