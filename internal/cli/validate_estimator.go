package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/groundtruth"
)

func init() {
	Register(&Command{
		Name:  "validate-estimator",
		Usage: "[--data DIR] [--user FILE.csv] [--iter N] [--json]",
		Short: "report the estimator's error on held-out GPUs and models",
		Long: `Validate-estimator refits the coefficients with each GPU held out in turn
(leave-one-GPU-out) and with each model held out in turn (leave-one-model-out), per engine
family, and prints the median and p90 absolute percentage error of TPOT, TTFT and
throughput on the held-out rows only, per engine and GPU, then pooled per engine and
overall, against the targets (median APE ≤ 8 % TPOT, ≤ 15 % TTFT, ≤ 10 % throughput).

Throughput of the AIConfigurator rows is derived from their TTFT and TPOT
(concurrency × osl ÷ E2E); Argonne's throughput is measured. No public file here records
the KV capacity an engine reports, so KV capacity is not validated; memory rules are
checked against the documented numbers in the estimate package tests.

The protocol, the latest figures and the error analysis are in estimate/ACCURACY.md.`,
		Flags: validateEstimatorFlags,
	})
}

func validateEstimatorFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	var g gtFlags
	g.register(fs, 1200)
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		if g.iter < 10 {
			return Usagef("--iter must be ≥ 10")
		}
		ps, skipped, err := g.load(env.Stderr)
		if err != nil {
			return err
		}
		rep, err := groundtruth.Validate(ctx, ps, estimate.PriorCoeffs(), g.iter)
		if err != nil {
			return err
		}
		rep.Skipped = skipped.String()
		if g.jsonOut {
			return writeJSON(env.Stdout, rep)
		}
		printValidation(env.Stdout, rep)
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
	fmt.Fprintf(w, "\nKV capacity: none of the measurement files records the KV capacity an engine reported, so it is not validated here\n")
	fmt.Fprintf(w, "(the memory rules are checked against costmodel.md's documented numbers in the estimate package tests).\n")
}
