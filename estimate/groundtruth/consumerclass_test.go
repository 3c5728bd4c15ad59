package groundtruth

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
)

func classFoldTable(fit ClassFit) string {
	var b strings.Builder
	for _, f := range fit.Folds {
		fmt.Fprintf(&b, "%s ×%.3f median %.1f%% -> %.1f%%\n", f.Source, f.Factor, f.MedianBefore*100, f.MedianAfter*100)
	}
	return b.String()
}

// TestConsumerClassHeldOut pins the consumer W4A16 multipliers to what the
// embedded rows give and re-derives each held-out figure row by row: the
// fold's multiplier is the fit on the other sources only, and its medians
// are the source's TPOT and throughput APEs priced with the shipped
// coefficients and with dequant × that multiplier. vLLM's AWQ MoE
// multiplier helps the deplodock sources and hurts the CloudRift ones, so
// it is not shipped; SGLang's and the dense AWQ row's have one source.
func TestConsumerClassHeldOut(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	fits, err := ConsumerClassFits()
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]ClassFit{}
	for _, f := range fits {
		byKey[string(f.Engine)+" "+f.Class] = f
	}
	if len(fits) != 3 {
		t.Fatalf("%d class fits, want sglang W4A16 MoE, vllm W4A16 MoE, vllm W4A16 dense: %v", len(fits), byKey)
	}
	for _, k := range []string{"sglang W4A16 MoE", "vllm W4A16 dense"} {
		f, ok := byKey[k]
		if !ok || len(f.Sources) != 1 || len(f.Folds) != 0 || f.Ship || !strings.HasPrefix(f.Why, "one source") {
			t.Errorf("%s: %+v; want one source, no fold, not shipped", k, f)
		}
	}
	if f := byKey["sglang W4A16 MoE"]; f.Rows != 2 || f.Factor != 3.33 {
		t.Errorf("sglang in-sample multiplier %g on %d rows, want 3.33 on 2", f.Factor, f.Rows)
	}
	fit := byKey["vllm W4A16 MoE"]
	want := `cloudrift-4090-qwen3coder-awq ×0.420 median 15.0% -> 41.6%
cloudrift-5090-qwen3coder-awq ×0.420 median 8.8% -> 55.0%
deplodock-5090-vllm-concurrency ×0.420 median 31.6% -> 5.1%
deplodock-5090-vllm-vs-sglang ×0.400 median 25.4% -> 9.9%
`
	if got := classFoldTable(fit); got != want {
		t.Errorf("held-out folds:\n%s\nwant:\n%s", got, want)
	}
	if fit.Ship || fit.Why != "worse on held-out cloudrift-4090-qwen3coder-awq, cloudrift-5090-qwen3coder-awq" || fit.Rows != 10 || fit.Factor != 0.425 {
		t.Errorf("vllm W4A16 MoE: ship %v (%q), %d rows, ×%g; want not shipped, worse on the CloudRift sources, 10 rows, ×0.425", fit.Ship, fit.Why, fit.Rows, fit.Factor)
	}
	var before, after []float64
	for _, f := range fit.Folds {
		var train, test []*IndependentRow
		for i := range rows {
			r := &rows[i]
			if r.Engine != estimate.VLLM || RowClass(r) != "W4A16 MoE" {
				continue
			}
			if r.Source == f.Source {
				test = append(test, r)
			} else {
				train = append(train, r)
			}
		}
		if k := fitClassFactor(train); k != f.Factor {
			t.Errorf("%s: fold multiplier %g, the fit on the other sources gives %g", f.Source, f.Factor, k)
		}
		var b, a []float64
		for _, r := range test {
			shipped := scoreIndependentRow(r) // the shipped coefficients, as ScoreIndependent prices the row
			co := withDequant(r, f.Factor)
			scaled := scoreIndependentRowWith(r, &co)
			for i, e := range shipped.Errors {
				if e.Metric == TTFT {
					continue
				}
				b = append(b, e.APE)
				a = append(a, scaled.Errors[i].APE)
			}
		}
		mb, _ := quantiles(b)
		ma, _ := quantiles(a)
		if math.Abs(mb-f.MedianBefore) > 1e-12 || math.Abs(ma-f.MedianAfter) > 1e-12 {
			t.Errorf("%s: medians %g -> %g, re-derived %g -> %g", f.Source, f.MedianBefore, f.MedianAfter, mb, ma)
		}
		before, after = append(before, b...), append(after, a...)
	}
	mb, _ := quantiles(before)
	ma, _ := quantiles(after)
	if math.Abs(mb-fit.HeldOutBefore) > 1e-12 || math.Abs(ma-fit.HeldOutAfter) > 1e-12 {
		t.Errorf("pooled held-out %g -> %g, re-derived %g -> %g", fit.HeldOutBefore, fit.HeldOutAfter, mb, ma)
	}
}

// TestFitConsumerClassShipRule: a multiplier is shipped only when two or
// more sources fit it, the pooled held-out error falls and no held-out
// source gets worse. The vLLM AWQ MoE rows of the two deplodock sources
// alone (one harness, one card, a batch of 4–20) meet the rule; with the
// CloudRift 400-client rows added they do not.
func TestFitConsumerClassShipRule(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	var deplodock []IndependentRow
	for _, r := range rows {
		if strings.HasPrefix(r.Source, "deplodock-") {
			deplodock = append(deplodock, r)
		}
	}
	f := FitConsumerClass(deplodock, estimate.VLLM, "W4A16 MoE")
	if len(f.Folds) != 2 || !f.Ship || !(f.HeldOutAfter < f.HeldOutBefore) {
		t.Errorf("deplodock alone: %d folds, ship %v (%q), held-out %g -> %g; want 2 folds, shipped, lower", len(f.Folds), f.Ship, f.Why, f.HeldOutBefore, f.HeldOutAfter)
	}
	one := FitConsumerClass(rows, estimate.SGLang, "W4A16 MoE")
	if one.Ship || len(one.Folds) != 0 {
		t.Errorf("one source shipped or held out: %+v", one)
	}
	none := FitConsumerClass(rows, estimate.TRTLLM, "W4A16 MoE")
	if none.Ship || none.Rows != 0 || none.Why != "no rows" {
		t.Errorf("no rows: %+v", none)
	}
}
