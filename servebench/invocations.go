package servebench

import (
	"errors"
	"fmt"
	"sort"
)

// PeakRSSKey is the Invocations.Summary key of the peak resident memory
// (Report.PeakRSSBytes), beside the keys of Metrics.
const PeakRSSKey = "peak_rss_bytes"

// HigherIsBetter reports whether a larger value of the metric key (a
// Metrics name or PeakRSSKey) is the better one: the throughputs and the
// request rate. Latencies and memory are better small.
func HigherIsBetter(key string) bool {
	for _, m := range Metrics {
		if m.Name == key {
			return m.Higher
		}
	}
	return false
}

// Across is one metric over separate invocations (processes) of a
// measurement: each invocation's own median over its runs, in order; their
// median; the conservative figure (the worst invocation: the largest for a
// latency or memory, the smallest for a throughput or rate); the range; and
// the relative spread (max−min)/median. Budget decisions use Worst: within
// one invocation the runs agree closely, between invocations the same model
// can differ by a factor (a machine whose shared cache other tenants take
// from one minute to the next), so one invocation is one draw.
type Across struct {
	Invocations []float64 `json:"invocations"`
	Median      float64   `json:"median"`
	Worst       float64   `json:"worst"`
	Min         float64   `json:"min"`
	Max         float64   `json:"max"`
	Spread      float64   `json:"spread"`
}

// AcrossValues summarises per-invocation figures xs of a metric for which
// higher is better or not (the zero Across when xs is empty).
func AcrossValues(xs []float64, higher bool) Across {
	if len(xs) == 0 {
		return Across{}
	}
	s := SpreadOfValues(xs)
	a := Across{Invocations: append([]float64(nil), xs...), Median: s.Median, Min: s.Min, Max: s.Max, Spread: s.Spread, Worst: s.Max}
	if higher {
		a.Worst = s.Min
	}
	return a
}

// Invocations is one model measured by several separate invocations of
// bench-serve, each with its own warm-up and repeats, combined by Combine.
type Invocations struct {
	// Reports are the invocations' own reports, in the order they ran.
	Reports []*Report `json:"reports"`
	// Summary holds, per Metrics name and PeakRSSKey, the metric across
	// the invocations (each invocation's median over its runs). Peak
	// memory is absent when no invocation reported it (measured in a
	// process that measured other things too).
	Summary map[string]Across `json:"summary"`
}

// ErrNoInvocations is Combine given nothing to combine.
var ErrNoInvocations = errors.New("servebench: no invocations to combine")

// Combine summarises separate measurements of one model under one workload
// and engine settings. They must agree on the model, the workload and the
// settings: combining measurements of different things is an error.
func Combine(reps []*Report) (*Invocations, error) {
	if len(reps) == 0 {
		return nil, ErrNoInvocations
	}
	first := reps[0]
	for i, r := range reps {
		if r == nil {
			return nil, fmt.Errorf("servebench: invocation %d has no report", i+1)
		}
		if r.Model != first.Model || r.Workload != first.Workload || r.MaxNumSeqs != first.MaxNumSeqs ||
			r.MaxBatchedTokens != first.MaxBatchedTokens || r.ContextLimit != first.ContextLimit || r.Requests != first.Requests {
			return nil, fmt.Errorf("servebench: invocation %d measured %s under %q (%s, %d tokens per step, context %d, %d requests), invocation 1 %s under %q (%s, %d, %d, %d): not one measurement",
				i+1, r.Model, r.Workload, r.SeqLimit(), r.MaxBatchedTokens, r.ContextLimit, r.Requests,
				first.Model, first.Workload, first.SeqLimit(), first.MaxBatchedTokens, first.ContextLimit, first.Requests)
		}
	}
	inv := &Invocations{Reports: reps, Summary: map[string]Across{}}
	for _, m := range Metrics {
		xs := make([]float64, 0, len(reps))
		for _, r := range reps {
			s, ok := r.Summary[m.Name]
			if !ok {
				s = SpreadOf(r.Runs, m.F) // a report read from older JSON
			}
			xs = append(xs, s.Median)
		}
		inv.Summary[m.Name] = AcrossValues(xs, HigherIsBetter(m.Name))
	}
	var rss []float64
	for _, r := range reps {
		if r.PeakRSSBytes > 0 {
			rss = append(rss, float64(r.PeakRSSBytes))
		}
	}
	if len(rss) == len(reps) {
		inv.Summary[PeakRSSKey] = AcrossValues(rss, false)
	}
	return inv, nil
}

// Conservative returns the worst invocation's figure of key (a Metrics
// name or PeakRSSKey), and whether it was measured (not on a nil v).
func (v *Invocations) Conservative(key string) (float64, bool) {
	if v == nil {
		return 0, false
	}
	a, ok := v.Summary[key]
	return a.Worst, ok && len(a.Invocations) > 0
}

// First is the first invocation's report (the settings every invocation
// shares), nil when there is none.
func (v *Invocations) First() *Report {
	if v == nil || len(v.Reports) == 0 {
		return nil
	}
	return v.Reports[0]
}

// Unstable lists, sorted, the keys of the metrics whose invocations
// spread more than tol relative to their median.
func (v *Invocations) Unstable(tol float64) []string {
	var out []string
	for k, a := range v.Summary {
		if len(a.Invocations) > 1 && a.Spread > tol {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
