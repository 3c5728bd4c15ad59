package pipeline

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/report"
	"github.com/autocompress/autocompress/search"
)

// chosenAsSearched prices the demo's parent under settings st the way the
// search prices a candidate, and returns the target, a search summary that
// chose it and the serving the search would write.
func chosenAsSearched(t *testing.T, c *Config, st search.Settings) (*target, *search.Summary, *search.Serving) {
	t.Helper()
	tg, err := resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	o := estimate.Options{Precision: st.Precision, KVDType: st.KVDType, MaxNumSeqs: st.MaxNumSeqs, MemFraction: st.MemFraction, TP: 1}
	comp, err := estimate.Compile(tg.gpu, tg.engine, o, tg.workload, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := comp.Price(tg.arch)
	if !p.Fits {
		t.Fatalf("the demo's parent does not fit: %s", p.FailTerm)
	}
	costs := search.Costs{Fits: true, MemoryBytes: p.TotalBytes, WeightsBytes: p.WeightsBytes, TTFT: p.TTFT, TPOT: p.TPOT, E2E: p.E2E,
		TTFTP90: p.TTFTP90, TPOTP90: p.TPOTP90, E2EP90: p.E2EP90, OutputTokS: p.OutputTokS, RequestsPerS: p.RequestsPerS}
	sum := &search.Summary{}
	sum.Chosen.Costs, sum.Chosen.Settings, sum.Parent.Costs = costs, st, costs
	sv := &search.Serving{Engine: string(tg.engine), TP: 1, MaxModelLen: tg.workload.MaxContext(), Settings: st}
	return tg, sum, sv
}

// TestReportConsistentWithBudgets (issue 17, class 3): the report's memory
// plan is the child priced as the search priced it — at the workload's
// context and concurrency under the chosen settings — so its total is the
// budget table's estimated memory (the issue: 87.6 MiB in the plan, 41.5
// in the table), in the memory budget's unit (MiB for the demo's 45 MiB,
// not GiB), with the table's budget and measured peak.
func TestReportConsistentWithBudgets(t *testing.T) {
	for _, tc := range []struct {
		name, budget, unit string
		st                 search.Settings
		gpu, engine        string
	}{
		{"demo", "45MiB", "MiB", search.Settings{}, "", ""},
		{"two sequences", "45MiB", "MiB", search.Settings{MaxNumSeqs: 2}, "", ""},
		{"GiB budget", "2GiB", "GiB", search.Settings{}, "", ""},
		{"no memory budget", "", "MiB", search.Settings{}, "", ""},
		{"vllm on an H100", "20GiB", "GiB", search.Settings{MaxNumSeqs: 8, MemFraction: 0.5}, "h100-sxm", "vllm"},
		{"llama.cpp on an RTX 4090", "", "MiB", search.Settings{}, "rtx-4090", "llamacpp"}, // under 1 GiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DemoConfig()
			c.Budgets.MaxMemory = tc.budget
			if tc.gpu != "" {
				c.Deployment.GPU, c.Deployment.Engine = tc.gpu, tc.engine
				c.Measure.Enabled = false
			}
			tg, sum, sv := chosenAsSearched(t, &c, tc.st)
			views := budgetViews(tg.budgets)
			d := &report.Data{Budgets: budgetRows(views, tg.budgets, sum, nil)}
			comp, err := compileChosen(tg, &c, sum, sv)
			if err != nil {
				t.Fatal(err)
			}
			memoryPlan(d, tg, comp, tg.arch, views, nil)
			if d.Memory.Unit != tc.unit || len(d.Memory.Terms) != 4 {
				t.Fatalf("memory plan in %q with %d terms, want %s", d.Memory.Unit, len(d.Memory.Terms), tc.unit)
			}
			if bad := d.Inconsistencies(); len(bad) > 0 {
				t.Fatalf("the report contradicts its budget table: %v", bad)
			}
			want := sum.Chosen.Costs.MemoryBytes / (1 << 20)
			if tc.unit == "GiB" {
				want /= 1024
			}
			if got := d.Memory.Total(); math.Abs(got-want) > 1e-9*want {
				t.Errorf("the memory plan totals %g %s, the search priced the child at %g", got, tc.unit, want)
			}
			for _, b := range d.Budgets {
				if b.Name == "memory" && (b.Unit != tc.unit || b.Limit != d.Memory.Budget) {
					t.Errorf("memory budget %g %s in the table, %g %s in the plan", b.Limit, b.Unit, d.Memory.Budget, d.Memory.Unit)
				}
			}
			old, err := estimate.Memory(tg.arch, tg.gpu, tg.engine, estimate.Options{MaxNumSeqs: tc.st.MaxNumSeqs, TP: 1})
			if err == nil {
				t.Logf("memory: %.1f MiB as searched, %.1f MiB priced without the workload", sum.Chosen.Costs.MemoryBytes/(1<<20), old.TotalBytes()/(1<<20))
			}
		})
	}
}

// TestReportSaysWhatIsEstimatedData (issue 17, class 2): the report's
// estimates carry the estimator's error band per cost, name where and when
// it was measured (the native calibration's host and window; the fitted
// GPUs) and say whether that is the device priced: for the native engine,
// whether this host is the calibration's.
func TestReportSaysWhatIsEstimatedData(t *testing.T) {
	c := DemoConfig()
	tg, sum, sv := chosenAsSearched(t, &c, search.Settings{})
	comp, err := compileChosen(tg, &c, sum, sv)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := estimate.ActiveNativeCoeffs()
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := f.Machine(tg.gpu.Name)
	if nc.Host == nil || nc.Measured == "" {
		t.Fatalf("the native coefficients do not record their host and time: %+v, %q", nc.Host, nc.Measured)
	}
	for _, tc := range []struct {
		name    string
		this    hardware.Host
		applies hardware.HostMatch
	}{
		{"the calibration's host", *nc.Host, ""}, // same or unknown, as far as the record tells
		{"another host", hardware.Host{CPU: "Some Other CPU", CPUs: nc.Host.CPUs + 14, LLCBytes: 1 << 20}, hardware.OtherHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := budgetRows(budgetViews(tg.budgets), tg.budgets, sum, nil)
			e := estimatorOf(tg, comp, rows, tc.this)
			if e == nil || !strings.Contains(e.Host, nc.Host.String()) || e.Measured != nc.Measured || e.Why == "" {
				t.Fatalf("estimator %+v; the coefficients were measured on %s, %q", e, nc.Host, nc.Measured)
			}
			if tc.applies != "" && e.Applies != string(tc.applies) || tc.applies == "" && e.Applies == string(hardware.OtherHost) {
				t.Errorf("the band applies %q (%s) on %s", e.Applies, e.Why, tc.name)
			}
			for _, r := range rows {
				want := map[string]float64{"memory": nc.ErrMemory, "tpot": nc.ErrTPOT}[r.Name]
				if want > 0 && (r.ErrorBand == nil || *r.ErrorBand != want) {
					t.Errorf("%s: error band %v, want %g", r.Name, r.ErrorBand, want)
				}
			}
		})
	}

	// A GPU target: the fitted family's bands, measured on its GPUs.
	c.Deployment.GPU, c.Deployment.Engine, c.Measure.Enabled = "h100-sxm", "vllm", false
	tg, sum, sv = chosenAsSearched(t, &c, search.Settings{})
	if comp, err = compileChosen(tg, &c, sum, sv); err != nil {
		t.Fatal(err)
	}
	rows := budgetRows(budgetViews(tg.budgets), tg.budgets, sum, nil)
	e := estimatorOf(tg, comp, rows, hardware.Host{})
	co := comp.Coeffs()
	if e == nil || !strings.Contains(e.Coefficients, comp.Family()) || len(co.GPUs) > 0 && !strings.Contains(e.Host, co.GPUs[0]) || e.Applies == "" {
		t.Fatalf("estimator %+v for the %s family (GPUs %v)", e, comp.Family(), co.GPUs)
	}
	for _, r := range rows {
		if r.Name == "tpot" && co.ErrTPOT > 0 && (r.ErrorBand == nil || *r.ErrorBand != co.ErrTPOT) {
			t.Errorf("tpot: error band %v, want %g", r.ErrorBand, co.ErrTPOT)
		}
		if r.Name == "memory" && r.ErrorBand != nil {
			t.Errorf("memory: error band %g, but the GPU families record none", *r.ErrorBand)
		}
	}
}

// TestReportRecoveryData (issue 17, class 10): the report keeps the
// training loss (the distillation objective) and the held-out
// cross-entropy apart, and draws the held-out loss before distillation
// (the distillation summary's, at step 0) and the parent's.
func TestReportRecoveryData(t *testing.T) {
	log := filepath.Join(t.TempDir(), DistillLog)
	lines := `{"step":1,"tokens":64,"loss":2,"lr":0.001,"grad_norm":1}
{"step":2,"tokens":128,"loss":1.5,"lr":0.001,"grad_norm":1}
{"step":2,"tokens":128,"val_loss":5,"val_ppl":148.4}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var d report.Data
	var err error
	if d.Training, d.HeldOut, err = readTrainingLog(log); err != nil {
		t.Fatal(err)
	}
	recovery(&d, &distill.Summary{KDWeight: 1, Temperature: 2, Before: &distill.Eval{Loss: 6.2}, TeacherEval: &distill.Eval{Loss: 4}})
	if len(d.Training) != 2 || d.Training[1].Loss != 1.5 || d.Training[1].Tokens != 128 {
		t.Errorf("training %+v: want the two steps' losses only", d.Training)
	}
	want := []report.HeldOutPoint{{Step: 0, Tokens: 0, Loss: 6.2}, {Step: 2, Tokens: 128, Loss: 5}}
	if len(d.HeldOut) != 2 || d.HeldOut[0] != want[0] || d.HeldOut[1] != want[1] {
		t.Errorf("held-out %+v, want %+v", d.HeldOut, want)
	}
	if d.ParentHeldOut == nil || *d.ParentHeldOut != 4 || !strings.Contains(d.Objective, "KL") || !strings.Contains(d.Objective, "T = 2") {
		t.Errorf("parent's held-out %v, objective %q", d.ParentHeldOut, d.Objective)
	}
}

// TestReportRecoveryTorchLog: the torch trainer's progress lines (the
// stage's log on distill.engine torch) give the held-out points their
// tokens from the step they follow (its evaluation lines carry none), and
// a step logged twice (a resumed job redoes the steps after its checkpoint)
// is one point, the later.
func TestReportRecoveryTorchLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), DistillLog)
	lines := `{"step": 0, "steps": 3, "val_loss": 8.3, "elapsed_s": 1.0}
{"step": 1, "steps": 3, "loss": 7.0, "lr": 0.001, "tokens": 1024}
{"step": 2, "steps": 3, "loss": 6.5, "lr": 0.001, "tokens": 2048}
{"event": "checkpoint", "step": 2}
{"event": "resumed", "step": 1}
{"step": 2, "steps": 3, "loss": 6.4, "lr": 0.001, "tokens": 2048}
{"step": 3, "steps": 3, "loss": 6.0, "lr": 0.0001, "tokens": 3072}
{"step": 3, "steps": 3, "val_loss": 6.1, "elapsed_s": 9.0}
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, held, err := readTrainingLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 3 || tr[1].Loss != 6.4 || tr[2].Tokens != 3072 {
		t.Errorf("training %+v: want steps 1, 2 (the resumed 6.4) and 3", tr)
	}
	want := []report.HeldOutPoint{{Step: 0, Loss: 8.3}, {Step: 3, Tokens: 3072, Loss: 6.1}}
	if len(held) != 2 || held[0] != want[0] || held[1] != want[1] {
		t.Errorf("held-out %+v, want %+v", held, want)
	}
}
