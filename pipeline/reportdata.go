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

// roundNote describes one measured check of the search's choice.
func roundNote(r Round) string {
	var parts []string
	for _, v := range []string{"memory", "ttft", "tpot", "e2e", "throughput", "request rate"} {
		m, ok := r.Measured[v]
		if !ok {
			continue
		}
		p := fmt.Sprintf("%s limit %.4g (searched under %.4g), estimated %.4g, measured %.4g", v, r.Limits[v], r.Searched[v], r.Estimated[v], m)
		if xs := r.Invocations[v]; len(xs) > 1 {
			lo, hi := slices.Min(xs), slices.Max(xs)
			p += fmt.Sprintf(" (the worst of %d invocations, %.4g–%.4g", len(xs), lo, hi)
			if r.Spread[v] > UnstableTolerance {
				p += fmt.Sprintf(", spread %.0f %%: unstable on this machine", 100*r.Spread[v])
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
	return fmt.Sprintf("check %d (pruned child measured before distillation, SI units): %s; %s", r.Round, strings.Join(parts, "; "), verdict)
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
		s.Layers = append(s.Layers, r)
	}
	return s
}

// buildReport gathers the report's data from the finished stages.
func buildReport(env *Env, t *target, c *Config, childFrom string) (*report.Data, error) {
	var sum search.Summary
	searchDir := filepath.Join(env.Input("search"), SearchDir)
	if err := readJSONFile(filepath.Join(searchDir, search.JSONFile), &sum); err != nil {
		return nil, err
	}
	childDir := filepath.Join(env.Input(childFrom), ChildDir)
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
	var rounds []Round
	if err := readJSONFile(filepath.Join(env.Input("search"), RoundsFile), &rounds); err == nil {
		for _, r := range rounds {
			d.Notes = append(d.Notes, roundNote(r))
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
	if p := env.Input("measure"); p != "" {
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
	views := budgetViews(t.budgets)
	d.Budgets = budgetRows(views, t.budgets, &sum, meas)
	if err := paretoFronts(d, searchDir, views, t.budgets, &sum); err != nil {
		return nil, err
	}

	// The memory plan of the child as the estimator prices it.
	o := estimate.Options{Precision: sum.Chosen.Settings.Precision, KVDType: sum.Chosen.Settings.KVDType,
		MaxNumSeqs: sum.Chosen.Settings.MaxNumSeqs, MemFraction: sum.Chosen.Settings.MemFraction, TP: max(c.Deployment.TP, 1)}
	if mem, err := estimate.Memory(childArch, t.gpu, t.engine, o); err == nil {
		d.Memory.Terms = []report.MemoryTerm{{Name: "weights", GiB: mem.WeightsBytes / (1 << 30)},
			{Name: "KV cache", GiB: mem.KVPoolBytes / (1 << 30)}, {Name: "activations", GiB: mem.ActivationBytes / (1 << 30)},
			{Name: "overhead", GiB: mem.OverheadBytes / (1 << 30)}}
	}
	d.Memory.BudgetGiB = t.budgets.MaxMemory / (1 << 30)
	if m, ok := meas.Conservative(servebench.PeakRSSKey); ok && m > 0 {
		d.Memory.MeasuredGiB = ptr(m / (1 << 30))
	}

	if childFrom == "distill" {
		var ds distill.Summary
		if err := readJSONFile(filepath.Join(env.Input("distill"), DistillSummary), &ds); err != nil {
			return nil, err
		}
		d.Tokens.Recovery = ds.Tokens
		if d.Training, err = readTrainingLog(filepath.Join(env.Input("distill"), DistillLog)); err != nil {
			return nil, err
		}
	}
	if s, err := importance.Load(filepath.Join(env.Input("importance"), ScoresFile)); err == nil {
		d.Tokens.Importance = s.Tokens
	}
	d.Tokens.Selection = sum.Tokens

	var er eval.Report
	if err := readJSONFile(filepath.Join(env.Input("eval"), EvalFile), &er); err != nil {
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

// readTrainingLog reads distill's JSON-lines log.
func readTrainingLog(path string) ([]report.TrainPoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	var out []report.TrainPoint
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
			return nil, fmt.Errorf("pipeline: %s: %w", path, err)
		}
		switch {
		case l.Loss != nil:
			tp := report.TrainPoint{Step: l.Step, Tokens: l.Tokens, Loss: *l.Loss}
			if l.LR != nil {
				tp.LR = *l.LR
			}
			out = append(out, tp)
		case l.ValLoss != nil && len(out) > 0 && out[len(out)-1].Step == l.Step:
			out[len(out)-1].EvalLoss = l.ValLoss
		case l.ValLoss != nil:
			out = append(out, report.TrainPoint{Step: l.Step, Tokens: l.Tokens, Loss: *l.ValLoss, EvalLoss: l.ValLoss})
		}
	}
	return out, sc.Err()
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
	return t
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
