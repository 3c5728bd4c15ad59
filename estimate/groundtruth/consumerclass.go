package groundtruth

// Consumer-GPU kernel factors per deployment class (issue #24).
//
// The W4A16 kernel factor (estimate.Coeffs.Dequant) is one per engine
// family, fitted on datacenter rows. On GeForce cards the published rows of
// AWQ MoE checkpoints (testdata/consumer_serving.csv) miss in both
// directions: SGLang's moe_wna16 path is 2–3× slower than priced, vLLM's
// faster at 4–40 clients and slower at 400. FitConsumerClass asks whether
// one multiplier on Dequant for an engine's rows of one class on consumer
// GPUs predicts a source it was not fitted on better than the datacenter
// value does: the multiplier is fitted on the other sources and scored on
// the held-out one, each source in turn, the protocol FitGDDR follows for
// the memory-traffic factor. A multiplier is shipped only when at least two
// sources fit it and the held-out errors improve (ClassFit.Ship).

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// The grid of the class multiplier: k/classDiv for k in [classMin,
// classMax] (0.25 to 6 in steps of 0.005).
const (
	classDiv = 200
	classMin = 50
	classMax = 1200
)

// ClassFold is one source held out of a class multiplier's fit.
type ClassFold struct {
	Source string
	Factor float64 // fitted on the other sources
	// Before and After are the held-out source's cells per metric with the
	// shipped coefficients and with Dequant × Factor.
	Before, After []IndependentCell
	// MedianBefore and MedianAfter are the median APEs over the source's
	// TPOT and throughput errors, without and with the multiplier.
	MedianBefore, MedianAfter float64
}

// ClassFit is the multiplier on Dequant of one engine's rows of one
// deployment class (RowClass) on consumer GPUs.
type ClassFit struct {
	Engine estimate.Engine
	Class  string
	// Factor is fitted on every source's rows (in-sample).
	Factor  float64
	Rows    int
	Sources []string
	Folds   []ClassFold
	// HeldOutBefore and HeldOutAfter are the median APEs over every
	// held-out TPOT and throughput error of the folds, without and with the
	// multiplier fitted without the row's source (NaN without folds).
	HeldOutBefore, HeldOutAfter float64
	// Ship says whether the multiplier is good enough to ship: at least two
	// sources, HeldOutAfter < HeldOutBefore, and no held-out source's
	// median (ClassFold.MedianAfter) worse than without the multiplier.
	// Why says why not.
	Ship bool
	Why  string
}

// classRow reports whether r is a consumer-GPU row of engine e in class.
func classRow(r *IndependentRow, e estimate.Engine, class string) bool {
	return r.Engine == e && RowClass(r) == class
}

// shippedFor returns the shipped coefficients of r's engine on r's GPU
// (what ScoreIndependent prices it with), its consumer memory-traffic
// factor included.
func shippedFor(r *IndependentRow) (estimate.Coeffs, bool) {
	hw, err := hardware.Lookup(r.GPU)
	if err != nil {
		return estimate.Coeffs{}, false
	}
	co, _ := estimate.DefaultCoeffs().Family(r.Engine.Family(hw))
	return co, true
}

// withDequant returns r's shipped coefficients with Dequant × k.
func withDequant(r *IndependentRow, k float64) estimate.Coeffs {
	co, _ := shippedFor(r)
	d := co.Dequant
	if d <= 0 {
		d = 1
	}
	co.Dequant = d * k
	return co
}

// FitConsumerClass fits the multiplier on Dequant of engine e's rows of
// class among rows (consumer GPUs): the grid value with the smallest
// median APE over the rows' TPOT and throughput (GDDRMetrics), the
// smallest such value on a tie; then each source held out in turn.
func FitConsumerClass(rows []IndependentRow, e estimate.Engine, class string) ClassFit {
	out := ClassFit{Engine: e, Class: class, HeldOutBefore: math.NaN(), HeldOutAfter: math.NaN()}
	var fit []*IndependentRow
	sources := map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if !classRow(r, e, class) {
			continue
		}
		if _, ok := shippedFor(r); !ok {
			continue
		}
		fit = append(fit, r)
		sources[r.Source] = true
	}
	out.Rows = len(fit)
	for s := range sources {
		out.Sources = append(out.Sources, s)
	}
	sort.Strings(out.Sources)
	if len(fit) == 0 {
		out.Why = "no rows"
		return out
	}
	out.Factor = fitClassFactor(fit)
	if len(out.Sources) < 2 {
		out.Why = "one source: fitted in-sample only, nothing to hold out"
		return out
	}
	var before, after []float64
	for _, src := range out.Sources {
		var train, test []*IndependentRow
		for _, r := range fit {
			if r.Source == src {
				test = append(test, r)
			} else {
				train = append(train, r)
			}
		}
		f := ClassFold{Source: src, Factor: fitClassFactor(train)}
		f.Before = gddrCells(test, func(r *IndependentRow) estimate.Coeffs { return withDequant(r, 1) })
		f.After = gddrCells(test, func(r *IndependentRow) estimate.Coeffs { return withDequant(r, f.Factor) })
		b, a := classAPEs(test, 1), classAPEs(test, f.Factor)
		f.MedianBefore, _ = quantiles(b)
		f.MedianAfter, _ = quantiles(a)
		out.Folds = append(out.Folds, f)
		before = append(before, b...)
		after = append(after, a...)
	}
	out.HeldOutBefore, _ = quantiles(before)
	out.HeldOutAfter, _ = quantiles(after)
	var worse []string
	for _, f := range out.Folds {
		if f.MedianAfter > f.MedianBefore+1e-12 {
			worse = append(worse, f.Source)
		}
	}
	switch {
	case !(out.HeldOutAfter < out.HeldOutBefore):
		out.Why = "held-out errors do not improve"
	case len(worse) > 0:
		out.Why = "worse on held-out " + strings.Join(worse, ", ")
	default:
		out.Ship = true
	}
	return out
}

// classAPEs returns the TPOT and throughput APEs of rows priced with
// Dequant × k.
func classAPEs(rows []*IndependentRow, k float64) []float64 {
	var apes []float64
	for _, r := range rows {
		co := withDequant(r, k)
		for _, e := range scoreIndependentRowWith(r, &co).Errors {
			if slices.Contains(GDDRMetrics, e.Metric) {
				apes = append(apes, e.APE)
			}
		}
	}
	return apes
}

func fitClassFactor(rows []*IndependentRow) float64 {
	best, bestErr := 1.0, math.Inf(1)
	for k := classMin; k <= classMax; k++ {
		c := float64(k) / classDiv
		apes := classAPEs(rows, c)
		if len(apes) == 0 {
			return 1
		}
		if med, _ := quantiles(apes); med < bestErr-1e-12 {
			best, bestErr = c, med
		}
	}
	return best
}

// ConsumerClassClasses are the (engine, class) pairs validate-estimator
// fits a consumer multiplier for: the classes of consumer rows with
// weight-only kernels (W4A16), per engine, in engine then class order.
func ConsumerClassClasses(rows []IndependentRow) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for i := range rows {
		r := &rows[i]
		class := RowClass(r)
		if !strings.HasPrefix(class, "W4A16 ") {
			continue
		}
		k := [2]string{string(r.Engine), class}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// ConsumerClassFits fits every pair of ConsumerClassClasses on the
// embedded consumer rows.
func ConsumerClassFits() ([]ClassFit, error) {
	rows, err := ConsumerTables()
	if err != nil {
		return nil, err
	}
	var fits []ClassFit
	for _, k := range ConsumerClassClasses(rows) {
		fits = append(fits, FitConsumerClass(rows, estimate.Engine(k[0]), k[1]))
	}
	return fits, nil
}
