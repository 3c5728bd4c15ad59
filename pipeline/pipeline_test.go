package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/browsertest"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/report"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/workload"
)

// tinyConfig is the demo shrunk to seconds: few calibration rows, a short
// distillation and a short held-out text.
func tinyConfig(t *testing.T, dir string) Config {
	t.Helper()
	text, err := parent.SplitText(moduleRoot(t), "test")
	if err != nil {
		t.Skipf("the parent's held-out text is not available: %v", err)
	}
	held := filepath.Join(t.TempDir(), "held-out.txt")
	if err := os.WriteFile(held, []byte(text[:12000]), 0o644); err != nil {
		t.Fatal(err)
	}
	c := DemoConfig()
	c.Budgets = parentRelativeBudgets(t, c, 0.85, 0.85)
	c.Dir = dir
	c.Assets = moduleRoot(t)
	c.Data = []string{"parent:validation"}
	c.EvalData = []string{held}
	c.Importance = Importance{Seqs: 4, SeqLen: 32}
	c.Search.ProxyRows = 4
	c.Search.TopK = 2
	c.Distill.Tokens, c.Distill.Batch, c.Distill.SeqLen = 40*2*32, 2, 32
	c.Eval.Limit = 4
	c.Measure.Runs, c.Measure.Invocations, c.Measure.GapSeconds = 1, 2, 0
	return c
}

// parentRelativeBudgets sets the memory budget to memFrac and the TPOT
// budget to tpotFrac of what the estimator says the parent needs on c's
// deployment, so the test binds whatever the calibration of this machine.
func parentRelativeBudgets(t *testing.T, c Config, memFrac, tpotFrac float64) Budgets {
	t.Helper()
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := estimate.Estimate(tg.arch, tg.gpu, tg.engine, estimate.Options{}, tg.workload)
	if err != nil {
		t.Fatal(err)
	}
	return Budgets{MaxMemory: fmt.Sprintf("%.2fMiB", memFrac*r.Memory.TotalBytes()/(1<<20)),
		MaxTPOT: fmt.Sprintf("%.3fms", tpotFrac*r.Analytic.TPOT*1e3)}
}

// looseTPOT is a TPOT budget of 20 times the parent's estimate: met when
// measured however slow or loaded the machine, so that the check rounds of
// a test are decided by the memory budget, which the estimator prices and an
// in-process measurement does not check, and not by the machine's speed.
// (With TPOT at 85 % of the estimate, a loaded machine measured 2x the
// estimate, and the tightened re-choice found no child.) The re-choice
// itself is tested on planted measurements (check_test.go).
const looseTPOT = 20

func moduleRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(d)
}

func stageNames(res *Result, reused bool) []string {
	var out []string
	for _, s := range res.Stages {
		if s.Reused == reused {
			out = append(out, s.Name)
		}
	}
	return out
}

func stageDir(t *testing.T, res *Result, name string) string {
	t.Helper()
	for _, s := range res.Stages {
		if s.Name == name {
			return s.Dir
		}
	}
	t.Fatalf("no stage %s in %+v", name, res.Stages)
	return ""
}

// readReport returns the run's report path and the data of its JSON.
func readReport(t *testing.T, res *Result) (string, *report.Data) {
	t.Helper()
	path, err := ReportPath(res)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(filepath.Dir(path), ReportJSON))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := report.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return path, d
}

func outputHash(t *testing.T, res *Result, name string) string {
	t.Helper()
	for _, s := range res.Stages {
		if s.Name == name {
			return s.OutputHash
		}
	}
	t.Fatalf("no stage %s in %+v", name, res.Stages)
	return ""
}

// TestPipelineEndToEnd runs the whole pipeline on the embedded parent,
// reruns it (everything reused), changes a budget (search and what follows
// rerun; importance is reused), and checks that every budget is met by the
// estimate and that the report's numbers are the run's.
func TestPipelineEndToEnd(t *testing.T) {
	dir := t.TempDir()
	c := tinyConfig(t, dir)
	c.Budgets = parentRelativeBudgets(t, c, 0.85, looseTPOT)
	// TPOT as a multiple of the parent measured here (as loose as before:
	// the search prices the multiple of the parent's estimate), so that the
	// report's limit is checked against the one the search stage resolved.
	c.Budgets.MaxTPOT = fmt.Sprintf("%dx", looseTPOT)
	ctx := context.Background()
	res, err := Execute(ctx, c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"importance", "search", "prune", "distill", "eval", "validate", "measure", "report"}
	if got := stageNames(res, false); !reflect.DeepEqual(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	path, d := readReport(t, res)
	if len(d.Budgets) != 2 {
		t.Fatalf("budgets %+v, want memory and tpot", d.Budgets)
	}
	// The report judges by the relative budget as the search stage
	// resolved it on the parent measured here (its budgets.json), not as
	// the config resolved it on the estimate.
	var rb ResolvedBudgets
	if err := readJSONFile(filepath.Join(stageDir(t, res, "search"), BudgetsFile), &rb); err != nil {
		t.Fatal(err)
	}
	if rb.Source != "measured" || rb.Multiple["tpot"] != looseTPOT {
		t.Errorf("resolved budgets %+v: want tpot %dx the measured parent", rb, looseTPOT)
	}
	for _, b := range d.Budgets {
		if want := 1e3 * rb.Limits["tpot"]; b.Name == "tpot" && math.Abs(b.Limit-want) > 1e-9*want {
			t.Errorf("report TPOT limit %g ms, the search stage resolved %g ms", b.Limit, want)
		}
		// The parent measured for the relative budget stands beside its
		// estimate; the memory budget is absolute and has none.
		if want := 1e3 * rb.Parent["tpot"]; b.Name == "tpot" && (b.ParentMeasured == nil || math.Abs(*b.ParentMeasured-want) > 1e-9*want) {
			t.Errorf("report's parent TPOT measured %v, the search stage measured %g ms", b.ParentMeasured, want)
		}
		// Beside it, the parent's estimate under the settings it was
		// measured under (the engine's defaults), not the child's.
		if b.Name == "tpot" {
			tgt, err := resolve(&c)
			if err != nil {
				t.Fatal(err)
			}
			est, err := parentEstimated(tgt)
			if err != nil {
				t.Fatal(err)
			}
			if want := 1e3 * est["tpot"]; b.ParentAsMeasured == nil || math.Abs(*b.ParentAsMeasured-want) > 1e-9*want {
				t.Errorf("report's parent TPOT estimated as measured %v, want %g ms (the engine's defaults)", b.ParentAsMeasured, want)
			}
		}
		if b.Name == "memory" && b.ParentMeasured != nil {
			t.Errorf("the absolute memory budget carries a parent measurement %g", *b.ParentMeasured)
		}
	}
	// The report agrees with its budget table and says where its estimates
	// come from; the recovery has its held-out loss from before the first
	// step (issue 17, classes 2, 3, 10).
	if bad := d.Inconsistencies(); len(bad) > 0 {
		t.Errorf("the report contradicts its budget table: %v", bad)
	}
	if d.Estimator == nil || d.Memory.Unit != d.Budgets[0].Unit || len(d.HeldOut) == 0 || d.HeldOut[0].Step != 0 || d.ParentHeldOut == nil {
		t.Errorf("report: estimator %+v, memory in %q (budget in %q), held-out %+v, parent's %v", d.Estimator, d.Memory.Unit, d.Budgets[0].Unit, d.HeldOut, d.ParentHeldOut)
	}
	// The parent, under the chosen settings, must miss some budget (else
	// there is nothing to prune). Not necessarily the binding one: fewer
	// native sequence slots lower TPOT (a smaller batch per step), so the
	// settings alone may meet the TPOT limit while memory still needs the
	// pruning.
	parentMisses := false
	for _, b := range d.Budgets {
		if b.Estimated == nil || !b.Met(*b.Estimated) {
			t.Errorf("budget %s: estimated %v does not meet %g", b.Name, b.Estimated, b.Limit)
		}
		if b.Parent == nil {
			t.Errorf("budget %s: no parent figure", b.Name)
		} else if !b.Met(*b.Parent) {
			parentMisses = true
		}
	}
	if !parentMisses {
		t.Errorf("the parent meets every budget under the chosen settings: %+v", d.Budgets)
	}
	if d.Child.Params >= d.Parent.Params || len(d.Training) == 0 || len(d.Eval.Models) != 2 || d.Tokens.Recovery == 0 {
		t.Errorf("report: child %d of %d params, %d training points, eval %v, recovery tokens %d",
			d.Child.Params, d.Parent.Params, len(d.Training), d.Eval.Models, d.Tokens.Recovery)
	}
	// The measure stage served the child under the search's settings.
	var sv search.Serving
	var inv servebench.Invocations
	if err := readJSONFile(filepath.Join(stageDir(t, res, "search"), SearchDir, search.ServingFile), &sv); err != nil {
		t.Fatal(err)
	}
	if err := readJSONFile(filepath.Join(stageDir(t, res, "measure"), MeasureFile), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Reports) != c.Measure.Invocations {
		t.Fatalf("%d invocations measured, want measure.invocations %d", len(inv.Reports), c.Measure.Invocations)
	}
	meas := *inv.First()
	for _, b := range d.Budgets {
		if b.Name == "tpot" && (b.Measured == nil || b.Invocations != c.Measure.Invocations || *b.Measured != 1e3*inv.Summary["tpot_mean_s"].Worst) {
			t.Errorf("report TPOT row %+v: want the worst of %d invocations, %v", b, c.Measure.Invocations, inv.Summary["tpot_mean_s"])
		}
	}
	wantSeqs := sv.Settings.MaxNumSeqs
	if wantSeqs == 0 {
		wantSeqs = c.Workload.Concurrency
	}
	if meas.MaxNumSeqs != wantSeqs || meas.ContextLimit != sv.MaxModelLen || meas.MaxBatchedTokens != servebench.DefaultPrefillTokens {
		t.Errorf("measured under %d sequences, context %d, %d tokens per step; the search chose %d sequences, context %d",
			meas.MaxNumSeqs, meas.ContextLimit, meas.MaxBatchedTokens, wantSeqs, sv.MaxModelLen)
	}
	for _, r := range meas.Runs {
		if r.MaxBatch > wantSeqs {
			t.Errorf("a measured run had %d sequences in one step; the search chose %d", r.MaxBatch, wantSeqs)
		}
	}
	// The search checked its choice measured, pruned, before distillation:
	// one round is kept, one that met every measured budget unless none
	// did.
	var rounds []Round
	if err := readJSONFile(filepath.Join(stageDir(t, res, "search"), RoundsFile), &rounds); err != nil {
		t.Fatal(err)
	}
	if len(rounds) < 1 || len(rounds) > c.Measure.Rounds+1 {
		t.Fatalf("%d check rounds, want 1 to %d", len(rounds), c.Measure.Rounds+1)
	}
	anyMet, kept := false, 0
	for _, r := range rounds {
		if _, ok := r.Measured["tpot"]; !ok {
			t.Errorf("round %+v of %d: TPOT not measured", r, len(rounds))
		}
		anyMet = anyMet || len(r.Missed) == 0
		if r.Chosen {
			kept++
		}
	}
	for _, r := range rounds {
		if r.Chosen && anyMet && len(r.Missed) > 0 {
			t.Errorf("kept round %+v, which missed, though another met every budget", r)
		}
	}
	if kept != 1 {
		t.Errorf("%d rounds kept of %d", kept, len(rounds))
	}
	t.Logf("%d check rounds: %+v", len(rounds), rounds)
	if d.Deployment.Settings == "" || d.Deployment.MeasuredUnder != d.Deployment.Settings {
		t.Errorf("report: engine settings %q, measured under %q: want the same", d.Deployment.Settings, d.Deployment.MeasuredUnder)
	}
	distilled, searched, pruned := outputHash(t, res, "distill"), outputHash(t, res, "search"), outputHash(t, res, "prune")
	t.Run("report in a browser", func(t *testing.T) {
		charts, err := report.Charts(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(charts) != 2+len(d.Budgets)+2 {
			t.Errorf("%d charts, want shape ×2, a front per budget, memory and training", len(charts))
		}
		browsertest.Check(t, browsertest.Browser(t), path, len(charts), d, report.FormatNumber)
	})

	res, err = Execute(ctx, c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := stageNames(res, false); len(got) != 0 {
		t.Fatalf("an unchanged rerun ran %v", got)
	}

	// A tighter memory budget: the search reruns, its upstream is reused.
	c.Budgets = parentRelativeBudgets(t, c, 0.8, looseTPOT)
	res, err = Execute(ctx, c, "", Options{})
	var inf *search.InfeasibleError
	if errors.As(err, &inf) {
		t.Skipf("80 %% of the parent is out of reach for this estimator: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The search reruns. What follows it reruns too unless its output is
	// the same as before (then reusing it is right), which the measured
	// re-choice makes possible: on a loaded machine the first run's child
	// may already be small enough for the tighter budget. The search's own
	// output records the budgets, so it differs; the pruned child may not
	// (seen under load: prune reran to the same child, and distill, eval
	// and validate were reused).
	got := stageNames(res, true)
	newSearch := outputHash(t, res, "search") != searched
	if len(got) == 0 || got[0] != "importance" || slices.Contains(got, "search") || newSearch && slices.Contains(got, "prune") {
		t.Fatalf("after a budget change reused %v, want importance and not the search (nor the pruning of a new search)", got)
	}
	if newSearch && outputHash(t, res, "prune") != pruned {
		if !reflect.DeepEqual(got, []string{"importance"}) {
			t.Fatalf("after a budget change that changed the child, reused %v, want [importance]", got)
		}
	} else {
		t.Logf("the new budget chose the same child (possible, not an error); reused %v", got)
	}
	if outputHash(t, res, "distill") == distilled {
		t.Log("the new budget distilled the same child") // possible, not an error
	}
}

// TestMeasureSetup: the measure stage takes the search's sequence limit and
// context, gives a workload without a request count the stage's count, and
// refuses settings the native engine cannot serve.
func TestMeasureSetup(t *testing.T) {
	w := workload.FixedClosed(384, 64, 8)
	sv := search.Serving{Engine: "native", MaxModelLen: 448, Settings: search.Settings{MaxNumSeqs: 2}}
	got, o, err := MeasureSetup(w, &sv, 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxNumSeqs != 2 || o.PrefillTokens != servebench.DefaultPrefillTokens || got.ContextLimit != 448 || got.NumRequests != DefaultMeasureRequests || got.Concurrency != 8 {
		t.Errorf("options %+v, workload %d requests, context %d, %d clients", o, got.NumRequests, got.ContextLimit, got.Concurrency)
	}
	args := strings.Join(BenchServeArgs("DIR", &Config{Measure: Measure{Runs: 1}, Workload: Workload{ISL: 384, OSL: 64, Concurrency: 8}}, &got, o), " ")
	for _, want := range []string{"--max-num-seqs 2", "--context 448", "--concurrency 8", "--max-batched-tokens 512", "--num-requests 32"} {
		if !strings.Contains(args, want) {
			t.Errorf("bench-serve args %q lack %q", args, want)
		}
	}
	if more, _, err := MeasureSetup(w, &sv, 512, 96); err != nil || more.NumRequests != 96 {
		t.Errorf("96 requests asked: %d (%v)", more.NumRequests, err)
	}
	counted := w
	counted.NumRequests = 40
	if own, _, err := MeasureSetup(counted, &sv, 512, 96); err != nil || own.NumRequests != 40 {
		t.Errorf("a workload's own 40 requests: %d (%v)", own.NumRequests, err)
	}
	for _, st := range []search.Settings{{KVDType: "fp8"}, {Precision: "int4-awq"}} {
		bad := sv
		bad.Settings = st
		if _, _, err := MeasureSetup(w, &bad, 512, 0); err == nil {
			t.Errorf("settings %+v: no error; the native engine serves float32 only", st)
		}
	}
	if _, _, err := MeasureSetup(w, &sv, 256, 0); err == nil {
		t.Error("a 448-token context on a 256-position model: no error")
	}
}

// TestPipelineInterruptResume cancels a run in the middle of distillation
// and reruns it: the finished stages are reused, the distillation resumes
// from its checkpoint, and the result is bit for bit the uninterrupted
// run's.
func TestPipelineInterruptResume(t *testing.T) {
	ctx := context.Background()
	// No measured check rounds: a re-choice depends on the machine's load,
	// and this test compares two runs' children bit for bit.
	tiny := func(dir string) Config {
		c := tinyConfig(t, dir)
		c.Measure.Rounds = 0
		return c
	}
	ref, err := Execute(ctx, tiny(t.TempDir()), "", Options{Until: "distill"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := tiny(dir)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = Execute(cctx, c, "", Options{Until: "distill", Progress: func(p progress.Event) {
		if p.Stage == "distill" && p.State == progress.Running && p.Unit == "step" && p.Done >= 30 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(StageDir(dir, 3, "distill")); !os.IsNotExist(err) {
		t.Fatalf("the interrupted distillation left its directory: %v", err)
	}
	var resumed bool
	var firstStep *progress.Event
	res, err := Execute(ctx, c, "", Options{Until: "distill", Progress: func(p progress.Event) {
		if p.Stage == "distill" && p.State == progress.Note && strings.HasPrefix(p.Msg, "resuming") {
			resumed = true
		}
		if p.Stage == "distill" && p.State == progress.Running && p.Unit == "step" && p.Done > p.Resumed && firstStep == nil {
			firstStep = &p
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := stageNames(res, true); !reflect.DeepEqual(got, []string{"importance", "search", "prune"}) {
		t.Fatalf("resumed run reused %v", got)
	}
	if !resumed {
		t.Error("the distillation did not resume from its checkpoint")
	}
	// The resumed steps reach the display as such, so that its rate and ETA
	// count only this run's steps (issue 17, class 11).
	if firstStep == nil || firstStep.Resumed < 25 || firstStep.Done != firstStep.Resumed+1 {
		t.Errorf("first step after the resume: %+v, want Resumed >= 25 (the checkpoint) and Done = Resumed+1", firstStep)
	}
	// The weights (the summary beside them records paths and timings).
	childHash := func(r *Result) string {
		for _, s := range r.Stages {
			if s.Name == "distill" {
				h, err := HashPath(filepath.Join(s.Dir, ChildDir))
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
		}
		t.Fatal("no distill stage")
		return ""
	}
	if a, b := childHash(ref), childHash(res); a != b {
		t.Fatalf("the resumed distillation's child %s differs from the uninterrupted run's %s", b, a)
	}
	if _, err := os.Stat(filepath.Join(dir, stateDirName, "distill")); !os.IsNotExist(err) {
		t.Errorf("the finished distillation left its resumable state: %v", err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Deployment.GPU = "rtx-9999" }, "deployment.gpu"},
		{func(c *Config) { c.Deployment.Engine = "vllm" }, "deployment.engine"},
		{func(c *Config) { c.Budgets.MaxMemory = "12 parsecs" }, "budgets.max_memory"},
		{func(c *Config) { c.Budgets = Budgets{} }, "budgets"},
		{func(c *Config) { c.Model = "acme/none" }, "model"},
		{func(c *Config) { c.Search.Strategy = "greedy" }, "search.strategy"},
		{func(c *Config) { c.Workload.Name = "nope" }, "workload.name"},
	} {
		c := DemoConfig()
		tc.edit(&c)
		_, err := Stages(c, "")
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != tc.want {
			t.Errorf("%s: err %v, want a ConfigError for %s", tc.want, err, tc.want)
		}
	}
}

// The demo's budgets bind (the parent misses one) and are within reach of
// the search (with the structural prior, as a first look before importance).
func TestDemoConfigBinds(t *testing.T) {
	c := DemoConfig()
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := search.Execute(context.Background(), search.Request{Parent: tg.arch, GPU: tg.gpu, Engine: tg.engine,
		ServeOn: tg.serveOn, Workload: tg.workload, Budgets: tg.budgets, TP: 1, Strategy: c.Search.Strategy, TopK: 2})
	if err != nil {
		t.Fatalf("the demo's budgets are out of reach: %v", err)
	}
	if rep.Result.ParentMeets {
		t.Fatal("the parent already meets the demo's budgets: nothing to compress")
	}
	t.Logf("binding %s; chosen %s", rep.Result.Binding, rep.Space.Describe(&rep.Result.Best))
}

// TestMarginChangeRerunsSearch: the margin is part of the search stage's
// settings (so a changed margin reruns the search and, through its output,
// every later stage) and of no earlier stage's; a bad margin names its field.
func TestMarginChangeRerunsSearch(t *testing.T) {
	params := func(c Config) map[string]string {
		st, err := Stages(c, "")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range st {
			b, err := json.Marshal(s.Params)
			if err != nil {
				t.Fatal(err)
			}
			out[s.Name] = string(b)
		}
		return out
	}
	c := DemoConfig()
	auto := params(c)
	c.Budgets.Margin = "0"
	none := params(c)
	if auto["importance"] != none["importance"] {
		t.Error("the margin changed the importance stage's settings")
	}
	if auto["search"] == none["search"] {
		t.Error("the margin is not in the search stage's settings")
	}
	c.Budgets.Margin = "tpot=abc"
	var ce *ConfigError
	if _, err := Stages(c, ""); !errors.As(err, &ce) || ce.Path != "budgets.margin" {
		t.Errorf("bad margin: %v, want a ConfigError on budgets.margin", err)
	}
}
