// Command headtohead runs the pipeline for both search strategies
// (autocompress and minitron) on the same parent, budgets, distillation data,
// schedule and token count, for three CPU deployments whose binding budgets
// differ, and several recovery seeds, and prints one Markdown table from the
// runs' report.json files.
//
//	go build -o autocompress ./cmd/autocompress
//	go run ./scripts/headtohead -bin ./autocompress -dir /tmp/h2h [-seeds 1,2] [-tokens 200000]
//
// Each run keeps its directory, so an interrupted benchmark resumes where it
// stopped (finished stages are reused).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/autocompress/autocompress/pipeline"
	"github.com/autocompress/autocompress/report"
)

// deployment is one CPU target and its budgets.
type deployment struct {
	name    string
	w       pipeline.Workload
	budgets pipeline.Budgets
}

var deployments = []deployment{
	{"latency: single stream", pipeline.Workload{ISL: 128, OSL: 64, Concurrency: 1}, pipeline.Budgets{MaxTPOT: "2.2ms"}},
	{"memory: long context", pipeline.Workload{ISL: 384, OSL: 64, Concurrency: 8}, pipeline.Budgets{MaxMemory: "58MiB"}},
	{"throughput: batch", pipeline.Workload{ISL: 64, OSL: 64, Concurrency: 16}, pipeline.Budgets{MinThroughput: "1500tok/s"}},
}

func main() {
	bin := flag.String("bin", "", "the autocompress binary (the measure stage runs its bench-serve)")
	dir := flag.String("dir", "h2h", "directory of the runs")
	seeds := flag.String("seeds", "1,2", "recovery seeds")
	tokens := flag.Int64("tokens", 200_000, "distillation tokens of every run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *bin, *dir, *seeds, *tokens); err != nil {
		fmt.Fprintln(os.Stderr, "headtohead:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, bin, dir, seedList string, tokens int64) error {
	var seeds []int64
	for _, s := range strings.Split(seedList, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("-seeds %q: %w", seedList, err)
		}
		seeds = append(seeds, v)
	}
	start := time.Now()
	fmt.Println("| deployment | strategy | seed | chosen shape | params | budget: limit, estimated, measured | selection tokens | held-out ppl | in-domain choice acc | cloze acc |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for di, d := range deployments {
		for _, strategy := range []string{"autocompress", "minitron"} {
			for _, seed := range seeds {
				c := pipeline.DemoConfig()
				c.Dir = filepath.Join(dir, fmt.Sprintf("d%d-%s-s%d", di+1, strategy, seed))
				c.Workload, c.Budgets = d.w, d.budgets
				c.Search.Strategy = strategy
				c.Distill.Tokens, c.Distill.Seed = tokens, seed
				t0 := time.Now()
				res, err := pipeline.Execute(ctx, c, bin, pipeline.Options{})
				if err != nil {
					fmt.Printf("| %s | %s | %d | failed: %s | | | | | | |\n", d.name, strategy, seed, oneLine(err.Error()))
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
				fmt.Fprintf(os.Stderr, "%s %s seed %d: %s\n", d.name, strategy, seed, time.Since(t0).Round(time.Second))
			}
		}
	}
	fmt.Fprintf(os.Stderr, "all runs: %s\n", time.Since(start).Round(time.Second))
	return nil
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
			meas = report.FormatNumber(*x.Measured)
			if !x.Met(*x.Measured) {
				meas += " (missed)"
			}
			if x.Disagrees(report.Tolerance) {
				meas += " ⚑"
			}
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
