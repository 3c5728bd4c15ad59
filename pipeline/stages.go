package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/eval"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/modelref"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/search/trained"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
	"github.com/autocompress/autocompress/workload"
)

// Output files of the stages (relative to each stage's directory).
const (
	ScoresFile     = "scores.safetensors"
	ExpertsFile    = "experts.safetensors"
	SearchDir      = "search"
	ChildDir       = "child"
	DistillSummary = "distill.json"
	DistillLog     = "log.jsonl"
	EvalFile       = "eval.json"
	SuiteFile      = "suite.jsonl"
	ValidateFile   = "validate.json"
	MeasureFile    = "invocations.json" // servebench.Invocations
	ReportHTML     = "report.html"
	ReportMarkdown = "report.md"
	ReportJSON     = "report.json"
	stateDirName   = ".state"
)

// DefaultMeasureRequests is Measure.Requests' default: the requests of one
// measured run when the workload gives no count.
const DefaultMeasureRequests = 32

// Deployment is the resolved target of a run.
type target struct {
	gpu      *hardware.GPU
	engine   estimate.Engine
	serveOn  export.Capabilities
	workload *workload.Workload
	budgets  search.Budgets
	margin   *search.Margins // nil: the estimator's default
	parent   string          // checkpoint directory
	arch     *architecture.Model
	local    bool // the target is this machine (cpu-local, native): measurable
	// relative are the budgets given relative to the parent ("0.6x"):
	// budgets holds them resolved on the parent's estimate, and the search
	// stage resolves them again on the parent measured on this host.
	relative relative
}

// resolve checks the config and resolves its names; every error names the
// field.
func resolve(c *Config) (*target, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t := &target{}
	r, err := modelref.Resolve(c.Model)
	if err != nil {
		return nil, &ConfigError{Path: "model", Msg: err.Error(), Err: err}
	}
	if t.parent, err = r.Checkpoint(); err != nil {
		return nil, &ConfigError{Path: "model", Msg: err.Error() + " (the pipeline needs a checkpoint with weights)", Err: err}
	}
	if t.arch, err = r.Arch(); err != nil {
		return nil, &ConfigError{Path: "model", Msg: err.Error(), Err: err}
	}
	// The native engine runs the model in every stage (importance, the
	// proxy, eval, measure); recovery needs its backward too unless a
	// PyTorch job does it (distill.engine torch: hybrid parents, whose
	// Mamba2 mixers the engine runs forward only; MoE layers it trains).
	if err := engine.Check(t.arch); err != nil {
		return nil, &ConfigError{Path: "model", Msg: fmt.Sprintf("the pipeline runs the model in the native engine, which cannot run this %s: %v", t.arch.Arch, err)}
	}
	if native(c.Distill.Engine) {
		if err := engine.CheckTrain(t.arch); err != nil {
			return nil, &ConfigError{Path: "model", Msg: fmt.Sprintf("the pipeline recovers the child in the native engine (distill.engine native), which cannot train this %s: %v; set distill.engine: torch to recover it with the PyTorch reference trainer", t.arch.Arch, err)}
		}
	}
	if t.gpu, err = hardware.Default().Lookup(c.Deployment.GPU); err != nil {
		return nil, &ConfigError{Path: "deployment.gpu", Msg: err.Error(), Err: err}
	}
	if t.engine, err = estimate.LookupEngine(c.Deployment.Engine); err != nil {
		return nil, &ConfigError{Path: "deployment.engine", Msg: err.Error(), Err: err}
	}
	if err := estimate.CheckEngine(t.engine, t.gpu); err != nil {
		return nil, &ConfigError{Path: "deployment.engine", Msg: err.Error(), Err: err}
	}
	if sp, ok := t.engine.Spec(); ok && sp.Local {
		// The search prices with these after the importance stage: a
		// missing or malformed local calibration is found now, not then.
		if _, _, err := estimate.ActiveNativeCoeffs(); err != nil {
			return nil, &ConfigError{Path: "deployment.engine", Msg: err.Error()}
		}
	}
	if c.Deployment.ServeOn == "" {
		var ok bool
		if t.serveOn, ok = export.ForEngine(t.engine); !ok {
			return nil, &ConfigError{Path: "deployment.engine", Msg: "engine " + string(t.engine) + " has no load rules"}
		}
	} else if t.serveOn, err = export.Lookup(c.Deployment.ServeOn); err != nil {
		return nil, &ConfigError{Path: "deployment.serve_on", Msg: err.Error(), Err: err}
	}
	t.local = t.engine.Local() && t.gpu.Name == "cpu-local"
	if t.workload, err = c.Workload.build(); err != nil {
		return nil, err
	}
	abs, rel, err := splitRelative(c.Budgets)
	if err != nil {
		return nil, err
	}
	if t.budgets, err = abs.parse(len(rel) > 0); err != nil {
		return nil, err
	}
	if len(rel) > 0 {
		t.relative = rel
		fig, err := parentEstimated(t)
		if err != nil {
			return nil, &ConfigError{Path: "budgets", Msg: err.Error(), Err: err}
		}
		if _, err := rel.apply(&t.budgets, fig, "estimated"); err != nil {
			return nil, &ConfigError{Path: "budgets", Msg: err.Error(), Err: err}
		}
	}
	if t.margin, err = search.ParseMargin(c.Budgets.Margin); err != nil {
		return nil, &ConfigError{Path: "budgets.margin", Msg: err.Error(), Err: err}
	}
	switch {
	case len(c.Data) == 0:
		return nil, &ConfigError{Path: "data", Msg: "no calibration and distillation text"}
	case len(c.EvalData) == 0:
		return nil, &ConfigError{Path: "eval_data", Msg: "no held-out text for evaluation"}
	case c.Eval.Suite != "" && evalSuiteError(c.Eval.Suite) != nil:
		return nil, &ConfigError{Path: "eval.suite", Msg: evalSuiteError(c.Eval.Suite).Error()}
	case c.Search.Strategy != search.AutoCompress && c.Search.Strategy != search.Minitron:
		return nil, &ConfigError{Path: "search.strategy", Msg: fmt.Sprintf("%q: want %s", c.Search.Strategy, strings.Join(search.Strategies(), " or "))}
	case c.Importance.Seqs < 1 || c.Importance.SeqLen < 2:
		return nil, &ConfigError{Path: "importance", Msg: "seqs must be ≥ 1 and seq_len ≥ 2"}
	case c.Distill.Tokens < 0 || c.Distill.SeqLen < 2 || c.Distill.Batch < 1 || c.Distill.LR <= 0:
		return nil, &ConfigError{Path: "distill", Msg: "tokens must be ≥ 0, seq_len ≥ 2, batch ≥ 1 and lr > 0"}
	case !pipelineEngine(c.Distill.Engine):
		return nil, &ConfigError{Path: "distill.engine", Msg: fmt.Sprintf("%q: want native or torch (automodel and megatron-bridge jobs are written by the distill command and run elsewhere)", c.Distill.Engine)}
	case !pipelineEngine(c.Importance.Engine):
		return nil, &ConfigError{Path: "importance.engine", Msg: fmt.Sprintf("%q: want native or torch", c.Importance.Engine)}
	case c.Importance.Passes != 0 && c.Importance.Passes < 1:
		return nil, &ConfigError{Path: "importance.passes", Msg: fmt.Sprintf("%g: want 0 (every sequence in full) or at least 1 (the calibration pass itself)", c.Importance.Passes)}
	case c.Distill.WorldSize > 0 && c.Distill.Batch%c.Distill.WorldSize != 0:
		return nil, &ConfigError{Path: "distill.world_size", Msg: fmt.Sprintf("%d ranks do not divide the batch of %d sequences: choose a batch that is a multiple of it", c.Distill.WorldSize, c.Distill.Batch)}
	case c.Distill.KDWeight < 0 || c.Distill.CEWeight < 0 || c.Distill.KDWeight+c.Distill.CEWeight == 0:
		return nil, &ConfigError{Path: "distill", Msg: "kd_weight and ce_weight must be ≥ 0 and not both 0"}
	case c.Search.Strategy == search.Minitron && c.Search.TopKTrainTokens > 0 && (len(c.Search.ProxyData) == 0 || c.Search.ProxyRows < 1):
		return nil, &ConfigError{Path: "search.topk_train_tokens", Msg: "training the top-k candidates needs search.proxy_data and search.proxy_rows ≥ 1 to score them on (or topk_train_tokens 0)"}
	case c.Measure.Enabled && c.Measure.Runs < 1:
		return nil, &ConfigError{Path: "measure.runs", Msg: "must be ≥ 1"}
	case c.Measure.Enabled && c.Measure.Invocations < 1:
		return nil, &ConfigError{Path: "measure.invocations", Msg: "must be ≥ 1"}
	}
	return t, nil
}

func (w Workload) build() (*workload.Workload, error) {
	var wl workload.Workload
	if w.Name != "" {
		p, err := workload.Preset(w.Name)
		if err != nil {
			return nil, &ConfigError{Path: "workload.name", Msg: err.Error(), Err: err}
		}
		wl = p
		if w.Concurrency > 0 {
			wl.Concurrency, wl.Rate = w.Concurrency, 0
		}
	} else {
		if w.ISL < 1 || w.OSL < 1 {
			return nil, &ConfigError{Path: "workload", Msg: "isl and osl must be ≥ 1 without a preset name"}
		}
		wl = workload.FixedClosed(w.ISL, w.OSL, max(w.Concurrency, 1))
	}
	if w.Rate > 0 {
		wl.Rate, wl.Concurrency = w.Rate, 0
	}
	if err := wl.Validate(); err != nil {
		return nil, &ConfigError{Path: "workload", Msg: err.Error(), Err: err}
	}
	return &wl, nil
}

// parse reads the budgets (search.ParseBudgets); every error is a
// ConfigError naming the field. none allows no absolute budget (the others
// are relative to the parent).
func (b Budgets) parse(none bool) (search.Budgets, error) {
	out, err := search.ParseBudgets(search.BudgetText{MaxMemory: b.MaxMemory, MaxTTFT: b.MaxTTFT, MaxTPOT: b.MaxTPOT,
		MaxE2E: b.MaxE2E, MinThroughput: b.MinThroughput, MaxParams: b.MaxParams, P90: b.P90})
	var be *search.BudgetError
	switch {
	case errors.Is(err, search.ErrNoBudget) && none:
		return search.Budgets{P90: b.P90}, nil
	case errors.Is(err, search.ErrNoBudget):
		return out, &ConfigError{Path: "budgets", Msg: "give at least one budget (max_memory, max_ttft, max_tpot, max_e2e, min_throughput, max_params)"}
	case errors.As(err, &be):
		field := func(name string) string { return strings.ReplaceAll(name, "-", "_") }
		return out, &ConfigError{Path: "budgets." + field(be.Budget), Msg: be.Spell(field)}
	case err != nil:
		return out, &ConfigError{Path: "budgets", Msg: err.Error(), Err: err}
	}
	return out, nil
}

// trainData is the data the search stage trains on: data when the top-k
// candidates are trained, else nil.
func trainData(o *trained.Options, data []string) []string {
	if o == nil {
		return nil
	}
	return data
}

// dataFiles returns the outside files among sources (parent: names are
// embedded or derived from the pinned assets and are hashed by name).
func dataFiles(sources []string) []string {
	var out []string
	for _, s := range sources {
		if !strings.HasPrefix(s, distill.ParentSplitPrefix) {
			out = append(out, s)
		}
	}
	return out
}

// rows reads sources for the parent (dataset.Rows): at most n rows of
// seqLen+1 ids. field is the config field that sets seqLen, for the
// context rule's error.
func rows(ctx context.Context, t *target, sources []string, assets string, seqLen, n int, field string) ([][]int32, error) {
	o := dataset.ForModel(t.arch, t.parent)
	o.SeqLen, o.MaxRows, o.Assets = seqLen, n, assets
	p, err := dataset.Rows(ctx, sources, o)
	var ce *workload.ContextError
	if errors.As(err, &ce) {
		return nil, &ConfigError{Path: field, Msg: fmt.Sprintf("%d tokens per row but the model has %d positions (max_position_embeddings)", seqLen, ce.MaxPositions)}
	}
	if err != nil {
		return nil, err
	}
	return p.Rows, nil
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644) //output:inside
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("pipeline: reading a stage output: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pipeline: %s: %w", path, err)
	}
	return nil
}

// Stage names, in run order. A later stage reads an earlier one's files
// through Outputs, never by spelling its name.
const (
	StageImportance = "importance"
	StageSearch     = "search"
	StagePrune      = "prune"
	StageDistill    = "distill"
	StageEval       = "eval"
	StageValidate   = "validate"
	StageMeasure    = "measure"
	StageReport     = "report"
)

// Settings of the stages that the run configuration does not expose. Each
// is fixed so that every run computes the same thing; changing one changes
// what a stage computes (but not its manifest), so change them with care.
const (
	// ProxyRowLen is the tokens per row of the search's measured proxy
	// (search.proxy_rows rows of search.proxy_data).
	ProxyRowLen = 128
	// ImportanceBatch is the rows per forward pass when scoring importance
	// (memory, not the scores).
	ImportanceBatch = 8
	// DistillEvalRows are the held-out rows the distillation evaluates on,
	// and DistillCheckpointEvery the steps between its resumable
	// checkpoints.
	DistillEvalRows        = 32
	DistillCheckpointEvery = 25
	// EvalSeqLen and EvalBatch are the eval stage's perplexity windows.
	EvalSeqLen = 128
	EvalBatch  = 8
	// DefaultSuiteItems are the in-domain suite's items of each kind (cloze
	// and choice) when eval.limit is 0.
	DefaultSuiteItems = 200
	// measureMaxWarmup bounds bench-serve's warm-up repeats in the measure
	// stage.
	measureMaxWarmup = 3
)

// Outputs are the files the stages of a run write, as a later stage (the
// report among them) reads them from its inputs. A path is that of a stage
// the reader depends on; the others are under "".
type Outputs struct {
	env *Env
	// childFrom is the stage whose child is final: distill, or prune when
	// there is no distillation.
	childFrom string
}

func (o Outputs) in(stage, file string) string { return filepath.Join(o.env.Input(stage), file) }

// Scores is the importance stage's scores.
func (o Outputs) Scores() string { return o.in(StageImportance, ScoresFile) }

// Experts is the importance stage's per-expert scores of an MoE parent
// (ExpertsFile; REAP's router-weighted activation saliency); the file is
// absent for a parent without MoE layers.
func (o Outputs) Experts() string { return o.in(StageImportance, ExpertsFile) }

// Search is the search stage's report directory (search.Report.Write).
func (o Outputs) Search() string { return o.in(StageSearch, SearchDir) }

// Budgets is the search stage's resolved relative budgets (BudgetsFile;
// absent when no budget is relative).
func (o Outputs) Budgets() string { return o.in(StageSearch, BudgetsFile) }

// Rounds is the search stage's measured rounds (a local target only).
func (o Outputs) Rounds() string { return o.in(StageSearch, RoundsFile) }

// Child is the final child checkpoint: the distilled one, or the pruned
// one when there is no distillation.
func (o Outputs) Child() string { return o.in(o.childFrom, ChildDir) }

// Distilled reports whether the run distils the child.
func (o Outputs) Distilled() bool { return o.childFrom == StageDistill }

// DistillSummary and DistillLog are the distill stage's summary and
// training log.
func (o Outputs) DistillSummary() string { return o.in(StageDistill, DistillSummary) }
func (o Outputs) DistillLog() string     { return o.in(StageDistill, DistillLog) }

// Eval is the eval stage's report.
func (o Outputs) Eval() string { return o.in(StageEval, EvalFile) }

// Measure is the measure stage's directory, "" when the run has none (or
// the reader does not depend on it).
func (o Outputs) Measure() string { return o.env.Input(StageMeasure) }

// builder builds the stages of one run: the configuration, its resolved
// target and the binary that measures (self).
type builder struct {
	c    *Config
	t    *target
	self string
	// childFrom is the stage whose child is final (Outputs.childFrom).
	childFrom string
}

func (b *builder) outputs(env *Env) Outputs { return Outputs{env: env, childFrom: b.childFrom} }

// Stages returns the stages of a run of c: importance, search, prune,
// distill (when c.Distill.Tokens > 0), eval, validate, measure (when the
// target is this machine and c.Measure.Enabled) and report.
func Stages(c Config, self string) ([]Stage, error) {
	t, err := resolve(&c)
	if err != nil {
		return nil, err
	}
	b := &builder{c: &c, t: t, self: self, childFrom: StagePrune}
	if c.Distill.Tokens > 0 {
		b.childFrom = StageDistill
	}
	st := []Stage{b.importance(), b.search(), b.prune()}
	if b.childFrom == StageDistill {
		st = append(st, b.distill())
	}
	st = append(st, b.eval(), b.validate())
	if t.local && c.Measure.Enabled {
		st = append(st, b.measure())
	}
	return append(st, b.report(st)), nil
}

// importance scores the parent on c.Data.
func (b *builder) importance() Stage {
	c, t := b.c, b.t
	experts := ""
	if t.arch.HasMoE() {
		experts = importance.ExpertREAP
	}
	return Stage{Name: StageImportance, Params: struct {
		Model      string
		Data       []string
		Importance Importance
		Experts    string `json:",omitempty"` // the kind of expert scores of an MoE parent
	}{c.Model, c.Data, c.Importance, experts}, Files: append([]string{t.parent}, dataFiles(c.Data)...),
		Run: func(ctx context.Context, env *Env) error {
			if !native(c.Importance.Engine) {
				return importanceJob(ctx, env, t, c)
			}
			// Forward only: the parent's weights are read in place.
			m, err := engine.LoadWith(t.parent, engine.LoadOptions{Mapped: true})
			if err != nil {
				return err
			}
			defer m.Close()
			rr, err := rows(ctx, t, c.Data, c.Assets, c.Importance.SeqLen, c.Importance.Seqs, "importance.seq_len")
			if err != nil {
				return err
			}
			env.Note("%d calibration rows of %d tokens", len(rr), c.Importance.SeqLen)
			// The runner's manifest decides reuse: always compute here.
			sc, _, err := importance.Cached(ctx, m, t.parent, rr, filepath.Join(env.Dir, ScoresFile), importance.Options{Batch: ImportanceBatch,
				Passes: c.Importance.Passes, Progress: env.Progress()}, true)
			if err != nil {
				return err
			}
			if c.Importance.Passes > 0 {
				env.Note("skip losses on %d of %d sequences (%d tokens each): %.2f equivalent forward passes", sc.SkipSequences, len(rr), sc.SkipTokens, sc.Passes)
			}
			if experts == "" {
				return nil
			}
			// An MoE parent: the routed experts ranked by REAP on the same
			// rows, for the search's plans and proxy (without them it
			// ranks experts by the structural prior of the weights).
			es, err := importance.RoutedExperts(ctx, m, rr, ImportanceBatch, experts)
			if err != nil {
				return err
			}
			es.ModelHash, es.DataHash = sc.ModelHash, sc.DataHash
			es.Source = "autocompress run (importance stage, native engine)"
			if err := es.Save(filepath.Join(env.Dir, ExpertsFile)); err != nil {
				return err
			}
			env.Note("expert scores: %s", es.Describe())
			return nil
		}}
}

// nativeIdentity names the native coefficients a native target's search
// prices with ("" for the other engines): where they came from and when
// they were measured.
func nativeIdentity(t *target) string {
	if !t.engine.Local() {
		return ""
	}
	f, src, err := estimate.ActiveNativeCoeffs()
	if err != nil {
		return ""
	}
	co, _ := f.Machine(t.gpu.Name)
	return src + " " + co.Measured
}

// topKTrain is Minitron++'s brief training of its top-k: the recovery
// recipe (the distill section) for search.topk_train_tokens tokens; nil
// when the strategy does not train them.
func (b *builder) topKTrain() *trained.Options {
	c := b.c
	if c.Search.Strategy != search.Minitron || c.Search.TopKTrainTokens <= 0 {
		return nil
	}
	d := c.Distill
	return &trained.Options{Tokens: c.Search.TopKTrainTokens, Batch: d.Batch, SeqLen: d.SeqLen, LR: d.LR,
		Temperature: d.Temperature, KDWeight: d.KDWeight, CEWeight: d.CEWeight, Seed: uint64(d.Seed)}
}

// search chooses the child's shape; on a local target it measures its
// choice and re-chooses (checkRounds).
func (b *builder) search() Stage {
	c, t := b.c, b.t
	// Minitron++'s brief training of its top-k uses the recovery recipe on
	// the distillation data: both are inputs of the search stage then.
	topKTrain := b.topKTrain()
	searchFiles := dataFiles(c.Search.ProxyData)
	searchParams := c.Search
	if c.Search.Strategy != search.Minitron {
		searchParams.TopKTrainTokens = 0 // unused: autocompress's stage is not rerun for it
	}
	if topKTrain != nil {
		searchFiles = append(searchFiles, dataFiles(c.Data)...)
	}
	var check Measure // the search stage's measured checks, where it makes them
	if t.local && c.Measure.Enabled && c.Measure.Rounds > 0 {
		check = c.Measure
		check.GapSeconds = 0 // the pause between invocations is not an input
	}
	return Stage{Name: StageSearch, Deps: []string{StageImportance}, Params: struct {
		D     Deployment
		W     Workload
		B     Budgets
		S     Search
		PD    []string
		Train *trained.Options `json:",omitempty"`
		Data  []string         `json:",omitempty"`
		M     Measure          // the measured checks (rounds) of a local target
		// Native names the native calibration the search prices with
		// (which coefficients, measured when): a stage searched under
		// another host's calibration is not reused after this host's.
		Native string `json:",omitempty"`
	}{c.Deployment, c.Workload, c.Budgets, searchParams, c.Search.ProxyData, topKTrain, trainData(topKTrain, c.Data), check, nativeIdentity(t)}, Files: searchFiles,
		Check: func(ctx context.Context) error { return checkBudgets(ctx, t.searchRequest(c)) },
		Run: func(ctx context.Context, env *Env) error {
			scores, err := importance.Load(b.outputs(env).Scores())
			if err != nil {
				return err
			}
			req := t.searchRequest(c)
			req.Scores = scores
			if t.arch.HasMoE() {
				es, err := importance.LoadExperts(b.outputs(env).Experts())
				switch {
				case err == nil:
					req.ExpertScores = es
				case !errors.Is(err, os.ErrNotExist):
					return err
				}
			}
			req.Progress = env.Progress()
			if len(c.Search.ProxyData) > 0 && c.Search.ProxyRows > 0 {
				if req.Rows, err = rows(ctx, t, c.Search.ProxyData, c.Assets, ProxyRowLen, c.Search.ProxyRows, "search.proxy_data"); err != nil {
					return fmt.Errorf("search.proxy_data: %w", err)
				}
			}
			if topKTrain != nil {
				trainRows, err := rows(ctx, t, c.Data, c.Assets, topKTrain.SeqLen, topKTrain.Rows(), "data")
				if err != nil {
					return fmt.Errorf("data (the top-k candidates' brief training): %w", err)
				}
				req.TopKMeasurer = trained.NewFactory(trainRows, *topKTrain)
				env.Note("minitron: each top-k candidate distilled for %d tokens (%d rows of data) before choosing by held-out loss", topKTrain.Rows()*topKTrain.SeqLen, len(trainRows))
			}
			user := req.Budgets
			if len(t.relative) > 0 {
				// The budgets relative to the parent: judged on the parent
				// measured here when this machine is the target, else on its
				// estimate. The search itself always prices the multiple of
				// the parent's estimate, so that an estimator off by a
				// factor on this host is off by the same factor on both
				// sides; the measured rounds then move its limits.
				var rb ResolvedBudgets
				if t.local && c.Measure.Enabled {
					inv, err := measureParent(ctx, env, t, c, b.self)
					if err != nil {
						return fmt.Errorf("measuring the parent for the budgets relative to it: %w", err)
					}
					if rb, err = t.relative.apply(&user, parentMeasured(t.relative, inv, c.Budgets.P90), "measured"); err != nil {
						return err
					}
					fig, err := parentEstimated(t)
					if err != nil {
						return err
					}
					if _, err = t.relative.apply(&req.Budgets, fig, "estimated"); err != nil {
						return err
					}
				} else {
					fig, err := parentEstimated(t)
					if err != nil {
						return err
					}
					if rb, err = t.relative.apply(&req.Budgets, fig, "estimated"); err != nil {
						return err
					}
					user = req.Budgets
				}
				env.Note("budgets relative to the parent (%s): %s", rb.Source, user.String())
				if err := writeJSONFile(filepath.Join(env.Dir, BudgetsFile), rb); err != nil {
					return err
				}
			}
			rep, err := search.Execute(ctx, req)
			if err != nil {
				return err
			}
			if check.Rounds > 0 {
				var rounds []Round
				rep, rounds, err = checkRounds(ctx, env, req, user, rep, check.Rounds, func(rep *search.Report, round int) (*servebench.Invocations, error) {
					return measureChoice(ctx, env, t, c, rep, round, b.self)
				})
				if err != nil {
					return err
				}
				os.RemoveAll(env.StateDir()) // the rounds' scratch
				if err := writeJSONFile(filepath.Join(env.Dir, RoundsFile), rounds); err != nil {
					return err
				}
			}
			return rep.Write(ctx, filepath.Join(env.Dir, SearchDir), false)
		}}
}

// prune cuts the child the search chose from the parent.
func (b *builder) prune() Stage {
	c, t := b.c, b.t
	return Stage{Name: StagePrune, Deps: []string{StageSearch}, Params: struct {
		ServeOn string
		TP      int
	}{t.serveOn.Name, c.Deployment.TP}, Files: []string{t.parent},
		Run: func(ctx context.Context, env *Env) error {
			plan, err := prune.LoadPlan(filepath.Join(b.outputs(env).Search(), search.PlanFile))
			if err != nil {
				return err
			}
			_, err = prune.Prune(ctx, prune.Options{Model: t.parent, Plan: plan, Out: filepath.Join(env.Dir, ChildDir),
				Engine: t.serveOn.Name, TP: c.Deployment.TP})
			return err
		}}
}

// distill recovers the pruned child by distillation from the parent,
// resumably.
func (b *builder) distill() Stage {
	c, t := b.c, b.t
	return Stage{Name: StageDistill, Deps: []string{StagePrune}, Params: struct {
		Data    []string
		Eval    []string
		Distill Distill
	}{c.Data, c.EvalData, c.Distill}, Files: append([]string{t.parent}, dataFiles(c.Data)...),
		Run: func(ctx context.Context, env *Env) error {
			if !native(c.Distill.Engine) {
				return distillJob(ctx, env, t, c)
			}
			state := env.StateDir()
			dc := distill.Config{Teacher: t.parent, Student: filepath.Join(env.Input(StagePrune), ChildDir),
				Out: filepath.Join(env.Dir, ChildDir), Data: c.Data, EvalData: c.EvalData, Assets: c.Assets,
				Tokens: c.Distill.Tokens, Temperature: c.Distill.Temperature,
				KDWeight: train.Ptr(c.Distill.KDWeight), CEWeight: train.Ptr(c.Distill.CEWeight),
				Train: train.Options{Batch: c.Distill.Batch, SeqLen: c.Distill.SeqLen, LR: c.Distill.LR,
					Seed: uint64(c.Distill.Seed), EvalRows: DistillEvalRows, CheckpointEvery: DistillCheckpointEvery},
				// The checkpoint and the log live beside the stage, so an
				// interrupted run resumes where it stopped.
				Checkpoint: filepath.Join(state, "distill.ckpt"), LogPath: filepath.Join(state, DistillLog),
				Progress: env.Progress()}
			if _, err := os.Stat(dc.Checkpoint); err == nil {
				dc.Resume = true
				env.Note("resuming from %s", dc.Checkpoint)
			}
			sum, err := distill.Run(ctx, dc)
			if err != nil {
				return err
			}
			log, err := os.ReadFile(dc.LogPath)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(env.Dir, DistillLog), log, 0o644); err != nil { //output:inside
				return err
			}
			if err := writeJSONFile(filepath.Join(env.Dir, DistillSummary), sum); err != nil {
				return err
			}
			os.RemoveAll(state) // finished: nothing left to resume
			return nil
		}}
}

// eval scores the parent and the final child (runEval).
func (b *builder) eval() Stage {
	c, t := b.c, b.t
	return Stage{Name: StageEval, Deps: []string{b.childFrom}, Params: struct {
		Eval []string
		E    Eval
	}{c.EvalData, c.Eval}, Files: append(append([]string{t.parent}, dataFiles(c.EvalData)...), suiteFiles(c.Eval.Suite)...),
		Run: func(ctx context.Context, env *Env) error {
			return runEval(ctx, env, t, c, b.outputs(env).Child())
		}}
}

// validate checks the final child against the serve-on engine's load
// rules.
func (b *builder) validate() Stage {
	t := b.t
	return Stage{Name: StageValidate, Deps: []string{b.childFrom}, Params: t.serveOn.Name,
		Run: func(ctx context.Context, env *Env) error {
			rep, err := export.ValidateDir(b.outputs(env).Child(), t.serveOn.Name)
			if err != nil {
				return err
			}
			if err := writeJSONFile(filepath.Join(env.Dir, ValidateFile), rep); err != nil {
				return err
			}
			return rep.Err()
		}}
}

// measure serves the final child on this machine (runMeasure).
func (b *builder) measure() Stage {
	c, t := b.c, b.t
	return Stage{Name: StageMeasure, Deps: []string{StageSearch, b.childFrom}, Params: struct {
		W           Workload
		Runs        int
		Invocations int
	}{c.Workload, c.Measure.Runs, c.Measure.Invocations},
		Run: func(ctx context.Context, env *Env) error {
			out := b.outputs(env)
			return runMeasure(ctx, env, t, c, out.Child(), out.Search(), b.self)
		}}
}

// report writes the report from every stage before it (st).
func (b *builder) report(st []Stage) Stage {
	c, t := b.c, b.t
	var deps []string
	for _, s := range st {
		deps = append(deps, s.Name)
	}
	return Stage{Name: StageReport, Deps: deps, Params: *c,
		Run: func(ctx context.Context, env *Env) error {
			d, err := buildReport(b.outputs(env), t, c)
			if err != nil {
				return err
			}
			return writeReport(env.Dir, d)
		}}
}

// runEval scores the parent and the child on the held-out text and on an
// in-domain suite cut from it (fixed seed), side by side, and on the named
// suite of eval.suite when one is set (its table goes into eval.json and
// the report).
func runEval(ctx context.Context, env *Env, t *target, c *Config, child string) error {
	var models []eval.Model
	for _, m := range []struct{ name, dir string }{{"parent", t.parent}, {"child", child}} {
		em, err := engine.LoadWith(m.dir, engine.LoadOptions{Mapped: true})
		if err != nil {
			return err
		}
		defer em.Close()
		tok, err := tokenizer.Load(filepath.Join(m.dir, "tokenizer.json"))
		if err != nil {
			return err
		}
		models = append(models, eval.Model{Name: m.name, Model: em, Tok: tok})
	}
	docs, err := dataset.Texts(c.EvalData, c.Assets)
	if err != nil {
		return err
	}
	text := corpus.Join(docs)
	cfg := eval.Config{Windows: eval.Options{SeqLen: EvalSeqLen, Batch: EvalBatch}, Limit: c.Eval.Limit}
	cfg.Data = []*eval.Data{{Name: strings.Join(c.EvalData, ","), Text: []byte(text)}}
	items := c.Eval.Limit
	if items <= 0 {
		items = DefaultSuiteItems
	}
	suite, err := eval.BuildSuite(text, eval.SuiteOptions{Seed: train.Ptr(uint64(1)), Cloze: items, Choice: items})
	if err != nil {
		return fmt.Errorf("eval: building the in-domain suite: %w", err)
	}
	var b bytes.Buffer
	if err := eval.WriteSuite(&b, suite); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(env.Dir, SuiteFile), b.Bytes(), 0o644); err != nil { //output:inside
		return err
	}
	if cfg.Tasks, err = eval.ParseSuite("in-domain", bytes.NewReader(b.Bytes())); err != nil {
		return err
	}
	var named string
	var unavailable []eval.Unavailable
	if c.Eval.Suite != "" {
		var dir string
		named, dir, _ = strings.Cut(c.Eval.Suite, "=")
		ts, un, err := eval.LoadSuite(named, dir)
		if err != nil {
			return err
		}
		cfg.Tasks, unavailable = append(cfg.Tasks, ts...), un
	}
	cfg.Progress = env.Progress()
	rep, err := eval.Run(ctx, models, cfg)
	if err != nil {
		return err
	}
	if named != "" {
		if rep.Suite, err = rep.ScoreSuite(named, unavailable); err != nil {
			return err
		}
	}
	return writeJSONFile(filepath.Join(env.Dir, EvalFile), rep)
}

// suiteFiles are the files a NAME=DIR suite setting reads, so that the eval
// stage reruns when one of them changes, appears or goes (the setting names
// only the directory).
func suiteFiles(spec string) []string {
	if spec == "" {
		return nil
	}
	name, dir, _ := strings.Cut(spec, "=")
	return eval.SuiteFiles(name, dir)
}

// evalSuiteError checks a NAME=DIR suite setting before any stage runs:
// a known suite and a directory that exists.
func evalSuiteError(spec string) error {
	name, dir, ok := strings.Cut(spec, "=")
	if !ok || dir == "" {
		return fmt.Errorf("%q: want NAME=DIR with NAME one of %s", spec, strings.Join(eval.SuiteList(), ", "))
	}
	if eval.Suites[name] == nil {
		return fmt.Errorf("unknown suite %q (known: %s)", name, strings.Join(eval.SuiteList(), ", "))
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s: not a directory (want the directory holding the suite's files)", dir)
	}
	return nil
}

// BenchServeArgs is the command line (after the program name) with which
// the measure stage runs bench-serve on the child: workload w as
// servebench.Workload prepared it (request count, context limit) and the
// engine settings o the search chose.
func BenchServeArgs(child string, c *Config, w *workload.Workload, o servebench.Options) []string {
	args := []string{"bench-serve", "--model", child, "--num-requests", strconv.Itoa(w.NumRequests),
		"--repeats", strconv.Itoa(c.Measure.Runs), "--max-warmup", strconv.Itoa(measureMaxWarmup), "--json"}
	if c.Workload.Name != "" {
		args = append(args, "--workload", c.Workload.Name)
	} else {
		args = append(args, "--isl", strconv.Itoa(c.Workload.ISL), "--osl", strconv.Itoa(c.Workload.OSL))
	}
	if w.Concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(w.Concurrency))
	}
	if w.Rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(w.Rate, 'g', -1, 64))
	}
	if w.ContextLimit > 0 {
		args = append(args, "--context", strconv.Itoa(w.ContextLimit))
	}
	if o.MaxNumSeqs > 0 {
		args = append(args, "--max-num-seqs", strconv.Itoa(o.MaxNumSeqs))
	}
	if o.PrefillTokens > 0 {
		args = append(args, "--max-batched-tokens", strconv.Itoa(o.PrefillTokens))
	}
	return args
}

// MeasureSetup is what the measure stage serves the child under: the run's
// workload prepared by servebench.Workload (requests requests when it
// gives no count, DefaultMeasureRequests when requests is 0; the context the search priced, sv.MaxModelLen, as the
// limit) and the engine settings the search chose (sv.Settings: the
// sequence limit; the native engine's only KV type and precision are
// float32, and the search prices its default prompt budget per step).
func MeasureSetup(w workload.Workload, sv *search.Serving, maxPositions, requests int) (workload.Workload, servebench.Options, error) {
	var o servebench.Options
	st := sv.Settings
	switch st.KVDType {
	case "", "auto", "fp32", "f32":
	default:
		return w, o, fmt.Errorf("measure: the search chose KV type %q, which the native engine does not serve (float32 only)", st.KVDType)
	}
	switch st.Precision {
	case "", "f32", "fp32", "float32", "bf16", "fp16", "f16":
	default:
		return w, o, fmt.Errorf("measure: the search chose precision %q, which the native engine does not serve (float32 only)", st.Precision)
	}
	o.MaxNumSeqs, o.PrefillTokens = st.MaxNumSeqs, servebench.DefaultPrefillTokens
	rule := workload.ContextRule{MaxPositions: maxPositions, What: "the run's workload", ContextFlag: "workload"}
	if sv.MaxModelLen > 0 && w.ContextLimit == 0 {
		w.ContextLimit, rule.Explicit = sv.MaxModelLen, true
	}
	if requests <= 0 {
		requests = DefaultMeasureRequests
	}
	w, _, err := servebench.Workload(w, requests, rule)
	if err != nil {
		return w, o, fmt.Errorf("measure: %w", err)
	}
	return w, o, nil
}

// settingsText describes the engine settings of a measurement in estimate's
// flag names.
func settingsText(seqs, prefill, context int) string {
	s := "max-num-seqs " + strconv.Itoa(seqs)
	if seqs <= 0 {
		s = "max-num-seqs one per client"
	}
	return fmt.Sprintf("%s, max-batched-tokens %d, context %d", s, prefill, context)
}

// runMeasure measures the child (measureChild) for the run's workload
// under the engine settings the search chose (its serving.json in
// searchDir) and writes the invocations' combined report.
func runMeasure(ctx context.Context, env *Env, t *target, c *Config, child, searchDir, self string) error {
	inv, err := measureChild(ctx, env, t, c, child, searchDir, self)
	if err != nil {
		return err
	}
	return writeJSONFile(filepath.Join(env.Dir, MeasureFile), inv)
}

// UnstableTolerance is the spread across invocations, relative to their
// median, above which a measured figure is called unstable on this machine.
const UnstableTolerance = 0.10

// measureRepeated measures one child with k separate invocations (invoke
// is one of them, i from 1), gap apart, and combines them
// (servebench.Combine). It notes each invocation's figures and the metrics
// whose invocations spread more than UnstableTolerance.
func measureRepeated(ctx context.Context, env *Env, k int, gap time.Duration, invoke func(ctx context.Context, i int) (*servebench.Report, error)) (*servebench.Invocations, error) {
	k = max(k, 1)
	task := progress.Start(env.Progress(), progress.Event{Stage: "measure", Total: int64(k), Unit: "invocation"})
	var reps []*servebench.Report
	for i := 1; i <= k; i++ {
		if i > 1 && gap > 0 {
			tm := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				tm.Stop()
				return nil, ctx.Err()
			case <-tm.C:
			}
		}
		rep, err := invoke(ctx, i)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("measure: invocation %d of %d: %w", i, k, err)
		}
		reps = append(reps, rep)
		tpot, tps := rep.Summary["tpot_mean_s"].Median, rep.Summary["output_tokens_per_s"].Median
		task.Set(int64(i), fmt.Sprintf("TPOT %.3g ms, %.4g tok/s", 1e3*tpot, tps))
	}
	inv, err := servebench.Combine(reps)
	if err != nil {
		return nil, err
	}
	if u := inv.Unstable(UnstableTolerance); len(u) > 0 {
		var parts []string
		for _, key := range u {
			a := inv.Summary[key]
			label, unit, scale := key, "", 1.0
			if key == servebench.PeakRSSKey {
				label, unit, scale = "peak memory", "MiB", 1.0/(1<<20)
			}
			for _, m := range servebench.Metrics {
				if m.Name == key {
					label, unit, scale = m.Label, m.Unit, m.Scale
				}
			}
			parts = append(parts, fmt.Sprintf("%s %.4g–%.4g %s (%.0f %%)", label, scale*a.Min, scale*a.Max, unit, 100*a.Spread))
		}
		env.Note("unstable on this machine: %d invocations spread more than %.0f %%: %s; budgets are judged on the worst", k, 100*UnstableTolerance, strings.Join(parts, ", "))
	}
	return inv, nil
}

// measureChild measures the child with c.Measure.Invocations separate
// invocations of bench-serve (measureRepeated). With self (the autocompress
// binary) each runs in a process of its own, so the peak resident memory it
// reports is the child's serving process alone; without it (library
// callers, tests) they run here and the memory is not reported, since this
// process's peak includes the earlier stages.
func measureChild(ctx context.Context, env *Env, t *target, c *Config, child, searchDir, self string) (*servebench.Invocations, error) {
	var sv search.Serving
	if err := readJSONFile(filepath.Join(searchDir, search.ServingFile), &sv); err != nil {
		return nil, err
	}
	// The child's shape alone: its weights are read by whatever serves it
	// (a float32 copy here would cost 4 bytes a parameter for nothing).
	arch, err := architecture.Load(child)
	if err != nil {
		return nil, err
	}
	w, o, err := MeasureSetup(*t.workload, &sv, arch.MaxPositions, c.Measure.Requests)
	if err != nil {
		return nil, err
	}
	o.Repeats, o.MaxWarmup = c.Measure.Runs, 3
	k := max(c.Measure.Invocations, 1)
	env.Note("serving under the search's settings: %s; %d invocations", settingsText(o.MaxNumSeqs, o.PrefillTokens, w.ContextLimit), k)
	gap := time.Duration(c.Measure.GapSeconds * float64(time.Second))
	if self != "" {
		args := BenchServeArgs(child, c, &w, o)
		env.Note("measuring: %s %s", filepath.Base(self), strings.Join(args, " "))
		return measureRepeated(ctx, env, k, gap, func(ctx context.Context, _ int) (*servebench.Report, error) {
			cmd := exec.CommandContext(ctx, self, args...)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("bench-serve: %v: %s", err, strings.TrimSpace(errb.String()))
			}
			var rep servebench.Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				return nil, fmt.Errorf("bench-serve output: %w", err)
			}
			return &rep, nil
		})
	}
	// In this process, as bench-serve does: the weights read in place.
	m, err := engine.LoadWith(child, engine.LoadOptions{Mapped: true})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return measureRepeated(ctx, env, k, gap, func(ctx context.Context, _ int) (*servebench.Report, error) {
		rep, err := servebench.Run(ctx, m, &w, o, nil)
		if err != nil {
			return nil, err
		}
		rep.Model = child
		rep.PeakRSSBytes = 0 // this process's peak, not the child's: not reported
		return rep, nil
	})
}

// Execute runs the whole pipeline of c in c.Dir. self, when not empty, is
// the autocompress binary, which the measure stage runs as its own process.
func Execute(ctx context.Context, c Config, self string, opt Options) (*Result, error) {
	st, err := Stages(c, self)
	if err != nil {
		return nil, err
	}
	return Run(ctx, c.Dir, st, opt)
}

// ReportPath is where a run directory's HTML report is, once the report
// stage has run.
func ReportPath(res *Result) (string, error) {
	for _, s := range res.Stages {
		if s.Name == StageReport {
			return filepath.Join(s.Dir, ReportHTML), nil
		}
	}
	return "", errors.New("pipeline: the run has no report stage")
}
