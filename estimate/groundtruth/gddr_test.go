package groundtruth

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
)

// shippedWithoutGDDR returns a copy of the shipped coefficients whose
// families have no consumer factor, as FitAll leaves them.
func shippedWithoutGDDR() *estimate.CoeffFile {
	src := estimate.DefaultCoeffs()
	cf := &estimate.CoeffFile{Comment: src.Comment, Command: src.Command, Families: map[string]estimate.Coeffs{}}
	for k, v := range src.Families {
		v.GDDR, v.GDDRGPUs = 0, nil
		cf.Families[k] = v
	}
	return cf
}

// TestGDDRShipped: the factor in estimate/coefficients.json is what
// FitConsumer fits on the embedded consumer rows (calibrate runs it after
// FitAll), and only the vLLM family has consumer rows.
func TestGDDRShipped(t *testing.T) {
	cf := shippedWithoutGDDR()
	fits, err := FitConsumer(cf)
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 1 || fits[0].Engine != estimate.VLLM {
		t.Fatalf("fits %+v, want one, for vLLM", fits)
	}
	for fam, co := range estimate.DefaultCoeffs().Families {
		got := cf.Families[fam]
		if got.GDDR != co.GDDR || !reflect.DeepEqual(got.GDDRGPUs, co.GDDRGPUs) {
			t.Errorf("family %s: fitted GDDR %g %v, shipped %g %v; regenerate with\n  autocompress calibrate --out estimate/coefficients.json --force", fam, got.GDDR, got.GDDRGPUs, co.GDDR, co.GDDRGPUs)
		}
	}
}

// gddrFoldTable prints the held-out folds as validate-estimator does: per
// held-out source and metric, the factor fitted without it and the
// source's errors before and after.
func gddrFoldTable(fit GDDRFit) string {
	var b strings.Builder
	for _, f := range fit.Folds {
		for i := range f.Before {
			x, y := f.Before[i], f.After[i]
			fmt.Fprintf(&b, "%s %s %d const=%.3f before %.1f%% %+.1f%% after %.1f%% %+.1f%%\n", f.Source, x.Metric, x.N, f.Const, x.Median*100, x.Bias*100, y.Median*100, y.Bias*100)
		}
	}
	return b.String()
}

// TestGDDRHeldOut pins the leave-one-source-out errors of the factor to what
// the embedded rows give, and checks the bound the fit meets: over every
// held-out TPOT and throughput error, the median falls below 10 % and
// below the median without the factor.
func TestGDDRHeldOut(t *testing.T) {
	rows, err := ConsumerTables()
	if err != nil {
		t.Fatal(err)
	}
	co := shippedWithoutGDDR().Families["vllm"]
	eff, err := GDDREfficiency()
	if err != nil {
		t.Fatal(err)
	}
	fit := FitGDDR(rows, estimate.VLLM, co, eff)
	want := `mushfiq-4090-mistral7b ttft 5 const=0.940 before 55.9% -1.3% after 58.1% +3.0%
mushfiq-4090-mistral7b throughput 5 const=0.940 before 6.6% +6.6% after 3.2% -3.2%
zhjunqin-3090-llama3-8b tpot 4 const=0.910 before 16.4% -16.4% after 4.3% -0.7%
zhjunqin-3090-llama3-8b throughput 1 const=0.910 before 17.4% +17.4% after 13.1% +13.1%
`
	if got := gddrFoldTable(fit); got != want {
		t.Errorf("held-out folds:\n%s\nwant:\n%s", got, want)
	}
	if fit.Const != 0.91 || fit.Rows != 9 {
		t.Errorf("pooled fit %g on %d rows, want 0.91 on 9", fit.Const, fit.Rows)
	}
	// The efficiencies are llama-bench's F16 decode on the 3090, 4080 and 4090.
	if len(eff) != 3 || !(eff["rtx-3090"] < eff["rtx-4090"] && eff["rtx-4090"] < eff["rtx-4080"]) || fit.EffDefault != eff["rtx-4090"] {
		t.Errorf("efficiencies %v (default %g)", eff, fit.EffDefault)
	}
	var before, after []float64
	for _, f := range fit.Folds {
		for i := range f.Before {
			if f.Before[i].Metric == TTFT {
				continue
			}
			// Re-derive the held-out APEs row by row (the cells hold medians only).
			for _, r := range rows {
				if r.Source != f.Source || !gddrRow(&r, estimate.VLLM) {
					continue
				}
				for _, g := range []struct {
					v   float64
					out *[]float64
				}{{1, &before}, {fit.Factor(f.Const, r.GPU), &after}} {
					c := withGDDR(co, g.v)
					for _, e := range scoreIndependentRowWith(&r, &c).Errors {
						if e.Metric == f.Before[i].Metric {
							*g.out = append(*g.out, e.APE)
						}
					}
				}
			}
		}
	}
	mb, _ := quantiles(before)
	ma, _ := quantiles(after)
	t.Logf("held-out TPOT and throughput: median APE %.1f %% without the factor, %.1f %% with it (n = %d)", mb*100, ma*100, len(after))
	if !(ma < mb && ma <= 0.10) || math.IsNaN(ma) {
		t.Errorf("held-out median %.3f with the factor, %.3f without; want below both 0.10 and the latter", ma, mb)
	}
}
