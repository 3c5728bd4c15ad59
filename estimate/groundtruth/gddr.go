package groundtruth

// The consumer-GPU memory-traffic factor (estimate.Coeffs.GDDR).
//
// The pool engines' families are fitted on datacenter GPUs with HBM. On a
// GeForce card the same engine streams its weights and KV cache from
// GDDR6X/GDDR7, which reaches less of its datasheet peak: the published
// consumer rows (testdata/consumer_serving.csv) put the shipped estimate's
// decode 7 % (RTX 4090) to 17 % (RTX 3090) too fast, and the two cards
// differ as their llama-bench decode efficiencies do. FitGDDR fits one
// class constant over each GPU's measured efficiency (GDDREfficiency) from
// those rows and reports it with each source held out in turn, the
// protocol validate-estimator prints.

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// The grid of the class constant: k/gddrDiv for k in [gddrDiv/2,
// 3·gddrDiv/2] (steps of 0.005); k/gddrDiv is the float nearest the
// decimal. Shipped per-GPU factors are rounded to gddrRound.
const (
	gddrDiv   = 200
	gddrRound = 1000
)

// GDDRMetrics are the metrics the factor is fitted on: the decode step and
// the throughput it sets. TTFT is scored but not fitted (it is dominated by
// scheduling, not by memory traffic, on these rows).
var GDDRMetrics = []Metric{TPOT, Throughput}

// GDDRFold is one source held out of the fit.
type GDDRFold struct {
	Source string  // the held-out source
	Const  float64 // the class constant fitted on the other sources
	// Before and After are the held-out source's cells per metric with the
	// family's coefficients as fitted on the datacenter GPUs (factor 1) and
	// with Const over its GPUs' efficiencies.
	Before, After []IndependentCell
}

// GDDRFit is the factor of one engine's family: a GPU's factor is
// Const ÷ its decode bandwidth efficiency (Eff; EffDefault for a consumer
// GPU without a measurement).
type GDDRFit struct {
	Engine estimate.Engine
	// Const is fitted on every source's rows (what calibrate ships); 0 when
	// the engine has no fitting rows.
	Const      float64
	Eff        map[string]float64 // per GPU, from llama-bench (GDDREfficiency)
	EffDefault float64            // their median
	Rows       int                // fitting rows (16-bit weights on consumer GPUs)
	Folds      []GDDRFold
}

// Factor returns the memory-traffic factor of gpu under constant c.
func (f *GDDRFit) Factor(c float64, gpu string) float64 {
	e, ok := f.Eff[gpu]
	if !ok {
		e = f.EffDefault
	}
	return c / e
}

// GDDREfficiency measures each consumer GPU's decode bandwidth efficiency
// from the published llama-bench rows (testdata/llama_bench.csv): a batch-1
// F16 decode from a short context (the tg row with the fewest tokens)
// streams the model's weights once per token, so tokens/s × streamed bytes
// ÷ the datasheet bandwidth is the share of the peak the card's memory
// reaches — llama.cpp's kernels included, which the class constant absorbs.
func GDDREfficiency() (map[string]float64, error) {
	rows, err := LlamaBenchTables()
	if err != nil {
		return nil, err
	}
	cases, err := prepareBench(rows)
	if err != nil {
		return nil, err
	}
	best := map[string]*benchCase{}
	for _, b := range cases {
		if b.row.Test != BenchTG || b.row.Precision != "f16" || estimate.GPUClass(b.hw) != "consumer" {
			continue
		}
		if o, ok := best[b.hw.Name]; !ok || b.row.Tokens < o.row.Tokens {
			best[b.hw.Name] = b
		}
	}
	eff := map[string]float64{}
	for g, b := range best {
		eff[g] = b.row.TokS * b.s.StreamedBytes(1) / b.hw.BandwidthBps
	}
	return eff, nil
}

// gddrRow reports whether r fits the factor of engine e: a consumer-GPU row
// of e with 16-bit weights, so that no weight-only kernel (whose cost the
// family's Dequant prices) is in what the factor explains.
func gddrRow(r *IndependentRow, e estimate.Engine) bool {
	return r.Engine == e && strings.HasPrefix(RowClass(r), "16-bit ")
}

// FitGDDR fits the class constant of engine e's family with coefficients co
// on the rows of e (consumer GPUs, 16-bit weights), each row's GPU getting
// the factor constant ÷ its efficiency in eff (or their median): the grid
// value in [0.5, 1.5] with the smallest median APE over the rows' TPOT and
// throughput, the smallest such value on a tie. Each source is then held
// out in turn: refitted on the others and scored on its fitting rows,
// every metric it publishes, before (factor 1) and after.
func FitGDDR(rows []IndependentRow, e estimate.Engine, co estimate.Coeffs, eff map[string]float64) GDDRFit {
	out := GDDRFit{Engine: e, Eff: eff, EffDefault: medianOf(eff)}
	co.GDDR, co.GDDRGPUs = 0, nil
	var fit []*IndependentRow
	for i := range rows {
		if gddrRow(&rows[i], e) {
			fit = append(fit, &rows[i])
		}
	}
	out.Rows = len(fit)
	if len(fit) == 0 || out.EffDefault <= 0 {
		return out
	}
	out.Const = out.fitConst(fit, co)
	sources := map[string]bool{}
	for _, r := range fit {
		sources[r.Source] = true
	}
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	if len(names) < 2 {
		return out
	}
	for _, src := range names {
		var train, test []*IndependentRow
		for _, r := range fit {
			if r.Source != src {
				train = append(train, r)
			} else {
				test = append(test, r)
			}
		}
		f := GDDRFold{Source: src, Const: out.fitConst(train, co)}
		f.Before = gddrCells(test, func(*IndependentRow) estimate.Coeffs { return co })
		f.After = gddrCells(test, func(r *IndependentRow) estimate.Coeffs { return withGDDR(co, out.Factor(f.Const, r.GPU)) })
		out.Folds = append(out.Folds, f)
	}
	return out
}

func withGDDR(co estimate.Coeffs, f float64) estimate.Coeffs {
	co.GDDR, co.GDDRGPUs = f, nil
	return co
}

func medianOf(m map[string]float64) float64 {
	v := make([]float64, 0, len(m))
	for _, x := range m {
		v = append(v, x)
	}
	med, _ := quantiles(v)
	return med
}

func (g *GDDRFit) fitConst(rows []*IndependentRow, co estimate.Coeffs) float64 {
	best, bestErr := 1.0, math.Inf(1)
	for k := gddrDiv / 2; k <= gddrDiv*3/2; k++ {
		c := float64(k) / gddrDiv
		var apes []float64
		for _, r := range rows {
			cr := withGDDR(co, g.Factor(c, r.GPU))
			for _, e := range scoreIndependentRowWith(r, &cr).Errors {
				if slices.Contains(GDDRMetrics, e.Metric) {
					apes = append(apes, e.APE)
				}
			}
		}
		if len(apes) == 0 {
			return 1
		}
		if med, _ := quantiles(apes); med < bestErr-1e-12 {
			best, bestErr = c, med
		}
	}
	return best
}

// gddrCells scores rows, each with the coefficients coFor gives it, and
// summarises each metric (Source is the rows' source, Engine "all").
func gddrCells(rows []*IndependentRow, coFor func(*IndependentRow) estimate.Coeffs) []IndependentCell {
	apes := map[Metric][]float64{}
	ratios := map[Metric][]float64{}
	src := ""
	for _, r := range rows {
		src = r.Source
		co := coFor(r)
		for _, e := range scoreIndependentRowWith(r, &co).Errors {
			apes[e.Metric] = append(apes[e.Metric], e.APE)
			ratios[e.Metric] = append(ratios[e.Metric], e.Predicted/e.Published-1)
		}
	}
	var out []IndependentCell
	for _, m := range Metrics {
		if v, ok := apes[m]; ok {
			c := SummariseAPE(v, ratios[m])
			c.Engine, c.Source, c.Metric = "all", src, m
			out = append(out, c)
		}
	}
	return out
}

// FitConsumer sets the consumer memory-traffic factors of every family
// that has consumer rows (ConsumerTables, 16-bit weights) in cf — GDDR for
// a consumer GPU without an efficiency measurement, GDDRGPUs for those
// with one — fitted on all the rows with the family's coefficients in cf,
// and returns the fits (each source held out in turn), in family order.
// Families without rows keep their factors.
func FitConsumer(cf *estimate.CoeffFile) ([]GDDRFit, error) {
	rows, err := ConsumerTables()
	if err != nil {
		return nil, err
	}
	eff, err := GDDREfficiency()
	if err != nil {
		return nil, err
	}
	byFamily := map[string]estimate.Engine{}
	for i := range rows {
		r := &rows[i]
		hw, err := hardware.Lookup(r.GPU)
		if err != nil {
			continue
		}
		if gddrRow(r, r.Engine) {
			byFamily[r.Engine.Family(hw)] = r.Engine
		}
	}
	fams := make([]string, 0, len(byFamily))
	for f := range byFamily {
		fams = append(fams, f)
	}
	sort.Strings(fams)
	var fits []GDDRFit
	for _, fam := range fams {
		co, ok := cf.Families[fam]
		if !ok {
			continue
		}
		fit := FitGDDR(rows, byFamily[fam], co, eff)
		if fit.Const > 0 {
			co.GDDR = roundGDDR(fit.Const / fit.EffDefault)
			co.GDDRGPUs = map[string]float64{}
			for g := range eff {
				co.GDDRGPUs[g] = roundGDDR(fit.Factor(fit.Const, g))
			}
		}
		cf.Families[fam] = co
		fits = append(fits, fit)
	}
	return fits, nil
}

func roundGDDR(x float64) float64 { return math.Round(x*gddrRound) / gddrRound }

// ConsumerHeldOut refits the consumer memory-traffic factors on a copy of
// cf with every family's factors removed (as FitAll leaves them) and
// returns the fits: each source's errors held out of the fit that
// predicts it, before and after the factor (validate-estimator's table).
func ConsumerHeldOut(cf *estimate.CoeffFile) ([]GDDRFit, error) {
	c := &estimate.CoeffFile{Comment: cf.Comment, Command: cf.Command, Families: map[string]estimate.Coeffs{}}
	for k, v := range cf.Families {
		v.GDDR, v.GDDRGPUs = 0, nil
		c.Families[k] = v
	}
	return FitConsumer(c)
}
