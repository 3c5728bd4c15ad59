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

	"github.com/autocompress/autocompress/estimate/scenarios"
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
		{[]string{"estimate", "--isl", "0", "--osl", "10"}, 2, "-isl: out of range; want an integer in [1, 67108864]"},
		{[]string{"estimate", "--isl", "10", "--osl", "10", "--rate", "fast"}, 2, "--rate"},
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
	if strings.Join(recs[0], ",") != strings.Join(scenarios.Out, ",") {
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

func TestValidateEstimatorNeedsData(t *testing.T) {
	code, _, errs := estRunCLI(t, "validate-estimator", "--groundtruth", t.TempDir())
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
	code, stdout, errs := estRunCLI(t, "calibrate", "--groundtruth", dir+"/none", "--user", user, "--iter", "60", "--out", out, "--no-validate")
	if code == 0 {
		t.Fatalf("a missing --groundtruth folder should fail: %s", stdout)
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
// file alone (no shared data) and checks that the checks on published
// data nobody fits — the TensorRT-LLM tables and the engines' KV-capacity
// logs — the consumer-GPU tables (which fit one term, held out by source)
// and the llama.cpp MoE rows on GeForce, all embedded, are printed and are
// valid JSON (no NaN or Inf).
func TestValidateEstimatorIndependentChecks(t *testing.T) {
	dir := t.TempDir()
	user := writeUserMeasurements(t, dir)
	code, out, errs := estRunCLI(t, "validate-estimator", "--user-only", "--user", user, "--iter", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Independent published tables, never fitted", "trtllm-perf-v0.17", "KV capacity against published engine start-up logs", "Qwen/Qwen3-235B-A22B-FP8",
		"Consumer GPUs: published serving measurements", "mushfiq-4090-mistral7b", "zhjunqin-3090-llama3-8b",
		"each source held out of the fit that predicts it", "class: W4A16 dense", "cloudrift-4090-qwen3coder-awq", "class: W4A16 MoE",
		"By architecture and clients", "llama.cpp MoE on GeForce", "am17an-16834-4090", "openai/gpt-oss-20b priced as mxfp4_moe"} {
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
		Consumer struct {
			Priced int              `json:"priced"`
			Cells  []map[string]any `json:"cells"`
		} `json:"consumer_gpus"`
		KV struct {
			Scored  int              `json:"scored"`
			Results []map[string]any `json:"results"`
		} `json:"kv_capacity"`
		MoE []map[string]any `json:"llamacpp_moe_geforce"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if len(doc.Overall) == 0 || doc.Independent.Rows < 100 || len(doc.Independent.Cells) == 0 || doc.KV.Scored == 0 || len(doc.KV.Results) == 0 ||
		doc.Consumer.Priced == 0 || len(doc.Consumer.Cells) == 0 || len(doc.MoE) == 0 {
		t.Errorf("--json document incomplete: %d overall cells, %d independent rows, %d KV rows scored, %d consumer rows priced, %d llama.cpp MoE cells",
			len(doc.Overall), doc.Independent.Rows, doc.KV.Scored, doc.Consumer.Priced, len(doc.MoE))
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

// TestEstimateQuantizedCheckpoint: a checkpoint directory whose
// config.json declares AWQ or GPTQ 4-bit (numbers decoded as json.Number)
// is priced at that precision, in one run and in batch mode; one that
// declares a form nobody can price is refused, not priced as bf16.
func TestEstimateQuantizedCheckpoint(t *testing.T) {
	base := `{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
 "max_position_embeddings": 131072, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "torch_dtype": "float16", "vocab_size": 128256, "quantization_config": `
	write := func(q string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(base+q+"}"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct{ q, want string }{
		{`{"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm", "zero_point": true}`, "int4-awq"},
		{`{"bits": 4, "desc_act": true, "group_size": 128, "quant_method": "gptq", "sym": true}`, "int4-gptq"},
	} {
		dir := write(tc.q)
		code, out, errs := estRunCLI(t, "estimate", "--model", dir, "--gpu", "l4", "--isl", "512", "--osl", "64", "--analytic", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.want, code, errs)
		}
		var v estJSONOut
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// 8.0 B parameters: ≈ 4.2 bits on the 7.0 B linear weights plus the
		// 16-bit embedding and head, ≈ 5.4 GiB (bf16 would be 15 GiB).
		if v.Memory.Precision != tc.want || v.Memory.WeightsGiB > 6 {
			t.Errorf("%s: priced as %s with %.1f GiB of weights", tc.want, v.Memory.Precision, v.Memory.WeightsGiB)
		}
		in := filepath.Join(t.TempDir(), "in.csv")
		if err := os.WriteFile(in, []byte("id,model,gpu,engine,isl,osl\nq,"+dir+",l4,vllm,512,64\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		outCSV := filepath.Join(t.TempDir(), "out.csv")
		if code, _, errs := estRunCLI(t, "estimate", "--scenarios", in, "--out", outCSV); code != 0 {
			t.Fatalf("batch: exit %d: %s", code, errs)
		}
		b, _ := os.ReadFile(outCSV)
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil || len(rows) != 2 {
			t.Fatalf("batch output %q: %v", b, err)
		}
		if w, _ := strconv.ParseFloat(rows[1][2], 64); w <= 0 || w > 6 {
			t.Errorf("batch %s: weights_gib %s", tc.want, rows[1][2])
		}
	}
	dir := write(`{"bits": 8, "group_size": 128, "quant_method": "gptq"}`)
	code, _, errs := estRunCLI(t, "estimate", "--model", dir, "--gpu", "l4", "--isl", "512", "--osl", "64", "--analytic")
	if code == 0 || !strings.Contains(errs, "8-bit") || !strings.Contains(errs, "--precision") {
		t.Errorf("gptq 8-bit: exit %d, %q; want a refusal naming the form and --precision", code, errs)
	}
	if code, _, errs := estRunCLI(t, "estimate", "--model", dir, "--gpu", "l4", "--isl", "512", "--osl", "64", "--analytic", "--precision", "fp8"); code != 0 {
		t.Errorf("--precision overrides an unpriceable quantization_config: exit %d, %s", code, errs)
	}
}

// TestTPOneRule: estimate and validate accept and refuse the same TP
// degrees on one checkpoint (8 heads in 4 KV groups, FFN 600: TP 1, 2, 4
// and 8 split it; 3, 5, 6 and 7 do not).
func TestTPOneRule(t *testing.T) {
	parent := pruneParent(t)
	for tp := 1; tp <= 8; tp++ {
		ts := strconv.Itoa(tp)
		vcode, vout, verr := estRunCLI(t, "validate", "--model", parent, "--engine", "vllm", "--tp", ts)
		ecode, _, eerr := estRunCLI(t, "estimate", "--model", parent, "--gpu", "h100-sxm", "--tp", ts, "--isl", "64", "--osl", "8", "--analytic")
		want := tp == 1 || tp == 2 || tp == 4 || tp == 8
		if (vcode == 0) != want || (ecode == 0) != want {
			t.Errorf("TP %d: validate exit %d, estimate exit %d; want both to %s\n%s%s%s", tp, vcode, ecode, map[bool]string{true: "accept", false: "refuse"}[want], vout, verr, eerr)
		}
		if !want && (ecode != 2 || !strings.Contains(eerr, "--tp "+ts) || !strings.Contains(eerr, "allows: 1, 2, 4, 8")) {
			t.Errorf("TP %d: estimate exit %d, %q; want 2 naming --tp and the valid degrees", tp, ecode, eerr)
		}
	}
}

// TestEstimateGPUCount: a multi-GPU consumer node is priced (by --gpus or
// a name ending in xN), a count beyond the node is refused naming it, and
// the "does not fit" advice names a TP that does fit, within the node.
func TestEstimateGPUCount(t *testing.T) {
	base := []string{"estimate", "--model", "Qwen/Qwen3-8B", "--isl", "1024", "--osl", "128", "--analytic", "--json"}
	for _, args := range [][]string{{"--gpu", "rtx-4090", "--tp", "2"}, {"--gpu", "rtx-4090x2", "--tp", "2"}, {"--gpu", "rtx-4090", "--gpus", "2", "--tp", "2"}} {
		code, out, errs := estRunCLI(t, append(base, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var v estJSONOut
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Memory.TP != 2 || !v.Fits {
			t.Errorf("%v: %v %s", args, err, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpu", "rtx-4090", "--gpus", "2", "--tp", "4"}, "the node has 2"},
		{[]string{"--gpu", "rtx-4090x2", "--gpus", "4"}, "--gpu rtx-4090x2"},
		{[]string{"--gpu", "rtx-4090x9"}, "1 to 8"},
		{[]string{"--gpu", "apple-m3-max", "--engine", "llamacpp", "--precision", "q4_0", "--tp", "2"}, "at most 1"},
		{[]string{"--gpu", "rtx-4090", "--gpus", "0"}, "-gpus: out of range"},
	} {
		code, _, errs := estRunCLI(t, append(base, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want a refusal containing %q", tc.args, code, errs, tc.want)
		}
	}
	// Batch rows name a node the same way.
	in := filepath.Join(t.TempDir(), "in.csv")
	os.WriteFile(in, []byte("id,model,gpu,engine,tp,isl,osl\na,Qwen/Qwen3-8B,rtx-4090x2,vllm,2,1024,128\nb,Qwen/Qwen3-8B,rtx-4090x2,vllm,4,1024,128\n"), 0o644)
	outCSV := filepath.Join(t.TempDir(), "out.csv")
	if code, _, errs := estRunCLI(t, "estimate", "--scenarios", in, "--out", outCSV); code != 0 {
		t.Fatalf("batch: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(outCSV)
	rows, _ := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if len(rows) != 3 || rows[1][1] != "true" || !strings.Contains(rows[2][len(rows[2])-1], "the node has 2") {
		t.Errorf("batch rows: %q", rows)
	}
	// The advice is true: the TP it names fits, and a full node names none.
	args := []string{"estimate", "--model", "Qwen/Qwen3-32B", "--gpu", "rtx-4090", "--isl", "1024", "--osl", "128", "--analytic"}
	code, _, errs := estRunCLI(t, args...)
	i := strings.Index(errs, "it fits at --tp ")
	if code != 1 || i < 0 {
		t.Fatalf("Qwen3-32B on one rtx-4090: exit %d, %q; want a does-not-fit naming a TP", code, errs)
	}
	tp := strings.Fields(errs[i+len("it fits at --tp "):])[0]
	tp = strings.TrimRight(tp, ";")
	if code, _, errs := estRunCLI(t, append(args, "--tp", tp)...); code != 0 {
		t.Errorf("advised --tp %s does not fit: exit %d, %s", tp, code, errs)
	}
	code, _, errs = estRunCLI(t, append(args, "--gpus", "2", "--tp", "2")...)
	if code != 1 || strings.Contains(errs, "larger --tp") || !strings.Contains(errs, "no larger TP up to the node's 2 GPUs fits") {
		t.Errorf("full node: exit %d, %q", code, errs)
	}
}

// TestContextRule: estimate, search, generate, eval and bench-serve refuse
// a context past the model's max_position_embeddings with exit 2, the same
// message and the same override.
func TestContextRule(t *testing.T) {
	text := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(text, []byte("once upon a time there was a tiny model. "), 0o644); err != nil {
		t.Fatal(err)
	}
	searchOut := filepath.Join(t.TempDir(), "o")
	for _, args := range [][]string{
		{"search", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "h100-sxm", "--engine", "vllm", "--isl", "200000", "--osl", "64",
			"--concurrency", "4", "--max-memory", "60GiB", "--out", searchOut},
		{"search", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "b200", "--engine", "vllm", "--workload", "long-context-coding",
			"--context", "200000", "--max-memory", "178GB", "--out", searchOut},
		{"estimate", "--isl", "200000", "--osl", "128", "--analytic"}, // Llama 3.1: 131,072 positions
		{"estimate", "--context", "200000", "--analytic"},
		{"generate", "--model", "parent", "--ids", "1,2", "--max-tokens", "1000"}, // parent: 512 positions
		{"eval", "--model", "parent", "--data", text, "--seq-len", "1000"},
		{"bench-serve", "--model", "parent", "--isl", "500", "--osl", "100"},
		{"bench-serve", "--model", "parent", "--workload", "chat"},
	} {
		code, _, errs := estRunCLI(t, args...)
		if code != 2 || !strings.Contains(errs, "max_position_embeddings") || !strings.Contains(errs, "--allow-long-context") {
			t.Errorf("%v: exit %d, %q; want 2 and a message naming the limit and --allow-long-context", args, code, errs)
		}
	}
	if _, err := os.Stat(searchOut); !os.IsNotExist(err) {
		t.Errorf("a refused search wrote %s (%v)", searchOut, err)
	}
	code, out, errs := estRunCLI(t, "estimate", "--isl", "200000", "--osl", "128", "--analytic", "--allow-long-context")
	if code != 0 || !strings.Contains(out, "context 200128 tokens: input + output") || !strings.Contains(out, "past the model's max_position_embeddings") {
		t.Errorf("--allow-long-context: exit %d, %s%s", code, out, errs)
	}
	// An unrequested context says where it comes from.
	code, out, errs = estRunCLI(t, "estimate", "--analytic")
	if code != 0 || !strings.Contains(out, "context 16384 tokens: the chat workload's limit; the longest request is 10240 tokens") {
		t.Errorf("default context: exit %d, %s%s", code, out, errs)
	}
	code, _, errs = estRunCLI(t, "generate", "--model", "parent", "--ids", "1,2", "--max-tokens", "4", "--greedy")
	if code != 0 {
		t.Errorf("generate within the limit: exit %d, %s", code, errs)
	}
}

// TestEstimateImpossibleDeployment: exit 2, the flag at fault and what is valid.
func TestEstimateImpossibleDeployment(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpu", "apple-m3-max", "--engine", "vllm"}, "--engine: vllm does not run on apple-m3-max (a metal device); valid: llamacpp"},
		{[]string{"--gpu", "h100-sxm", "--engine", "native"}, "valid: llamacpp, sglang, trtllm, vllm"},
		{[]string{"--gpu", "cpu-local", "--engine", "trtllm"}, "valid: llamacpp, native"},
		{[]string{"--precision", "mxfp4"}, "--precision: precision mxfp4 quantizes MoE experts only"},
	} {
		code, _, errs := estRunCLI(t, append([]string{"estimate", "--analytic"}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	// Batch rows get the same refusal as their error.
	in := filepath.Join(t.TempDir(), "in.csv")
	os.WriteFile(in, []byte("id,model,gpu,engine,isl,osl\na,meta-llama/Meta-Llama-3.1-8B,apple-m3-max,vllm,512,64\nb,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,512,64\n"), 0o644)
	out := filepath.Join(t.TempDir(), "out.csv")
	if code, _, errs := estRunCLI(t, "estimate", "--scenarios", in, "--out", out); code != 0 {
		t.Fatalf("batch: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(out)
	rows, _ := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if len(rows) != 3 || !strings.Contains(rows[1][len(rows[1])-1], "does not run on apple-m3-max") || rows[2][1] != "true" {
		t.Errorf("batch rows: %q", rows)
	}
}

// TestEstimateLlamaCPPSlots: the KV capacity and the concurrency printed
// for llama.cpp are the same allocation, and the slot rule is spelled out.
func TestEstimateLlamaCPPSlots(t *testing.T) {
	code, out, errs := estRunCLI(t, "estimate", "--model", "Qwen/Qwen3-0.6B", "--gpu", "rtx-4090", "--engine", "llamacpp",
		"--isl", "512", "--osl", "128", "--concurrency", "3", "--analytic")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"capacity 2304 tokens = 3 slots (-np) × 768 cells (the 640-token context padded to 256)",
		"max concurrency at 640-token context: 3 (the slots); memory would hold"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
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
		{"node,meta-llama/Meta-Llama-3.1-8B,rtx-4090,vllm,bf16,2,512,128,4,,,,,,,,2", []string{"--gpus", "2"}},
	}
	bad := map[string]string{
		"bad-kv,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,fp7,,,,,":      "kv_dtype",
		"bad-frac,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,1.5,,,,":    "mem_fraction",
		"bad-seqs,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,0,,,":      "max_num_seqs",
		"bad-tok,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,,many,,":    "max_batched_tokens",
		"bad-ctx,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,1,1024,256,4,,,,,,,1000,":    "context",
		"bad-gpus,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,bf16,2,1024,256,4,,,,,,,,1":      "gpus",
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
	n, nbad, err := scenarios.Run(context.Background(), strings.NewReader(b.String()), &out, hardware.Default(), nil, true)
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
		for i, c := range scenarios.Out {
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
			{"kv_capacity_tokens", scenarios.FormatTokens(e.Memory.KVCapacityTokens)},
			{"max_concurrency", strconv.Itoa(e.Memory.MaxConcurrency)},
			{"tpot_ms", scenarios.FormatFloat(e.Analytic.TPOTms, 3)},
			{"output_tok_s", scenarios.FormatFloat(e.Analytic.OutputTokS, 1)},
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

// TestEstimateExplainsItself: the text says which figures to use and what
// the budget is, the error band has its p90 beside the median, and the
// JSON keeps the analytic and simulated figures under their own keys.
func TestEstimateExplainsItself(t *testing.T) {
	code, out, errs := estRunCLI(t, "estimate")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Use the analytic figures", "engine budget: the 0.90 memory fraction", "median / p90",
		"context 16384 tokens: the chat workload's limit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, analytic := range []bool{false, true} {
		args := []string{"estimate", "--json"}
		if analytic {
			args = append(args, "--analytic")
		}
		code, out, errs := estRunCLI(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var v estJSONOut
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Use != "analytic" || v.Analytic == nil || v.Context == nil || v.Context.Tokens != 16384 || v.Latency == nil {
			t.Errorf("--analytic %v: %s", analytic, out)
		}
		if analytic != (v.Simulated == nil) {
			t.Errorf("--analytic %v: simulated present %v", analytic, v.Simulated != nil)
		}
		if !analytic && (v.Simulated.TTFTms == v.Analytic.TTFTms || v.Simulated.TTFTP90ms == 0) {
			t.Errorf("analytic and simulated figures are not kept apart: %s", out)
		}
	}
}

// TestNativeEstimateSpeaksNative (issue 17, class 11): the native engine's
// estimate, its infeasibility message and the search's hints for it speak
// of what the native engine has (float32 weights, sequences in flight, a
// process's memory) and name nothing it lacks: llama-server's -np slots
// and padded cells, CUDA, GPUs, GGUF types, fp8/nvfp4, KV types, TP.
func TestNativeEstimateSpeaksNative(t *testing.T) {
	lacks := []string{"-np", "slot", "cells", "padded", "CUDA", "GPU", "GGUF", "q4_k_m", "q8_0", "fp8", "nvfp4", "--kv-dtype", "--precision", "lower precision", "--tp", "tensor parallel"}
	check := func(what, text string) {
		t.Helper()
		for _, bad := range lacks {
			if strings.Contains(text, bad) {
				t.Errorf("%s names %q, which the native engine does not have:\n%s", what, bad, text)
			}
		}
	}
	args := []string{"estimate", "--gpu", "cpu-local", "--engine", "native", "--isl", "128", "--osl", "32", "--concurrency", "4"}
	code, out, errs := estRunCLI(t, append(args, "--model", "Qwen/Qwen3-0.6B")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	check("the native estimate", out+errs)
	for _, want := range []string{"Memory of the process", "process + run garbage", "peak resident memory",
		"capacity 640 tokens = 4 sequences in flight × 160 tokens (prompt + output)", "4 run at once", "Scheduling (native engine, engine.Serve)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the native estimate lacks %q:\n%s", want, out)
		}
	}
	// A model that does not fit: the memory plan and the error.
	code, out, errs = estRunCLI(t, append(args, "--model", "meta-llama/Llama-3.1-70B")...)
	if code != 1 || !strings.Contains(errs, "does not fit on cpu-local with native") {
		t.Fatalf("70B on cpu-local: exit %d: %s", code, errs)
	}
	check("the native infeasibility", out+errs)
	if strings.Contains(out, "hold -") {
		t.Errorf("a negative count of sequences:\n%s", out)
	}
	// The search's hints when memory binds.
	code, out, errs = estRunCLI(t, "search", "--model", "Qwen/Qwen3-0.6B", "--gpu", "cpu-local", "--engine", "native", "--isl", "128", "--osl", "32",
		"--concurrency", "4", "--max-memory", "10MiB", "--out", filepath.Join(t.TempDir(), "o"))
	if code == 0 || !strings.Contains(out+errs, "to make it feasible") {
		t.Fatalf("search with a 10 MiB budget: exit %d: %s %s", code, out, errs)
	}
	check("the native search's hints", errs)
}
