package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/groundtruth"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/shareddata"
)

func init() {
	Register(&Command{
		Name:  "calibrate",
		Usage: "[--groundtruth DIR] [--user FILE.csv] [--iter N] [--out estimate/coefficients.json [--force]] [--json]",
		Short: "fit the estimator's coefficients to serving measurements",
		Long: `Calibrate fits the step-time coefficients of each engine family (vllm, sglang, trtllm;
"@2024" families for the 2024 Argonne builds, llamacpp-cuda@2024 among them; llamacpp-cuda
and llamacpp-metal keep the costmodel.md §5.4 decode priors of priors.json, and their prompt
GEMM terms are fitted on the embedded llama-bench tables unless --user rows cover them) by
deterministic Nelder-Mead
on log-coefficients, minimising the mean squared log error of TPOT, TTFT and throughput.
It then runs the leave-one-GPU-out and leave-one-model-out validation and stores the
held-out median errors next to the coefficients.

--groundtruth is the folder with aiconfigurator_silicon_sample.csv, argonne_all_results.csv and
argonne_fig22_all_results_TTFT_ITL.csv (default: ../shared/data/groundtruth).
--user adds your own measurements, a CSV with the header
  engine,gpu,model,precision,kv_dtype,tp,isl,osl,concurrency,ttft_ms,tpot_ms,output_tok_s
(closed-loop runs at fixed lengths; metric columns may be empty, at least one set).
model is a published id, or a config.json path or checkpoint directory (a relative
path from the working directory or from the CSV's folder): a pruned child is fitted as
itself.

Reproduce the embedded coefficients with:
  autocompress calibrate --out estimate/coefficients.json`,
		Flags: calibrateFlags,
	})
}

type gtFlags struct {
	data, user string
	iter       int
	jsonOut    bool
	userOnly   bool
}

func (g *gtFlags) register(fs *flag.FlagSet, iter int) {
	fs.StringVar(&g.data, "groundtruth", "", "ground-truth `folder` (default ../shared/data/groundtruth)")
	fs.StringVar(&g.user, "user", "", "your own measurements (CSV, see help)")
	intVar(fs, &g.iter, "iter", iter, 1, maxCount, "Nelder-Mead iterations per fit")
	fs.BoolVar(&g.jsonOut, "json", false, "print JSON")
	fs.BoolVar(&g.userOnly, "user-only", false, "use only --user, not the public ground truth")
}

// load reads and prepares the measurement rows.
func (g *gtFlags) load(stderr io.Writer) ([]*groundtruth.Prepared, groundtruth.Skipped, error) {
	if g.userOnly && g.user == "" {
		return nil, nil, Usagef("--user-only needs --user FILE.csv")
	}
	dir := g.data
	if g.userOnly {
		dir = ""
	} else if dir == "" {
		d, ok := shareddata.Dir()
		if !ok && g.user == "" {
			return nil, nil, Usagef("no ground-truth folder: pass --groundtruth DIR (the folder with aiconfigurator_silicon_sample.csv) or --user FILE.csv")
		}
		dir = filepath.Join(d, "groundtruth")
	}
	ps, skipped, err := groundtruth.Load(dir, g.data != "", g.user)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(stderr, "%d measurement rows usable; %s\n", len(ps), skipped)
	return ps, skipped, nil
}

func calibrateFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	var g gtFlags
	g.register(fs, 400)
	out := fs.String("out", "", "write the coefficient JSON here (e.g. estimate/coefficients.json)")
	force := fs.Bool("force", false, "replace an existing --out")
	noVal := fs.Bool("no-validate", false, "skip the hold-out validation (faster; no error bands)")
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		if g.iter < 10 {
			return Usagef("--iter must be ≥ 10")
		}
		if *out != "" {
			if err := output.Check(*out, *force); err != nil {
				return err // before the fit, not after it
			}
		}
		ps, _, err := g.load(env.Stderr)
		if err != nil {
			return err
		}
		cf, err := groundtruth.Calibrate(ctx, ps, estimate.PriorCoeffs(), g.iter, !*noVal)
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(cf, "", "  ")
		if err != nil {
			return err
		}
		data = append(data, '\n')
		if _, err := estimate.ParseCoeffs(data); err != nil {
			return fmt.Errorf("fitted coefficients are invalid: %w", err)
		}
		if *out != "" {
			if err := output.WriteFile(*out, data, *force); err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "wrote %s\n", *out)
		}
		if g.jsonOut {
			_, err := env.Stdout.Write(data)
			return err
		}
		printCoeffs(env.Stdout, cf)
		return nil
	}
}

func printCoeffs(w io.Writer, cf *estimate.CoeffFile) {
	names := make([]string, 0, len(cf.Families))
	for n := range cf.Families {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%-20s %6s %6s %6s %6s %8s %8s %8s %8s %8s %6s %5s  %s\n", "family", "comp", "weight", "kv", "tp",
		"layer_us", "step_us", "req_us", "moe_us", "alpha0ms", "queue", "rows", "held-out median APE tpot/ttft/thr")
	for _, n := range names {
		c := cf.Families[n]
		fmt.Fprintf(w, "%-20s %6.2f %6.2f %6.2f %6.2f %8.1f %8.1f %8.2f %8.1f %8.1f %6.2f %5d  %s / %s / %s\n", n,
			c.Comp, c.Weight, c.KV, c.TP, c.Layer*1e6, c.Step*1e6, c.Req*1e6, c.MoE*1e6, c.Alpha0*1e3, c.Queue, c.Rows,
			band(c.ErrTPOT), band(c.ErrTTFT), band(c.ErrThroughput))
	}
}
