// Package report renders the outcome of a compression run — the deployment,
// the budgets, the chosen shape beside the parent's, estimated and measured
// costs, the Pareto front, the memory breakdown, the distillation curve, the
// evaluation table and the tokens spent — as one self-contained HTML file
// (charts are inline SVG drawn with gonum's plot package; nothing is fetched
// at view time), a Markdown summary and the JSON they are made from.
//
// Every figure says whether it is estimated (with the estimator's error
// band and where it was measured) or measured, and a budgeted cost shown
// outside the budget table (the memory plan, the charts' budgets and chosen
// child) is the table's figure (see Data.Inconsistencies). Legends sit in a
// strip above each chart's data, never over it.
//
// The report is a pure function of a *Data: the pipeline fills one from its
// stages' outputs, and a test renders it in a real browser and checks the
// numbers on the page against the JSON and the charts' layout for overlaps.
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
	// ChildMeasured says the child was served by bench-serve on this
	// machine (the measure stage ran), whether or not a budget is a cost
	// it measured.
	ChildMeasured bool `json:"child_measured,omitempty"`
	// Estimator says where the estimated figures come from and how far
	// they are to be trusted (nil: not known).
	Estimator *Estimator `json:"estimator,omitempty"`
	Parent    Shape      `json:"parent"`
	Child     Shape      `json:"child"`
	// Strategy is the search strategy that chose the child.
	Strategy string   `json:"strategy,omitempty"`
	Summary  []string `json:"summary,omitempty"` // what was cut and why, in words
	Pareto   []Pareto `json:"pareto,omitempty"`
	Memory   Memory   `json:"memory"`
	// Training is the recovery's logged steps; Objective says what their
	// loss is (the distillation's, not the held-out cross-entropy).
	Training  []TrainPoint `json:"training,omitempty"`
	Objective string       `json:"objective,omitempty"`
	// HeldOut is the child's held-out cross-entropy during recovery (step 0:
	// before distillation), ParentHeldOut the parent's on the same text.
	HeldOut       []HeldOutPoint `json:"held_out,omitempty"`
	ParentHeldOut *float64       `json:"parent_held_out,omitempty"`
	Eval          EvalTable      `json:"eval"`
	Tokens        Tokens         `json:"tokens"`
	Stages        []Stage        `json:"stages,omitempty"`
	Notes         []string       `json:"notes,omitempty"`

	// Recovery is what the distillation cost (nil: no distillation).
	Recovery *RecoveryCost `json:"recovery_cost,omitempty"`
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

// Budget is one budgeted cost: its limit, the parent's and the chosen
// child's estimated value and (where the target could be measured) the
// child's measured value. Parent is the estimator's figure for the parent,
// as Estimated is the child's; ParentMeasured is the parent measured on
// this machine (bench-serve, the worst invocation) where a budget relative
// to the parent was resolved from that measurement (its Limit is a multiple
// of it), nil otherwise; ParentAsMeasured is then the estimator's figure
// for the parent under the settings it was measured under (the engine's
// defaults, which Parent, priced under the child's chosen settings, need
// not be), so that the two compare like with like. ErrorBand is the estimator's held-out median
// error for this cost (a fraction, nil where none is known), measured where
// the Data's Estimator says.
// Max says the cost must stay at or below Limit; otherwise at or above
// (throughput).
//
// A measurement is several separate invocations of bench-serve: Measured
// is the conservative figure, the worst invocation (the largest latency or
// memory, the smallest throughput), and the budget is judged on it;
// MeasuredMedian, MeasuredMin and MeasuredMax are the median and range of
// the Invocations invocations' figures and MeasuredSpread their relative
// spread (max−min)/median. A budget on a count (the child's parameters)
// has Counted set: Measured is the written child's exact count, no
// serving measurement.
type Budget struct {
	Name           string   `json:"name"` // "memory", "ttft", ...
	Unit           string   `json:"unit"` // "GiB", "ms", "tok/s", ...
	Max            bool     `json:"max"`
	Limit          float64  `json:"limit"`
	Parent         *float64 `json:"parent,omitempty"`
	ParentMeasured *float64 `json:"parent_measured,omitempty"`
	// ParentAsMeasured: see ParentMeasured.
	ParentAsMeasured *float64 `json:"parent_as_measured,omitempty"`
	Estimated        *float64 `json:"estimated,omitempty"`
	ErrorBand        *float64 `json:"error_band,omitempty"`
	Measured         *float64 `json:"measured,omitempty"`
	Invocations      int      `json:"invocations,omitempty"`
	MeasuredMedian   *float64 `json:"measured_median,omitempty"`
	MeasuredMin      *float64 `json:"measured_min,omitempty"`
	MeasuredMax      *float64 `json:"measured_max,omitempty"`
	MeasuredSpread   *float64 `json:"measured_spread,omitempty"`
	Counted          bool     `json:"counted,omitempty"`
	Binding          bool     `json:"binding,omitempty"`
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

// Estimator describes the coefficients behind the estimates.
type Estimator struct {
	// Coefficients names them ("the native@embedded coefficients, fitted
	// by calibrate-native").
	Coefficients string `json:"coefficients"`
	// Host and Measured say where and when the error bands were measured
	// ("" where that is not known).
	Host     string `json:"host,omitempty"`
	Measured string `json:"measured,omitempty"`
	// Applies says whether the bands were measured on the device priced
	// (for the native engine: the host the run ran on): "same",
	// "different" (the bands do not apply here), "unknown" (the record
	// cannot tell) or "" (not known); Why says why.
	Applies string `json:"applies,omitempty"`
	Why     string `json:"why,omitempty"`
}

// BandSource says where an error band was measured, in words: "on HOST,
// DATE", "on HOST" or "" where neither is known.
func (e *Estimator) BandSource() string {
	switch {
	case e == nil || e.Host == "" && e.Measured == "":
		return ""
	case e.Host == "":
		return e.Measured
	case e.Measured == "":
		return "on " + e.Host
	}
	return "on " + e.Host + ", " + e.Measured
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
	// MambaHeads and MambaHeadDim are a Mamba2 mixer's heads and channels
	// per head (0: no Mamba2 mixer).
	MambaHeads   int `json:"mamba_heads,omitempty"`
	MambaHeadDim int `json:"mamba_head_dim,omitempty"`
	// Experts, TopK and ExpertWidth are an MoE block's routed experts,
	// experts per token and one expert's width (0: no MoE block; the MLP
	// column shows them).
	Experts     int `json:"experts,omitempty"`
	TopK        int `json:"top_k,omitempty"`
	ExpertWidth int `json:"expert_width,omitempty"`
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

// Memory is the child's estimated memory plan at the workload's context and
// concurrency: the plan the search priced it by, so that its total is the
// budget table's estimated memory. Every figure is in Unit (the memory
// budget's unit where one is set).
type Memory struct {
	Unit  string       `json:"unit,omitempty"`
	Terms []MemoryTerm `json:"terms,omitempty"`
	// Budget is the memory budget (0: none).
	Budget float64 `json:"budget,omitempty"`
	// Measured is the measured peak (resident memory on the CPU).
	Measured *float64 `json:"measured,omitempty"`
}

// MemoryTerm is one part of the memory plan.
type MemoryTerm struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Total sums the terms.
func (m Memory) Total() float64 {
	var s float64
	for _, t := range m.Terms {
		s += t.Value
	}
	return s
}

// TrainPoint is one logged step of recovery: its training loss.
type TrainPoint struct {
	Step   int     `json:"step"`
	Tokens int64   `json:"tokens"`
	Loss   float64 `json:"loss"`
	LR     float64 `json:"lr"`
}

// HeldOutPoint is one evaluation of the child on held-out text during
// recovery: mean cross-entropy in nats per token.
type HeldOutPoint struct {
	Step   int     `json:"step"`
	Tokens int64   `json:"tokens"`
	Loss   float64 `json:"loss"`
}

// EvalTable is the evaluation of the parent and its children.
type EvalTable struct {
	Models []string  `json:"models"`
	Rows   []EvalRow `json:"rows"`
	// Suite is a named suite's table (avg8: the paper's eight tests), when
	// the run scored one.
	Suite *EvalSuite `json:"suite,omitempty"`
}

// EvalSuite is a named suite's scores: a row per test and the average.
type EvalSuite struct {
	Name  string         `json:"name"`
	About string         `json:"about"`
	Rows  []EvalSuiteRow `json:"rows"`
	// Average per model, over the tests measured (Measured of len(Rows)).
	Average  []EvalValue `json:"average"`
	Measured []int       `json:"measured"`
}

// EvalSuiteRow is one test of a suite for every model.
type EvalSuiteRow struct {
	Category string `json:"category"`
	Task     string `json:"task"`
	Metric   string `json:"metric"`
	Shots    int    `json:"shots"`
	// Values per model, nil where the test was not measured.
	Values []*EvalValue `json:"values"`
	Chance float64      `json:"chance,omitempty"`
	// Note says which models are at chance, or why the test is
	// unavailable.
	Note string `json:"note,omitempty"`
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

// RecoveryCost is what recovery took: its tokens, the engine and ranks
// that ran it, the rate measured, and the device-hours its token budget
// takes at that rate and at a stated GPU assumption.
type RecoveryCost struct {
	Tokens    int64  `json:"tokens"`
	Engine    string `json:"engine"`
	WorldSize int    `json:"world_size"`
	Device    string `json:"device"` // what the ranks ran on: cpu or cuda
	// TokensPerSecond is the training tokens per second over all ranks,
	// measured (0: not measured).
	TokensPerSecond float64 `json:"tokens_per_s"`
	// DeviceHours is Tokens at that rate, times the ranks (0: no rate).
	DeviceHours float64 `json:"device_hours"`
	// AssumedGPUHours is Tokens at AssumedGPUFLOPs per GPU, counting
	// 2 FLOPs per teacher and 6 per student parameter per token.
	AssumedGPUHours float64 `json:"assumed_gpu_hours"`
	Assumption      string  `json:"assumption"`
}

// AssumedGPUFLOPs is the effective FLOP rate per GPU a recovery's
// GPU-hours are priced at when it was not measured on GPUs: NVIDIA's
// Qwen3-8B → 6B recovery, 50B tokens in ~3,000 GPU-hours (NVIDIA
// Model-Optimizer PR #861), is 4,630 tokens/s per GPU, and at 2 FLOPs per
// teacher parameter (8.2B, forward) and 6 per student parameter (6B,
// forward and backward) per token that is 2.4e14 FLOP/s.
const AssumedGPUFLOPs = 2.4e14

// AssumedGPUSource says where AssumedGPUFLOPs comes from, for the page.
const AssumedGPUSource = "an effective 2.4e14 FLOP/s per GPU (NVIDIA's Qwen3-8B → 6B recovery: 50B tokens in ~3,000 GPU-hours, Model-Optimizer PR #861), 2 FLOPs per teacher and 6 per student parameter per token"

// NewRecoveryCost prices a recovery of tokens run by engine on world ranks
// at tokensPerSecond (all ranks), with the teacher's and the student's
// parameter counts for the assumption.
func NewRecoveryCost(tokens int64, engine string, world int, device string, tokensPerSecond float64, teacherParams, studentParams int64) *RecoveryCost {
	r := &RecoveryCost{Tokens: tokens, Engine: engine, WorldSize: world, Device: device, TokensPerSecond: tokensPerSecond, Assumption: AssumedGPUSource}
	if tokensPerSecond > 0 {
		r.DeviceHours = float64(tokens) / tokensPerSecond / 3600 * float64(world)
	}
	flops := float64(tokens) * float64(2*teacherParams+6*studentParams)
	r.AssumedGPUHours = flops / AssumedGPUFLOPs / 3600
	return r
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

// Inconsistencies lists the figures of d that disagree with its budget
// table: a memory plan whose unit, total, budget or measured peak is not the
// memory budget's, a Pareto front whose unit, limit or chosen point is not
// its budget's. A report built from one run has none.
func (d *Data) Inconsistencies() []string {
	var out []string
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }
	for _, b := range d.Budgets {
		if b.Name != "memory" {
			continue
		}
		m := &d.Memory
		if len(m.Terms) > 0 {
			switch {
			case m.Unit != b.Unit:
				out = append(out, fmt.Sprintf("the memory plan is in %s, the memory budget in %s", m.Unit, b.Unit))
			case b.Estimated != nil && !near(m.Total(), *b.Estimated):
				out = append(out, fmt.Sprintf("the memory plan totals %s %s, the budget table estimates %s %s", fmtNum(m.Total()), m.Unit, fmtNum(*b.Estimated), b.Unit))
			}
		}
		if m.Unit == b.Unit && m.Budget > 0 && !near(m.Budget, b.Limit) {
			out = append(out, fmt.Sprintf("the memory plan's budget is %s %s, the budget table's %s %s", fmtNum(m.Budget), m.Unit, fmtNum(b.Limit), b.Unit))
		}
		switch {
		case m.Unit != b.Unit:
		case m.Measured != nil && b.Measured == nil:
			out = append(out, fmt.Sprintf("the memory plan has a measured peak of %s %s, the budget table none", fmtNum(*m.Measured), m.Unit))
		case m.Measured != nil && !near(*m.Measured, *b.Measured):
			out = append(out, fmt.Sprintf("the memory plan's measured peak is %s %s, the budget table's %s %s", fmtNum(*m.Measured), m.Unit, fmtNum(*b.Measured), b.Unit))
		}
	}
	for _, f := range d.Pareto {
		i := budgetIndex(d, f.Cost)
		if i < 0 {
			out = append(out, fmt.Sprintf("a Pareto front of %s, which has no budget", f.Cost))
			continue
		}
		b := &d.Budgets[i]
		if f.Unit != b.Unit || !near(f.Limit, b.Limit) {
			out = append(out, fmt.Sprintf("the %s front's budget is %s %s, the budget table's %s %s", f.Cost, fmtNum(f.Limit), f.Unit, fmtNum(b.Limit), b.Unit))
		}
		for _, p := range f.Points {
			if p.Chosen && b.Estimated != nil && !near(p.Cost, *b.Estimated) {
				out = append(out, fmt.Sprintf("the %s front puts the chosen child at %s %s, the budget table at %s %s", f.Cost, fmtNum(p.Cost), f.Unit, fmtNum(*b.Estimated), b.Unit))
			}
		}
	}
	return out
}
