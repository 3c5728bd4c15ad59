package groundtruth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// MarginsCommand is the command that writes estimate/margins.json.
const MarginsCommand = "autocompress validate-estimator --margins-out estimate/margins.json --force"

// Margins runs Validate's held-out protocol and returns, per error class
// (family, GPU class, metric, regime), the quantiles of the held-out
// estimates' shortfall (estimate.MarginCell), with pooled rows for every
// GPU class ("all") of a regime and for every regime ("all"), as
// estimate/margins.json holds them.
func Margins(ctx context.Context, rows []*Prepared, prior *estimate.CoeffFile, maxIter int) (*estimate.MarginFile, error) {
	short := map[estimate.ErrorClass][]float64{}
	err := heldOut(ctx, rows, prior, maxIter, func(fam, _ string, p *Prepared, m Metric, pred, meas float64) {
		if !(pred > 0) || !(meas > 0) || math.IsInf(pred, 0) {
			return
		}
		x := meas/pred - 1
		if m == Throughput {
			x = pred/meas - 1
		}
		hw, err := hardware.Lookup(p.Row.GPU)
		if err != nil {
			return
		}
		clients := p.Row.Concurrency
		if p.Row.Static() {
			clients = p.Row.Batch
		}
		c := estimate.ErrorClass{Family: fam, GPUClass: estimate.GPUClass(hw), Metric: string(m), Regime: estimate.Regime(clients)}
		for _, k := range []estimate.ErrorClass{c,
			{Family: fam, GPUClass: "all", Metric: c.Metric, Regime: c.Regime},
			{Family: fam, GPUClass: "all", Metric: c.Metric, Regime: "all"}} {
			short[k] = append(short[k], x)
		}
	})
	if err != nil {
		return nil, err
	}
	f := &estimate.MarginFile{
		Comment: "The estimator's held-out shortfall by error class (engine family, GPU class, metric, workload regime), from validate-estimator's protocol (each GPU, then each model, held out of the fit): q50/q80/q90 are the margins that cover that share of the held-out rows (measured/estimated - 1 for latencies, estimated/measured - 1 for throughput). The search's default margin is the q90 of the deployment's class (search.DefaultMargins).",
		Command: MarginsCommand,
	}
	for k, v := range short {
		sort.Float64s(v)
		f.Cells = append(f.Cells, estimate.MarginCell{ErrorClass: k, N: len(v), Q50: round4(quantile(v, 0.5)), Q80: round4(quantile(v, 0.8)), Q90: round4(quantile(v, 0.9))})
	}
	sort.Slice(f.Cells, func(i, j int) bool {
		a, b := f.Cells[i].ErrorClass, f.Cells[j].ErrorClass
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Metric != b.Metric {
			return a.Metric < b.Metric
		}
		if a.GPUClass != b.GPUClass {
			return a.GPUClass < b.GPUClass
		}
		return a.Regime < b.Regime
	})
	return f, nil
}

// round4 keeps four decimals (a hundredth of a per cent), so the file
// reads plainly and reproduces byte for byte.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// MarginJSON is the margin file as written: indented JSON and a final
// newline.
func MarginJSON(f *estimate.MarginFile) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("margins: %w", err)
	}
	return b.Bytes(), nil
}
