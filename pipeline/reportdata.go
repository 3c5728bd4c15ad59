package pipeline

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/eval"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/report"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// budgetView says how one search budget is shown: its unit, the scale from
// the search's SI value, and how to read the same quantity from the search's
// costs and from bench-serve's invocations (key: the servebench.Invocations
// summary key; "" where bench-serve does not measure it).
type budgetView struct {
	name, unit string
	max        bool
	scale      float64
	cost       func(c *search.Costs, p90 bool) float64
	key        func(p90 bool) string
}

// measured returns the view's figure across the invocations: the
// conservative one (the worst invocation) and the whole summary.
func (v budgetView) measured(inv *servebench.Invocations, p90 bool) (float64, servebench.Across, bool) {
	if v.key == nil || inv == nil {
		return 0, servebench.Across{}, false
	}
	k := v.key(p90)
	w, ok := inv.Conservative(k)
	return w, inv.Summary[k], ok
}

func pick(p90 bool, mean, tail float64) float64 {
	if p90 {
		return tail
	}
	return mean
}

func latencyKey(p90 bool, base string) string {
	if p90 {
		return base + "_p90_s"
	}
	return base + "_mean_s"
}

func fixedKey(k string) func(bool) string { return func(bool) string { return k } }

// budgetViews returns the views of the budgets b sets, in a fixed order.
func budgetViews(b search.Budgets) []budgetView {
	var out []budgetView
	if b.MaxMemory > 0 {
		unit, scale := "GiB", 1.0/(1<<30)
		if b.MaxMemory < 1<<30 {
			unit, scale = "MiB", 1.0/(1<<20)
		}
		out = append(out, budgetView{name: "memory", unit: unit, max: true, scale: scale,
			cost: func(c *search.Costs, _ bool) float64 { return c.MemoryBytes }, key: fixedKey(servebench.PeakRSSKey)})
	}
	lat := func(name, key string, get func(c *search.Costs, p90 bool) float64) budgetView {
		return budgetView{name: name, unit: "ms", max: true, scale: 1e3, cost: get,
			key: func(p90 bool) string { return latencyKey(p90, key) }}
	}
	if b.MaxTTFT > 0 {
		out = append(out, lat("ttft", "ttft", func(c *search.Costs, p bool) float64 { return pick(p, c.TTFT, c.TTFTP90) }))
	}
	if b.MaxTPOT > 0 {
		out = append(out, lat("tpot", "tpot", func(c *search.Costs, p bool) float64 { return pick(p, c.TPOT, c.TPOTP90) }))
	}
	if b.MaxE2E > 0 {
		out = append(out, lat("e2e", "e2e", func(c *search.Costs, p bool) float64 { return pick(p, c.E2E, c.E2EP90) }))
	}
	if b.MinThroughput.TokensPerS > 0 {
		out = append(out, budgetView{name: "throughput", unit: "tok/s", scale: 1,
			cost: func(c *search.Costs, _ bool) float64 { return c.OutputTokS }, key: fixedKey("output_tokens_per_s")})
	}
	if b.MinThroughput.RequestsPerS > 0 {
		out = append(out, budgetView{name: "request rate", unit: "req/s", scale: 1,
			cost: func(c *search.Costs, _ bool) float64 { return c.RequestsPerS }, key: fixedKey("requests_per_s")})
	}
	if b.MaxParams > 0 {
		out = append(out, budgetView{name: "params", unit: "M", max: true, scale: 1e-6,
			cost: func(c *search.Costs, _ bool) float64 { return c.Params }})
	}
	return out
}

func (v budgetView) limit(b search.Budgets) float64 {
	switch v.name {
	case "memory":
		return b.MaxMemory
	case "ttft":
		return b.MaxTTFT
	case "tpot":
		return b.MaxTPOT
	case "e2e":
		return b.MaxE2E
	case "throughput":
		return b.MinThroughput.TokensPerS
	case "request rate":
		return b.MinThroughput.RequestsPerS
	case "params":
		return b.MaxParams
	}
	return 0
}

func ptr(v float64) *float64 { return &v }

// searchBudget maps a view's name to the search's budget name.
var searchBudget = map[string]string{"memory": search.BudgetMemory, "ttft": search.BudgetTTFT, "tpot": search.BudgetTPOT,
	"e2e": search.BudgetE2E, "throughput": search.BudgetThroughput, "request rate": search.BudgetThroughput, "params": search.BudgetParams}

// roundNote describes one measured check of the search's choice, each
// figure in its budget's unit as the budget table shows it.
func roundNote(r Round, views []budgetView) string {
	var parts []string
	for _, v := range views {
		m, ok := r.Measured[v.name]
		if !ok {
			continue
		}
		f := func(x float64) string { return report.FormatNumber(x*v.scale) + " " + v.unit }
		p := fmt.Sprintf("%s limit %s (searched under %s), estimated %s, measured %s", v.name, f(r.Limits[v.name]), f(r.Searched[v.name]), f(r.Estimated[v.name]), f(m))
		if xs := r.Invocations[v.name]; len(xs) > 1 {
			p += fmt.Sprintf(" (the worst of %d invocations, %s–%s", len(xs), report.FormatNumber(slices.Min(xs)*v.scale), f(slices.Max(xs)))
			if r.Spread[v.name] > UnstableTolerance {
				p += fmt.Sprintf(", spread %.0f %%: unstable on this machine", 100*r.Spread[v.name])
			}
			p += ")"
		}
		parts = append(parts, p)
	}
	verdict := "met every measured budget"
	if len(r.Missed) > 0 {
		verdict = "missed " + strings.Join(r.Missed, ", ")
	}
	if len(parts) == 0 {
		parts = append(parts, "no budgeted cost measurable here")
	}
	if r.ReusedFrom > 0 {
		verdict += fmt.Sprintf(" (the child of check %d again: its measurement reused)", r.ReusedFrom)
	}
	if r.Chosen {
		verdict += "; this child was kept"
	}
	return fmt.Sprintf("check %d (the pruned child measured before distillation): %s; %s", r.Round, strings.Join(parts, "; "), verdict)
}

// chosenSettings describes the engine settings the search chose, in
// estimate's flag names.
func chosenSettings(sv *search.Serving, eng estimate.Engine, clients int) string {
	st := sv.Settings
	if eng.Local() {
		seqs := st.MaxNumSeqs
		if seqs == 0 {
			seqs = clients
		}
		return settingsText(seqs, servebench.DefaultPrefillTokens, sv.MaxModelLen)
	}
	var parts []string
	if st.Precision != "" {
		parts = append(parts, "precision "+st.Precision)
	}
	if st.KVDType != "" {
		parts = append(parts, "kv-dtype "+st.KVDType)
	}
	if st.MaxNumSeqs > 0 {
		parts = append(parts, "max-num-seqs "+strconv.Itoa(st.MaxNumSeqs))
	}
	if st.MemFraction > 0 {
		parts = append(parts, "mem-fraction "+strconv.FormatFloat(st.MemFraction, 'g', -1, 64))
	}
	if sv.MaxModelLen > 0 {
		parts = append(parts, "context "+strconv.Itoa(sv.MaxModelLen))
	}
	return strings.Join(parts, ", ")
}

// shapeOf lists a model's layers for the report.
func shapeOf(name string, m *architecture.Model, params int64) report.Shape {
	s := report.Shape{Name: name, Params: params, Hidden: m.Hidden}
	for _, l := range m.Layers {
		var r report.Layer
		if l.Attention != nil {
			r.Heads, r.KVHeads = l.Attention.Heads, l.Attention.KVHeads
		}
		if l.MLP != nil {
			r.FFN = l.MLP.Width
		}
		if l.Mamba != nil {
			r.MambaHeads, r.MambaHeadDim = l.Mamba.Heads, l.Mamba.HeadDim
		}
		if x := l.MoE; x != nil {
			r.Experts, r.TopK, r.ExpertWidth = x.Experts, x.TopK, x.ExpertWidth
		}
		s.Layers = append(s.Layers, r)
	}
	return s
}

// buildReport gathers the report's data from the finished stages' outputs.
func buildReport(out Outputs, t *target, c *Config) (*report.Data, error) {
	var sum search.Summary
	searchDir := out.Search()
	if err := readJSONFile(filepath.Join(searchDir, search.JSONFile), &sum); err != nil {
		return nil, err
	}
	childDir := out.Child()
	childArch, err := architecture.Load(childDir)
	if err != nil {
		return nil, err
	}
	d := &report.Data{Title: fmt.Sprintf("autocompress: %s for %s / %s", c.Model, t.gpu.Name, t.engine),
		RunDir: c.Dir, Strategy: sum.Strategy, Summary: sum.Why, Notes: sum.Notes}
	prec := sum.Chosen.Settings.Precision
	if prec == "" {
		prec = "the engine's default"
		if spec, ok := t.engine.Spec(); ok && spec.FixedPrecision != "" {
			prec = spec.FixedPrecision
		}
	}
	d.Deployment = report.Deployment{GPU: t.gpu.Name, Engine: string(t.engine), Precision: prec,
		TP: max(c.Deployment.TP, 1), Workload: t.workload.String(), ISL: t.workload.Input.MaxValue(), OSL: t.workload.Output.MaxValue(),
		Concurrency: t.workload.Concurrency, RequestRate: t.workload.Rate}
	var sv search.Serving
	if err := readJSONFile(filepath.Join(searchDir, search.ServingFile), &sv); err != nil {
		return nil, err
	}
	d.Deployment.Settings = chosenSettings(&sv, t.engine, t.workload.Concurrency)
	var rb ResolvedBudgets
	if err := readJSONFile(out.Budgets(), &rb); err == nil {
		for v, lim := range rb.Limits {
			setLimit(&t.budgets, v, lim)
		}
		for _, v := range rb.views() {
			d.Notes = append(d.Notes, fmt.Sprintf("budget %s: %s × the parent's %s (%s)", v, report.FormatNumber(rb.Multiple[v]), v, rb.Source))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var rounds []Round
	views := budgetViews(t.budgets)
	if err := readJSONFile(out.Rounds(), &rounds); err == nil {
		for _, r := range rounds {
			d.Notes = append(d.Notes, roundNote(r, views))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	d.Parent = shapeOf(c.Model, t.arch, int64(sum.Parent.Costs.Params))
	d.Child = shapeOf("child", childArch, int64(sum.Chosen.Costs.Params))
	for i, l := range sum.Chosen.Layers {
		if !l.Removed {
			d.Child.Kept = append(d.Child.Kept, i)
		}
	}

	var meas *servebench.Invocations
	if p := out.Measure(); p != "" {
		meas = &servebench.Invocations{}
		if err := readJSONFile(filepath.Join(p, MeasureFile), meas); err != nil {
			return nil, err
		}
		if meas.First() == nil {
			return nil, fmt.Errorf("pipeline: %s: no invocations", filepath.Join(p, MeasureFile))
		}
		first := meas.First()
		d.Deployment.MeasuredUnder = settingsText(first.MaxNumSeqs, first.MaxBatchedTokens, first.ContextLimit)
	}
	d.Budgets = budgetRows(views, t.budgets, &sum, meas)
	for i := range d.Budgets {
		if d.Budgets[i].Name == "params" {
			// Counted, not estimated: the written child's tensors, which
			// prune checked against its config.
			d.Budgets[i].Measured = ptr(float64(childArch.Params().Total) * 1e-6)
			d.Budgets[i].Counted = true
		}
	}
	d.ChildMeasured = meas != nil
	if rb.Source == "measured" {
		// The parent was measured under the engine's defaults
		// (measureParent); the search priced it under the child's chosen
		// settings. Its estimate under the defaults compares like with like.
		asMeasured, err := parentEstimated(t)
		if err != nil {
			return nil, err
		}
		for i, v := range views {
			if p, ok := rb.Parent[v.name]; ok {
				d.Budgets[i].ParentMeasured = ptr(p * v.scale)
				if e, ok := asMeasured[v.name]; ok {
					d.Budgets[i].ParentAsMeasured = ptr(e * v.scale)
				}
			}
		}
	}
	if err := paretoFronts(d, searchDir, views, t.budgets, &sum); err != nil {
		return nil, err
	}

	comp, err := compileChosen(t, c, &sum, &sv)
	if err != nil {
		return nil, err
	}
	memoryPlan(d, t, comp, childArch, views, meas)
	d.Estimator = estimatorOf(t, comp, d.Budgets, hardware.ThisHost())

	if out.Distilled() {
		var ds distill.Summary
		if err := readJSONFile(out.DistillSummary(), &ds); err != nil {
			return nil, err
		}
		d.Tokens.Recovery = ds.Tokens
		if d.Training, d.HeldOut, err = readTrainingLog(out.DistillLog()); err != nil {
			return nil, err
		}
		recovery(d, &ds)
		engine, world, device := ds.Engine, ds.WorldSize, ds.Device
		if engine == "" { // native distill: one process on this machine's CPU
			engine, world, device = "native", 1, "cpu"
		}
		d.Recovery = report.NewRecoveryCost(ds.Tokens, engine, max(world, 1), device, ds.TokensPerSecond, d.Parent.Params, d.Child.Params)
	}
	if s, err := importance.Load(out.Scores()); err == nil {
		d.Tokens.Importance = s.Tokens
	}
	d.Tokens.Selection = sum.Tokens

	var er eval.Report
	if err := readJSONFile(out.Eval(), &er); err != nil {
		return nil, err
	}
	d.Eval = evalTable(&er)
	return d, nil
}

// budgetRows is the report's budget table: per budget the limit, the
// parent's and the child's estimated cost, and, where meas measured it, the
// conservative figure over the invocations (the worst: the one the budget
// is judged on) with their median, range and spread.
func budgetRows(views []budgetView, b search.Budgets, sum *search.Summary, meas *servebench.Invocations) []report.Budget {
	var out []report.Budget
	for _, v := range views {
		r := report.Budget{Name: v.name, Unit: v.unit, Max: v.max, Limit: v.limit(b) * v.scale,
			Parent:    ptr(v.cost(&sum.Parent.Costs, b.P90) * v.scale),
			Estimated: ptr(v.cost(&sum.Chosen.Costs, b.P90) * v.scale),
			Binding:   searchBudget[v.name] == sum.Binding}
		if m, a, ok := v.measured(meas, b.P90); ok {
			r.Measured = ptr(m * v.scale)
			r.Invocations = len(a.Invocations)
			r.MeasuredMedian, r.MeasuredMin, r.MeasuredMax = ptr(a.Median*v.scale), ptr(a.Min*v.scale), ptr(a.Max*v.scale)
			r.MeasuredSpread = ptr(a.Spread)
		}
		out = append(out, r)
	}
	return out
}

// paretoFronts reads the search's Pareto front and draws one per budgeted
// cost.
func paretoFronts(d *report.Data, dir string, views []budgetView, b search.Budgets, sum *search.Summary) error {
	f, err := os.Open(filepath.Join(dir, search.ParetoFile))
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) == 0 {
		return fmt.Errorf("pipeline: %s: %v", search.ParetoFile, err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	num := func(rec []string, name string) (float64, bool) {
		i, ok := col[name]
		if !ok || i >= len(rec) || rec[i] == "" {
			return 0, false
		}
		v, err := strconv.ParseFloat(rec[i], 64)
		return v, err == nil
	}
	csvCol := map[string]string{"memory": "memory_gib", "ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms",
		"throughput": "output_tok_s", "request rate": "requests_s", "params": "params"}
	csvScale := map[string]float64{"memory": 1 << 30, "ttft": 1e-3, "tpot": 1e-3, "e2e": 1e-3, "throughput": 1, "request rate": 1, "params": 1}
	if b.P90 {
		csvCol["ttft"], csvCol["tpot"], csvCol["e2e"] = "ttft_p90_ms", "tpot_p90_ms", "e2e_p90_ms"
	}
	for _, v := range views {
		p := report.Pareto{Cost: v.name, Unit: v.unit, Quality: "proxy (retained importance)", Limit: v.limit(b) * v.scale}
		for _, rec := range recs[1:] {
			cost, ok := num(rec, csvCol[v.name])
			q, ok2 := num(rec, "quality")
			if !ok || !ok2 {
				continue
			}
			meets := rec[col["meets_budgets"]] == "true"
			p.Points = append(p.Points, report.Point{Cost: cost * csvScale[v.name] * v.scale, Quality: q, Feasible: meets})
		}
		chosen := report.Point{Cost: v.cost(&sum.Chosen.Costs, b.P90) * v.scale, Quality: sum.Chosen.Quality, Feasible: true, Chosen: true}
		p.Points = append(p.Points, chosen)
		d.Pareto = append(d.Pareto, p)
	}
	return nil
}

// compileChosen prepares the estimator as the search priced the chosen
// child: its settings, the serving context and TP, the workload.
func compileChosen(t *target, c *Config, sum *search.Summary, sv *search.Serving) (*estimate.Compiled, error) {
	st := sum.Chosen.Settings
	o := estimate.Options{Precision: st.Precision, KVDType: st.KVDType, MaxNumSeqs: st.MaxNumSeqs, MemFraction: st.MemFraction,
		TP: max(sv.TP, c.Deployment.TP, 1), MaxModelLen: sv.MaxModelLen}
	comp, err := estimate.Compile(t.gpu, t.engine, o, t.workload, nil)
	if err != nil {
		return nil, fmt.Errorf("pipeline: pricing the child for the report: %w", err)
	}
	return comp, nil
}

// memoryPlan fills d.Memory with the child's memory plan priced by comp
// (compileChosen: as the search priced it, at the workload's context and
// concurrency), so that its total is the budget table's estimated memory.
// Its unit is the memory budget's, else the one its total reads best in.
func memoryPlan(d *report.Data, t *target, comp *estimate.Compiled, child *architecture.Model, views []budgetView, meas *servebench.Invocations) {
	var s estimate.Summary
	comp.Summarize(&s, child)
	mem, ok := comp.Memory(&s)
	unit, scale := "GiB", 1.0/(1<<30)
	if mem.TotalBytes() < 1<<30 {
		unit, scale = "MiB", 1.0/(1<<20)
	}
	for _, v := range views {
		if v.name == "memory" {
			unit, scale = v.unit, v.scale
		}
	}
	d.Memory = report.Memory{Unit: unit, Budget: t.budgets.MaxMemory * scale}
	if ok {
		d.Memory.Terms = []report.MemoryTerm{{Name: "weights", Value: mem.WeightsBytes * scale},
			{Name: "KV cache", Value: mem.KVPoolBytes * scale}, {Name: "activations", Value: mem.ActivationBytes * scale},
			{Name: "overhead", Value: mem.OverheadBytes * scale}}
	}
	if m, ok := meas.Conservative(servebench.PeakRSSKey); ok && m > 0 {
		d.Memory.Measured = ptr(m * scale)
	}
}

// estimatorOf says where the estimates come from and sets each budget
// row's error band: the held-out median errors of the coefficients comp
// prices with, where and when they were measured, and whether that is the
// device priced (for the native engine: this host, this).
func estimatorOf(t *target, comp *estimate.Compiled, rows []report.Budget, this hardware.Host) *report.Estimator {
	r := estimate.Result{Engine: t.engine, Family: comp.Family(), Coeffs: comp.Coeffs()}
	b := r.Band(t.gpu, this)
	e := report.Estimator{Coefficients: "the " + b.Family + " coefficients", Host: b.MeasuredOn, Measured: b.Measured,
		Applies: string(b.Applies), Why: b.Why}
	bands := map[string]float64{"ttft": b.TTFT, "tpot": b.TPOT, "throughput": b.Throughput}
	if t.engine.Local() {
		e.Coefficients += ", fitted by calibrate-native"
		if f, _, err := estimate.ActiveNativeCoeffs(); err == nil {
			nc, _ := f.Machine(t.gpu.Name)
			bands["memory"] = nc.ErrMemory
			if strings.HasPrefix(nc.Source, "quick probe") {
				e.Coefficients = "the " + b.Family + " coefficients, this host's quick probe (the committed calibration scaled to this host; no held-out rows of its own)"
			}
		}
	} else {
		e.Coefficients += ", fitted to published serving measurements"
		if v := r.Coeffs.EngineVersion; v != "" {
			e.Coefficients += " (engine versions " + v + ")"
		}
	}
	for i := range rows {
		if v := bands[rows[i].Name]; v > 0 {
			rows[i].ErrorBand = ptr(v)
		}
	}
	return &e
}

// recovery adds what the distillation measured besides its log: the
// held-out cross-entropy before the first step (at step 0) and the
// parent's, and says what the training loss is.
func recovery(d *report.Data, ds *distill.Summary) {
	d.Objective = fmt.Sprintf("distillation loss: %g × T² × KL(parent ‖ child) at T = %g", ds.KDWeight, ds.Temperature)
	if ds.CEWeight > 0 {
		d.Objective += fmt.Sprintf(" + %g × cross-entropy on the data", ds.CEWeight)
	}
	if ds.Before != nil && (len(d.HeldOut) == 0 || d.HeldOut[0].Step > 0) {
		d.HeldOut = append([]report.HeldOutPoint{{Loss: ds.Before.Loss}}, d.HeldOut...)
	}
	if ds.TeacherEval != nil {
		d.ParentHeldOut = ptr(ds.TeacherEval.Loss)
	}
}

// readTrainingLog reads distill's JSON-lines log: the training steps and
// the held-out evaluations. A step logged again (a resumed PyTorch job
// redoes the steps after its checkpoint) replaces the earlier line, and an
// evaluation line without tokens (the torch trainer's, job/CONTRACT.md:
// tokens is optional) takes those of the training step it follows.
func readTrainingLog(path string) ([]report.TrainPoint, []report.HeldOutPoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: %w", err)
	}
	var steps []report.TrainPoint
	var held []report.HeldOutPoint
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l struct {
			Step    int      `json:"step"`
			Loss    *float64 `json:"loss"`
			LR      *float64 `json:"lr"`
			Tokens  int64    `json:"tokens"`
			ValLoss *float64 `json:"val_loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, nil, fmt.Errorf("pipeline: %s: %w", path, err)
		}
		if l.Loss != nil {
			tp := report.TrainPoint{Step: l.Step, Tokens: l.Tokens, Loss: *l.Loss}
			if l.LR != nil {
				tp.LR = *l.LR
			}
			for len(steps) > 0 && steps[len(steps)-1].Step >= tp.Step {
				steps = steps[:len(steps)-1]
			}
			steps = append(steps, tp)
		}
		if l.ValLoss != nil {
			hp := report.HeldOutPoint{Step: l.Step, Tokens: l.Tokens, Loss: *l.ValLoss}
			if hp.Tokens == 0 && hp.Step > 0 {
				for i := len(steps) - 1; i >= 0; i-- {
					if steps[i].Step == hp.Step {
						hp.Tokens = steps[i].Tokens
						break
					}
				}
			}
			for len(held) > 0 && held[len(held)-1].Step >= hp.Step {
				held = held[:len(held)-1]
			}
			held = append(held, hp)
		}
	}
	return steps, held, sc.Err()
}

// evalTable turns an eval report into the report's side-by-side table.
func evalTable(er *eval.Report) report.EvalTable {
	var t report.EvalTable
	for _, m := range er.Models {
		t.Models = append(t.Models, m.Model)
	}
	if len(er.Models) == 0 {
		return t
	}
	first := er.Models[0]
	if first.PerplexityResult != nil {
		row := report.EvalRow{Task: "held-out text", Metric: "perplexity"}
		bpb := report.EvalRow{Task: "held-out text", Metric: "bits per byte"}
		for _, m := range er.Models {
			if m.PerplexityResult == nil {
				row.Values, bpb.Values = append(row.Values, report.EvalValue{}), append(bpb.Values, report.EvalValue{})
				continue
			}
			row.Values = append(row.Values, report.EvalValue{Value: m.Perplexity})
			bpb.Values = append(bpb.Values, report.EvalValue{Value: m.BitsPerByte})
		}
		t.Rows = append(t.Rows, row)
		if first.BitsPerByte > 0 {
			t.Rows = append(t.Rows, bpb)
		}
	}
	for ti, task := range first.Tasks {
		for _, metric := range task.Metrics {
			row := report.EvalRow{Task: task.Task, Metric: metric.Name}
			for _, m := range er.Models {
				var v report.EvalValue
				if ti < len(m.Tasks) {
					if mm, ok := m.Tasks[ti].Metric(metric.Name); ok {
						v = report.EvalValue{Value: mm.Value, StdErr: mm.Stderr}
					}
				}
				row.Values = append(row.Values, v)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	t.Suite = suiteTable(er.Suite)
	return t
}

// suiteTable turns a suite's scores into the report's: the note of a row
// names the models at chance, or why the test was not measured.
func suiteTable(s *eval.SuiteScores) *report.EvalSuite {
	if s == nil {
		return nil
	}
	out := &report.EvalSuite{Name: s.Suite, About: s.About, Measured: s.Measured}
	for _, r := range s.Rows {
		row := report.EvalSuiteRow{Category: r.Category, Task: r.Task, Metric: r.Metric, Shots: r.Shots, Chance: r.Chance}
		var at []string
		for i, m := range r.Scores {
			if m == nil {
				row.Values = append(row.Values, nil)
				continue
			}
			row.Values = append(row.Values, &report.EvalValue{Value: m.Value, StdErr: m.Stderr})
			if i < len(r.AtChance) && r.AtChance[i] {
				at = append(at, s.Models[i])
			}
		}
		switch {
		case r.Unavailable != "":
			row.Note = "unavailable: " + r.Unavailable
		case len(at) > 0:
			row.Note = "at chance: " + strings.Join(at, ", ")
		}
		out.Rows = append(out.Rows, row)
	}
	for _, a := range s.Average {
		out.Average = append(out.Average, report.EvalValue{Value: a.Value, StdErr: a.Stderr})
	}
	return out
}

// writeReport writes the HTML, Markdown and JSON report into dir.
func writeReport(dir string, d *report.Data) error {
	for _, f := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{ReportHTML, func(b *bytes.Buffer) error { return report.WriteHTML(b, d) }},
		{ReportMarkdown, func(b *bytes.Buffer) error { return report.WriteMarkdown(b, d) }},
		{ReportJSON, func(b *bytes.Buffer) error { return report.WriteJSON(b, d) }},
	} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return err
		}
		if err := output.WriteFile(filepath.Join(dir, f.name), b.Bytes(), false); err != nil {
			return err
		}
	}
	return nil
}
