package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// cell is one number on the page: its text and the JSON path it comes from,
// so a test can check every number against the run's JSON.
type cell struct {
	Text string
	Path string
}

func num(v float64, path string) cell { return cell{Text: fmtNum(v), Path: path} }

func optNum(v *float64, path string) cell {
	if v == nil {
		return cell{Text: "—"}
	}
	return num(*v, path)
}

type budgetRow struct {
	Name, Unit, Sense                 string
	Limit, Parent, Estimated, Measure cell
	// ParentMeasured is the parent measured here, for a budget relative
	// to it (Text "" otherwise), and ParentAsMeasured its estimate under
	// the settings it was measured under (Text "" where unknown).
	ParentMeasured, ParentAsMeasured cell
	// Band is the estimator's error band for this cost ("±7 %"; "" where
	// none is known), shown beside each estimate.
	Band string
	// MinM, MaxM and MedianM are the range and median over Invocations
	// invocations (HasRange: more than one).
	MinM, MaxM, MedianM cell
	Invocations         int
	Status, StatusClass string
	Binding, Flag       bool
	HasRange, Unstable  bool
	SpreadText          string
}

type evalCell struct {
	Value, StdErr cell
	HasErr        bool
}

type evalRow struct {
	Task, Metric string
	Cells        []evalCell
}

// suiteRow is a row of a suite's table; a cell without a value is a test
// not measured.
type suiteRow struct {
	Category, Task, Metric, Shots, Note string
	Cells                               []evalCell
	Missing                             []bool
	Chance                              cell
	HasChance                           bool
}

type layerRow struct {
	Index                                int
	PHeads, PKV, PFFN, CHeads, CKV, CFFN string
	// PMamba, CMamba: the Mamba2 mixer's heads × head_dim ("—": none);
	// shown only when the parent has one (page.AnyMamba).
	PMamba, CMamba string
	Changed        bool
}

type page struct {
	D            *Data
	Charts       []chartView
	Budgets      []budgetRow
	Eval         []evalRow
	Suite        []suiteRow
	SuiteAvg     []evalCell
	SuiteNote    string
	Layers       []layerRow
	AnyMamba     bool
	Memory       []cell
	MemoryNames  []string
	MemTotal     cell
	MemBudget    cell
	MemMeasured  cell
	MemUnit      string
	Tokens       []cell
	ParentParams cell
	ChildParams  cell
	ParamRatio   string
	// EstimateNote says what the estimates are and where their error
	// bands were measured.
	EstimateNote string
	// BandWarning says where the bands do not or may not apply to the
	// device priced.
	BandWarning string
	BandFlag    bool // the band does not apply here (not merely unknown)
	// Inconsistent lists figures that disagree with the budget table (a
	// report built from one run has none; the page says so if it does).
	Inconsistent []string
	AnyMeasured  bool
	// NothingMeasured is the note shown when no budget was judged by a
	// measurement.
	NothingMeasured string
	AnyDisagree     bool
	AnyUnstable     bool
	AnyRange        bool
	TrainingFinal   string
	// Recovery is the recovery cost's row (nil: no distillation).
	Recovery   []cell
	RecoveryOn string
}

type chartView struct {
	Chart
	Inline template.HTML
}

// Tolerance is the relative gap between estimate and measurement above which
// the report flags a budget row.
const Tolerance = 0.10

// bandText formats an error band.
func bandText(b *float64) string {
	if b == nil || *b <= 0 {
		return ""
	}
	return fmt.Sprintf("±%.0f %%", 100**b)
}

func build(d *Data) (*page, error) {
	charts, err := Charts(d)
	if err != nil {
		return nil, err
	}
	pg := &page{D: d}
	for _, c := range charts {
		pg.Charts = append(pg.Charts, chartView{Chart: c, Inline: template.HTML(c.SVG)})
	}
	anyBand := false
	for i, b := range d.Budgets {
		p := fmt.Sprintf("budgets.%d.", i)
		r := budgetRow{Name: b.Name, Unit: b.Unit, Binding: b.Binding, Band: bandText(b.ErrorBand),
			Limit: num(b.Limit, p+"limit"), Parent: optNum(b.Parent, p+"parent"),
			Estimated: optNum(b.Estimated, p+"estimated"), Measure: optNum(b.Measured, p+"measured"),
			Flag: b.Disagrees(Tolerance), HasRange: b.HasRange(), Unstable: b.Unstable(Tolerance)}
		if b.ParentMeasured != nil {
			r.ParentMeasured = num(*b.ParentMeasured, p+"parent_measured")
			if b.ParentAsMeasured != nil {
				r.ParentAsMeasured = num(*b.ParentAsMeasured, p+"parent_as_measured")
			}
		}
		anyBand = anyBand || r.Band != ""
		if r.HasRange {
			r.MinM, r.MaxM, r.MedianM = optNum(b.MeasuredMin, p+"measured_min"), optNum(b.MeasuredMax, p+"measured_max"), optNum(b.MeasuredMedian, p+"measured_median")
			r.Invocations = b.Invocations
			if b.MeasuredSpread != nil {
				r.SpreadText = fmt.Sprintf("%.0f %%", 100**b.MeasuredSpread)
			}
		}
		r.Sense = "≥"
		if b.Max {
			r.Sense = "≤"
		}
		v, how := b.Measured, "measured"
		if b.Counted {
			how = "counted"
		}
		if v == nil {
			v, how = b.Estimated, "estimated"
		}
		switch {
		case v == nil:
			r.Status, r.StatusClass = "not known", "unknown"
		case b.Met(*v):
			r.Status, r.StatusClass = "met, "+how, "met"
		default:
			r.Status, r.StatusClass = "missed, "+how, "missed"
		}
		if b.Measured == nil && b.Estimated != nil && b.ErrorBand != nil && math.Abs(*b.Estimated-b.Limit) <= *b.ErrorBand*math.Abs(*b.Estimated) {
			r.Status += ", within its error band of the limit"
		}
		pg.AnyMeasured = pg.AnyMeasured || b.Measured != nil && !b.Counted
		pg.AnyDisagree = pg.AnyDisagree || r.Flag
		pg.AnyUnstable = pg.AnyUnstable || r.Unstable
		pg.AnyRange = pg.AnyRange || r.HasRange
		pg.Budgets = append(pg.Budgets, r)
	}
	pg.EstimateNote = estimateNote(d, anyBand)
	pg.NothingMeasured = nothingMeasured(d)
	if e := d.Estimator; anyBand && e != nil {
		switch e.Applies {
		case "different":
			pg.BandWarning = "The error band does not apply here: " + e.Why + ". Expect larger errors than ±; only a measurement tells."
			pg.BandFlag = true
		case "unknown":
			pg.BandWarning = "Whether the error band applies here is not known: " + e.Why + "."
		}
	}
	pg.Inconsistent = d.Inconsistencies()
	for i, row := range d.Eval.Rows {
		er := evalRow{Task: row.Task, Metric: row.Metric}
		for j, v := range row.Values {
			p := fmt.Sprintf("eval.rows.%d.values.%d.", i, j)
			er.Cells = append(er.Cells, evalCell{Value: num(v.Value, p+"value"), StdErr: num(v.StdErr, p+"stderr"), HasErr: v.StdErr > 0})
		}
		pg.Eval = append(pg.Eval, er)
	}
	if su := d.Eval.Suite; su != nil {
		for i, row := range su.Rows {
			sr := suiteRow{Category: row.Category, Task: row.Task, Metric: row.Metric, Shots: fmt.Sprint(row.Shots), Note: row.Note,
				Chance: num(row.Chance, fmt.Sprintf("eval.suite.rows.%d.chance", i)), HasChance: row.Chance > 0}
			for j, v := range row.Values {
				p := fmt.Sprintf("eval.suite.rows.%d.values.%d.", i, j)
				if v == nil {
					sr.Cells, sr.Missing = append(sr.Cells, evalCell{Value: cell{Text: "—"}}), append(sr.Missing, true)
					continue
				}
				sr.Cells = append(sr.Cells, evalCell{Value: num(v.Value, p+"value"), StdErr: num(v.StdErr, p+"stderr"), HasErr: v.StdErr > 0})
				sr.Missing = append(sr.Missing, false)
			}
			pg.Suite = append(pg.Suite, sr)
		}
		var short []string
		for j, a := range su.Average {
			p := fmt.Sprintf("eval.suite.average.%d.", j)
			pg.SuiteAvg = append(pg.SuiteAvg, evalCell{Value: num(a.Value, p+"value"), StdErr: num(a.StdErr, p+"stderr"), HasErr: a.StdErr > 0})
			if j < len(su.Measured) && su.Measured[j] < len(su.Rows) && j < len(d.Eval.Models) {
				short = append(short, fmt.Sprintf("%s %d", d.Eval.Models[j], su.Measured[j]))
			}
		}
		pg.SuiteNote = fmt.Sprintf("%s: %s. The average is over the tests measured", su.Name, su.About)
		if len(short) > 0 {
			pg.SuiteNote += fmt.Sprintf(" (%s of %d), so it is not comparable with a full average", strings.Join(short, ", "), len(su.Rows))
		}
		pg.SuiteNote += "; ± is one standard error. At chance: within two standard errors of a uniform guess, where a small model sits on these public tests."
	}
	aligned := d.Child.Aligned(len(d.Parent.Layers))
	n := len(aligned)
	w := func(v int) string {
		if v == 0 {
			return "—"
		}
		return fmt.Sprint(v)
	}
	// The MLP column: the dense width, or an MoE block's experts.
	ffn := func(l *Layer) string {
		if l.Experts > 0 {
			return fmt.Sprintf("%d experts×%d, top-%d", l.Experts, l.ExpertWidth, l.TopK)
		}
		return w(l.FFN)
	}
	mamba := func(l *Layer) string {
		if l.MambaHeads == 0 {
			return "—"
		}
		return fmt.Sprintf("%d×%d", l.MambaHeads, l.MambaHeadDim)
	}
	for _, l := range d.Parent.Layers {
		pg.AnyMamba = pg.AnyMamba || l.MambaHeads > 0
	}
	for i := 0; i < n; i++ {
		r := layerRow{Index: i, PHeads: "", CHeads: "removed"}
		if i < len(d.Parent.Layers) {
			l := d.Parent.Layers[i]
			r.PHeads, r.PKV, r.PFFN, r.PMamba = w(l.Heads), w(l.KVHeads), ffn(&l), mamba(&l)
		}
		if l := aligned[i]; l != nil {
			r.CHeads, r.CKV, r.CFFN, r.CMamba = w(l.Heads), w(l.KVHeads), ffn(l), mamba(l)
		} else {
			r.CKV, r.CFFN, r.CMamba = "removed", "removed", "removed"
		}
		r.Changed = r.PHeads != r.CHeads || r.PKV != r.CKV || r.PFFN != r.CFFN || pg.AnyMamba && r.PMamba != r.CMamba
		pg.Layers = append(pg.Layers, r)
	}
	memoryCells(pg, d)
	pg.ParentParams = num(float64(d.Parent.Params), "parent.params")
	pg.ChildParams = num(float64(d.Child.Params), "child.params")
	if d.Parent.Params > 0 {
		pg.ParamRatio = fmt.Sprintf("%.1f %%", 100*float64(d.Child.Params)/float64(d.Parent.Params))
	}
	pg.Tokens = []cell{num(float64(d.Tokens.Importance), "tokens.importance"),
		num(float64(d.Tokens.Selection), "tokens.selection"), num(float64(d.Tokens.Recovery), "tokens.recovery")}
	if r := d.Recovery; r != nil {
		pg.Recovery = []cell{num(float64(r.Tokens), "recovery_cost.tokens"), num(float64(r.WorldSize), "recovery_cost.world_size"),
			num(r.TokensPerSecond, "recovery_cost.tokens_per_s"), num(r.DeviceHours, "recovery_cost.device_hours"),
			num(r.AssumedGPUHours, "recovery_cost.assumed_gpu_hours")}
		pg.RecoveryOn = r.Engine + " on " + r.Device
	}
	if k := len(d.Training); k > 0 {
		pg.TrainingFinal = fmt.Sprintf("final training loss %s after %s tokens", fmtNum(d.Training[k-1].Loss), fmtNum(float64(d.Training[k-1].Tokens)))
	}
	return pg, nil
}

// memoryCells fills the memory table. Its total, budget and measured peak
// are the budget table's figures (their cells carry the budget row's JSON
// path, so a test checks they agree) where a memory budget in the same unit
// is set.
func memoryCells(pg *page, d *Data) {
	m := &d.Memory
	pg.MemUnit = m.Unit
	if pg.MemUnit == "" {
		pg.MemUnit = "GiB"
	}
	for i, t := range m.Terms {
		pg.Memory = append(pg.Memory, num(t.Value, fmt.Sprintf("memory.terms.%d.value", i)))
		pg.MemoryNames = append(pg.MemoryNames, t.Name)
	}
	pg.MemTotal = cell{Text: fmtNum(m.Total())}
	pg.MemBudget = cell{Text: "—"}
	if m.Budget > 0 {
		pg.MemBudget = num(m.Budget, "memory.budget")
	}
	pg.MemMeasured = optNum(m.Measured, "memory.measured")
	if bi := budgetIndex(d, "memory"); bi >= 0 && d.Budgets[bi].Unit == pg.MemUnit {
		p := fmt.Sprintf("budgets.%d.", bi)
		pg.MemTotal.Path = p + "estimated"
		if m.Budget > 0 {
			pg.MemBudget.Path = p + "limit"
		}
		if m.Measured != nil {
			pg.MemMeasured.Path = p + "measured"
		}
	}
}

// anyParentMeasured reports whether a budget carries the parent measured
// here.
func anyParentMeasured(d *Data) bool {
	for _, b := range d.Budgets {
		if b.ParentMeasured != nil {
			return true
		}
	}
	return false
}

// nothingMeasured is the note of a report in which no budget was judged
// by a measurement: why.
func nothingMeasured(d *Data) string {
	counted := false
	for _, b := range d.Budgets {
		counted = counted || b.Counted
	}
	judged := "every status judges the estimator's figures"
	if counted {
		judged = "a parameter budget judges the written child's exact count and every other status the estimator's figures"
	}
	if d.ChildMeasured {
		return "The child was served by bench-serve on this machine, but no budget is a cost it measures (latency, throughput or memory), so " + judged + "."
	}
	if counted {
		return "Nothing was served (the target is not this machine, or measuring was turned off), so " + judged + "."
	}
	return "Nothing was measured (the target is not this machine, or measuring was turned off), so every status judges an estimate."
}

// estimateNote says what the estimated figures are and how far to trust
// them.
func estimateNote(d *Data, anyBand bool) string {
	s := "Estimated: the estimator's figures"
	if e := d.Estimator; e != nil && e.Coefficients != "" {
		s += ", from " + e.Coefficients
	}
	if anyParentMeasured(d) {
		s += "; the parent's figures are the estimator's too, and where a budget is relative to the parent, the parent measured on this machine (bench-serve, the worst invocation) is shown beside its estimate as \"measured\": the limit is that multiple of it. The parent is measured under the engine's default settings, and the first parent figure is priced under the child's chosen settings, so the parent's estimate under the settings it was measured under stands beside the measurement as well."
	} else {
		s += "; the parent is not measured, every parent figure is an estimate."
	}
	switch src := d.Estimator.BandSource(); {
	case anyBand && src != "":
		s += " ± is the estimator's median error on held-out measurements, measured " + src + ": on another machine, or the same one under another load, the error can be larger."
		if e := d.Estimator; e.Applies == "same" {
			s += " The band was measured on this device (" + e.Why + ")."
		}
	case anyBand:
		s += " ± is the estimator's median error on held-out measurements (where and when they were taken is not recorded)."
	default:
		s += " No error band is known for these estimates."
	}
	return s
}

var funcs = template.FuncMap{
	"pct": func(v float64) string {
		if math.IsNaN(v) {
			return "—"
		}
		return fmt.Sprintf("%.1f %%", 100*v)
	},
}

var htmlTmpl = template.Must(template.New("report").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.D.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", "Liberation Sans", Arial, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05rem; margin: 0 0 .3rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ccc; padding: .25rem .6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.binding td { font-weight: 600; }
td.met, td.missed, td.unknown { min-width: 8.5em; } td.met { color: #1a7f37; } td.missed { color: #c62828; font-weight: 600; } td.unknown { color: #777; }
tr.changed td { background: #f3f8fd; }
td.limit { white-space: nowrap; } .band { color: #555; font-size: .9em; white-space: nowrap; }
.flag { color: #c62828; font-weight: 600; }
figure { margin: 1.5rem 0; width: 100%; } figure svg { display: block; width: 100%; height: auto; background: #fff; }
figcaption { color: #444; font-size: .95rem; }
.note { color: #555; }
</style>
</head>
<body>
<h1>{{.D.Title}}</h1>
<section id="deployment">
<h2>Deployment</h2>
<table>
<tr><th>GPU</th><td>{{.D.Deployment.GPU}}</td></tr>
<tr><th>engine</th><td>{{.D.Deployment.Engine}}</td></tr>
<tr><th>precision</th><td>{{.D.Deployment.Precision}}</td></tr>
<tr><th>workload</th><td>{{.D.Deployment.Workload}}</td></tr>
{{if .D.Deployment.Settings}}<tr><th>engine settings</th><td>{{.D.Deployment.Settings}}</td></tr>
{{end}}{{if .D.Deployment.MeasuredUnder}}<tr><th>measured under</th><td>{{.D.Deployment.MeasuredUnder}}</td></tr>
{{end}}<tr><th>parent</th><td>{{.D.Parent.Name}}, <span data-json="{{.ParentParams.Path}}">{{.ParentParams.Text}}</span> parameters</td></tr>
<tr><th>child</th><td><span data-json="{{.ChildParams.Path}}">{{.ChildParams.Text}}</span> parameters ({{.ParamRatio}} of the parent){{if .D.Strategy}}, chosen by {{.D.Strategy}}{{end}}</td></tr>
</table>
{{if .D.Summary}}<p class="note">Why this child, in the search's words (its figures are the estimator's):</p>
{{range .D.Summary}}<p>{{.}}</p>
{{end}}{{end}}</section>
<section id="budgets">
<h2>Budgets</h2>
{{if .Budgets}}<table>
<tr><th>budget</th><th>limit</th><th>parent, estimated</th><th>child, estimated</th><th>child, measured</th><th>status</th></tr>
{{range .Budgets}}<tr{{if .Binding}} class="binding"{{end}}><td>{{.Name}}{{if .Binding}} (binding){{end}}</td><td class="limit">{{.Sense}} <span data-json="{{.Limit.Path}}">{{.Limit.Text}}</span> {{.Unit}}</td><td><span data-json="{{.Parent.Path}}">{{.Parent.Text}}</span>{{if .Band}} <span class="band">{{.Band}}</span>{{end}}{{if .ParentMeasured.Text}} (measured <span data-json="{{.ParentMeasured.Path}}">{{.ParentMeasured.Text}}</span>{{if .ParentAsMeasured.Text}}, estimated <span data-json="{{.ParentAsMeasured.Path}}">{{.ParentAsMeasured.Text}}</span> at the settings it was measured under{{end}}){{end}}</td><td><span data-json="{{.Estimated.Path}}">{{.Estimated.Text}}</span>{{if .Band}} <span class="band">{{.Band}}</span>{{end}}</td><td><span data-json="{{.Measure.Path}}">{{.Measure.Text}}</span>{{if .HasRange}} <span class="range">(<span data-json="{{.MinM.Path}}">{{.MinM.Text}}</span> – <span data-json="{{.MaxM.Path}}">{{.MaxM.Text}}</span>, median <span data-json="{{.MedianM.Path}}">{{.MedianM.Text}}</span>, over {{.Invocations}} invocations)</span>{{end}}{{if .Unstable}} <span class="flag unstable" title="the invocations spread {{.SpreadText}}, more than 10 %">unstable on this machine</span>{{end}}{{if .Flag}} <span class="flag" title="estimate and measurement differ by more than 10 %">⚑</span>{{end}}</td><td class="{{.StatusClass}}">{{.Status}}</td></tr>
{{end}}</table>
<p class="note">{{.EstimateNote}}</p>
{{if .BandWarning}}<p class="{{if .BandFlag}}flag{{else}}note{{end}} band-warning">{{.BandWarning}}</p>{{end}}
{{if .AnyMeasured}}<p class="note">Measured: the child served by bench-serve on this machine{{if .AnyRange}}, the worst of separate invocations (the largest latency or memory, the smallest throughput), which the status judges; in brackets their range and median{{end}}. The status judges the measurement where there is one, else the estimate.</p>{{else}}<p class="note">{{.NothingMeasured}}</p>{{end}}
{{if .AnyUnstable}}<p class="flag">Unstable on this machine: the invocations of a measurement spread more than 10 % of their median, so one invocation alone would not have been a reliable figure.</p>{{end}}
{{if .AnyDisagree}}<p class="flag">⚑ estimate and measurement differ by more than 10 %.</p>{{end}}
{{range .Inconsistent}}<p class="flag inconsistent">This report contradicts itself: {{.}}.</p>
{{end}}{{else}}<p class="note">No budgets were set.</p>{{end}}
</section>
<section id="shape">
<h2>Shape per layer</h2>
<table>
<tr><th>layer</th><th>parent heads</th><th>parent KV</th><th>parent MLP</th>{{if .AnyMamba}}<th>parent Mamba heads×dim</th>{{end}}<th>child heads</th><th>child KV</th><th>child MLP</th>{{if .AnyMamba}}<th>child Mamba heads×dim</th>{{end}}</tr>
{{range .Layers}}<tr{{if .Changed}} class="changed"{{end}}><td>{{.Index}}</td><td>{{.PHeads}}</td><td>{{.PKV}}</td><td>{{.PFFN}}</td>{{if $.AnyMamba}}<td>{{.PMamba}}</td>{{end}}<td>{{.CHeads}}</td><td>{{.CKV}}</td><td>{{.CFFN}}</td>{{if $.AnyMamba}}<td>{{.CMamba}}</td>{{end}}</tr>
{{end}}</table>
</section>
<section id="charts">
<h2>Charts</h2>
{{range .Charts}}<figure class="chart" id="{{.ID}}">
<h3>{{.Title}}</h3>
{{.Inline}}
<figcaption>{{range .Caption}}{{if .Path}}<span data-json="{{.Path}}">{{.Text}}</span>{{else}}{{.Text}}{{end}}{{end}}</figcaption>
</figure>
{{else}}<p class="note">No chart data.</p>
{{end}}</section>
<section id="memory">
<h2>Memory</h2>
{{if .Memory}}<table>
<tr>{{range .MemoryNames}}<th>{{.}}</th>{{end}}<th>total, estimated</th><th>measured peak</th><th>budget</th></tr>
<tr>{{range .Memory}}<td data-json="{{.Path}}">{{.Text}}</td>{{end}}<td data-json="{{.MemTotal.Path}}">{{.MemTotal.Text}}</td><td data-json="{{.MemMeasured.Path}}">{{.MemMeasured.Text}}</td><td>{{if .D.Memory.Budget}}≤ {{end}}<span data-json="{{.MemBudget.Path}}">{{.MemBudget.Text}}</span></td></tr>
</table><p class="note">{{.MemUnit}}. The terms are estimated, priced as the search priced the child (the workload's context and concurrency, the chosen engine settings); the measured peak is the resident memory of the serving process.</p>
{{else}}<p class="note">No memory plan.</p>{{end}}
</section>
<section id="eval">
<h2>Evaluation</h2>
{{if .Eval}}<table>
<tr><th>task</th><th>metric</th>{{range .D.Eval.Models}}<th>{{.}}</th>{{end}}</tr>
{{range .Eval}}<tr><td>{{.Task}}</td><td>{{.Metric}}</td>{{range .Cells}}<td><span data-json="{{.Value.Path}}">{{.Value.Text}}</span>{{if .HasErr}} ± <span data-json="{{.StdErr.Path}}">{{.StdErr.Text}}</span>{{end}}</td>{{end}}</tr>
{{end}}</table><p class="note">Measured: each model run on the evaluation data; ± is one standard error.</p>
{{else}}<p class="note">No evaluation.</p>{{end}}
{{if .Suite}}<h3>{{.D.Eval.Suite.Name}}</h3><table>
<tr><th>category</th><th>task</th><th>metric</th><th>shots</th>{{range .D.Eval.Models}}<th>{{.}}</th>{{end}}<th>chance</th><th>note</th></tr>
{{range .Suite}}<tr><td>{{.Category}}</td><td>{{.Task}}</td><td>{{.Metric}}</td><td>{{.Shots}}</td>{{range .Cells}}<td>{{if .Value.Path}}<span data-json="{{.Value.Path}}">{{.Value.Text}}</span>{{if .HasErr}} ± <span data-json="{{.StdErr.Path}}">{{.StdErr.Text}}</span>{{end}}{{else}}{{.Value.Text}}{{end}}</td>{{end}}<td>{{if .HasChance}}<span data-json="{{.Chance.Path}}">{{.Chance.Text}}</span>{{end}}</td><td>{{.Note}}</td></tr>
{{end}}<tr><th colspan="4">average</th>{{range .SuiteAvg}}<td><span data-json="{{.Value.Path}}">{{.Value.Text}}</span>{{if .HasErr}} ± <span data-json="{{.StdErr.Path}}">{{.StdErr.Text}}</span>{{end}}</td>{{end}}<td></td><td></td></tr>
</table><p class="note">{{.SuiteNote}}</p>{{end}}
</section>
<section id="tokens">
<h2>Tokens spent</h2>
<table>
<tr><th>importance (calibration)</th><th>choosing the architecture</th><th>recovery</th></tr>
<tr>{{range .Tokens}}<td data-json="{{.Path}}">{{.Text}}</td>{{end}}</tr>
</table>
<p class="note">Counted{{if .TrainingFinal}}; {{.TrainingFinal}}{{end}}.</p>
{{if .Recovery}}<h3>Recovery cost</h3>
<table>
<tr><th>engine</th><th>tokens</th><th>ranks</th><th>tokens/s (measured)</th><th>device-hours at that rate</th><th>GPU-hours at the assumption</th></tr>
<tr><td>{{.RecoveryOn}}</td>{{range .Recovery}}<td data-json="{{.Path}}">{{.Text}}</td>{{end}}</tr>
</table>
<p class="note">Device-hours: the recovery's tokens at the measured rate, times the ranks. GPU-hours at the assumption: {{.D.Recovery.Assumption}}.</p>{{end}}
</section>
{{if .D.Stages}}<section id="stages">
<h2>Stages</h2>
<table>
<tr><th>stage</th><th>reused</th><th>seconds</th></tr>
{{range .D.Stages}}<tr><td>{{.Name}}</td><td>{{if .Reused}}yes{{else}}no{{end}}</td><td>{{printf "%.1f" .Seconds}}</td></tr>
{{end}}</table>
</section>{{end}}
{{if .D.Notes}}<section id="notes">
<h2>Notes</h2>
<ul>{{range .D.Notes}}<li>{{.}}</li>{{end}}</ul>
</section>{{end}}
<pre id="layout" hidden></pre>
<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  function box(r) { return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height}; }
  window.addEventListener("load", function () {
    var charts = [];
    document.querySelectorAll("figure.chart").forEach(function (f) {
      var s = f.querySelector("svg"), c = box((s || f).getBoundingClientRect());
      c.id = f.id;
      c.parts = [];
      if (s) {
        s.querySelectorAll("path, text, rect, circle, line, polyline, polygon").forEach(function (el) {
          var g = el.closest("[data-role]"), b = box(el.getBoundingClientRect());
          if (b.w === 0 && b.h === 0) { return; }
          b.role = g ? g.getAttribute("data-role") : "axis";
          b.tag = el.tagName;
          if (el.tagName === "text") {
            b.text = el.textContent;
            b.font = getComputedStyle(el).fontFamily;
          }
          c.parts.push(b);
        });
      }
      charts.push(c);
    });
    var main = (document.getElementById("charts") || document.body).getBoundingClientRect();
    document.getElementById("layout").textContent = JSON.stringify({charts: charts, errors: errors,
      content: box(main).w, width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight});
  });
})();
</script>
</body>
</html>
`))

// WriteHTML writes the self-contained HTML report.
func WriteHTML(w io.Writer, d *Data) error {
	pg, err := build(d)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, pg); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// WriteMarkdown writes the summary as Markdown.
func WriteMarkdown(w io.Writer, d *Data) error {
	pg, err := build(d)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", d.Title)
	dep := d.Deployment
	fmt.Fprintf(&b, "Deployment: %s, %s, %s; workload %s.\n\n", dep.GPU, dep.Engine, dep.Precision, dep.Workload)
	if dep.Settings != "" {
		fmt.Fprintf(&b, "Engine settings: %s.", dep.Settings)
		if dep.MeasuredUnder != "" {
			fmt.Fprintf(&b, " Measured under: %s.", dep.MeasuredUnder)
		}
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Parent %s: %s parameters; child: %s (%s)", d.Parent.Name, pg.ParentParams.Text, pg.ChildParams.Text, pg.ParamRatio)
	if d.Strategy != "" {
		fmt.Fprintf(&b, ", chosen by %s", d.Strategy)
	}
	b.WriteString(".\n\n")
	if len(d.Summary) > 0 {
		b.WriteString("Why this child, in the search's words (its figures are the estimator's):\n\n")
	}
	for _, s := range d.Summary {
		b.WriteString(s + "\n\n")
	}
	if len(pg.Budgets) > 0 {
		b.WriteString("## Budgets\n\n| budget | limit | parent, estimated | child, estimated | child, measured | status |\n|---|---|---|---|---|---|\n")
		for _, r := range pg.Budgets {
			name := r.Name
			if r.Binding {
				name = "**" + name + "** (binding)"
			}
			m := r.Measure.Text
			if r.HasRange {
				m += fmt.Sprintf(" (%s – %s, median %s, over %d invocations)", r.MinM.Text, r.MaxM.Text, r.MedianM.Text, r.Invocations)
			}
			if r.Unstable {
				m += " unstable on this machine (spread " + r.SpreadText + ")"
			}
			if r.Flag {
				m += " ⚑"
			}
			par, est := r.Parent.Text, r.Estimated.Text
			if r.Band != "" {
				par, est = par+" "+r.Band, est+" "+r.Band
			}
			if r.ParentMeasured.Text != "" {
				if r.ParentAsMeasured.Text != "" {
					par += " (measured " + r.ParentMeasured.Text + ", estimated " + r.ParentAsMeasured.Text + " at the settings it was measured under)"
				} else {
					par += " (measured " + r.ParentMeasured.Text + ")"
				}
			}
			fmt.Fprintf(&b, "| %s | %s %s %s | %s | %s | %s | %s |\n", name, r.Sense, r.Limit.Text, r.Unit, par, est, m, r.Status)
		}
		b.WriteString("\n" + pg.EstimateNote + "\n")
		if pg.BandWarning != "" {
			b.WriteString("\n" + pg.BandWarning + "\n")
		}
		if pg.AnyRange {
			b.WriteString("\nMeasured: the worst of separate bench-serve invocations (the largest latency or memory, the smallest throughput), which the status judges; in brackets their range and median.\n")
		} else if !pg.AnyMeasured {
			b.WriteString("\n" + pg.NothingMeasured + "\n")
		}
		if pg.AnyUnstable {
			b.WriteString("\nUnstable on this machine: the invocations of a measurement spread more than 10 % of their median, so one invocation alone would not have been a reliable figure.\n")
		}
		if pg.AnyDisagree {
			b.WriteString("\n⚑ estimate and measurement differ by more than 10 %.\n")
		}
		for _, s := range pg.Inconsistent {
			b.WriteString("\nThis report contradicts itself: " + s + ".\n")
		}
		b.WriteString("\n")
	}
	if len(pg.Memory) > 0 {
		fmt.Fprintf(&b, "## Memory (%s)\n\nEstimated, as the search priced the child at the workload's context and concurrency:", pg.MemUnit)
		for i, c := range pg.Memory {
			fmt.Fprintf(&b, " %s %s,", pg.MemoryNames[i], c.Text)
		}
		fmt.Fprintf(&b, " total %s", pg.MemTotal.Text)
		if d.Memory.Measured != nil {
			fmt.Fprintf(&b, "; measured peak %s", pg.MemMeasured.Text)
		}
		if d.Memory.Budget > 0 {
			fmt.Fprintf(&b, "; budget ≤ %s", pg.MemBudget.Text)
		}
		b.WriteString(".\n\n")
	}
	if pg.AnyMamba {
		b.WriteString("## Shape per layer\n\n| layer | parent heads/KV/MLP/Mamba | child heads/KV/MLP/Mamba |\n|---|---|---|\n")
	} else {
		b.WriteString("## Shape per layer\n\n| layer | parent heads/KV/MLP | child heads/KV/MLP |\n|---|---|---|\n")
	}
	for _, r := range pg.Layers {
		if pg.AnyMamba {
			fmt.Fprintf(&b, "| %d | %s / %s / %s / %s | %s / %s / %s / %s |\n", r.Index, r.PHeads, r.PKV, r.PFFN, r.PMamba, r.CHeads, r.CKV, r.CFFN, r.CMamba)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s / %s / %s | %s / %s / %s |\n", r.Index, r.PHeads, r.PKV, r.PFFN, r.CHeads, r.CKV, r.CFFN)
	}
	b.WriteString("\n")
	if len(pg.Eval) > 0 {
		b.WriteString("## Evaluation\n\n| task | metric |")
		for _, m := range d.Eval.Models {
			b.WriteString(" " + m + " |")
		}
		b.WriteString("\n|---|---|" + strings.Repeat("---|", len(d.Eval.Models)) + "\n")
		for _, r := range pg.Eval {
			fmt.Fprintf(&b, "| %s | %s |", r.Task, r.Metric)
			for _, c := range r.Cells {
				if c.HasErr {
					fmt.Fprintf(&b, " %s ± %s |", c.Value.Text, c.StdErr.Text)
				} else {
					fmt.Fprintf(&b, " %s |", c.Value.Text)
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\nMeasured: each model run on the evaluation data; ± is one standard error.\n\n")
		if len(pg.Suite) > 0 {
			fmt.Fprintf(&b, "### %s\n\n| category | task | metric | shots |", d.Eval.Suite.Name)
			for _, m := range d.Eval.Models {
				b.WriteString(" " + m + " |")
			}
			b.WriteString(" chance | note |\n|---|---|---|---|" + strings.Repeat("---|", len(d.Eval.Models)) + "---|---|\n")
			cellText := func(c evalCell) string {
				if c.HasErr {
					return c.Value.Text + " ± " + c.StdErr.Text
				}
				return c.Value.Text
			}
			for _, r := range pg.Suite {
				fmt.Fprintf(&b, "| %s | %s | %s | %s |", r.Category, r.Task, r.Metric, r.Shots)
				for _, c := range r.Cells {
					b.WriteString(" " + cellText(c) + " |")
				}
				chance := ""
				if r.HasChance {
					chance = r.Chance.Text
				}
				fmt.Fprintf(&b, " %s | %s |\n", chance, r.Note)
			}
			b.WriteString("| average | | | |")
			for _, c := range pg.SuiteAvg {
				b.WriteString(" " + cellText(c) + " |")
			}
			b.WriteString(" | |\n\n" + pg.SuiteNote + "\n\n")
		}
	}
	if len(d.HeldOut) > 0 {
		b.WriteString("## Recovery\n\nHeld-out cross-entropy of the child (nats per token, measured):")
		for i, h := range d.HeldOut {
			sep := ","
			if i == 0 {
				sep = ""
			}
			if h.Step == 0 {
				fmt.Fprintf(&b, "%s %s before distillation", sep, fmtNum(h.Loss))
			} else {
				fmt.Fprintf(&b, "%s %s after %s tokens", sep, fmtNum(h.Loss), fmtNum(float64(h.Tokens)))
			}
		}
		if d.ParentHeldOut != nil {
			fmt.Fprintf(&b, "; the parent %s", fmtNum(*d.ParentHeldOut))
		}
		b.WriteString(".\n\n")
	}
	fmt.Fprintf(&b, "## Tokens spent\n\nimportance %s, choosing the architecture %s, recovery %s.\n", pg.Tokens[0].Text, pg.Tokens[1].Text, pg.Tokens[2].Text)
	if r := pg.Recovery; r != nil {
		fmt.Fprintf(&b, "\nRecovery cost: %s tokens on %s, %s rank(s), %s tokens/s measured: %s device-hours at that rate; %s GPU-hours at %s.\n",
			r[0].Text, pg.RecoveryOn, r[1].Text, r[2].Text, r[3].Text, r[4].Text, d.Recovery.Assumption)
	}
	if len(d.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range d.Notes {
			b.WriteString("- " + n + "\n")
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}
