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

// Budget names: the library's identifiers of the budget kinds, in outputs
// (Result.Binding, the summary's JSON), notes and errors. A command maps
// each to its own spelling (a flag, a config field); these are the names,
// not the flags.
const (
	BudgetMemory       = "max-memory"
	BudgetTTFT         = "max-ttft"
	BudgetTPOT         = "max-tpot"
	BudgetE2E          = "max-e2e"
	BudgetThroughput   = "min-throughput"
	BudgetParams       = "max-params"
	BudgetActiveParams = "max-active-params"
)

// A BudgetKind is one kind of budget: a limit on one cost of the
// deployment. The kinds are data (BudgetKinds): meeting, binding, margins,
// reach, the Pareto front, the outputs and the errors all read them from
// there, so a new budget is one entry (plus a field of Budgets for its
// limit and a field of BudgetText to read it).
type BudgetKind struct {
	// Name identifies the budget (BudgetMemory, …).
	Name string
	// Cost says what it limits, in words; Unit the unit of its values.
	Cost, Unit string
	// Floor is set for a budget the cost must reach (a throughput); the
	// others are ceilings the cost must stay within.
	Floor bool
	// Exact is set for a cost known from the shape alone (parameter
	// counts): it needs no fit on the GPU and has no margin for the
	// estimator's error.
	Exact bool
	// Limit returns the budget's limit in b (≤ 0: not budgeted) and Value
	// the cost it limits, both in the budget's unit.
	Limit func(b *Budgets) float64
	Value func(b *Budgets, c *Costs) float64
	// Margin returns the allowance for the estimator's error on the cost
	// (nil: none).
	Margin func(m *Margins) float64
	// Format prints a value in the unit.
	Format func(b *Budgets, v float64) string
	// Hints say what would bring an out-of-reach limit within reach, from
	// the engine's hints (its entry in estimate's table) where they apply.
	Hints func(b *Budgets, engine *estimate.Hints) []Hint
}

// latency returns the mean or, with P90, the p90 of a latency.
func (b *Budgets) latency(mean, p90 float64) float64 {
	if b.P90 {
		return p90
	}
	return mean
}

func latencyHints(b *Budgets, engine *estimate.Hints) []Hint {
	h := engine.Latency
	if b.P90 {
		h = append(h, Hint{Text: "a budget on the mean instead of the p90", Setting: SettingP90, Drop: true})
	}
	return h
}

func formatSeconds(_ *Budgets, v float64) string { return FormatSeconds(v) }
func formatCount(_ *Budgets, v float64) string   { return FormatCount(v) }

// BudgetKinds are the kinds of budget, in the order the outputs list them.
var BudgetKinds = []BudgetKind{
	{Name: BudgetMemory, Cost: "the engine's whole memory footprint on one GPU", Unit: "bytes",
		Limit:  func(b *Budgets) float64 { return b.MaxMemory },
		Value:  func(_ *Budgets, c *Costs) float64 { return c.MemoryBytes },
		Margin: func(m *Margins) float64 { return m.Memory },
		Format: func(_ *Budgets, v float64) string { return FormatBytes(v) },
		Hints:  func(_ *Budgets, e *estimate.Hints) []Hint { return e.Memory }},
	{Name: BudgetTTFT, Cost: "time to first token", Unit: "s",
		Limit:  func(b *Budgets) float64 { return b.MaxTTFT },
		Value:  func(b *Budgets, c *Costs) float64 { return b.latency(c.TTFT, c.TTFTP90) },
		Margin: func(m *Margins) float64 { return m.TTFT }, Format: formatSeconds, Hints: latencyHints},
	{Name: BudgetTPOT, Cost: "time per output token", Unit: "s",
		Limit:  func(b *Budgets) float64 { return b.MaxTPOT },
		Value:  func(b *Budgets, c *Costs) float64 { return b.latency(c.TPOT, c.TPOTP90) },
		Margin: func(m *Margins) float64 { return m.TPOT }, Format: formatSeconds, Hints: latencyHints},
	{Name: BudgetE2E, Cost: "end-to-end request latency", Unit: "s",
		Limit:  func(b *Budgets) float64 { return b.MaxE2E },
		Value:  func(b *Budgets, c *Costs) float64 { return b.latency(c.E2E, c.E2EP90) },
		Margin: func(m *Margins) float64 { return m.E2E }, Format: formatSeconds, Hints: latencyHints},
	{Name: BudgetThroughput, Cost: "server throughput", Unit: "tok/s or req/s", Floor: true,
		Limit: func(b *Budgets) float64 {
			if b.MinThroughput.RequestsPerS > 0 {
				return b.MinThroughput.RequestsPerS
			}
			return b.MinThroughput.TokensPerS
		},
		Value: func(b *Budgets, c *Costs) float64 {
			if b.MinThroughput.RequestsPerS > 0 {
				return c.RequestsPerS
			}
			return c.OutputTokS
		},
		Margin: func(m *Margins) float64 { return m.Throughput },
		Format: func(b *Budgets, v float64) string {
			if b.MinThroughput.RequestsPerS > 0 {
				return fmt.Sprintf("%.2f req/s", v)
			}
			return fmt.Sprintf("%.0f tok/s", v)
		},
		Hints: func(_ *Budgets, e *estimate.Hints) []Hint { return e.Throughput }},
	{Name: BudgetParams, Cost: "total parameters", Unit: "parameters", Exact: true,
		Limit:  func(b *Budgets) float64 { return b.MaxParams },
		Value:  func(_ *Budgets, c *Costs) float64 { return c.Params },
		Format: formatCount, Hints: paramHints},
	{Name: BudgetActiveParams, Cost: "parameters active per token", Unit: "parameters", Exact: true,
		Limit:  func(b *Budgets) float64 { return b.MaxActiveParams },
		Value:  func(_ *Budgets, c *Costs) float64 { return c.ActiveParams },
		Format: formatCount, Hints: paramHints},
}

func paramHints(*Budgets, *estimate.Hints) []Hint {
	return []Hint{{Text: "a larger parameter budget (the space keeps at least a quarter of each width and half of the layers)"}}
}

// Kind returns the kind of a budget by its name.
func Kind(name string) (*BudgetKind, bool) {
	for i := range BudgetKinds {
		if BudgetKinds[i].Name == name {
			return &BudgetKinds[i], true
		}
	}
	return nil, false
}

// use returns the usage of budget k by c: the cost divided by the limit
// (≤ 1: met; for a floor, limit ÷ cost), times 1 + its margin; NaN when k
// is not budgeted. A candidate that does not fit uses +Inf of every budget
// but the exact ones.
func (b *Budgets) use(k *BudgetKind, c *Costs) float64 {
	lim := k.Limit(b)
	if lim <= 0 {
		return math.NaN()
	}
	if !k.Exact && !c.Fits {
		return math.Inf(1)
	}
	v := k.Value(b, c)
	var u float64
	if k.Floor {
		if v <= 0 {
			return math.Inf(1)
		}
		u = lim / v
	} else {
		u = v / lim
	}
	if b.Margin != nil && k.Margin != nil {
		u *= 1 + k.Margin(b.Margin)
	}
	return u
}

// Meets reports whether c fits on the GPU and meets every budget.
func (b *Budgets) Meets(c *Costs) bool {
	if !c.Fits {
		return false
	}
	for i := range BudgetKinds {
		if b.use(&BudgetKinds[i], c) > 1 { // NaN (unset) compares false
			return false
		}
	}
	return true
}

// Binding returns the budget closest to its limit (the highest usage) and
// that usage; "" when no budget is set.
func (b *Budgets) Binding(c *Costs) (string, float64) {
	name, best := "", math.Inf(-1)
	for i := range BudgetKinds {
		if x := b.use(&BudgetKinds[i], c); !math.IsNaN(x) && x > best {
			name, best = BudgetKinds[i].Name, x
		}
	}
	if name == "" {
		return "", 0
	}
	return name, best
}

// Any reports whether at least one budget is set.
func (b *Budgets) Any() bool { return len(b.Set()) > 0 }

// value returns the cost that a budget limits, in the budget's own unit
// (bytes, seconds, tok/s, req/s, parameters), and the limit.
func (b *Budgets) value(name string, c *Costs) (v, limit float64) {
	k, ok := Kind(name)
	if !ok {
		return math.NaN(), 0
	}
	return k.Value(b, c), k.Limit(b)
}

// Format prints a budget's cost in its unit.
func (b *Budgets) Format(name string, v float64) string {
	if k, ok := Kind(name); ok {
		return k.Format(b, v)
	}
	return fmt.Sprint(v)
}

// Set lists the budgets that are set, in BudgetKinds order.
func (b *Budgets) Set() []string {
	var out []string
	for i := range BudgetKinds {
		if BudgetKinds[i].Limit(b) > 0 {
			out = append(out, BudgetKinds[i].Name)
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
