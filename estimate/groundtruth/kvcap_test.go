package groundtruth

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

const kvHeader = "engine,engine_version,era,model,gpu,tp,precision,kv_dtype,gpu_mem_util,max_model_len,max_num_seqs," +
	"max_num_batched_tokens,reported_kv_tokens,reported_kv_gib,reported_weights_gib,source\n"

func TestReadKVCapacity(t *testing.T) {
	in := "# comment line\n" + kvHeader +
		`vllm,0.9,,meta-llama/Llama-3.1-8B,h100-sxm,2,bf16,auto,0.9,131072,256,8192,410128,51.63,14.99,"issue 1, quote"` + "\n" +
		"SGLang,,2024,Qwen/Qwen3-8B,h200,,,,,,,,1000,,,src\n"
	rows, err := ReadKVCapacity(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows", len(rows))
	}
	r := rows[0]
	if r.Engine != estimate.VLLM || r.TP != 2 || r.MemFraction != 0.9 || r.MaxModelLen != 131072 || r.MaxNumSeqs != 256 ||
		r.MaxBatchedTokens != 8192 || r.ReportedKVGiB != 51.63 || r.ReportedWeightsGiB != 14.99 || r.Source != "issue 1, quote" {
		t.Errorf("row 0 = %+v", r)
	}
	if r.Line != 3 {
		t.Errorf("line %d, want 3", r.Line)
	}
	if r.ReportedTokens != 410128 || r.Precision != "bf16" || r.KVDType != "auto" || r.EngineVersion != "0.9" {
		t.Errorf("row 0 = %+v", r)
	}
	if rows[1].Engine != estimate.SGLang || rows[1].Era != "2024" || rows[1].TP != 1 || rows[1].ReportedTokens != 1000 || rows[1].MemFraction != 0 {
		t.Errorf("row 1 = %+v", rows[1])
	}
}

func TestReadKVCapacityErrors(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"", "empty file"},
		{"# only a comment\n", "empty file"},
		{"engine,model,gpu\n", "missing columns source"},
		{"engine,model,gpu,source,model\n", "duplicate column"},
		{"engine,model,gpu,source,gpu_mem_utilization\n", "unknown column \"gpu_mem_utilization\""},
		{kvHeader, "no rows"},
		{kvHeader + "tgi,,,m,h100-sxm,1,,,,,,,10,,,s\n", "unknown engine"},
		{kvHeader + "vllm,,,,h100-sxm,1,,,,,,,10,,,s\n", "must not be empty"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,,,,,10,,,\n", "must not be empty"},
		{kvHeader + "vllm,,,m,h100-sxm,-1,,,,,,,10,,,s\n", "tp \"-1\""},
		{kvHeader + "vllm,,,m,h100-sxm,1.5,,,,,,,10,,,s\n", "tp \"1.5\""},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,1.2,,,,10,,,s\n", "not in (0, 1]"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,,,,s\n", "no reported value"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,-4,,,s\n", "non-negative number"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,NaN,,,s\n", "non-negative number"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,\"410,128\",,,s\n", "non-negative number"},
		{kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,10,,,\"s\n", "kv capacity"},
	} {
		_, err := ReadKVCapacity(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		}
	}
}

func FuzzReadKVCapacity(f *testing.F) {
	f.Add(kvHeader + "vllm,0.9,,meta-llama/Llama-3.1-8B,h100-sxm,1,bf16,auto,0.9,131072,,,410128,51.63,,src\n")
	f.Add(kvHeader + "sglang,,,Qwen/Qwen3-235B-A22B-FP8,h100-sxm,4,fp8-block,auto,0.93,40960,,,367404,16.46,,s\n")
	f.Add(kvHeader + "vllm,0.6.4,2024,meta-llama/Llama-3.1-8B-Instruct,rtx-3090,1,,,0.9,20000,,20000,31232,3.81,14.99,s\n")
	f.Add("# c\nengine,model,gpu,source,reported_kv_gib\ntrtllm,m,l40s,s,1e3\n")
	f.Add(kvHeader + "vllm,,,m,h100-sxm,1,,,0.9,,,,1_000,,,s\n")
	f.Add("")
	f.Add("\"")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := ReadKVCapacity(strings.NewReader(in))
		if err != nil {
			if rows != nil {
				t.Fatal("rows returned with an error")
			}
			return
		}
		if len(rows) == 0 {
			t.Fatal("no rows and no error")
		}
		for _, r := range rows {
			if r.Model == "" || r.GPU == "" || r.Source == "" || r.TP < 1 {
				t.Fatalf("invalid row accepted: %+v", r)
			}
			if r.MemFraction < 0 || r.MemFraction > 1 || r.ReportedTokens+r.ReportedKVGiB+r.ReportedWeightsGiB <= 0 {
				t.Fatalf("invalid values accepted: %+v", r)
			}
		}
		// Scoring must not panic on anything the reader accepts.
		res, s := ScoreKVCapacity(rows)
		if len(res) != len(rows) || s.Scored > len(rows) {
			t.Fatalf("%d results, %d scored for %d rows", len(res), s.Scored, len(rows))
		}
	})
}

// TestScoreKVCapacityArithmetic checks the comparison on a row built from the
// estimator's own plan: a row reporting exactly the predicted values scores 0 %,
// one reporting 10 % more tokens scores 1/11.
func TestScoreKVCapacityArithmetic(t *testing.T) {
	m, _ := published.Describe("meta-llama/Llama-3.1-8B")
	hw, err := hardware.Lookup("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := estimate.Memory(m, hw, estimate.VLLM, estimate.Options{MaxModelLen: 8192})
	if err != nil {
		t.Fatal(err)
	}
	row := KVRow{Engine: estimate.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "h100-sxm", TP: 1, MaxModelLen: 8192,
		ReportedTokens: rep.KVCapacityTokens, ReportedKVGiB: rep.KVPoolBytes / estimate.GiB, Source: "self"}
	off := row
	off.ReportedTokens *= 1.1
	off.ReportedKVGiB = 0
	unknown := row
	unknown.Model = "acme/NoSuchModel-7B"
	badGPU := row
	badGPU.GPU = "tpu-v9"
	res, s := ScoreKVCapacity([]KVRow{row, off, unknown, badGPU})
	if res[0].Skip != "" || res[0].TokensAPE != 0 || res[0].KVGiBAPE > 1e-12 || !math.IsNaN(res[0].WeightsAPE) {
		t.Errorf("exact row: %+v", res[0])
	}
	if d := res[1].TokensAPE - 0.1/1.1; math.Abs(d) > 1e-12 || !math.IsNaN(res[1].KVGiBAPE) {
		t.Errorf("10%% row: APE %v", res[1].TokensAPE)
	}
	if res[2].Skip != "model not described" || res[3].Skip != "GPU not in the catalog" {
		t.Errorf("skips %q %q", res[2].Skip, res[3].Skip)
	}
	if s.Rows != 4 || s.Scored != 2 || s.Within5 != 1 || s.Tokens.N != 2 || s.KVGiB.N != 1 {
		t.Errorf("summary %+v", s)
	}
	if math.Abs(s.Tokens.Max-0.1/1.1) > 1e-12 || math.Abs(s.Tokens.Median-0.05/1.1) > 1e-12 {
		t.Errorf("token stats %+v", s.Tokens)
	}
	// Price reports the same capacity as Memory (both plan with planMemory).
	w := workload.FixedClosed(1024, 256, 1)
	c, err := estimate.Compile(hw, estimate.VLLM, estimate.Options{MaxModelLen: 8192}, &w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Price(m); p.KVCapacityTokens != rep.KVCapacityTokens {
		t.Errorf("Price capacity %v, Memory %v", p.KVCapacityTokens, rep.KVCapacityTokens)
	}
}

func TestDescribeKVAliases(t *testing.T) {
	for id, want := range map[string]int{
		"Qwen/Qwen1.5-7B-Chat-GPTQ-Int4":    32,
		"Qwen/Qwen2.5-7B-Instruct":          28,
		"meta-llama/Llama-3.3-70B-Instruct": 80,
		"Qwen/Qwen3-8B":                     36,
		// RedHatAI / Neural Magic suffixes and shape-identical aliases.
		"RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic":         80,
		"RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic":            28,
		"RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8":         28,
		"RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8":  32,
		"RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16": 32,
		"mistralai/Mixtral-8x7B-Instruct-v0.1":                32,
		"Qwen/Qwen3-Coder-30B-A3B-Instruct":                   48,
	} {
		m, ok := published.DescribePublished(id)
		if !ok || len(m.Layers) != want {
			t.Errorf("%s: ok=%v", id, ok)
		}
	}
	if _, ok := published.DescribePublished("Qwen/Qwen3-4B"); ok {
		t.Error("Qwen3-4B has no description and no preset")
	}
	// The aliases resolve to the right family, not just a layer count.
	for id, want := range map[string]struct{ experts, kv, vocab int }{
		"mistralai/Mixtral-8x7B-Instruct-v0.1":        {8, 8, 32000},
		"Qwen/Qwen3-Coder-30B-A3B-Instruct":           {128, 4, 151936},
		"RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic": {0, 8, 128256},
		"RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic":    {0, 4, 152064},
	} {
		m, ok := published.DescribePublished(id)
		if !ok {
			t.Errorf("%s: not described", id)
			continue
		}
		l := m.Layers[0]
		experts := 0
		if l.MoE != nil {
			experts = l.MoE.Experts
		}
		if experts != want.experts || l.Attention.KVHeads != want.kv || m.Vocab != want.vocab {
			t.Errorf("%s: experts %d, KV heads %d, vocab %d; want %+v", id, experts, l.Attention.KVHeads, m.Vocab, want)
		}
	}
	// A suffix alone does not make an unknown family describable.
	if _, ok := published.DescribePublished("RedHatAI/Phi-3-mini-4k-instruct-fp8-dynamic"); ok {
		t.Error("an undescribed RedHatAI checkpoint resolved")
	}
}

// TestKVCapacityPublished scores every published start-up log in
// testdata/kv_capacity.csv with the shipped estimator and logs the table.
//
// The target is KV capacity within 5 % of what the engines report.
// It is NOT met: see the bounds below, which the current estimator meets
// with a small margin so that a regression fails; tighten them as the
// memory model improves.
func TestKVCapacityPublished(t *testing.T) {
	rows, err := PublishedKVCapacity()
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := ReadKVCapacityFile(filepath.Join("testdata", "kv_capacity.csv"))
	if err != nil || len(fromFile) != len(rows) {
		t.Fatalf("file: %d rows, %v; embedded: %d rows", len(fromFile), err, len(rows))
	}
	if _, err := ReadKVCapacityFile(filepath.Join("testdata", "no-such.csv")); err == nil {
		t.Error("missing file read without error")
	}
	res, s := ScoreKVCapacity(rows)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-8s %-34s %-10s %2s %12s %12s %7s %9s %9s %7s %7s %8s %8s %7s\n", "engine", "model", "gpu", "tp",
		"rep tokens", "pred tokens", "err", "rep KV", "pred KV", "err", "ΔKV GiB", "rep W", "pred W", "err")
	for _, r := range res {
		if r.Skip != "" {
			fmt.Fprintf(&b, "%-8s %-34s %-10s skipped: %s\n", r.Row.Engine, r.Row.Model, r.Row.GPU, r.Skip)
			continue
		}
		dkv := "—"
		if r.Row.ReportedKVGiB > 0 {
			dkv = fmt.Sprintf("%+.2f", r.PredKVGiB-r.Row.ReportedKVGiB)
		}
		fmt.Fprintf(&b, "%-8s %-34s %-10s %2d %12s %12.0f %7s %9s %9.2f %7s %7s %8s %8.2f %7s", r.Row.Engine, r.Row.Model,
			r.Row.GPU, r.Row.TP, num(r.Row.ReportedTokens, "%.0f"), r.PredTokens, pct(r.TokensAPE),
			num(r.Row.ReportedKVGiB, "%.2f"), r.PredKVGiB, pct(r.KVGiBAPE), dkv,
			num(r.Row.ReportedWeightsGiB, "%.2f"), r.PredWeightsGiB, pct(r.WeightsAPE))
		if !r.Fits {
			fmt.Fprintf(&b, "  (estimator: does not fit, %s)", r.FailTerm)
		}
		b.WriteByte('\n')
	}
	for _, m := range []struct {
		name string
		s    KVStats
	}{{"headline (tokens, else KV GiB)", s.Primary}, {"headline, current builds", s.Current}, {"KV tokens", s.Tokens}, {"KV GiB", s.KVGiB}, {"weights GiB", s.Weights}} {
		fmt.Fprintf(&b, "%-31s n=%2d median %6s p90 %6s max %6s\n", m.name, m.s.N, pct(m.s.Median), pct(m.s.P90), pct(m.s.Max))
	}
	fmt.Fprintf(&b, "rows with a KV figure: %d; within 5 %%: %d, within 20 %%: %d (%d rows, %d scored)\n",
		s.Primary.N, s.Within5, s.Within20, s.Rows, s.Scored)
	t.Log(b.String())

	if s.Scored != s.Rows {
		t.Errorf("%d of %d rows scored; every row in the file must be describable", s.Scored, s.Rows)
	}
	// Regression bounds: what the current estimator meets, plus a small
	// margin. The target is every row within 5 %; it is met by 16
	// of the 24 rows with a KV figure (see kv_capacity.md for the diagnosis
	// of each miss).
	if s.Current.N < kvMinCurrent || s.Current.Median > kvBoundMedian {
		t.Errorf("current builds: n=%d median %s, bound %s", s.Current.N, pct(s.Current.Median), pct(kvBoundMedian))
	}
	if s.Within5 < kvMinWithin5 || s.Within20 < kvMinWithin20 {
		t.Errorf("%d rows within 5 %% and %d within 20 %%, want at least %d and %d", s.Within5, s.Within20,
			kvMinWithin5, kvMinWithin20)
	}
	noFit := 0
	for _, r := range res {
		if r.Skip == "" && !r.Fits {
			noFit++
		}
	}
	if noFit > kvMaxNoFit {
		t.Errorf("estimator says %d published deployments do not start, want at most %d", noFit, kvMaxNoFit)
	}
	if s.Weights.N > 0 && s.Weights.Max > kvBoundWeights {
		t.Errorf("weights error max %s, bound %s", pct(s.Weights.Max), pct(kvBoundWeights))
	}
}

// Bounds the current estimator meets (TestKVCapacityPublished, 2026-11-29,
// 30 rows, vLLM's memory rules of >= 0.17 from these logs; row 31, SGLang's
// weights on an RTX 5090, added 2026-12-03, 1.0 % low): current builds
// (vLLM >= 0.17, SGLang, llama.cpp) median 0.7 % (n=17, p90 5.3 %, max
// 11.8 %); 16 rows of all eras within 5 %, 19 within 20 %; the vLLM V0 rows
// still "do not fit" (V0 profiled a whole max_model_len batch); weights error
// max 8.0 % (gpt-oss-120b). The target is 5 %: met by the median of
// current builds and by 15 of its 17 rows, including the three FP8
// (fp8-dynamic) logs of llm-d-planner's v0.19 sweep (Llama-3.3-70B at TP 2
// and 4, 1.3 % and 0.7 %; Qwen2.5-7B, 0.4 %) and the five llama.cpp logs
// (rows 26-30: Llama-2-7B MHA, Llama-3/3.1-8B GQA, 4 slots, q8_0 KV), whose
// KV size is exact arithmetic and is predicted exactly (0.0 %); the SGLang
// row is 7.5 % high and the vLLM 0.27 RTX PRO 6000 row 11.8 % low. vLLM V1
// before 0.17 profiled a ~60 % higher activation peak, so those rows are
// summarised apart.
const (
	kvMinCurrent   = 17
	kvBoundMedian  = 0.015
	kvMinWithin5   = 15
	kvMinWithin20  = 18
	kvMaxNoFit     = 3
	kvBoundWeights = 0.09
)

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func num(v float64, f string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf(f, v)
}
