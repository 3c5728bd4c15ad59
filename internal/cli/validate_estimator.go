package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/groundtruth"
	"github.com/autocompress/autocompress/estimate/scenarios"
	"github.com/autocompress/autocompress/internal/output"
)

func init() {
	Register(&Command{
		Name:  "validate-estimator",
		Usage: "[--groundtruth DIR] [--user FILE.csv] [--iter N] [--json] [--margins-out FILE.json [--force]]",
		Short: "report the estimator's error on held-out GPUs and models",
		Long: `Validate-estimator refits the coefficients with each GPU held out in turn
(leave-one-GPU-out) and with each model held out in turn (leave-one-model-out), per engine
family, and prints the median and p90 absolute percentage error of TPOT, TTFT and
throughput on the held-out rows only, per engine and GPU, then pooled per engine and
overall, against the targets (median APE ≤ 8 % TPOT, ≤ 15 % TTFT, ≤ 10 % throughput).

Throughput of the AIConfigurator rows is derived from their TTFT and TPOT
(concurrency × osl ÷ E2E); Argonne's throughput is measured.

Then checks on published data that no fit ever sees, scored with the shipped
coefficients: TensorRT-LLM's performance-overview tables (max-load throughput and
online-serving TTFT/ITL), and the KV capacity (tokens or GiB) and weight memory that
engines printed at start-up in public logs. The max-load tables are also priced through
estimate --scenarios, once with the setting columns empty and once with the FP8 KV cache and
0.95 memory fraction they state. Then consumer GPUs (GeForce RTX): published serving
measurements by source, metric and deployment class, and the memory-traffic factor they fit
(a constant over each GPU's llama-bench decode efficiency) with each source held out of its
fit in turn, then per engine and W4A16 class a multiplier on the W4A16 kernel factor, each
source held out the same way, and whether it would be shipped (two or more sources, a lower
pooled held-out error, no held-out source worse; estimate/groundtruth/testdata/consumer_serving.md).

Last, llama.cpp on GeForce and Apple GPUs: published llama-bench prompt-processing and
decode rows, each GPU predicted by the llamacpp-cuda / llamacpp-metal terms refitted on the
other GPUs (targets: prompt median ≤ 15 %, decode ≤ 10 %). All these data sets are
embedded; their sources are in estimate/groundtruth/testdata/*.md.

--margins-out writes, instead of the report, the held-out shortfall of the estimates by error
class (engine family, GPU class, metric, workload regime: up to 4 clients or more), whose q90
is the search's default margin for a deployment of that class; the embedded table is
reproduced with:
  autocompress validate-estimator --margins-out estimate/margins.json --force

The protocol, the latest figures and the error analysis are in estimate/ACCURACY.md.`,
		Flags: validateEstimatorFlags,
	})
}

func validateEstimatorFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	var g gtFlags
	g.register(fs, 200)
	marginsOut := fs.String("margins-out", "", "write the held-out margins by error class here (JSON) instead of the report")
	force := fs.Bool("force", false, "replace an existing --margins-out")
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		if g.iter < 10 {
			return Usagef("--iter must be ≥ 10")
		}
		if *marginsOut != "" {
			if err := output.Check(*marginsOut, *force); errors.As(err, new(*output.ExistsError)) {
				return err
			} else if err != nil {
				return Usagef("--margins-out %s: %v", *marginsOut, err)
			}
		}
		ps, skipped, err := g.load(env.Stderr)
		if err != nil {
			return err
		}
		if *marginsOut != "" {
			f, err := groundtruth.Margins(ctx, ps, estimate.PriorCoeffs(), g.iter)
			if err != nil {
				return err
			}
			b, err := groundtruth.MarginJSON(f)
			if err != nil {
				return err
			}
			if err := output.WriteFile(*marginsOut, b, *force); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "wrote %s (%d classes)\n", *marginsOut, len(f.Cells))
			return nil
		}
		rep, err := groundtruth.Validate(ctx, ps, estimate.PriorCoeffs(), g.iter)
		if err != nil {
			return err
		}
		rep.Skipped = skipped.String()
		ind, kv, err := independentChecks(ctx)
		if err != nil {
			return err
		}
		cons, err := consumerCheck()
		if err != nil {
			return err
		}
		lb, err := llamaBenchCheck(g.iter)
		if err != nil {
			return err
		}
		moe, err := llamaCPPMoECheck()
		if err != nil {
			return err
		}
		where := groundtruth.WhereMeasured(ps)
		if g.jsonOut {
			return writeJSON(env.Stdout, validationJSON{Report: rep, Measured: where, Independent: ind.json(), Consumer: cons.json(), KVCapacity: kv.json(), LlamaBench: lb.cells, LlamaCPPMoE: moe.cells})
		}
		printValidation(env.Stdout, rep)
		fmt.Fprintf(env.Stdout, "\nWhere and when the rows were measured (every error above is about these GPUs at these dates)\n")
		for _, m := range where {
			when := m.When
			if when == "" {
				when = "dates not recorded"
			}
			fmt.Fprintf(env.Stdout, "%-20s %s; %s\n", m.Family, when, strings.Join(m.GPUs, ", "))
		}
		ind.print(env.Stdout)
		cons.printConsumer(env.Stdout)
		kv.print(env.Stdout)
		lb.print(env.Stdout)
		moe.print(env.Stdout)
		return nil
	}
}

func printValidation(w io.Writer, rep *groundtruth.Report) {
	fmt.Fprintf(w, "Held-out absolute percentage error (%d rows; %s)\n\n", rep.Rows, rep.Skipped)
	fmt.Fprintf(w, "%-20s %-10s %-10s %-7s %5s %8s %8s\n", "engine", "gpu", "metric", "holdout", "n", "median", "p90")
	for _, c := range rep.Cells {
		fmt.Fprintf(w, "%-20s %-10s %-10s %-7s %5d %7.1f%% %7.1f%%\n", c.Family, c.GPU, c.Metric, c.Holdout, c.N, c.Median*100, c.P90*100)
	}
	fmt.Fprintf(w, "\nPooled per engine (GPU and model hold-outs together)\n")
	for _, c := range rep.Pooled {
		fmt.Fprintf(w, "%-20s %-10s %5d %7.1f%% %7.1f%%\n", c.Family, c.Metric, c.N, c.Median*100, c.P90*100)
	}
	fmt.Fprintf(w, "\nOverall\n")
	for _, c := range rep.Overall {
		target := map[groundtruth.Metric]float64{groundtruth.TPOT: rep.Targets.TPOT, groundtruth.TTFT: rep.Targets.TTFT, groundtruth.Throughput: rep.Targets.Throughput}[c.Metric]
		verdict := "meets"
		if c.Median > target {
			verdict = "MISSES"
		}
		fmt.Fprintf(w, "%-10s n=%5d median %5.1f%%  p90 %5.1f%%  target ≤ %.0f%%: %s\n", c.Metric, c.N, c.Median*100, c.P90*100, target*100, verdict)
	}
	fmt.Fprintf(w, "\nBy architecture and clients (held out, both hold-outs; an MoE step streams the experts its batch touches: a wrong expert-traffic term biases MoE rows by client band and not dense ones)\n")
	fmt.Fprintf(w, "%-20s %-10s %-6s %-7s %5s %8s %8s\n", "engine", "metric", "arch", "clients", "n", "median", "bias")
	for _, c := range rep.Batch {
		fmt.Fprintf(w, "%-20s %-10s %-6s %-7s %5d %8s %8s\n", c.Family, c.Metric, c.Arch, c.Band, c.N, pct(c.Median), signedPct(c.Bias))
	}
}

// independent holds the two checks on data that no fit ever sees: the
// published serving tables and the published engine start-up logs (KV
// capacity), both scored with the shipped coefficients.
type independent struct {
	res      []groundtruth.IndependentResult
	sum      groundtruth.IndependentSummary
	settings *settingsCheck
	// gddr is the consumer check's memory-traffic factor, each source
	// held out of its fit in turn.
	gddr []groundtruth.GDDRFit
	// class is the consumer check's W4A16 kernel multiplier per engine
	// and deployment class, each source held out of its fit in turn.
	class []groundtruth.ClassFit
}

type kvCheck struct {
	res []groundtruth.KVResult
	sum groundtruth.KVSummary
}

func independentChecks(ctx context.Context) (*independent, *kvCheck, error) {
	rows, err := groundtruth.IndependentTables()
	if err != nil {
		return nil, nil, fmt.Errorf("independent serving tables: %w", err)
	}
	kvRows, err := groundtruth.PublishedKVCapacity()
	if err != nil {
		return nil, nil, fmt.Errorf("published KV-capacity logs: %w", err)
	}
	ind := &independent{}
	ind.res, ind.sum = groundtruth.ScoreIndependent(rows)
	ind.settings = &settingsCheck{}
	if ind.settings.Defaults, ind.settings.Stated, err = scenarios.Published(ctx, rows); err != nil {
		return nil, nil, fmt.Errorf("independent tables through the scenario CSV: %w", err)
	}
	kv := &kvCheck{}
	kv.res, kv.sum = groundtruth.ScoreKVCapacity(kvRows)
	return ind, kv, nil
}

func (ind *independent) print(w io.Writer) {
	s := &ind.sum
	fmt.Fprintf(w, "\nIndependent published tables, never fitted (%d rows, %d priced; shipped coefficients; sources in estimate/groundtruth/testdata/independent_serving.md)\n", s.Rows, s.Priced)
	fmt.Fprintf(w, "%-8s %-22s %-10s %5s %8s %8s %8s\n", "engine", "source", "metric", "n", "median", "p90", "bias")
	for _, c := range s.Cells {
		fmt.Fprintf(w, "%-8s %-22s %-10s %5d %8s %8s %8s\n", c.Engine, c.Source, c.Metric, c.N, pct(c.Median), pct(c.P90), signedPct(c.Bias))
	}
	if st := ind.settings; st != nil {
		fmt.Fprintf(w, "Max-load rows through estimate --scenarios (output tok/s): settings columns empty (engine defaults) n=%d median %s p90 %s bias %s; "+
			"with the stated kv_dtype and mem_fraction n=%d median %s p90 %s bias %s\n",
			st.Defaults.N, pct(st.Defaults.Median), pct(st.Defaults.P90), signedPct(st.Defaults.Bias),
			st.Stated.N, pct(st.Stated.Median), pct(st.Stated.P90), signedPct(st.Stated.Bias))
	}
}

// consumerCheck scores the published consumer-GPU tables (GeForce RTX)
// with the shipped coefficients: no fit sees them, so each source is held out.
func consumerCheck() (*independent, error) {
	rows, err := groundtruth.ConsumerTables()
	if err != nil {
		return nil, fmt.Errorf("consumer-GPU serving tables: %w", err)
	}
	c := &independent{}
	c.res, c.sum = groundtruth.ScoreIndependent(rows)
	if c.gddr, err = groundtruth.ConsumerHeldOut(estimate.DefaultCoeffs()); err != nil {
		return nil, fmt.Errorf("consumer-GPU memory-traffic factor: %w", err)
	}
	if c.class, err = groundtruth.ConsumerClassFits(); err != nil {
		return nil, fmt.Errorf("consumer-GPU W4A16 kernel multipliers: %w", err)
	}
	return c, nil
}

func (ind *independent) printConsumer(w io.Writer) {
	s := &ind.sum
	fmt.Fprintf(w, "\nConsumer GPUs: published serving measurements (%d rows, %d priced; sources in estimate/groundtruth/testdata/consumer_serving.md)\n", s.Rows, s.Priced)
	for _, fit := range ind.gddr {
		fmt.Fprintf(w, "%s on GeForce: memory traffic × constant ÷ the GPU's llama-bench decode efficiency; constant %.3f fitted on %d rows (16-bit weights); each source held out of the fit that predicts it:\n", fit.Engine, fit.Const, fit.Rows)
		fmt.Fprintf(w, "%-32s %-10s %5s %9s %8s %8s %8s\n", "held-out source", "metric", "n", "constant", "before", "after", "bias")
		for _, f := range fit.Folds {
			for i := range f.Before {
				x, y := f.Before[i], f.After[i]
				fmt.Fprintf(w, "%-32s %-10s %5d %9.3f %8s %8s %8s\n", f.Source, x.Metric, x.N, f.Const, pct(x.Median), pct(y.Median), signedPct(y.Bias))
			}
		}
	}
	for _, fit := range ind.class {
		verdict := "shipped"
		if !fit.Ship {
			verdict = "not shipped: " + fit.Why
		}
		fmt.Fprintf(w, "%s on GeForce, class %s: W4A16 kernel factor (dequant) × %.3f fitted on %d rows of %d source(s); %s", fit.Engine, fit.Class, fit.Factor, fit.Rows, len(fit.Sources), verdict)
		if len(fit.Folds) == 0 {
			fmt.Fprintf(w, "\n")
			continue
		}
		fmt.Fprintf(w, " (held-out TPOT and throughput: median %s before, %s after); each source held out of the fit that predicts it:\n", pct(fit.HeldOutBefore), pct(fit.HeldOutAfter))
		fmt.Fprintf(w, "%-32s %-10s %5s %9s %8s %8s %8s %8s\n", "held-out source", "metric", "n", "×dequant", "before", "bias", "after", "bias")
		for _, f := range fit.Folds {
			for i := range f.Before {
				x, y := f.Before[i], f.After[i]
				fmt.Fprintf(w, "%-32s %-10s %5d %9.3f %8s %8s %8s %8s\n", f.Source, x.Metric, x.N, f.Factor, pct(x.Median), signedPct(x.Bias), pct(y.Median), signedPct(y.Bias))
			}
		}
	}
	fmt.Fprintf(w, "With the shipped coefficients (in-sample for that factor on its 16-bit rows; every other row never fitted):\n")
	fmt.Fprintf(w, "%-8s %-32s %-10s %5s %8s %8s %8s\n", "engine", "source", "metric", "n", "median", "p90", "bias")
	for _, c := range s.Cells {
		fmt.Fprintf(w, "%-8s %-32s %-10s %5d %8s %8s %8s\n", c.Engine, c.Source, c.Metric, c.N, pct(c.Median), pct(c.P90), signedPct(c.Bias))
	}
	fmt.Fprintf(w, "By deployment class (weight format, dense or MoE), every source together:\n")
	for _, c := range s.Classes {
		fmt.Fprintf(w, "%-8s %-32s %-10s %5d %8s %8s %8s\n", "all", "class: "+c.Class, c.Metric, c.N, pct(c.Median), pct(c.P90), signedPct(c.Bias))
	}
	if len(s.Skipped) > 0 {
		fmt.Fprintf(w, "not priced: %s\n", s.Skipped.String())
	}
}

func (kv *kvCheck) print(w io.Writer) {
	s := &kv.sum
	fmt.Fprintf(w, "\nKV capacity against published engine start-up logs (%d rows, %d scored; estimate/groundtruth/testdata/kv_capacity.md)\n", s.Rows, s.Scored)
	fmt.Fprintf(w, "%-8s %-34s %-10s %3s %12s %12s %8s\n", "engine", "model", "gpu", "tp", "reported", "predicted", "error")
	for i := range kv.res {
		r := &kv.res[i]
		if r.Skip != "" {
			continue
		}
		rep, pred, unit := r.Row.ReportedTokens, r.PredTokens, "tok"
		if rep == 0 {
			rep, pred, unit = r.Row.ReportedKVGiB, r.PredKVGiB, "GiB"
		}
		if rep == 0 {
			continue
		}
		note := ""
		if !r.Fits {
			note = "  (estimator: does not fit, " + r.FailTerm + ")"
		}
		fmt.Fprintf(w, "%-8s %-34s %-10s %3d %8.1f %3s %8.1f %3s %8s%s\n", r.Row.Engine, r.Row.Model, r.Row.GPU, r.Row.TP, rep, unit, pred, unit, pct(r.Primary()), note)
	}
	fmt.Fprintf(w, "KV capacity (tokens, else GiB): n=%d median %s p90 %s; current engine builds n=%d median %s; within 5 %%: %d, within 20 %%: %d (target: within 5 %%)\n",
		s.Primary.N, pct(s.Primary.Median), pct(s.Primary.P90), s.Current.N, pct(s.Current.Median), s.Within5, s.Within20)
	fmt.Fprintf(w, "weights: n=%d median %s max %s\n", s.Weights.N, pct(s.Weights.Median), pct(s.Weights.Max))
}

func pct(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", x*100)
}

func signedPct(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", x*100)
}

// validationJSON is validate-estimator's --json document: the held-out
// report plus the two independent checks and the llama-bench hold-out.
type validationJSON struct {
	*groundtruth.Report
	Measured    []groundtruth.Measured       `json:"measured"`
	Independent independentJSON              `json:"independent"`
	Consumer    independentJSON              `json:"consumer_gpus"`
	KVCapacity  kvJSON                       `json:"kv_capacity"`
	LlamaBench  []groundtruth.LlamaBenchCell `json:"llama_bench"`
	LlamaCPPMoE []groundtruth.MoECell        `json:"llamacpp_moe_geforce"`
}

// benchCheck is the llama-bench hold-out: llama.cpp prompt processing and
// decode on GeForce and Apple GPUs, each GPU predicted by the family
// refitted on the others.
type benchCheck struct {
	rows  int
	cells []groundtruth.LlamaBenchCell
}

func llamaBenchCheck(iter int) (*benchCheck, error) {
	rows, err := groundtruth.LlamaBenchTables()
	if err != nil {
		return nil, fmt.Errorf("llama-bench tables: %w", err)
	}
	_, cells, err := groundtruth.ValidateLlamaBench(rows, estimate.PriorCoeffs(), iter)
	if err != nil {
		return nil, err
	}
	return &benchCheck{rows: len(rows), cells: cells}, nil
}

func (b *benchCheck) print(w io.Writer) {
	fmt.Fprintf(w, "\nllama.cpp on GeForce and Apple GPUs: published llama-bench rows (%d; estimate/groundtruth/testdata/llama_bench.md), each GPU held out of the fit that predicts it\n", b.rows)
	fmt.Fprintf(w, "%-15s %-8s %-10s %4s %8s %8s %8s\n", "family", "test", "prediction", "n", "median", "p90", "bias")
	for _, c := range b.cells {
		fmt.Fprintf(w, "%-15s %-8s %-10s %4d %8s %8s %8s\n", c.Family, c.Test, c.Kind, c.N, pct(c.Median), pct(c.P90), signedPct(c.Bias))
	}
	for _, t := range []struct {
		test, name string
		target     float64
	}{{groundtruth.BenchPP, "prompt processing (≤ 1024 tokens)", groundtruth.LlamaBenchTargets.PP}, {groundtruth.BenchTG, "decode", groundtruth.LlamaBenchTargets.TG}} {
		c, err := groundtruth.LlamaBenchCellFor(b.cells, "all", t.test, "held-out")
		if err != nil {
			continue
		}
		verdict := "meets"
		if c.Median > t.target {
			verdict = "MISSES"
		}
		fmt.Fprintf(w, "%s held-out: n=%d median %s (prior %s)  target ≤ %.0f%%: %s\n", t.name, c.N, pct(c.Median), priorMedian(b.cells, t.test), t.target*100, verdict)
	}
	fmt.Fprintf(w, "pp-long (prompts above 1024 tokens, builds without flash attention) is reported, not fitted and not in the target\n")
}

// moeCheck is the llama.cpp MoE check on GeForce: published llama-bench
// rows of MoE models (gpt-oss in MXFP4, Qwen3-30B-A3B), never fitted,
// priced with the shipped coefficients.
type moeCheck struct {
	rows  int
	res   []groundtruth.MoEResult
	cells []groundtruth.MoECell
}

func llamaCPPMoECheck() (*moeCheck, error) {
	rows, err := groundtruth.LlamaCPPMoETables()
	if err != nil {
		return nil, fmt.Errorf("llama.cpp MoE tables: %w", err)
	}
	res, cells, err := groundtruth.ScoreLlamaCPPMoE(rows, estimate.DefaultCoeffs())
	if err != nil {
		return nil, fmt.Errorf("llama.cpp MoE tables: %w", err)
	}
	return &moeCheck{rows: len(rows), res: res, cells: cells}, nil
}

func (m *moeCheck) print(w io.Writer) {
	fmt.Fprintf(w, "\nllama.cpp MoE on GeForce: published llama-bench rows (%d; estimate/groundtruth/testdata/llamacpp_moe.md), never fitted: each source held out, shipped coefficients\n", m.rows)
	fmt.Fprintf(w, "%-20s %-8s %4s %8s %8s %8s\n", "held-out source", "test", "n", "median", "p90", "bias")
	for _, c := range m.cells {
		fmt.Fprintf(w, "%-20s %-8s %4d %8s %8s %8s\n", c.Source, c.Test, c.N, pct(c.Median), pct(c.P90), signedPct(c.Bias))
	}
	fmt.Fprintf(w, "tg: decode from an empty context; pp-step: a 4096-token prompt at ≤ %d tokens per step (-ub: the experts a step's tokens touch); pp-long: larger steps of that prompt (attention not priced, as pp-long above)\n", groundtruth.MoEStepTokens)
	seen := map[string]bool{}
	for _, r := range m.res {
		k := r.Row.Model + " " + r.Row.Precision
		if seen[k] {
			continue
		}
		seen[k] = true
		fmt.Fprintf(w, "%s priced as %s: weights %.2f GiB, a one-token decode step streams %.2f GB\n", r.Row.Model, r.Row.Precision, r.WeightGiB, r.StreamedGB)
	}
}

func priorMedian(cells []groundtruth.LlamaBenchCell, test string) string {
	c, err := groundtruth.LlamaBenchCellFor(cells, "all", test, "prior")
	if err != nil {
		return "—"
	}
	return pct(c.Median)
}

// num is a float that encodes NaN and ±Inf as null (JSON has neither).
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

type independentJSON struct {
	Rows    int                 `json:"rows"`
	Priced  int                 `json:"priced"`
	Skipped map[string]int      `json:"skipped"`
	Cells   []independentCellJS `json:"cells"`
	// Classes are the cells per deployment class (RowClass), every source together.
	Classes []independentCellJS `json:"classes,omitempty"`
	// Scenario is the max-load throughput through the batch CSV, with the
	// settings columns empty and with the stated settings.
	Scenario []independentCellJS `json:"scenario_csv,omitempty"`
}

type independentCellJS struct {
	Engine    string             `json:"engine"`
	Source    string             `json:"source"`
	Metric    groundtruth.Metric `json:"metric"`
	N         int                `json:"n"`
	Median    num                `json:"median_ape"`
	P90       num                `json:"p90_ape"`
	Bias      num                `json:"bias"`
	Unbounded int                `json:"unbounded"`
}

func (ind *independent) json() independentJSON {
	out := independentJSON{Rows: ind.sum.Rows, Priced: ind.sum.Priced, Skipped: ind.sum.Skipped}
	for _, c := range ind.sum.Cells {
		out.Cells = append(out.Cells, independentCellJS{c.Engine, c.Source, c.Metric, c.N, num(c.Median), num(c.P90), num(c.Bias), c.Unbounded})
	}
	for _, c := range ind.sum.Classes {
		out.Classes = append(out.Classes, independentCellJS{"all", "class: " + c.Class, c.Metric, c.N, num(c.Median), num(c.P90), num(c.Bias), c.Unbounded})
	}
	if st := ind.settings; st != nil {
		for _, c := range []struct {
			src  string
			cell groundtruth.IndependentCell
		}{{"scenario-csv-defaults", st.Defaults}, {"scenario-csv-stated", st.Stated}} {
			out.Scenario = append(out.Scenario, independentCellJS{"all", c.src, c.cell.Metric, c.cell.N, num(c.cell.Median), num(c.cell.P90), num(c.cell.Bias), c.cell.Unbounded})
		}
	}
	return out
}

type kvJSON struct {
	Rows     int         `json:"rows"`
	Scored   int         `json:"scored"`
	Median   num         `json:"median_ape"`
	P90      num         `json:"p90_ape"`
	Current  num         `json:"current_builds_median_ape"`
	Within5  int         `json:"within_5pct"`
	Within20 int         `json:"within_20pct"`
	Results  []kvRowJSON `json:"results"`
}

type kvRowJSON struct {
	Engine         string `json:"engine"`
	EngineVersion  string `json:"engine_version"`
	Era            string `json:"era,omitempty"`
	Model          string `json:"model"`
	GPU            string `json:"gpu"`
	TP             int    `json:"tp"`
	ReportedTokens num    `json:"reported_tokens"`
	PredTokens     num    `json:"predicted_tokens"`
	ReportedKVGiB  num    `json:"reported_kv_gib"`
	PredKVGiB      num    `json:"predicted_kv_gib"`
	APE            num    `json:"ape"`
	Fits           bool   `json:"fits"`
	Skip           string `json:"skip,omitempty"`
}

func (kv *kvCheck) json() kvJSON {
	s := &kv.sum
	out := kvJSON{Rows: s.Rows, Scored: s.Scored, Median: num(s.Primary.Median), P90: num(s.Primary.P90), Current: num(s.Current.Median),
		Within5: s.Within5, Within20: s.Within20}
	for i := range kv.res {
		r := &kv.res[i]
		out.Results = append(out.Results, kvRowJSON{string(r.Row.Engine), r.Row.EngineVersion, r.Row.Era, r.Row.Model, r.Row.GPU, r.Row.TP, num(r.Row.ReportedTokens), num(r.PredTokens),
			num(r.Row.ReportedKVGiB), num(r.PredKVGiB), num(r.Primary()), r.Fits, r.Skip})
	}
	return out
}

// settingsCheck re-scores the max-load rows of the independent tables
// through the batch-mode scenario CSV twice: once with the settings columns
// empty (the engine's defaults) and once with the KV cache type and memory
// fraction the publication states, so the table shows what the columns buy.
type settingsCheck struct {
	Defaults, Stated groundtruth.IndependentCell
}
