package search

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/workload"
)

// Margins are allowances for the estimator's error, as fractions per
// budgeted cost: a candidate meets a ceiling when its estimate × (1 +
// margin) stays within it, and the throughput floor when its estimate ÷ (1
// + margin) reaches it. Parameter counts are exact and have no margin.
// The zero Margins disables them.
type Margins struct {
	Memory     float64 `json:"memory"`
	TTFT       float64 `json:"ttft"`
	TPOT       float64 `json:"tpot"`
	E2E        float64 `json:"e2e"`
	Throughput float64 `json:"throughput"`
	// Source says where the margins come from.
	Source string `json:"source,omitempty"`
	// Quantile, when set (ParseMargin's "q80"), asks for the margins
	// covering that share of the held-out rows of the deployment's class
	// instead of the default MarginQuantile: Execute derives them
	// (DefaultMarginsFor) and the fields above are ignored.
	Quantile float64 `json:"quantile,omitempty"`
}

// MarginQuantile is the share of the held-out rows of the deployment's
// error class the default margins cover (GPU engines).
const MarginQuantile = 0.9

// marginQuantiles are the quantiles ParseMargin accepts ("q50" ...), the
// ones estimate/margins.json holds.
var marginQuantiles = map[string]float64{"q50": 0.5, "q80": 0.8, "q90": 0.9}

// Of returns the margin of a budget by its name (BudgetTPOT, ...): 0 for
// nil Margins and for a budget without one.
func (m *Margins) Of(budget string) float64 {
	k, ok := Kind(budget)
	if m == nil || !ok || k.Margin == nil {
		return 0
	}
	return k.Margin(m)
}

// String lists the non-zero margins of the budgets set in b, e.g.
// "max-tpot +14.5 %, max-memory +4.9 % (source)"; "none" when all are 0.
func (m *Margins) String(b *Budgets) string {
	var parts []string
	for _, n := range b.Set() {
		if x := m.Of(n); x > 0 {
			parts = append(parts, fmt.Sprintf("%s %+.1f %%", n, 100*x))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	s := strings.Join(parts, ", ")
	if m.Source != "" {
		s += " (" + m.Source + ")"
	}
	return s
}

// MarginAuto is the margin spec that selects DefaultMargins.
const MarginAuto = "auto"

// ParseMargin reads a margin spec: "auto" or "" (nil: the estimator's
// calibrated error band, DefaultMargins), "q50", "q80" or "q90" (the
// margins covering that share of the held-out rows of the deployment's
// class; GPU engines), one value for every cost
// ("0" disables them, "10%" or "0.1"), or per cost
// "tpot=15%,memory=5%" (names memory, ttft, tpot, e2e, throughput; the
// costs not named get no margin).
func ParseMargin(s string) (*Margins, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == MarginAuto {
		return nil, nil
	}
	if q, ok := marginQuantiles[s]; ok {
		return &Margins{Quantile: q}, nil
	}
	frac := func(v string) (float64, error) {
		v = strings.TrimSpace(v)
		pct := strings.HasSuffix(v, "%")
		x, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(v, "%")), 64)
		if err != nil {
			return 0, fmt.Errorf("margin %q: want a fraction (0.1) or a percentage (10%%)", v)
		}
		if pct {
			x /= 100
		}
		if x < 0 || x > 1 || math.IsNaN(x) {
			return 0, fmt.Errorf("margin %q: must be between 0 and 100 %%", v)
		}
		return x, nil
	}
	m := &Margins{Source: "set by the user"}
	if !strings.Contains(s, "=") {
		x, err := frac(s)
		if err != nil {
			return nil, err
		}
		m.Memory, m.TTFT, m.TPOT, m.E2E, m.Throughput = x, x, x, x, x
		return m, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("margin %q: want NAME=VALUE, e.g. tpot=15%%", kv)
		}
		x, err := frac(v)
		if err != nil {
			return nil, err
		}
		switch strings.TrimSpace(k) {
		case "memory":
			m.Memory = x
		case "ttft":
			m.TTFT = x
		case "tpot":
			m.TPOT = x
		case "e2e":
			m.E2E = x
		case "throughput":
			m.Throughput = x
		default:
			return nil, fmt.Errorf("margin %q: unknown cost %q (want memory, ttft, tpot, e2e or throughput)", kv, k)
		}
	}
	return m, nil
}

// DefaultMargins is DefaultMarginsFor without a parent (E2E takes the
// larger of TTFT's and TPOT's margins) at MarginQuantile.
func DefaultMargins(hw *hardware.GPU, eng estimate.Engine, w *workload.Workload) (*Margins, error) {
	return DefaultMarginsFor(hw, eng, w, nil, MarginQuantile)
}

// DefaultMarginsFor are the allowances for the estimator's error that fit
// the deployment. For the native engine: the median absolute errors of
// its calibration on the held-out rows (estimate/nativecal: TTFT, TPOT,
// throughput, peak memory; E2E the larger of TTFT's and TPOT's). For the
// other engines: per metric, the q-quantile of the held-out shortfall of
// the estimates of the deployment's error class (engine family, GPU
// class, metric, workload regime; estimate/margins.json, pooled over GPU
// classes or regimes where the class has too few rows), E2E weighted by
// the share of the parent's estimated E2E that is TTFT (the larger of the
// two without a parent), and no memory margin (the memory plan has no
// calibrated error). A family the table lacks takes its coefficients'
// p90 held-out error bands (the median where no p90 was fitted).
func DefaultMarginsFor(hw *hardware.GPU, eng estimate.Engine, w *workload.Workload, parent *architecture.Model, q float64) (*Margins, error) {
	c, err := estimate.Compile(hw, eng, estimate.Options{}, w, nil)
	if err != nil {
		return nil, fmt.Errorf("search: margins: %w", err)
	}
	if eng.Local() {
		n := c.NativeCoeffs()
		src := fmt.Sprintf("the native estimator's held-out median error on %s", hw.Name)
		if n.ErrTTFT == 0 && n.ErrTPOT == 0 && n.ErrThroughput == 0 && n.ErrMemory == 0 {
			// A quick probe of this host has no held-out rows of its own:
			// the committed calibration's errors stand in.
			n, _ = estimate.DefaultNativeCoeffs().Machine(hw.Name)
			src = "the committed native calibration's held-out median error (this host's quick probe has none of its own)"
		}
		return &Margins{Memory: n.ErrMemory, TTFT: n.ErrTTFT, TPOT: n.ErrTPOT, E2E: math.Max(n.ErrTTFT, n.ErrTPOT), Throughput: n.ErrThroughput,
			Source: src}, nil
	}
	co := c.Coeffs()
	or := func(p90, median float64) float64 {
		if p90 > 0 {
			return p90
		}
		return median
	}
	m := &Margins{TTFT: or(co.ErrTTFTP90, co.ErrTTFT), TPOT: or(co.ErrTPOTP90, co.ErrTPOT), Throughput: or(co.ErrThroughputP90, co.ErrThroughput)}
	class := estimate.ErrorClass{Family: c.Family(), GPUClass: estimate.GPUClass(hw), Regime: estimate.Regime(w.Concurrency)}
	table := estimate.DefaultMarginFile()
	var from []string
	for _, x := range []struct {
		metric string
		v      *float64
	}{{"ttft", &m.TTFT}, {"tpot", &m.TPOT}, {"throughput", &m.Throughput}} {
		class.Metric = x.metric
		if v, why, ok := table.MarginFor(class, q); ok {
			*x.v = v
			from = append(from, x.metric+" from "+why)
		}
	}
	if len(from) == 0 {
		m.E2E = math.Max(m.TTFT, m.TPOT)
		m.Source = fmt.Sprintf("the p90 held-out error of the %s coefficients", c.Family())
		return m, nil
	}
	m.E2E = math.Max(m.TTFT, m.TPOT)
	e2e := "E2E the larger of TTFT's and TPOT's"
	if parent != nil {
		if r, err := estimate.Estimate(parent, hw, eng, estimate.Options{}, w); err == nil && r.Analytic.E2E > 0 {
			share := math.Min(r.Analytic.TTFT/r.Analytic.E2E, 1)
			m.E2E = share*m.TTFT + (1-share)*m.TPOT
			e2e = fmt.Sprintf("E2E weighted by the parent's estimated TTFT share of it (%.0f %%)", 100*share)
		}
	}
	m.Source = fmt.Sprintf("the q%.0f of the held-out shortfall of %s on %s GPUs, %s workload (%s; %s)", 100*q, class.Family, class.GPUClass, class.Regime,
		strings.Join(from, ", "), e2e)
	return m, nil
}
