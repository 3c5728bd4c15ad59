package search

import (
	"fmt"
	"math"
	"strconv"
	"strings"

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
}

// factors returns 1 + margin in usage order (see Budgets.usage).
func (m *Margins) factors() [7]float64 {
	if m == nil {
		return [7]float64{1, 1, 1, 1, 1, 1, 1}
	}
	return [7]float64{1 + m.Memory, 1 + m.TTFT, 1 + m.TPOT, 1 + m.E2E, 1 + m.Throughput, 1, 1}
}

// Of returns the margin of a budget by its name (BudgetTPOT, ...).
func (m *Margins) Of(budget string) float64 {
	for i, n := range budgetNames {
		if n == budget {
			return m.factors()[i] - 1
		}
	}
	return 0
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
// calibrated error band, DefaultMargins), one value for every cost
// ("0" disables them, "10%" or "0.1"), or per cost
// "tpot=15%,memory=5%" (names memory, ttft, tpot, e2e, throughput; the
// costs not named get no margin).
func ParseMargin(s string) (*Margins, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == MarginAuto {
		return nil, nil
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

// DefaultMargins are the estimator's calibrated held-out error bands for
// the deployment: for the native engine the median absolute errors of its
// calibration on this machine's held-out rows (estimate/nativecal: TTFT,
// TPOT, throughput, peak memory; E2E takes the larger of TTFT's and
// TPOT's); for the other engines the 90th percentiles of the held-out
// errors of the coefficient family (the median where no p90 was fitted),
// as estimate --json reports them in error_band, and no memory margin (the
// memory plan has no calibrated error).
func DefaultMargins(hw *hardware.GPU, eng estimate.Engine, w *workload.Workload) (*Margins, error) {
	c, err := estimate.Compile(hw, eng, estimate.Options{}, w, nil)
	if err != nil {
		return nil, fmt.Errorf("search: margins: %w", err)
	}
	if eng.Local() {
		n := c.NativeCoeffs()
		return &Margins{Memory: n.ErrMemory, TTFT: n.ErrTTFT, TPOT: n.ErrTPOT, E2E: math.Max(n.ErrTTFT, n.ErrTPOT), Throughput: n.ErrThroughput,
			Source: fmt.Sprintf("the native estimator's held-out median error on %s", hw.Name)}, nil
	}
	co := c.Coeffs()
	or := func(p90, median float64) float64 {
		if p90 > 0 {
			return p90
		}
		return median
	}
	m := &Margins{TTFT: or(co.ErrTTFTP90, co.ErrTTFT), TPOT: or(co.ErrTPOTP90, co.ErrTPOT), Throughput: or(co.ErrThroughputP90, co.ErrThroughput),
		Source: fmt.Sprintf("the p90 held-out error of the %s coefficients", c.Family())}
	m.E2E = math.Max(m.TTFT, m.TPOT)
	return m, nil
}
