package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/modelref"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/search/trained"
	"github.com/autocompress/autocompress/workload"
)

func init() {
	Register(&Command{
		Name: "search",
		Usage: "--model DIR|preset|parent --gpu NAME --engine NAME [--workload W | --isl/--osl/--concurrency/--rate] " +
			"[--max-memory 13.96GiB] [--max-e2e 11.5s] [--max-ttft 500ms] [--max-tpot 40ms] [--p90] [--min-throughput 2000tok/s] " +
			"[--max-params 3B] [--max-active-params ..] [--strategy autocompress|minitron] [--topk-train-tokens N] [--serve-on E] [--keep-layers 0,31] --out DIR [--json]",
		Short: "choose the pruned child's shape and engine settings that meet a deployment's budgets",
		Long: `Search prices candidate children of the parent with the estimator on one deployment
(--gpu, --engine, --precision, --tp, the workload) and returns the one that meets every
budget and keeps the most of the parent by the quality proxy: the retained share of
its importance scores (--importance), or, without scores, a documented structural
prior (said in the output). With --data (calibration text or token ids), candidates
too close to call (autocompress) or the whole top-k (minitron) are re-ranked by a
measured proxy: the KL divergence to the parent of the child pruned in memory,
without training (autocompress), or the held-out loss of each top-k candidate after a
brief distillation from the parent on further --data rows (minitron, Minitron++:
--topk-train-tokens per candidate; 0 ranks by the loss untrained). The tokens spent
choosing the architecture are reported.

Budgets take units: memory GiB/GB/MiB (the engine's whole footprint on one GPU at the
workload's context and concurrency), latency us/ms/s/min (on the mean; on the p90
with --p90), throughput tok/s or req/s, parameters K/M/B.

--margin allows for the estimator's error: the child's estimate × (1 + margin) must
stay within each ceiling (throughput: estimate ÷ (1 + margin) at or above the floor).
The default, auto, fits the estimator's held-out error for the deployment (native on
cpu-local: the calibration's median error per metric; the other engines: the q90 of the
held-out shortfall of the deployment's error class — engine, GPU class, metric, workload
regime — from estimate/margins.json, pooled where the class has too few rows; E2E
weighted by the parent's TTFT share; no memory margin); q50, q80 or q90 asks for another
share of the held-out rows covered; one value (10%, 0.1; 0 disables) or per cost
(tpot=15%,memory=5%) overrides it. The summary says the margins used and where they
come from.

The space: hidden size and query heads (global), per layer the MLP width, KV groups
and removed attention/MLP sub-blocks where the --serve-on engine loads per-layer
shapes (DeciLM block_configs, Llama-family parents), whole layers removed (never the
--keep-layers), widths aligned for the target's kernels, head_dim unchanged, KV groups
divisible by --tp; the precisions (--precision a,b) and KV types (--kv-dtype a,b)
listed, and the engine settings left free (vLLM/SGLang/TRT-LLM memory fraction under a
memory budget, llama.cpp slots). MoE experts are kept whole.

Strategies: autocompress (global × per-layer: a Lagrangian relaxation over per-layer
menus and local search on the estimator's true cost) and minitron (Minitron++: the same
widths in every layer, all layers kept, Minitron's grid).

--out receives plan.json (for "autocompress prune --plan"), config.json of the child
(for "autocompress estimate --model DIR/config.json"), serving.json (settings and the
serving command), pareto.csv, topk.csv, summary.txt and summary.json. It is written
atomically and an existing directory is refused without --force.

Exit status: 0 found, 1 no candidate meets the budgets (the error names the binding
budget, the best value reachable and what would make it feasible), 2 bad input.`,
		Flags: searchFlags,
	})
}

// searchBudgetFlags are the budget flags, parsed with units after flag parsing.
type searchBudgetFlags struct {
	memory, e2e, ttft, tpot, throughput, params, active string
	p90                                                 bool
}

// searchWorkloadFlags registers the workload and deployment flags (one
// function, so a shared workload flag group can replace it).
func searchWorkloadFlags(fs *flag.FlagSet, f *estFlags) {
	f.wl = workloadFlags{DefaultPreset: estDefaultWorkload}
	f.wl.Register(fs)
	intVar(fs, &f.maxSeqs, "max-num-seqs", 0, 1, maxClients, "fix the engine sequence limit / llamacpp slots (default: searched for llamacpp, the engine's for the others)")
	intVar(fs, &f.maxBatched, "max-batched-tokens", 0, 1, maxTokens, "per-step token budget (default: the engine's)")
	floatVar(fs, &f.memFraction, "mem-fraction", 0, fraction, "fix the memory fraction (default: searched under --max-memory, else the engine's)")
}

func searchFlags(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
	f := &estFlags{}
	var b searchBudgetFlags
	var data fileList
	fs.StringVar(&f.model, "model", "", "parent: a checkpoint directory, a config.json, a preset name or \"parent\"")
	fs.StringVar(&f.gpu, "gpu", "", "GPU name (or cpu-local for this CPU)")
	fs.StringVar(&f.gpuFile, "gpu-file", "", "YAML or JSON file adding devices to the catalog")
	fs.StringVar(&f.engine, "engine", "", "serving engine priced: "+strings.Join(estimate.Engines(), ", "))
	fs.StringVar(&f.precision, "precision", "", "weight precision, or a comma-separated list to search (default: the engine's)")
	fs.StringVar(&f.kvDType, "kv-dtype", "", "KV cache type, or a comma-separated list to search (default: auto)")
	intVar(fs, &f.tp, "tp", 1, 1, maxGPUs, "tensor-parallel degree")
	searchWorkloadFlags(fs, f)
	fs.StringVar(&b.memory, "max-memory", "", "memory budget per GPU, e.g. 13.96GiB")
	fs.StringVar(&b.e2e, "max-e2e", "", "end-to-end latency budget, e.g. 11.5s")
	fs.StringVar(&b.ttft, "max-ttft", "", "time-to-first-token budget, e.g. 500ms")
	fs.StringVar(&b.tpot, "max-tpot", "", "time-per-output-token budget, e.g. 40ms")
	fs.BoolVar(&b.p90, "p90", false, "latency budgets apply to the p90 instead of the mean")
	margin := fs.String("margin", search.MarginAuto, "allowance for the estimator's error: auto (GPU engines: the q90 of the held-out shortfall of the deployment's class; native: its calibrated held-out error), q50/q80/q90 (another quantile), a fraction or percentage for every cost (0 disables), or per cost, e.g. tpot=15%,memory=5%")
	fs.StringVar(&b.throughput, "min-throughput", "", "throughput floor, e.g. 2000tok/s or 3req/s")
	fs.StringVar(&b.params, "max-params", "", "parameter budget, e.g. 3B")
	fs.StringVar(&b.active, "max-active-params", "", "active-parameter budget (MoE), e.g. 3B")
	importancePath := fs.String("importance", "", "importance scores (.safetensors) of the parent; default: a structural prior")
	expertPath := fs.String("expert-scores", "", "expert scores (.safetensors, prune/PLAN.md#experts: REAP, routing frequency or structural) ranking an MoE parent's routed experts; default: the structural prior of --model's weights")
	strategy := fs.String("strategy", search.AutoCompress, "search strategy: autocompress or minitron")
	serveOn := fs.String("serve-on", "", "engine the child must load in: "+strings.Join(export.Engines(), ", ")+" (default: --engine)")
	keep := fs.String("keep-layers", "", "comma-separated parent layers never removed (autocompress)")
	topK := intArg(fs, "top-k", 10, 1, maxCount, "candidates kept (and measured, for minitron)")
	fs.Var(&data, "data", "calibration `files` for the measured proxy (text, token ids, or parent:SPLIT)")
	ids := fs.Bool("ids", false, "the --data files hold token ids")
	tokPath := fs.String("tokenizer", "", "tokenizer.json for --data (default: the model's)")
	rows := intArg(fs, "rows", 16, 1, maxCount, "held-out rows for the measured proxy")
	seqLen := intArg(fs, "seq-len", 128, 1, maxTokens, "tokens per measured row")
	allowLong := fs.Bool("allow-long-context", false, "allow the workload's context (and --seq-len) past the model's max_position_embeddings")
	topKTrain := intArg(fs, "topk-train-tokens", trained.DefaultTokens, 0, maxTrainTokens, "minitron with --data: distillation tokens each top-k candidate is trained on before the best held-out loss is chosen, on --data rows after the held-out --rows (0: rank by the loss untrained)")
	out := fs.String("out", "", "output `directory`")
	force := fs.Bool("force", false, "replace an existing --out")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	fs.BoolVar(&f.offline, offlineFlag, false, offlineHelp)
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments: %s", strings.Join(args, " "))
		}
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		switch {
		case f.model == "":
			return Usagef("--model is required (a checkpoint directory, a config.json, a preset or %q)", ParentModel)
		case f.gpu == "" || f.engine == "":
			return Usagef("--gpu and --engine are required")
		case *out == "":
			return Usagef("--out is required")
		case f.tp < 1:
			return Usagef("--tp must be ≥ 1, got %d", f.tp)
		case *topK < 1:
			return Usagef("--top-k must be ≥ 1, got %d", *topK)
		case *rows < 1 || *seqLen < 2:
			return Usagef("--rows must be ≥ 1 and --seq-len ≥ 2")
		}
		if *strategy != search.AutoCompress && *strategy != search.Minitron {
			return Usagef("--strategy %q: want autocompress or minitron", *strategy)
		}
		if *keep != "" && *strategy == search.Minitron {
			return Usagef("--keep-layers applies to --strategy autocompress: minitron keeps every layer")
		}
		budgets, err := parseBudgets(&b)
		if err != nil {
			return err
		}
		margins, err := search.ParseMargin(*margin)
		if err != nil {
			return Usagef("--margin: %v", err)
		}
		cat, err := hardware.LoadCatalog(f.gpuFile)
		if err != nil {
			return err
		}
		hw, err := cat.Lookup(f.gpu)
		if err != nil {
			return Usagef("--gpu: %v", err)
		}
		eng, err := estimate.LookupEngine(f.engine)
		if err != nil {
			return Usagef("--engine: %v", err)
		}
		caps, err := searchServeOn(*serveOn, eng)
		if err != nil {
			return err
		}
		wp, err := f.wl.Workload()
		if err != nil {
			return err
		}
		w := *wp
		precs, err := searchList("precision", f.precision, func(s string) error { _, err := estimate.LookupPrecision(s); return err })
		if err != nil {
			return err
		}
		kvs, err := searchList("kv-dtype", f.kvDType, func(s string) error { _, err := estimate.LookupKVType(s); return err })
		if err != nil {
			return err
		}
		// The result is written after the search (and any top-k training):
		// --out is checked now, not then.
		if err := output.Check(*out, *force); errors.As(err, new(*output.ExistsError)) {
			return err // the one exists-error: exit 1 and the one hint, as in every command
		} else if err != nil {
			return Usagef("--out %s: %v", *out, err)
		}
		if err := useHostCalibration(ctx, env, eng, hw, f.offline); err != nil {
			return err
		}
		dir, m, err := searchModel(f.model)
		if err != nil {
			return err
		}
		var scores *importance.Scores
		if *importancePath != "" {
			if scores, err = importance.Load(*importancePath); err != nil {
				return Usagef("--importance: %v", err)
			}
		}
		var experts *importance.ExpertScores
		if *expertPath != "" {
			if experts, err = importance.LoadExperts(*expertPath); err != nil {
				return Usagef("--expert-scores: %v", err)
			}
		}
		keepIdx, err := parseLayerList(*keep)
		if err != nil {
			return err
		}
		req := search.Request{Parent: m, Name: m.Name, Dir: dir, Scores: scores, GPU: hw, Engine: eng, ServeOn: caps,
			Workload: &w, Budgets: budgets, TP: f.tp, Precisions: precs, KVDTypes: kvs, MaxNumSeqs: f.maxSeqs,
			MemFraction: f.memFraction, MaxBatchedTokens: f.maxBatched, MaxModelLen: f.wl.limit, AllowLongContext: *allowLong, KeepLayers: keepIdx,
			Strategy: *strategy, TopK: *topK, Margin: margins, ExpertScores: experts}
		if req.Name == "" {
			req.Name = f.model
		}
		if len(data) > 0 {
			if dir == "" {
				return Usagef("--data needs a checkpoint with weights (--model DIR or %q), not a config", ParentModel)
			}
			if err := engineRunsFor("--model", f.model, m, "--data runs the parent (the measured proxy)", "without --data, search prices every supported family"); err != nil {
				return err
			}
			if req.Rows, err = searchRows(ctx, dir, m, data, *ids, *allowLong, *tokPath, *seqLen, *rows); err != nil {
				return err
			}
			if *strategy == search.Minitron && *topKTrain > 0 {
				o := trained.Options{Tokens: int64(*topKTrain), SeqLen: *seqLen, Seed: 1}
				all, err := searchRows(ctx, dir, m, data, *ids, *allowLong, *tokPath, *seqLen, *rows+o.Rows())
				if err != nil {
					return err
				}
				if len(all) < *rows+8 {
					return Usagef("--topk-train-tokens: --data gives %d rows of %d tokens, and the %d held-out --rows plus one training batch of 8 need %d: give more --data, fewer --rows, or --topk-train-tokens 0", len(all), *seqLen+1, *rows, *rows+8)
				}
				trainRows := all[*rows:]
				o.SeqLen = len(trainRows[0]) - 1
				req.TopKMeasurer = trained.NewFactory(trainRows, o)
			}
		}
		term := progress.NewTerminal(env.Stderr)
		req.Progress = term.Report
		rep, err := search.Execute(ctx, req)
		term.End()
		var ke *search.KeepLayersError
		var se *search.ScoresError
		var ee *search.ExpertScoresError
		var ce *workload.ContextError
		switch {
		case errors.As(err, &ee):
			return Usagef("--expert-scores %s: %v", *expertPath, ee.Err)
		case errors.As(err, &ke):
			return Usagef("%v", err)
		case errors.As(err, &ce):
			ce.ContextFlag, ce.AllowFlag = "--context", allowLongFlag
			if f.wl.Set("isl") || f.wl.Set("osl") {
				ce.What = fmt.Sprintf("--isl %d + --osl %d", f.wl.isl, f.wl.osl)
			}
			return Usagef("%v", ce)
		case errors.As(err, &se), errors.Is(err, search.ErrScoresMismatch):
			return Usagef("--importance %s: %v", *importancePath, err)
		case err != nil:
			return err
		}
		if err := rep.Write(ctx, *out, *force); err != nil {
			return err
		}
		if *jsonOut {
			return writeJSON(env.Stdout, rep.Summarize())
		}
		rep.WriteText(env.Stdout)
		fmt.Fprintf(env.Stdout, "\nwritten to %s\n", *out)
		return nil
	}
}

// parseBudgets reads the budget flags (search.ParseBudgets); every error
// is a usage error naming the flag.
func parseBudgets(f *searchBudgetFlags) (search.Budgets, error) {
	b, err := search.ParseBudgets(search.BudgetText{MaxMemory: f.memory, MaxTTFT: f.ttft, MaxTPOT: f.tpot, MaxE2E: f.e2e,
		MinThroughput: f.throughput, MaxParams: f.params, MaxActiveParams: f.active, P90: f.p90})
	switch {
	case errors.Is(err, search.ErrNoBudget):
		return b, Usagef("give at least one budget (--max-memory, --max-e2e, --max-ttft, --max-tpot, --min-throughput, --max-params, --max-active-params)")
	case err != nil:
		return b, Usagef("%v", err)
	}
	return b, nil
}

// searchServeOn resolves --serve-on; an estimator engine other than
// --engine is contradictory (the child would be priced on one engine and
// served on another).
func searchServeOn(name string, eng estimate.Engine) (export.Capabilities, error) {
	if name == "" {
		c, ok := export.ForEngine(eng)
		if !ok {
			return c, Usagef("--engine %s has no load rules", eng)
		}
		return c, nil
	}
	c, err := export.Lookup(strings.ToLower(name))
	if err != nil {
		return c, Usagef("--serve-on: %v", err)
	}
	if e2, err := estimate.LookupEngine(name); err == nil && e2 != eng {
		return c, Usagef("--serve-on %s contradicts --engine %s: the child would be priced on %s but served on %s (give the same engine, or --serve-on hf)", name, eng, eng, e2)
	}
	return c, nil
}

func searchList(flagName, v string, check func(string) error) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if err := check(s); err != nil {
			return nil, Usagef("--%s: %v", flagName, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseLayerList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, Usagef("--keep-layers %q: %q is not a layer index", s, p)
		}
		out = append(out, n)
	}
	return out, nil
}

// searchModel resolves --model: "parent" or a checkpoint directory (with
// its directory, for the importance hash and the measured proxy), a
// config.json or a preset (directory "").
func searchModel(name string) (string, *architecture.Model, error) {
	r, err := resolveModel(name)
	if err != nil {
		return "", nil, err
	}
	m, err := r.Arch()
	if err != nil {
		return "", nil, modelUsage(err)
	}
	switch r.Kind {
	case modelref.KindParent, modelref.KindCheckpoint:
		d, err := r.Checkpoint()
		if err != nil {
			return "", nil, modelUsage(err)
		}
		if r.Kind == modelref.KindParent {
			m.Name = "embedded parent"
		} else if m.Name == "" {
			m.Name = filepath.Base(d)
		}
		return d, m, nil
	}
	return "", m, nil
}

// searchRows reads the measured proxy's held-out rows from --data
// (dataset.Rows): at most n rows of seqLen+1 ids (inputs and next-token
// targets).
func searchRows(ctx context.Context, dir string, arch *architecture.Model, data []string, ids, allowLong bool, tokPath string, seqLen, n int) ([][]int32, error) {
	o := dataset.ForModel(arch, dir)
	o.SeqLen, o.MaxRows, o.IDs, o.TokenizerFile, o.AllowLong = seqLen, n, ids, tokPath, allowLong
	p, err := dataRows(ctx, data, o)
	if err != nil {
		return nil, err
	}
	return p.Rows, nil
}
