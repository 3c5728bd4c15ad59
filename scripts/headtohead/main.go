// Command headtohead runs the pipeline for both search strategies
// (autocompress and minitron) on the same parent, budgets, distillation data,
// schedule and token count, for three CPU deployments whose binding budgets
// differ, and several recovery seeds, and prints one Markdown table from the
// runs' report.json files.
//
//	go build -o autocompress ./cmd/autocompress
//	go run ./scripts/headtohead -bin ./autocompress -dir /tmp/h2h [-seeds 1,2] [-tokens 200000]
//	go run ./scripts/headtohead -bin ./autocompress -dir /tmp/h2h-moe -config scripts/moe/pipeline.yaml -model MOE_DIR
//
// With -config the benchmark has one deployment, the config's own (its
// parent, data, workload, budgets and every stage's settings), and each
// run changes only the strategy and the seeds; -tokens, when given,
// overrides the config's distillation tokens.
//
// Each run keeps its directory, so an interrupted benchmark resumes where it
// stopped (finished stages are reused). The runs of a later recovery seed
// start from the first seed's importance, search and prune stages (copied,
// then checked by the pipeline's manifests like any reused stage), so every
// seed of a deployment and strategy recovers the same child and the spread
// over seeds is the recovery's alone. (Minitron++'s brief training of its
// top-k is seeded by the distillation seed, so its search reruns per seed.)
//
// Each measured cell is the conservative figure, the worst of the measure
// stage's separate bench-serve invocations (pipeline measure.invocations),
// with their range in brackets; "unstable" marks a figure whose invocations
// spread more than 10 %, ⚑ one whose estimate differs from it by more than
// 10 %. A budget is met only when the conservative figure meets it.
//
// After the per-run table it prints one line per deployment and strategy:
// the mean held-out perplexity with its range over the seeds, and whether
// every seed's child met every budget when measured.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/pipeline"
	"github.com/autocompress/autocompress/report"
)

// deployment is one CPU target and its budgets.
type deployment struct {
	// n is the deployment's place in the full list (1, 2, 3): its runs
	// are d<n>-STRATEGY-s<seed>, whichever deployments run.
	n       int
	name    string
	w       pipeline.Workload
	budgets pipeline.Budgets
}

// The budgets are relative to the parent measured on the machine that runs
// the benchmark (the search stage measures it first), so that they mean
// the same on every host: TPOT ≤ 0.6 × the parent's, memory ≤ 0.8 ×,
// throughput ≥ 1.5 ×.
var deployments = []deployment{
	{1, "latency: single stream", pipeline.Workload{ISL: 128, OSL: 64, Concurrency: 1}, pipeline.Budgets{MaxTPOT: "0.6x"}},
	{2, "memory: long context", pipeline.Workload{ISL: 384, OSL: 64, Concurrency: 8}, pipeline.Budgets{MaxMemory: "0.8x"}},
	{3, "throughput: batch", pipeline.Workload{ISL: 64, OSL: 64, Concurrency: 16}, pipeline.Budgets{MinThroughput: "1.5x"}},
}

func main() {
	bin := flag.String("bin", "", "the autocompress binary (the measure stage runs its bench-serve)")
	dir := flag.String("dir", "h2h", "directory of the runs")
	seeds := flag.String("seeds", "1,2", "recovery seeds")
	tokens := flag.Int64("tokens", 200_000, "distillation tokens of every run")
	config := flag.String("config", "", "a pipeline config whose deployment, parent and settings replace the three CPU deployments")
	model := flag.String("model", "", "the parent checkpoint (required with -config)")
	only := flag.String("only", "", "run only the deployments whose names start with these comma-separated prefixes (latency, memory, throughput)")
	flag.Parse()
	tokensSet := false
	flag.Visit(func(f *flag.Flag) { tokensSet = tokensSet || f.Name == "tokens" })
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	base, deps := pipeline.DemoConfig(), deployments
	if *config != "" {
		c, err := configDeployment(*config, *model, tokensSet, *tokens)
		if err != nil {
			fmt.Fprintln(os.Stderr, "headtohead:", err)
			os.Exit(2)
		}
		base, deps = c, []deployment{{1, "config " + filepath.Base(*config), c.Workload, c.Budgets}}
		*tokens = c.Distill.Tokens
	}
	deps, err := selectDeployments(deps, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "headtohead:", err)
		os.Exit(2)
	}
	if err := run(ctx, base, deps, *bin, *dir, *seeds, *tokens); err != nil {
		fmt.Fprintln(os.Stderr, "headtohead:", err)
		os.Exit(1)
	}
}

// selectDeployments keeps the deployments whose names start with one of
// the comma-separated prefixes of only (all of them when only is empty).
// Their run directories keep their place in the full list (d1, d2, d3), so
// a partial rerun lands where the full benchmark's runs of those
// deployments do.
func selectDeployments(deps []deployment, only string) ([]deployment, error) {
	if strings.TrimSpace(only) == "" {
		return deps, nil
	}
	var out []deployment
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		found := false
		for _, d := range deps {
			if p != "" && strings.HasPrefix(d.name, p) {
				out = append(out, d)
				found = true
			}
		}
		if !found {
			var names []string
			for _, d := range deps {
				names = append(names, d.name)
			}
			return nil, fmt.Errorf("-only %q: no deployment's name starts with %q (they are: %s)", only, p, strings.Join(names, "; "))
		}
	}
	return out, nil
}

// configDeployment is the base config of a benchmark on one config's
// deployment: the config read from path, with model as its parent when
// and tokens as its distillation tokens when set.
func configDeployment(path, model string, tokensSet bool, tokens int64) (pipeline.Config, error) {
	if model == "" {
		// A config without model: runs the embedded parent, which is
		// never what a benchmark of a config's own parent means.
		return pipeline.Config{}, fmt.Errorf("with -config %s, give the parent checkpoint with -model", path)
	}
	c, err := pipeline.LoadConfig(path)
	if err != nil {
		return c, err
	}
	c.Model = model
	if tokensSet {
		c.Distill.Tokens = tokens
	}
	return c, nil
}

func run(ctx context.Context, base pipeline.Config, deps []deployment, bin, dir, seedList string, tokens int64) error {
	var seeds []int64
	for _, s := range strings.Split(seedList, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("-seeds %q: %w", seedList, err)
		}
		seeds = append(seeds, v)
	}
	start := time.Now()
	type key struct{ dep, strategy string }
	var order []key
	ppls := map[key][]float64{}
	met := map[key]bool{}
	fmt.Println("| deployment | strategy | seed | chosen shape | params | budget: limit, estimated / measured (worst invocation, range) | selection tokens | held-out ppl | in-domain choice acc | cloze acc |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, d := range deps {
		for _, strategy := range []string{"autocompress", "minitron"} {
			for _, seed := range seeds {
				c := base
				c.Dir = filepath.Join(dir, fmt.Sprintf("d%d-%s-s%d", d.n, strategy, seed))
				c.Workload, c.Budgets = d.w, d.budgets
				c.Search.Strategy = strategy
				c.Distill.Tokens, c.Distill.Seed = tokens, seed
				if seed != seeds[0] {
					first := filepath.Join(dir, fmt.Sprintf("d%d-%s-s%d", d.n, strategy, seeds[0]))
					if err := seedFrom(first, c.Dir, []string{"importance", "search", "prune"}); err != nil {
						// The first seed failed before prune: this seed runs every stage itself.
						fmt.Fprintf(os.Stderr, "headtohead: %v; running every stage\n", err)
					}
				}
				k := key{d.name, strategy}
				if _, ok := met[k]; !ok {
					order = append(order, k)
					met[k] = true
				}
				t0 := time.Now()
				res, err := pipeline.Execute(ctx, c, bin, pipeline.Options{})
				if err != nil {
					fmt.Printf("| %s | %s | %d | failed: %s | | | | | | |\n", d.name, strategy, seed, oneLine(err.Error()))
					met[k] = false
					if ctx.Err() != nil {
						return ctx.Err()
					}
					continue
				}
				path, err := pipeline.ReportPath(res)
				if err != nil {
					return err
				}
				f, err := os.Open(filepath.Join(filepath.Dir(path), pipeline.ReportJSON))
				if err != nil {
					return err
				}
				r, err := report.ReadJSON(f)
				f.Close()
				if err != nil {
					return err
				}
				fmt.Println(row(d.name, strategy, seed, r))
				if p, ok := heldOutPPL(r); ok {
					ppls[k] = append(ppls[k], p)
				}
				met[k] = met[k] && allMet(r)
				fmt.Fprintf(os.Stderr, "%s %s seed %d: %s\n", d.name, strategy, seed, time.Since(t0).Round(time.Second))
			}
		}
	}
	fmt.Println()
	fmt.Println("| deployment | strategy | seeds | held-out ppl, mean (min–max) | every budget met when measured |")
	fmt.Println("|---|---|---|---|---|")
	for _, k := range order {
		p := ppls[k]
		cell := "—"
		if len(p) > 0 {
			lo, hi, sum := p[0], p[0], 0.0
			for _, v := range p {
				lo, hi, sum = math.Min(lo, v), math.Max(hi, v), sum+v
			}
			cell = fmt.Sprintf("%s (%s–%s)", report.FormatNumber(sum/float64(len(p))), report.FormatNumber(lo), report.FormatNumber(hi))
		}
		yes := "no"
		if met[k] {
			yes = "yes"
		}
		fmt.Printf("| %s | %s | %d | %s | %s |\n", k.dep, k.strategy, len(p), cell, yes)
	}
	fmt.Fprintf(os.Stderr, "all runs: %s\n", time.Since(start).Round(time.Second))
	return nil
}

// heldOutPPL is the child's held-out perplexity in r.
func heldOutPPL(r *report.Data) (float64, bool) {
	for _, e := range r.Eval.Rows {
		if e.Task == "held-out text" && e.Metric == "perplexity" && len(e.Values) >= 2 {
			return e.Values[1].Value, true
		}
	}
	return 0, false
}

// allMet reports whether every budget of r was measured and met by its
// conservative figure (the worst of the invocations).
func allMet(r *report.Data) bool {
	for _, x := range r.Budgets {
		if x.Measured == nil || !x.Met(*x.Measured) {
			return false
		}
	}
	return true
}

// seedFrom makes dst a run directory holding src's stages of the given
// names (its NN-name folders), unless dst exists already (a resumed
// benchmark). The pipeline then reuses them where their manifests match.
func seedFrom(src, dst string, stages []string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	out, err := output.NewDir(dst, false)
	if err != nil {
		return err
	}
	defer out.Abort()
	for _, name := range stages {
		ms, err := filepath.Glob(filepath.Join(src, "[0-9][0-9]-"+name))
		if err != nil || len(ms) != 1 {
			return fmt.Errorf("seeding %s: no stage %q in %s (run the first seed first)", dst, name, src)
		}
		if err := copyTree(ms[0], filepath.Join(out.Path(), filepath.Base(ms[0]))); err != nil {
			return fmt.Errorf("seeding %s: %w", dst, err)
		}
	}
	return out.Commit()
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o777)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.Create(to) //output:inside
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, in); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// measuredCell is a budget's measured figure: the conservative one (the
// worst invocation), with the range over the invocations where there were
// several, "(missed)" when the conservative figure misses the budget,
// "unstable" when the invocations spread more than 10 % and ⚑ when estimate
// and measurement differ by more than 10 %.
func measuredCell(x report.Budget) string {
	s := report.FormatNumber(*x.Measured)
	if x.HasRange() {
		s += fmt.Sprintf(" (%s–%s over %d)", report.FormatNumber(*x.MeasuredMin), report.FormatNumber(*x.MeasuredMax), x.Invocations)
	}
	if !x.Met(*x.Measured) {
		s += " (missed)"
	}
	if x.Unstable(report.Tolerance) {
		s += " unstable"
	}
	if x.Disagrees(report.Tolerance) {
		s += " ⚑"
	}
	return s
}

func oneLine(s string) string { return strings.ReplaceAll(s, "|", "/") }

func row(dep, strategy string, seed int64, r *report.Data) string {
	var b []string
	for _, x := range r.Budgets {
		est, meas := "—", "—"
		if x.Estimated != nil {
			est = report.FormatNumber(*x.Estimated)
		}
		if x.Measured != nil {
			meas = measuredCell(x)
		}
		b = append(b, fmt.Sprintf("%s %s %s: %s / %s", x.Name, report.FormatNumber(x.Limit), x.Unit, est, meas))
	}
	shape := r.Summary
	desc := ""
	for _, s := range shape {
		if strings.HasPrefix(s, "cut:") {
			desc = strings.TrimPrefix(s, "cut: ")
		}
	}
	if desc == "" {
		desc = fmt.Sprintf("%d layers", len(r.Child.Layers))
	}
	if u := r.Deployment.MeasuredUnder; u != "" {
		desc += "; measured under " + u
	} else if s := r.Deployment.Settings; s != "" {
		desc += "; " + s
	}
	ppl, choice, cloze := "—", "—", "—"
	for _, e := range r.Eval.Rows {
		if len(e.Values) < 2 {
			continue
		}
		v := e.Values[1]
		cell := report.FormatNumber(v.Value)
		if v.StdErr > 0 && !math.IsNaN(v.StdErr) {
			cell += " ± " + report.FormatNumber(v.StdErr)
		}
		switch {
		case e.Task == "held-out text" && e.Metric == "perplexity":
			ppl = cell
		case strings.HasSuffix(e.Task, "choice") && e.Metric == "acc":
			choice = cell
		case strings.HasSuffix(e.Task, "cloze") && e.Metric == "acc":
			cloze = cell
		}
	}
	return fmt.Sprintf("| %s | %s | %d | %s | %s | %s | %d | %s | %s | %s |", dep, strategy, seed, oneLine(desc),
		report.FormatNumber(float64(r.Child.Params)), strings.Join(b, "; "), r.Tokens.Selection, ppl, choice, cloze)
}
