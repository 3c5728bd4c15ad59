package groundtruth

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// TestConsumerTables checks the embedded consumer-GPU tables: every row
// parses, is on a consumer GPU of the catalog and is priced, every source
// has a per-source cell for each metric it publishes, and every row's
// class a per-class cell.
func TestConsumerTables(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no consumer-GPU rows")
	}
	sources := map[string]bool{}
	published := map[string]map[Metric]bool{}
	classes := map[string]bool{}
	for i, r := range rows {
		if published[r.Source] == nil {
			published[r.Source] = map[Metric]bool{}
		}
		for m, v := range map[Metric]float64{Throughput: r.OutputTokS, TTFT: r.TTFTms, TPOT: r.TPOTms} {
			if v > 0 {
				published[r.Source][m] = true
			}
		}
		classes[RowClass(&rows[i])] = true
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			t.Fatalf("line %d: %v", r.Line, err)
		}
		if c := estimate.GPUClass(hw); c != "consumer" {
			t.Errorf("line %d: %s is a %s GPU, not a consumer one", r.Line, r.GPU, c)
		}
		sources[r.Source] = true
	}
	res, sum := ScoreIndependent(rows)
	if sum.Priced != len(rows) {
		for _, x := range res {
			if x.Skip != "" {
				t.Errorf("line %d not priced: %s", x.Row.Line, x.Skip)
			}
		}
	}
	for src := range sources {
		for m := range published[src] {
			if _, ok := sum.Cell("all", src, m); !ok {
				t.Errorf("no %s cell for source %s", m, src)
			}
		}
	}
	for _, c := range sum.Classes {
		delete(classes, c.Class)
	}
	if len(classes) > 0 {
		t.Errorf("classes without a cell: %v", classes)
	}
	md, err := os.ReadFile("testdata/consumer_serving.md")
	if err != nil {
		t.Fatal(err)
	}
	for src := range sources {
		if !strings.Contains(string(md), "`"+src+"`") {
			t.Errorf("source %s has no provenance in consumer_serving.md", src)
		}
	}
}

// consumerREADMETable is the README's table of errors on consumer GPUs, as
// validate-estimator prints them: first each source held out of the fit of
// the consumer memory-traffic factor (per metric, before and after it),
// then every row with the shipped coefficients by source and by deployment
// class (in-sample for the factor on its 16-bit rows, held out otherwise).
func consumerREADMETable(fits []GDDRFit, classFits []ClassFit, sum IndependentSummary) string {
	var b strings.Builder
	b.WriteString("  | held-out source | metric | n | factor fitted without it | median APE before | after | bias after |\n  |---|---|---|---|---|---|---|\n")
	for _, fit := range fits {
		for _, f := range fit.Folds {
			for i := range f.Before {
				x, y := f.Before[i], f.After[i]
				fmt.Fprintf(&b, "  | `%s` | %s | %d | %.3f ÷ efficiency | %.1f %% | %.1f %% | %+.1f %% |\n", f.Source, x.Metric, x.N, f.Const, x.Median*100, y.Median*100, y.Bias*100)
			}
		}
	}
	b.WriteString("\n  | W4A16 kernel multiplier: engine, class, held-out source | metric | n | × dequant fitted without it | median APE before | bias before | after | bias after |\n  |---|---|---|---|---|---|---|---|\n")
	for _, fit := range classFits {
		verdict := "shipped"
		if !fit.Ship {
			verdict = "not shipped: " + fit.Why
		}
		if len(fit.Folds) == 0 {
			fmt.Fprintf(&b, "  | %s, %s (rows: %d, in-sample × %.3f; %s) | | | | | | | |\n", fit.Engine, fit.Class, fit.Rows, fit.Factor, verdict)
			continue
		}
		for _, f := range fit.Folds {
			for i := range f.Before {
				x, y := f.Before[i], f.After[i]
				fmt.Fprintf(&b, "  | %s, %s, `%s` | %s | %d | %.3f | %.1f %% | %+.1f %% | %.1f %% | %+.1f %% |\n", fit.Engine, fit.Class, f.Source, x.Metric, x.N, f.Factor, x.Median*100, x.Bias*100, y.Median*100, y.Bias*100)
			}
		}
		fmt.Fprintf(&b, "  | %s, %s: every held-out TPOT and throughput error (in-sample × %.3f on %d rows; %s) | | | | %.1f %% | | %.1f %% | |\n", fit.Engine, fit.Class, fit.Factor, fit.Rows, verdict, fit.HeldOutBefore*100, fit.HeldOutAfter*100)
	}
	b.WriteString("\n  | shipped coefficients: source or class | metric | n | median APE | p90 APE | bias |\n  |---|---|---|---|---|---|\n")
	for _, c := range sum.Cells {
		if c.Engine != "all" || c.Source == "all" {
			continue
		}
		fmt.Fprintf(&b, "  | `%s` | %s | %d | %.1f %% | %.1f %% | %+.1f %% |\n", c.Source, c.Metric, c.N, c.Median*100, c.P90*100, c.Bias*100)
	}
	for _, c := range sum.Classes {
		fmt.Fprintf(&b, "  | class: %s | %s | %d | %.1f %% | %.1f %% | %+.1f %% |\n", c.Class, c.Metric, c.N, c.Median*100, c.P90*100, c.Bias*100)
	}
	return b.String()
}

// TestConsumerREADME checks that the errors the README states for consumer
// GPUs (between the consumer-gpus markers) are the ones the embedded
// tables give with the shipped coefficients.
func TestConsumerREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skipf("README.md not found beside the module: %v", err)
	}
	const begin, end = "  <!-- consumer-gpus -->\n", "  <!-- /consumer-gpus -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %q … %q block", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	got := s[i+len(begin) : j]
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	_, sum := ScoreIndependent(rows)
	fits, err := ConsumerHeldOut(estimate.DefaultCoeffs())
	if err != nil {
		t.Fatal(err)
	}
	classFits, err := ConsumerClassFits()
	if err != nil {
		t.Fatal(err)
	}
	if want := consumerREADMETable(fits, classFits, sum); got != want {
		t.Errorf("README's consumer-GPU errors are stale; replace the block with:\n%s\ngot:\n%s", want, got)
	}
}

// TestConsumerDerivedLengths checks the one derived value of the consumer
// tables: zhjunqin-3090-llama3-8b's isl and osl are the page's stated token
// totals divided by its request count, rounded (consumer_serving.md).
func TestConsumerDerivedLengths(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		precision     string
		rate          float64
		n             int
		input, output int // the table's "Total input tokens", "Total generated tokens"
		tpot          float64
	}
	stated := []run{
		{"bf16", 1, 100, 22925, 21789, 24.68},
		{"bf16", 2, 200, 42889, 44132, 29.64},
		{"bf16", 5, 1000, 213987, 199774, 82.95},
		{"bf16", 8, 1000, 213987, 199774, 104.71},
		{"int4-awq", 5, 1000, 213987, 199771, 139.76},
	}
	found := 0
	for _, r := range rows {
		if r.Source != "zhjunqin-3090-llama3-8b" {
			continue
		}
		found++
		ok := false
		for _, s := range stated {
			if s.precision == r.Precision && s.rate == r.RequestRate {
				ok = true
				wantISL := int(math.Round(float64(s.input) / float64(s.n)))
				wantOSL := int(math.Round(float64(s.output) / float64(s.n)))
				if r.ISL != wantISL || r.OSL != wantOSL || r.NumRequests != s.n || r.TPOTms != s.tpot || r.Mode != ModePoisson {
					t.Errorf("line %d: isl %d osl %d n %d tpot %g mode %s; want %d %d %d %g poisson", r.Line, r.ISL, r.OSL, r.NumRequests, r.TPOTms, r.Mode, wantISL, wantOSL, s.n, s.tpot)
				}
			}
		}
		if !ok {
			t.Errorf("line %d: no stated run for %s at %g req/s", r.Line, r.Precision, r.RequestRate)
		}
	}
	if found != len(stated) {
		t.Errorf("%d zhjunqin rows, want %d", found, len(stated))
	}
}

// TestConsumerClosedLoopRows checks the closed-loop AWQ MoE rows against
// the figures their benchmark files print: the client's concurrency and
// prompt count, the token totals (isl and osl are the totals ÷ prompts,
// rounded: exact for deplodock's 4000/4000 runs, 997 for CloudRift's
// chat-templated 1000-token prompts), and the three metrics copied.
func TestConsumerClosedLoopRows(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		source, engine   string
		concurrency, n   int
		input, generated int // "Total input tokens", "Total generated tokens"
		tokS, ttft, tpot float64
	}
	stated := []run{
		{"cloudrift-4090-qwen3coder-awq", "vllm", 400, 1200, 1196622, 1200000, 1131.16, 262205.54, 36.63},
		{"cloudrift-5090-qwen3coder-awq", "vllm", 400, 1200, 1196622, 1200000, 2288.09, 108756.59, 42.25},
		{"deplodock-5090-vllm-vs-sglang", "vllm", 16, 32, 128000, 128000, 1209.17, 1319.22, 12.89},
		{"deplodock-5090-vllm-vs-sglang", "sglang", 16, 32, 128000, 128000, 405.16, 3608.25, 38.60},
		{"deplodock-5090-vllm-vs-sglang", "vllm", 4, 8, 32000, 32000, 555.82, 549.13, 7.06},
		{"deplodock-5090-vllm-vs-sglang", "sglang", 4, 8, 32000, 32000, 207.93, 1557.93, 18.85},
		{"deplodock-5090-vllm-vs-sglang", "vllm", 4, 4, 16000, 16000, 519.68, 631.77, 7.54},
		{"deplodock-5090-vllm-concurrency", "vllm", 8, 80, 320000, 320000, 869.3, 753.15, 9.02},
		{"deplodock-5090-vllm-concurrency", "vllm", 16, 80, 320000, 320000, 1157.45, 956.15, 13.58},
		{"deplodock-5090-vllm-concurrency", "vllm", 24, 80, 320000, 320000, 1185.9, 4956.54, 17.94},
		{"deplodock-5090-vllm-concurrency", "vllm", 32, 80, 320000, 320000, 1147.3, 19298.51, 20.22},
		{"deplodock-5090-vllm-concurrency", "vllm", 40, 80, 320000, 320000, 1148.12, 38886.71, 20.17},
	}
	seen := make([]bool, len(stated))
	for _, r := range rows {
		if r.Mode != ModeClosed || RowClass(&r) != "W4A16 MoE" {
			continue
		}
		found := false
		for i, s := range stated {
			if s.source != r.Source || s.engine != string(r.Engine) || s.concurrency != r.Concurrency || s.n != r.NumRequests {
				continue
			}
			found, seen[i] = true, true
			isl := int(math.Round(float64(s.input) / float64(s.n)))
			osl := int(math.Round(float64(s.generated) / float64(s.n)))
			if r.ISL != isl || r.OSL != osl || r.OutputTokS != s.tokS || r.TTFTms != s.ttft || r.TPOTms != s.tpot || r.Precision != "int4-awq" || r.GPU == "" {
				t.Errorf("line %d: isl %d osl %d, %g tok/s, ttft %g, tpot %g, %s; want %d %d %g %g %g int4-awq", r.Line, r.ISL, r.OSL, r.OutputTokS, r.TTFTms, r.TPOTms, r.Precision, isl, osl, s.tokS, s.ttft, s.tpot)
			}
		}
		if !found {
			t.Errorf("line %d (%s, %s, %d clients, %d prompts): no stated run", r.Line, r.Source, r.Engine, r.Concurrency, r.NumRequests)
		}
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("stated run %+v has no row", stated[i])
		}
	}
}
