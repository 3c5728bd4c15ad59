package estimate

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/hardware"
)

// ErrorClass is a deployment's class for the estimator's error: the
// coefficient family, the GPU class, the metric and the workload regime.
// The default margins of a search are the held-out error of its class
// (MarginTable), not one band for the whole family.
type ErrorClass struct {
	Family   string `json:"engine"`
	GPUClass string `json:"gpu_class"`
	Metric   string `json:"metric"` // "ttft", "tpot", "throughput"
	Regime   string `json:"regime"` // RegimeInteractive or RegimeBatched
}

// The workload regimes of ErrorClass: a few clients (or a static batch of
// a few) decode almost alone; many share every step.
const (
	RegimeInteractive = "interactive" // ≤ InteractiveClients
	RegimeBatched     = "batched"
)

// InteractiveClients is the most clients (or static batch) of the
// interactive regime.
const InteractiveClients = 4

// Regime returns the regime of a closed loop of clients (or a static
// batch); a Poisson rate (clients 0) is batched.
func Regime(clients int) string {
	if clients > 0 && clients <= InteractiveClients {
		return RegimeInteractive
	}
	return RegimeBatched
}

// MarginCell is the held-out error of one class: over the rows of that
// class predicted by coefficients fitted without their GPU or without
// their model (estimate/groundtruth.Validate's protocol), the quantiles of
// the estimate's shortfall — the margin that covers that share of the
// rows: measured ÷ estimated − 1 for a latency (a ceiling), estimated ÷
// measured − 1 for throughput (a floor). A negative quantile is an
// estimate on the safe side that often.
type MarginCell struct {
	ErrorClass
	N   int     `json:"n"`
	Q50 float64 `json:"q50"`
	Q80 float64 `json:"q80"`
	Q90 float64 `json:"q90"`
}

// MarginFile is margins.json: the held-out shortfall by class, written by
// "autocompress validate-estimator --margins-out".
type MarginFile struct {
	Comment string       `json:"comment"`
	Command string       `json:"command"`
	Cells   []MarginCell `json:"cells"`
}

// MinMarginRows is the fewest held-out rows a class needs for its own
// margin; a class with fewer takes its family's pooled one (MarginFor).
const MinMarginRows = 20

//go:embed margins.json
var embeddedMargins []byte

var defaultMargins = func() *MarginFile {
	var f MarginFile
	if err := json.Unmarshal(embeddedMargins, &f); err != nil {
		panic("estimate: embedded margins.json: " + err.Error())
	}
	return &f
}()

// DefaultMarginFile returns the embedded held-out margin table.
func DefaultMarginFile() *MarginFile { return defaultMargins }

// MarginFor returns the margin covering the share q (0.5, 0.8 or 0.9) of
// the held-out rows of class c, and what it stands on: the class's own
// rows when it has at least MinMarginRows; else the family's rows of that
// metric and regime on any GPU class, then of any regime (said in the
// text). ok is false when the family has no held-out rows of the metric.
// A negative quantile (the estimate is on the safe side) gives 0.
func (f *MarginFile) MarginFor(c ErrorClass, q float64) (margin float64, why string, ok bool) {
	pick := func(x *MarginCell) float64 {
		switch {
		case q <= 0.5:
			return x.Q50
		case q <= 0.8:
			return x.Q80
		}
		return x.Q90
	}
	for _, try := range []struct {
		match func(x *MarginCell) bool
		what  string
	}{
		{func(x *MarginCell) bool { return x.ErrorClass == c }, "its class"},
		{func(x *MarginCell) bool {
			return x.Family == c.Family && x.Metric == c.Metric && x.Regime == c.Regime && x.GPUClass == "all"
		}, "all GPU classes of " + c.Family + " (no " + c.GPUClass + " rows held out)"},
		{func(x *MarginCell) bool {
			return x.Family == c.Family && x.Metric == c.Metric && x.Regime == "all" && x.GPUClass == "all"
		}, "every GPU class and regime of " + c.Family},
	} {
		for i := range f.Cells {
			x := &f.Cells[i]
			if try.match(x) && x.N >= MinMarginRows {
				return math.Max(pick(x), 0), fmt.Sprintf("%s: %d held-out rows", try.what, x.N), true
			}
		}
	}
	return 0, "", false
}

// GPUClasses maps a catalog name's prefix to its GPU class, longest
// prefix first where two match (facts as data).
var GPUClasses = []struct{ Prefix, Class string }{
	{"rtx-pro-", "workstation"},
	{"rtx-", "consumer"},
	{"apple-", "apple"},
	{"jetson-", "edge"},
	{"cpu-", "cpu"},
}

// GPUClass returns hw's class: consumer (GeForce RTX), workstation,
// apple, edge, cpu, or datacenter for the rest.
func GPUClass(hw *hardware.GPU) string {
	for _, g := range GPUClasses {
		if len(hw.Name) >= len(g.Prefix) && hw.Name[:len(g.Prefix)] == g.Prefix {
			return g.Class
		}
	}
	return "datacenter"
}
