package groundtruth

import (
	"context"
	"math"
	"sort"

	"github.com/autocompress/autocompress/estimate"
)

// Cell is the error of one (family, GPU, metric, hold-out kind) group.
type Cell struct {
	Family  string  `json:"engine"`
	GPU     string  `json:"gpu"` // "all" for the pooled row of a family
	Metric  Metric  `json:"metric"`
	Holdout string  `json:"holdout"` // "gpu", "model" or "in-sample"
	N       int     `json:"n"`
	Median  float64 `json:"median_ape"`
	P90     float64 `json:"p90_ape"`
}

// Report is the result of Validate.
type Report struct {
	Rows    int     `json:"rows"`
	Skipped string  `json:"skipped"`
	Cells   []Cell  `json:"cells"`
	Pooled  []Cell  `json:"pooled"` // per family and metric, both hold-outs together
	Overall []Cell  `json:"overall"`
	Targets Targets `json:"targets"`
	// Batch splits the held-out TPOT and throughput errors of every family
	// by architecture (dense or MoE) and client band: an MoE decode step
	// streams the experts its batch touches (estimate.Summary.StreamedBytes),
	// so a wrong expert-traffic term shows as a bias that moves with the
	// band on MoE rows and not on dense ones.
	Batch []BatchCell `json:"by_batch"`
}

// BatchCell is the held-out error of one (family, architecture, client
// band, metric) group, both hold-outs together.
type BatchCell struct {
	Family string  `json:"engine"`
	Arch   string  `json:"arch"`    // "dense" or "moe"
	Band   string  `json:"clients"` // ClientBands
	Metric Metric  `json:"metric"`
	N      int     `json:"n"`
	Median float64 `json:"median_ape"`
	// Bias is the median of predicted/measured − 1 (negative: the estimate
	// is low).
	Bias float64 `json:"bias"`
}

// ClientBands are the client-count bands of BatchCell, by upper bound.
var ClientBands = []struct {
	Name string
	Max  int
}{{"1", 1}, {"2-4", 4}, {"5-16", 16}, {"17-64", 64}, {"65+", math.MaxInt}}

// clientBand returns the band of a row's clients (closed loop) or static batch.
func clientBand(r *Row) string {
	n := max(r.Concurrency, r.Batch, 1)
	for _, b := range ClientBands {
		if n <= b.Max {
			return b.Name
		}
	}
	return ClientBands[len(ClientBands)-1].Name
}

// Targets are the median-APE goals of the issue.
type Targets struct {
	TPOT       float64 `json:"tpot"`
	TTFT       float64 `json:"ttft"`
	Throughput float64 `json:"throughput"`
}

// DefaultTargets: median APE ≤ 8 % TPOT, ≤ 15 % TTFT, ≤ 10 % throughput.
var DefaultTargets = Targets{TPOT: 0.08, TTFT: 0.15, Throughput: 0.10}

type key struct {
	fam, gpu string
	m        Metric
	hold     string
}

// Validate fits with whole GPUs held out (leave-one-GPU-out) and with whole
// models held out (leave-one-model-out), per family, and reports the absolute
// percentage errors on the held-out rows only.
func Validate(ctx context.Context, rows []*Prepared, prior *estimate.CoeffFile, maxIter int) (*Report, error) {
	apes := map[key][]float64{}
	type bk struct {
		fam, arch, band string
		m               Metric
	}
	bApes, bRatios := map[bk][]float64{}, map[bk][]float64{}
	err := heldOut(ctx, rows, prior, maxIter, func(fam, hold string, p *Prepared, m Metric, pred, meas float64) {
		ape := math.Abs(pred-meas) / meas
		if math.IsNaN(ape) {
			ape = math.Inf(1)
		}
		k := key{fam, p.Row.GPU, m, hold}
		apes[k] = append(apes[k], ape)
		if m != TTFT {
			arch := "dense"
			if p.s.MoELayers > 0 {
				arch = "moe"
			}
			b := bk{fam, arch, clientBand(p.Row), m}
			bApes[b] = append(bApes[b], ape)
			bRatios[b] = append(bRatios[b], pred/meas-1)
		}
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Rows: len(rows), Targets: DefaultTargets}
	pooled := map[key][]float64{}
	overall := map[key][]float64{}
	for k, v := range apes {
		rep.Cells = append(rep.Cells, cell(k, v))
		pk := key{k.fam, "all", k.m, "gpu+model"}
		pooled[pk] = append(pooled[pk], v...)
		ok := key{"all", "all", k.m, "gpu+model"}
		overall[ok] = append(overall[ok], v...)
	}
	for k, v := range pooled {
		rep.Pooled = append(rep.Pooled, cell(k, v))
	}
	for k, v := range overall {
		rep.Overall = append(rep.Overall, cell(k, v))
	}
	band := map[string]int{}
	for i, b := range ClientBands {
		band[b.Name] = i
	}
	for k, v := range bApes {
		med, _ := quantiles(v)
		bias, _ := quantiles(bRatios[k])
		rep.Batch = append(rep.Batch, BatchCell{Family: k.fam, Arch: k.arch, Band: k.band, Metric: k.m, N: len(v), Median: med, Bias: bias})
	}
	sort.Slice(rep.Batch, func(i, j int) bool {
		a, b := rep.Batch[i], rep.Batch[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		if a.Arch != b.Arch {
			return a.Arch < b.Arch
		}
		return band[a.Band] < band[b.Band]
	})
	for _, cs := range [][]Cell{rep.Cells, rep.Pooled, rep.Overall} {
		sort.Slice(cs, func(i, j int) bool {
			a, b := cs[i], cs[j]
			if a.Family != b.Family {
				return a.Family < b.Family
			}
			if a.GPU != b.GPU {
				return a.GPU < b.GPU
			}
			if a.Metric != b.Metric {
				return a.Metric < b.Metric
			}
			return a.Holdout < b.Holdout
		})
	}
	return rep, nil
}

// heldOut runs Validate's protocol — per family, each GPU held out in
// turn and each model held out in turn, the coefficients refitted on the
// rest — and calls visit with every held-out row's prediction and
// measurement of every metric.
func heldOut(ctx context.Context, rows []*Prepared, prior *estimate.CoeffFile, maxIter int, visit func(fam, hold string, p *Prepared, m Metric, pred, meas float64)) error {
	for _, fam := range Families(rows) {
		sub := filter(rows, func(p *Prepared) bool { return p.Family == fam })
		for _, hold := range []string{"gpu", "model"} {
			groupOf := func(p *Prepared) string {
				if hold == "gpu" {
					return p.Row.GPU
				}
				return p.Group
			}
			groups := map[string]bool{}
			for _, p := range sub {
				groups[groupOf(p)] = true
			}
			if len(groups) < 2 {
				continue
			}
			names := make([]string, 0, len(groups))
			for g := range groups {
				names = append(names, g)
			}
			sort.Strings(names)
			for _, g := range names {
				if err := ctx.Err(); err != nil {
					return err
				}
				train := filter(sub, func(p *Prepared) bool { return groupOf(p) != g })
				test := filter(sub, func(p *Prepared) bool { return groupOf(p) == g })
				pc := startFor(ctx, rows, fam, prior, maxIter, func(p *Prepared) bool { return groupOf(p) != g })
				co, _ := Fit(ctx, train, fam, pc, maxIter)
				for _, p := range test {
					for _, m := range Metrics {
						if pred, meas, ok := p.Predict(co, m); ok {
							visit(fam, hold, p, m, pred, meas)
						}
					}
				}
			}
		}
	}
	return nil
}

func cell(k key, v []float64) Cell {
	med, p90 := quantiles(v)
	return Cell{Family: k.fam, GPU: k.gpu, Metric: k.m, Holdout: k.hold, N: len(v), Median: med, P90: p90}
}

func quantiles(v []float64) (med, p90 float64) {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0, 0
	}
	return quantile(s, 0.5), quantile(s, 0.9)
}

// quantile is the linear-interpolation quantile q of sorted s (non-empty).
// Samples may hold +Inf: a quantile that interpolates towards +Inf is +Inf.
func quantile(s []float64, q float64) float64 {
	x := q * float64(len(s)-1)
	i := int(math.Floor(x))
	f := x - float64(i)
	if i+1 >= len(s) || f == 0 {
		return s[i]
	}
	if math.IsInf(s[i+1], 1) {
		return math.Inf(1)
	}
	return s[i]*(1-f) + s[i+1]*f
}

// InSample reports the errors of co on rows (no hold-out), per family and metric.
func InSample(rows []*Prepared, cf *estimate.CoeffFile) []Cell {
	apes := map[key][]float64{}
	for _, p := range rows {
		co, _ := cf.Family(p.Family)
		for _, m := range Metrics {
			pred, meas, ok := p.Predict(co, m)
			if !ok {
				continue
			}
			k := key{p.Family, "all", m, "in-sample"}
			apes[k] = append(apes[k], math.Abs(pred-meas)/meas)
		}
	}
	var out []Cell
	for k, v := range apes {
		out = append(out, cell(k, v))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Family != out[j].Family {
			return out[i].Family < out[j].Family
		}
		return out[i].Metric < out[j].Metric
	})
	return out
}
