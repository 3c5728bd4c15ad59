// Package report renders the outcome of a compression run — the deployment,
// the budgets, the chosen shape beside the parent's, estimated and measured
// costs, the Pareto front, the memory breakdown, the distillation curve, the
// evaluation table and the tokens spent — as one self-contained HTML file
// (charts are inline SVG drawn with gonum's plot package; nothing is fetched
// at view time), a Markdown summary and the JSON they are made from.
//
// The report is a pure function of a *Data: the pipeline fills one from its
// stages' outputs, and a test renders it in a real browser and checks the
// numbers on the page against the JSON.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Data is everything a report shows. Missing parts (no measurement on a GPU
// target, no distillation yet) are left empty and the report says so.
type Data struct {
	Title string `json:"title"`
	// RunDir is where the run's stage outputs are.
	RunDir     string     `json:"run_dir,omitempty"`
	Deployment Deployment `json:"deployment"`
	Budgets    []Budget   `json:"budgets"`
	Parent     Shape      `json:"parent"`
	Child      Shape      `json:"child"`
	// Strategy is the search strategy that chose the child.
	Strategy string       `json:"strategy,omitempty"`
	Summary  []string     `json:"summary,omitempty"` // what was cut and why, in words
	Pareto   []Pareto     `json:"pareto,omitempty"`
	Memory   Memory       `json:"memory"`
	Training []TrainPoint `json:"training,omitempty"`
	Eval     EvalTable    `json:"eval"`
	Tokens   Tokens       `json:"tokens"`
	Stages   []Stage      `json:"stages,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
}

// Deployment is the target the child was chosen for.
type Deployment struct {
	GPU         string  `json:"gpu"`
	Engine      string  `json:"engine"`
	Precision   string  `json:"precision"`
	TP          int     `json:"tp"`
	Workload    string  `json:"workload"`
	ISL         int     `json:"isl"`
	OSL         int     `json:"osl"`
	Concurrency int     `json:"concurrency,omitempty"`
	RequestRate float64 `json:"request_rate,omitempty"`
	// Settings are the engine settings the search chose, and
	// MeasuredUnder those the measurement served the child under, in
	// estimate's flag names ("" where none or not measured).
	Settings      string `json:"settings,omitempty"`
	MeasuredUnder string `json:"measured_under,omitempty"`
}

// Budget is one budgeted cost: its limit and the parent's, the chosen
// child's estimated and (where the target could be measured) measured value.
// Max says the cost must stay at or below Limit; otherwise at or above
// (throughput).
//
// A measurement is several separate invocations of bench-serve: Measured
// is the conservative figure, the worst invocation (the largest latency or
// memory, the smallest throughput), and the budget is judged on it;
// MeasuredMedian, MeasuredMin and MeasuredMax are the median and range of
// the Invocations invocations' figures and MeasuredSpread their relative
// spread (max−min)/median.
type Budget struct {
	Name           string   `json:"name"` // "memory", "ttft", ...
	Unit           string   `json:"unit"` // "GiB", "ms", "tok/s", ...
	Max            bool     `json:"max"`
	Limit          float64  `json:"limit"`
	Parent         *float64 `json:"parent,omitempty"`
	Estimated      *float64 `json:"estimated,omitempty"`
	Measured       *float64 `json:"measured,omitempty"`
	Invocations    int      `json:"invocations,omitempty"`
	MeasuredMedian *float64 `json:"measured_median,omitempty"`
	MeasuredMin    *float64 `json:"measured_min,omitempty"`
	MeasuredMax    *float64 `json:"measured_max,omitempty"`
	MeasuredSpread *float64 `json:"measured_spread,omitempty"`
	Binding        bool     `json:"binding,omitempty"`
}

// HasRange reports whether the measurement has a range over more than one
// invocation to show.
func (b Budget) HasRange() bool {
	return b.Measured != nil && b.Invocations > 1 && b.MeasuredMin != nil && b.MeasuredMax != nil
}

// Unstable reports whether the invocations of the measurement spread more
// than tol relative to their median: the figure is unsteady on the machine
// that measured it.
func (b Budget) Unstable(tol float64) bool {
	return b.HasRange() && b.MeasuredSpread != nil && *b.MeasuredSpread > tol
}

// Met reports whether v satisfies the budget.
func (b Budget) Met(v float64) bool {
	if b.Max {
		return v <= b.Limit
	}
	return v >= b.Limit
}

// Disagrees reports whether the estimate and the measurement differ by more
// than tol (relative to the measurement).
func (b Budget) Disagrees(tol float64) bool {
	if b.Estimated == nil || b.Measured == nil || *b.Measured == 0 {
		return false
	}
	return math.Abs(*b.Estimated-*b.Measured)/math.Abs(*b.Measured) > tol
}

// Shape is a model's per-layer structure.
type Shape struct {
	Name   string  `json:"name"`
	Params int64   `json:"params"`
	Hidden int     `json:"hidden"`
	Layers []Layer `json:"layers"`
	// Kept gives, for a child, the parent layer each of its layers comes
	// from (nil: layer i is the parent's layer i), so removed layers line up.
	Kept []int `json:"kept,omitempty"`
}

// Aligned returns the child's layers placed at their parent indices over n
// parent layers; a removed layer is nil.
func (s Shape) Aligned(n int) []*Layer {
	out := make([]*Layer, max(n, len(s.Layers)))
	for i := range s.Layers {
		j := i
		if s.Kept != nil && i < len(s.Kept) {
			j = s.Kept[i]
		}
		if j >= 0 && j < len(out) {
			out[j] = &s.Layers[i]
		}
	}
	return out
}

// Layer is one layer of a Shape. A removed sub-block has width 0.
type Layer struct {
	Heads   int `json:"heads"`    // query heads (0: no attention)
	KVHeads int `json:"kv_heads"` // KV heads
	FFN     int `json:"ffn"`      // MLP width (0: no MLP)
}

// Pareto is the front of one budgeted cost against the quality proxy.
type Pareto struct {
	Cost    string  `json:"cost"` // a Budget's name
	Unit    string  `json:"unit"`
	Quality string  `json:"quality"` // what the proxy is
	Limit   float64 `json:"limit"`
	Points  []Point `json:"points"`
}

// Point is one candidate on a front.
type Point struct {
	Cost     float64 `json:"cost"`
	Quality  float64 `json:"quality"`
	Feasible bool    `json:"feasible"`
	Chosen   bool    `json:"chosen,omitempty"`
}

// Memory is the child's estimated memory plan at the workload.
type Memory struct {
	Terms     []MemoryTerm `json:"terms,omitempty"`
	BudgetGiB float64      `json:"budget_gib,omitempty"`
	// MeasuredGiB is the measured peak (resident memory on the CPU).
	MeasuredGiB *float64 `json:"measured_gib,omitempty"`
}

// MemoryTerm is one part of the memory plan.
type MemoryTerm struct {
	Name string  `json:"name"`
	GiB  float64 `json:"gib"`
}

// TotalGiB sums the terms.
func (m Memory) TotalGiB() float64 {
	var s float64
	for _, t := range m.Terms {
		s += t.GiB
	}
	return s
}

// TrainPoint is one logged step of recovery.
type TrainPoint struct {
	Step     int      `json:"step"`
	Tokens   int64    `json:"tokens"`
	Loss     float64  `json:"loss"`
	LR       float64  `json:"lr"`
	EvalLoss *float64 `json:"eval_loss,omitempty"`
}

// EvalTable is the evaluation of the parent and its children.
type EvalTable struct {
	Models []string  `json:"models"`
	Rows   []EvalRow `json:"rows"`
}

// EvalRow is one metric of one task for every model.
type EvalRow struct {
	Task   string      `json:"task"`
	Metric string      `json:"metric"`
	Values []EvalValue `json:"values"` // one per model, in Models' order
}

// EvalValue is a score with its standard error (0: none, e.g. perplexity).
type EvalValue struct {
	Value  float64 `json:"value"`
	StdErr float64 `json:"stderr,omitempty"`
}

// Tokens counts what the run spent.
type Tokens struct {
	Importance int64 `json:"importance"` // calibration tokens for the importance pass
	Selection  int64 `json:"selection"`  // tokens spent choosing the architecture
	Recovery   int64 `json:"recovery"`   // distillation tokens
}

// Stage is one pipeline stage's outcome.
type Stage struct {
	Name    string  `json:"name"`
	Reused  bool    `json:"reused"`
	Seconds float64 `json:"seconds"`
}

// WriteJSON writes d as indented JSON.
func WriteJSON(w io.Writer, d *Data) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// ReadJSON reads what WriteJSON wrote.
func ReadJSON(r io.Reader) (*Data, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var d Data
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("report: reading report JSON: %w", err)
	}
	return &d, nil
}
