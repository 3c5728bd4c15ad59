package groundtruth

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

func TestDescribeMatchesPublishedSizes(t *testing.T) {
	for id, want := range map[string]float64{
		"meta-llama/Llama-3.1-8B": 8.03, "meta-llama/Llama-3.1-70B": 70.55, "Qwen/Qwen3-32B": 32.76,
		"Qwen/Qwen3-235B-A22B-FP8": 235.09, "mistralai/Mixtral-8x7B-v0.1": 46.70, "meta-llama/Llama-2-7b-hf": 6.74,
		"openai/gpt-oss-120b": 116.83, "nvidia/Llama-3.1-8B-Instruct-FP8": 8.03,
	} {
		m, ok := published.Describe(id)
		if !ok {
			t.Fatalf("%s not described", id)
		}
		p := float64(m.Params().Total) / 1e9
		if math.Abs(p-want)/want > 0.01 {
			t.Errorf("%s: %.2f B params, published %.2f B", id, p, want)
		}
	}
	if _, ok := published.Describe("deepseek-ai/DeepSeek-R1"); ok {
		t.Error("DeepSeek-R1 (MLA) should not be described")
	}
}

func TestReadUser(t *testing.T) {
	good := "engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\n" +
		"vllm,h100-sxm,meta-llama/Llama-3.1-8B,bf16,auto,1,1024,256,16,80.5,9.1,\n" +
		"sglang,h200,unknown/model,bf16,auto,1,1024,256,16,80.5,9.1,\n"
	sk := Skipped{}
	rows, err := ReadUser(strings.NewReader(good), "mine.csv", sk)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].TPOTms != 9.1 || rows[0].Concurrency != 16 || sk["model not described (mine.csv)"] != 1 {
		t.Fatalf("rows %+v skipped %v", rows, sk)
	}
	for _, tc := range []struct{ in, err string }{
		{"", "empty file"},
		{"engine,gpu\n", "missing columns"},
		{"engine,gpu,model,isl,osl,concurrency\ntgi,h100,m,1,1,1\n", "unknown engine"},
		{"engine,gpu,model,isl,osl,concurrency\nvllm,h100,m,0,1,1\n", "positive integers"},
		{"engine,gpu,model,isl,osl,concurrency,ttft_ms\nvllm,h100,m,1,1,1,\n", "no measurement"},
		{"engine,gpu,model,isl,osl,concurrency,ttft_ms\nvllm,h100,m,1,1,1,-3\n", "non-negative"},
	} {
		_, err := ReadUser(strings.NewReader(tc.in), "f.csv", Skipped{})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		}
	}
}

// childConfig is a depth- and width-pruned Llama-3.1-8B as a search would
// write it: 20 layers, FFN 9216.
const childConfig = `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
"intermediate_size": 9216, "num_hidden_layers": 20, "num_attention_heads": 32, "num_key_value_heads": 8,
"head_dim": 128, "vocab_size": 128256, "rms_norm_eps": 1e-5, "hidden_act": "silu", "torch_dtype": "bfloat16"}`

// TestReadUserModelPaths: a user row may name its model by a config.json
// path or a checkpoint directory (relative to the working directory or to
// the measurement file), not only by an id the ground-truth tables know; the
// rows keep the loaded architecture and are prepared, not skipped. A path
// that exists but does not load is an error naming its line.
func TestReadUserModelPaths(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "child-20L")
	if err := os.MkdirAll(ck, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{filepath.Join(ck, "config.json"): childConfig, filepath.Join(dir, "child.json"): childConfig,
		filepath.Join(dir, "broken.json"): "{not json"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "mine.csv")
	in := "engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s\n" +
		"vllm,h100-sxm,child.json,bf16,auto,1,1024,256,16,60,6,\n" + // relative to the file
		"vllm,h100-sxm," + ck + ",bf16,auto,1,1024,256,16,60,6,\n" + // checkpoint directory
		"vllm,h100-sxm,nvidia/Llama-3.1-8B-Instruct-FP8,fp8,auto,1,1024,256,16,60,6,\n" +
		"vllm,h100-sxm,no/such-model,bf16,auto,1,1024,256,16,60,6,\n"
	sk := Skipped{}
	rows, err := ReadUser(strings.NewReader(in), file, sk)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || sk["model not described ("+file+")"] != 1 {
		t.Fatalf("%d rows, skipped %v", len(rows), sk)
	}
	for _, r := range rows[:2] {
		if r.Arch == nil || len(r.Arch.Layers) != 20 || r.Arch.Layers[0].MLP.Width != 9216 {
			t.Fatalf("row %s: architecture %+v", r.Model, r.Arch)
		}
	}
	ps := Prepare(rows, sk)
	if len(ps) != 3 {
		t.Fatalf("%d of 3 rows prepared (skipped %v)", len(ps), sk)
	}
	// The child is priced as itself: 20 of 32 layers, narrower FFN, so
	// faster than the 8B parent under the same coefficients.
	co, _ := estimate.DefaultCoeffs().Family("vllm")
	child, _, _ := ps[0].Predict(co, TPOT)
	parent, _, _ := ps[2].Predict(co, TPOT)
	if !(child > 0 && child < 0.8*parent) {
		t.Errorf("child TPOT %.2f ms, 8B FP8 parent %.2f ms", child*1e3, parent*1e3)
	}
	_, err = ReadUser(strings.NewReader("engine,gpu,model,isl,osl,concurrency,tpot_ms\nvllm,h100-sxm,x,1,1,1,5\nvllm,h100-sxm,broken.json,1,1,1,5\n"), file, Skipped{})
	if err == nil || !strings.Contains(err.Error(), ":3:") || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("broken config: %v, want an error at line 3 naming it", err)
	}
}

// TestReadAICProvenanceRules checks the two provenance rules of the silicon
// sample's README: wip=True runs and several-replica runs (client
// concurrency ≠ batch_size) are skipped and counted; other rows are kept
// with batch_size as the concurrency.
func TestReadAICProvenanceRules(t *testing.T) {
	head := "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,silicon_ttft_ms,silicon_tpot_ms\n"
	row := func(src string, batch int) string {
		return fmt.Sprintf("r,%q,vllm,0.12.0,meta-llama/Llama-3.1-8B,h100_sxm,bf16,agg,1024,128,,,%d,1,1,1,80,9\n", src, batch)
	}
	in := head +
		row("db-dump/2026-04-27; silicon_concurrency=16; measured=2026-04-17", 16) +
		row("source_file=x.csv; silicon_concurrency=16; wip=True", 16) +
		row("source_file=x.csv; silicon_concurrency=64", 16) +
		row("source_file=x.csv", 8) // no silicon_concurrency: batch_size is used
	sk := Skipped{}
	rows, err := ReadAIC(strings.NewReader(in), "aic.csv", sk)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Concurrency != 16 || rows[1].Concurrency != 8 {
		t.Fatalf("rows %+v", rows)
	}
	if sk["marked wip=True (aic)"] != 1 || sk["client concurrency is not batch_size: several replicas (aic)"] != 1 {
		t.Fatalf("skipped %v", sk)
	}
	// A key must match a whole item, not a prefix or a value.
	if hasItem("a=1; wip=Truely", "wip=True") || !hasItem(" wip=True ;b", "wip=True") {
		t.Error("hasItem matches partial items")
	}
	if v, ok := itemValue("x_silicon_concurrency=3; silicon_concurrency=5", "silicon_concurrency"); !ok || v != "5" {
		t.Errorf("itemValue = %q, %v", v, ok)
	}
}

func TestLoadShared(t *testing.T) {
	dir := sdtest.Require(t, "groundtruth")
	rows, sk, err := LoadShared(dir)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Source]++
		if r.TP < 1 || r.ISL < 1 || r.OSL < 1 {
			t.Fatalf("bad row %+v", r)
		}
	}
	// 3619 aggregated AIC rows, of which the described models (Llama-3.1-8B/70B,
	// Qwen3-32B/235B, gpt-oss-120b) are about 1,700.
	if count["aic"] < 1500 || count["argonne"] < 1300 || count["argonne-ttft"] < 15 {
		t.Errorf("rows per source %v", count)
	}
	if sk["disaggregated (aic)"] != 1602 {
		t.Errorf("disaggregated rows skipped: %d, want 1602 (README)", sk["disaggregated (aic)"])
	}
	if !strings.Contains(sk.String(), "model not described") {
		t.Errorf("skip reasons: %s", sk)
	}
}

// TestHeldOutErrors runs the leave-one-GPU-out / leave-one-model-out
// validation on the shared ground truth and asserts the medians it reaches.
// The issue's targets are 8 % TPOT, 15 % TTFT and 10 % throughput; the model
// reaches them only partly (see the report), so the bounds below are what it
// achieves, with a small margin, to catch regressions.
func TestHeldOutErrors(t *testing.T) {
	dir := sdtest.Require(t, "groundtruth")
	rows, sk, err := LoadShared(dir)
	if err != nil {
		t.Fatal(err)
	}
	ps := Prepare(rows, sk)
	iter := 300
	if testing.Short() {
		iter = 90
	}
	rep, err := Validate(context.Background(), ps, estimate.PriorCoeffs(), iter)
	if err != nil {
		t.Fatal(err)
	}
	reached := map[Metric]float64{TPOT: heldOutTPOT, TTFT: heldOutTTFT, Throughput: heldOutThroughput}
	for _, c := range rep.Overall {
		t.Logf("held-out %s: median %.1f%% p90 %.1f%% (n=%d)", c.Metric, c.Median*100, c.P90*100, c.N)
		if c.Median > reached[c.Metric] {
			t.Errorf("held-out median %s APE %.1f%% exceeds %.1f%%", c.Metric, c.Median*100, reached[c.Metric]*100)
		}
	}
	if len(rep.Overall) != 3 {
		t.Errorf("overall cells: %+v", rep.Overall)
	}
	// The architecture × client-band split holds every held-out TPOT and
	// throughput error once, MoE rows included.
	n := map[Metric]int{}
	moe := 0
	for _, c := range rep.Batch {
		n[c.Metric] += c.N
		if c.Arch == "moe" {
			moe += c.N
		}
		t.Logf("%s %s %s clients %s: n=%d median %.1f%% bias %+.1f%%", c.Family, c.Metric, c.Arch, c.Band, c.N, c.Median*100, c.Bias*100)
	}
	for _, c := range rep.Overall {
		if c.Metric != TTFT && n[c.Metric] != c.N {
			t.Errorf("%s: %d errors by band, %d overall", c.Metric, n[c.Metric], c.N)
		}
	}
	if moe == 0 {
		t.Error("no held-out MoE rows in the band split")
	}
}

func TestClientBand(t *testing.T) {
	for _, tc := range []struct {
		r    Row
		want string
	}{{Row{Concurrency: 1}, "1"}, {Row{Concurrency: 4}, "2-4"}, {Row{Concurrency: 5}, "5-16"}, {Row{Batch: 64}, "17-64"}, {Row{Concurrency: 128}, "65+"}, {Row{}, "1"}} {
		if got := clientBand(&tc.r); got != tc.want {
			t.Errorf("%+v: band %s, want %s", tc.r, got, tc.want)
		}
	}
}

// Held-out medians reached: 12.3 % TPOT, 28.9 % TTFT, 9.3 % throughput at
// 300 iterations; 12.1 %, 29.1 % and 9.1 % at the -short 90 (the
// Levenberg–Marquardt polish lands within 0.2 % of the same loss from
// either; the valley is flat in the per-layer overhead). The bounds are
// those plus a small margin, so that a regression fails. Targets are 8 %,
// 15 % and 10 %: throughput meets its target; TPOT and TTFT do not (see
// ACCURACY.md).
const (
	heldOutTPOT       = 0.126
	heldOutTTFT       = 0.30
	heldOutThroughput = 0.097
)

// TestFitRecoversKnownCoefficients generates measurements from the estimator
// itself under known coefficients and checks that Fit, started from the
// priors, finds coefficients that reproduce them (the loss is ~0) and
// recovers the well-determined ones.
func TestFitRecoversKnownCoefficients(t *testing.T) {
	var rows []Row
	for _, gpu := range []string{"h100-sxm", "h200", "b200"} {
		for _, model := range []string{"meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-30B-A3B"} {
			for _, c := range []int{1, 8, 32, 128} {
				for _, io := range [][2]int{{1024, 256}, {4096, 1024}} {
					rows = append(rows, Row{Source: "synthetic", Engine: estimate.VLLM, Model: model, GPU: gpu, Precision: "fp8",
						TP: 2, ISL: io[0], OSL: io[1], Concurrency: c, TTFTms: 1, TPOTms: 1, OutputTokS: 1})
				}
			}
		}
	}
	ps := Prepare(rows, Skipped{})
	if len(ps) != len(rows) {
		t.Fatalf("prepared %d of %d rows", len(ps), len(rows))
	}
	prior := priorFor(estimate.PriorCoeffs(), "vllm")
	truth := prior
	truth.Comp, truth.Weight, truth.Layer, truth.Step, truth.Alpha0, truth.Req = 1.9, 1.25, 30e-6, 400e-6, 0.04, 8e-6
	for _, p := range ps {
		all := p.PredictAll(truth)
		p.Row.TPOTms, p.Row.TTFTms, p.Row.OutputTokS = all[0].Pred, all[1].Pred, all[2].Pred
	}
	if l := loss(ps, prior); l < 1e-3 {
		t.Fatalf("the priors already fit the synthetic rows (loss %g): the test would prove nothing", l)
	}
	co, fx := Fit(context.Background(), ps, "vllm", prior, 60)
	if fx > 1e-6 {
		t.Errorf("loss %g after the fit, want ~0", fx)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"comp", co.Comp, truth.Comp}, {"weight", co.Weight, truth.Weight}, {"layer", co.Layer, truth.Layer}, {"alpha0", co.Alpha0, truth.Alpha0}} {
		if math.Abs(c.got/c.want-1) > 0.05 {
			t.Errorf("%s: fitted %.4g, true %.4g", c.name, c.got, c.want)
		}
	}
}

func TestSolve(t *testing.T) {
	M := []float64{2, 1, -1, -3, -1, 2, -2, 1, 2}
	x, ok := solve(M, []float64{8, -11, -3}, 3)
	if !ok || math.Abs(x[0]-2) > 1e-12 || math.Abs(x[1]-3) > 1e-12 || math.Abs(x[2]+1) > 1e-12 {
		t.Errorf("solve: %v %v, want [2 3 -1]", x, ok)
	}
	if _, ok := solve([]float64{1, 2, 2, 4}, []float64{1, 2}, 2); ok {
		t.Error("singular system solved")
	}
}

func fuzzSeeds(f *testing.F, names ...string) {
	f.Add([]byte("engine,gpu,model,isl,osl,concurrency,ttft_ms\nvllm,h100,meta-llama/Llama-3.1-8B,1,1,1,3\n"))
	f.Add([]byte("a,b\n\"x,1\n"))
	if dir, ok := shareddata.Path("groundtruth"); ok {
		for _, n := range names {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil {
				if len(b) > 4000 {
					b = b[:4000]
				}
				f.Add(b)
			}
		}
	}
}

func FuzzReadUser(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ReadUser(bytes.NewReader(data), "fuzz.csv", Skipped{})
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.ISL < 1 || r.OSL < 1 || r.Concurrency < 1 || r.TTFTms < 0 {
				t.Fatalf("accepted an invalid row %+v", r)
			}
		}
		Prepare(rows, Skipped{})
	})
}

func FuzzReadMeasurements(f *testing.F) {
	fuzzSeeds(f, "aiconfigurator_silicon_sample.csv", "argonne_all_results.csv", "argonne_fig22_all_results_TTFT_ITL.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, read := range []func(*bytes.Reader) ([]Row, error){
			func(r *bytes.Reader) ([]Row, error) { return ReadAIC(r, "f", Skipped{}) },
			func(r *bytes.Reader) ([]Row, error) { return ReadArgonne(r, "f", Skipped{}) },
			func(r *bytes.Reader) ([]Row, error) { return ReadArgonneTTFT(r, "f", Skipped{}) },
		} {
			rows, err := read(bytes.NewReader(data))
			if err != nil {
				continue
			}
			for _, r := range rows {
				if r.TP < 1 || r.ISL < 1 || r.OSL < 1 {
					t.Fatalf("accepted an invalid row %+v", r)
				}
			}
		}
	})
}

// TestDescribeMatchesPresets cross-checks the ground-truth shape table with
// the architecture package's presets, parsed from the real config.json files.
func TestDescribeMatchesPresets(t *testing.T) {
	pairs := map[string]string{
		"meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B", "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
		"Qwen/Qwen3-32B": "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B", "mistralai/Mixtral-8x7B-v0.1": "mistralai/Mixtral-8x7B-v0.1",
		"meta-llama/Llama-2-7b-hf": "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf": "meta-llama/Llama-2-70b-hf",
		"Qwen/Qwen2-7B": "Qwen/Qwen2-7B", "openai/gpt-oss-120b": "openai/gpt-oss-120b", "mistralai/Mistral-7B-v0.1": "mistralai/Mistral-7B-v0.1",
		"meta-llama/Meta-Llama-3-8B": "meta-llama/Meta-Llama-3-8B",
	}
	checked := 0
	for id, preset := range pairs {
		want, err := architecture.Preset(preset)
		if err != nil {
			continue // preset not shipped (yet)
		}
		got, ok := published.Describe(id)
		if !ok {
			t.Fatalf("%s not described", id)
		}
		gp, wp := got.Params(), want.Params()
		if gp.Total != wp.Total || gp.Active != wp.Active {
			t.Errorf("%s: params %d/%d active, preset %d/%d", id, gp.Total, gp.Active, wp.Total, wp.Active)
		}
		if got.KVElemsPerToken() != want.KVElemsPerToken() {
			t.Errorf("%s: KV elements per token %d, preset %d", id, got.KVElemsPerToken(), want.KVElemsPerToken())
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no matching architecture presets")
	}
}

func ExampleDescribe() {
	m, _ := published.Describe("nvidia/Llama-3.1-8B-Instruct-FP8")
	p := m.Params()
	fmt.Printf("%d layers, %.2f B parameters\n", m.NumLayers(), float64(p.Total)/1e9)
	// Output: 32 layers, 8.03 B parameters
}

// TestIdentifiable checks that coefficients no row depends on are left out
// of the fit: a dense BF16 sample says nothing about block-scaled FP8,
// weight-only kernels or MoE layers; adding such rows brings them back.
func TestIdentifiable(t *testing.T) {
	row := func(model, prec string, gpu string) Row {
		return Row{Source: "t", Engine: estimate.VLLM, Model: model, GPU: gpu, Precision: prec, TP: 2,
			ISL: 1024, OSL: 256, Concurrency: 16, TTFTms: 100, TPOTms: 20, OutputTokS: 700}
	}
	prior := priorFor(estimate.PriorCoeffs(), "vllm")
	all := fitted["default"]
	has := func(idx []int, k int) bool {
		for _, i := range idx {
			if i == k {
				return true
			}
		}
		return false
	}
	const moe, block, dequant = 9, 15, 16
	dense := Prepare([]Row{row("meta-llama/Llama-3.1-8B", "bf16", "h100-sxm")}, Skipped{})
	got := identifiable(dense, prior, all)
	for _, k := range []int{moe, block, dequant} {
		if has(got, k) {
			t.Errorf("dense BF16 rows: %s kept in the fit", estimate.CoeffNames[k])
		}
	}
	if !has(got, 1) || !has(got, 10) {
		t.Errorf("dense BF16 rows: weight or alpha0 dropped: %v", got)
	}
	mixed := Prepare([]Row{row("meta-llama/Llama-3.1-8B", "bf16", "h100-sxm"),
		row("MiniMaxAI/MiniMax-M2.5", "fp8-block", "h200"), row("openai/gpt-oss-120b", "mxfp4", "h200")}, Skipped{})
	if len(mixed) != 3 {
		t.Fatalf("prepared %d rows", len(mixed))
	}
	got = identifiable(mixed, prior, all)
	for _, k := range []int{moe, block, dequant} {
		if !has(got, k) {
			t.Errorf("MoE, fp8-block and weight-only rows: %s left out", estimate.CoeffNames[k])
		}
	}
}

// TestBlockFP8Checkpoints checks the quant-mode mapping: fp8_block rows and
// rows of checkpoints known to ship 128×128 block scales are fp8-block.
func TestBlockFP8Checkpoints(t *testing.T) {
	head := "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,silicon_ttft_ms,silicon_tpot_ms\n"
	in := head +
		"a,x,vllm,0.12.0,Qwen/Qwen3-235B-A22B-FP8,h200_sxm,fp8,agg,1000,100,fp8,fp8,16,2,1,1,200,50\n" +
		"b,x,sglang,0.5.8,meta-llama/Llama-3.1-8B-Instruct,h200_sxm,fp8,agg,1000,100,fp8_block,fp8_block,16,1,1,1,80,9\n" +
		"c,x,vllm,0.12.0,meta-llama/Llama-3.1-70B,h200_sxm,fp8,agg,1000,100,fp8,fp8,16,2,1,1,200,20\n"
	rows, err := ReadAIC(strings.NewReader(in), "aic.csv", Skipped{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fp8-block", "fp8-block", "fp8"}
	for i, r := range rows {
		if r.Precision != want[i] {
			t.Errorf("row %s: precision %s, want %s", r.ID, r.Precision, want[i])
		}
	}
}
