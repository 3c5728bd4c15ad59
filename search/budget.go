package search

import (
	"fmt"
	"math"
	"strings"

	"github.com/autocompress/autocompress/estimate"
)

// Budgets are the deployment's limits; a zero field is not budgeted.
type Budgets struct {
	// MaxMemory is the engine's whole footprint on one GPU, in bytes, at
	// the workload's context and concurrency: weights, activations,
	// overheads and the KV pool (for vLLM, SGLang and TensorRT-LLM the pool
	// is what their memory fraction reserves, so the fraction is searched).
	MaxMemory float64
	// MaxTTFT, MaxTPOT and MaxE2E are latency limits in seconds, on the
	// mean, or on the p90 when P90 is set.
	MaxTTFT, MaxTPOT, MaxE2E float64
	P90                      bool
	// MinThroughput is a server throughput floor.
	MinThroughput Throughput
	// MaxParams and MaxActiveParams limit the total and per-token
	// parameters.
	MaxParams, MaxActiveParams float64
	// Margin is the allowance for the estimator's error on each cost (nil:
	// none; Execute fills in DefaultMargins when Request.DefaultMargin).
	Margin *Margins
}

// Costs are what the estimator says a candidate costs on the deployment.
type Costs struct {
	Fits bool `json:"fits"`
	// FailTerm names the memory term that does not fit (when !Fits).
	FailTerm         string  `json:"fail_term,omitempty"`
	MemoryBytes      float64 `json:"memory_bytes"`
	WeightsBytes     float64 `json:"weights_bytes"`
	KVCapacityTokens float64 `json:"kv_capacity_tokens"`
	MaxConcurrency   int     `json:"max_concurrency"`
	TTFT             float64 `json:"ttft_s"`
	TPOT             float64 `json:"tpot_s"`
	E2E              float64 `json:"e2e_s"`
	TTFTP90          float64 `json:"ttft_p90_s"`
	TPOTP90          float64 `json:"tpot_p90_s"`
	E2EP90           float64 `json:"e2e_p90_s"`
	OutputTokS       float64 `json:"output_tok_s"`
	RequestsPerS     float64 `json:"requests_per_s"`
	Params           float64 `json:"params"`
	ActiveParams     float64 `json:"active_params"`
}

func costsOf(p *estimate.Price, s *estimate.Summary) Costs {
	c := Costs{Fits: p.Fits, FailTerm: p.FailTerm, MemoryBytes: p.TotalBytes, WeightsBytes: p.WeightsBytes,
		KVCapacityTokens: p.KVCapacityTokens, MaxConcurrency: p.MaxConcurrency,
		Params: s.TotalParams, ActiveParams: s.ActiveParams}
	if p.Fits {
		c.TTFT, c.TPOT, c.E2E = p.TTFT, p.TPOT, p.E2E
		c.TTFTP90, c.TPOTP90, c.E2EP90 = p.TTFTP90, p.TPOTP90, p.E2EP90
		c.OutputTokS, c.RequestsPerS = p.OutputTokS, p.RequestsPerS
		if p.Saturated {
			c.TTFT, c.E2E, c.TTFTP90, c.E2EP90 = math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)
		}
	}
	return c
}

// Budget names, as the flags spell them.
const (
	BudgetMemory       = "max-memory"
	BudgetTTFT         = "max-ttft"
	BudgetTPOT         = "max-tpot"
	BudgetE2E          = "max-e2e"
	BudgetThroughput   = "min-throughput"
	BudgetParams       = "max-params"
	BudgetActiveParams = "max-active-params"
)

// usage returns, for every budget set, the cost divided by the limit
// (≤ 1: met; for the throughput floor, limit ÷ throughput), each times 1 +
// its margin, in a fixed order; unset budgets are NaN. A candidate that does not fit has +Inf
// usage of the memory budget (and of every other, since it cannot run).
func (b *Budgets) usage(c *Costs) [7]float64 {
	var u [7]float64
	for i := range u {
		u[i] = math.NaN()
	}
	inf := math.Inf(1)
	ttft, tpot, e2e := c.TTFT, c.TPOT, c.E2E
	if b.P90 {
		ttft, tpot, e2e = c.TTFTP90, c.TPOTP90, c.E2EP90
	}
	set := func(i int, limit, v float64) {
		if limit <= 0 {
			return
		}
		if !c.Fits {
			u[i] = inf
			return
		}
		u[i] = v / limit
	}
	if b.MaxMemory > 0 {
		u[0] = c.MemoryBytes / b.MaxMemory
		if !c.Fits {
			u[0] = inf
		}
	}
	set(1, b.MaxTTFT, ttft)
	set(2, b.MaxTPOT, tpot)
	set(3, b.MaxE2E, e2e)
	switch {
	case b.MinThroughput.TokensPerS > 0:
		u[4] = inf
		if c.Fits && c.OutputTokS > 0 {
			u[4] = b.MinThroughput.TokensPerS / c.OutputTokS
		}
	case b.MinThroughput.RequestsPerS > 0:
		u[4] = inf
		if c.Fits && c.RequestsPerS > 0 {
			u[4] = b.MinThroughput.RequestsPerS / c.RequestsPerS
		}
	}
	if b.MaxParams > 0 {
		u[5] = c.Params / b.MaxParams
	}
	if b.MaxActiveParams > 0 {
		u[6] = c.ActiveParams / b.MaxActiveParams
	}
	if b.Margin != nil {
		f := b.Margin.factors()
		for i := range u {
			u[i] *= f[i]
		}
	}
	return u
}

var budgetNames = [7]string{BudgetMemory, BudgetTTFT, BudgetTPOT, BudgetE2E, BudgetThroughput, BudgetParams, BudgetActiveParams}

// Meets reports whether c fits on the GPU and meets every budget.
func (b *Budgets) Meets(c *Costs) bool {
	if !c.Fits {
		return false
	}
	for _, x := range b.usage(c) {
		if x > 1 { // NaN (unset) compares false
			return false
		}
	}
	return true
}

// Binding returns the budget closest to its limit (the highest usage) and
// that usage; "" when no budget is set.
func (b *Budgets) Binding(c *Costs) (string, float64) {
	name, best := "", math.Inf(-1)
	for i, x := range b.usage(c) {
		if !math.IsNaN(x) && x > best {
			name, best = budgetNames[i], x
		}
	}
	if name == "" {
		return "", 0
	}
	return name, best
}

// Any reports whether at least one budget is set.
func (b *Budgets) Any() bool {
	for _, x := range b.usage(&Costs{Fits: true, OutputTokS: 1, RequestsPerS: 1}) {
		if !math.IsNaN(x) {
			return true
		}
	}
	return false
}

// value returns the cost that a budget limits, in the budget's own unit
// (bytes, seconds, tok/s, req/s, parameters), and the limit.
func (b *Budgets) value(name string, c *Costs) (v, limit float64) {
	ttft, tpot, e2e := c.TTFT, c.TPOT, c.E2E
	if b.P90 {
		ttft, tpot, e2e = c.TTFTP90, c.TPOTP90, c.E2EP90
	}
	switch name {
	case BudgetMemory:
		return c.MemoryBytes, b.MaxMemory
	case BudgetTTFT:
		return ttft, b.MaxTTFT
	case BudgetTPOT:
		return tpot, b.MaxTPOT
	case BudgetE2E:
		return e2e, b.MaxE2E
	case BudgetThroughput:
		if b.MinThroughput.RequestsPerS > 0 {
			return c.RequestsPerS, b.MinThroughput.RequestsPerS
		}
		return c.OutputTokS, b.MinThroughput.TokensPerS
	case BudgetParams:
		return c.Params, b.MaxParams
	case BudgetActiveParams:
		return c.ActiveParams, b.MaxActiveParams
	}
	return math.NaN(), 0
}

// Format prints a budget's cost in its unit.
func (b *Budgets) Format(name string, v float64) string {
	switch name {
	case BudgetMemory:
		return FormatBytes(v)
	case BudgetTTFT, BudgetTPOT, BudgetE2E:
		return FormatSeconds(v)
	case BudgetThroughput:
		if b.MinThroughput.RequestsPerS > 0 {
			return fmt.Sprintf("%.2f req/s", v)
		}
		return fmt.Sprintf("%.0f tok/s", v)
	case BudgetParams, BudgetActiveParams:
		return FormatCount(v)
	}
	return fmt.Sprint(v)
}

// Set lists the budgets that are set, in flag order.
func (b *Budgets) Set() []string {
	var out []string
	for i, x := range b.usage(&Costs{Fits: true, OutputTokS: 1, RequestsPerS: 1}) {
		if !math.IsNaN(x) {
			out = append(out, budgetNames[i])
		}
	}
	return out
}

// String describes the budgets, e.g. "max-memory 13.96 GiB, max-e2e 11.50 s (mean)".
func (b *Budgets) String() string {
	var parts []string
	for _, n := range b.Set() {
		_, lim := b.value(n, &Costs{})
		parts = append(parts, n+" "+b.Format(n, lim))
	}
	s := strings.Join(parts, ", ")
	if b.MaxTTFT > 0 || b.MaxTPOT > 0 || b.MaxE2E > 0 {
		if b.P90 {
			s += " (latency on the p90)"
		} else {
			s += " (latency on the mean)"
		}
	}
	return s
}
