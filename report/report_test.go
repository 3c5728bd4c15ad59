package report

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/browsertest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func sample(t testing.TB) *Data { return fixture(t, "sample.json") }

// demo is the report of a real demo run (testdata/demo.json).
func demo(t testing.TB) *Data { return fixture(t, "demo.json") }

func fixture(t testing.TB, name string) *Data {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMarkdownGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sample(t)); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.md")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./report -run Golden -update)", err)
	}
	if b.String() != string(want) {
		t.Fatalf("Markdown differs from %s (go test ./report -update to accept):\n%s", golden, b.String())
	}
}

func TestHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	d := sample(t)
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, id := range []string{"chart-shape-ffn", "chart-shape-heads", "chart-pareto-0", "chart-memory", "chart-training"} {
		if !strings.Contains(html, `id="`+id+`"`) {
			t.Errorf("chart %s missing", id)
		}
	}
	if n := strings.Count(html, "<svg"); n != 5 {
		t.Errorf("%d inline SVGs, want 5", n)
	}
	// Nothing may be fetched at view time.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`).FindString(html); m != "" {
		t.Errorf("the page references an outside resource: %s", m)
	}
	// The measured range over invocations is on the page, each number
	// marked so that CheckNumbers compares it with the JSON.
	for _, path := range []string{"budgets.1.measured", "budgets.1.measured_min", "budgets.1.measured_max", "budgets.1.measured_median"} {
		if !strings.Contains(html, `data-json="`+path+`"`) {
			t.Errorf("%s is not on the page", path)
		}
	}
	if !strings.Contains(html, "unstable on this machine") {
		t.Error("the TPOT row's invocations spread 30 %, but the page does not call it unstable")
	}
	browsertest.CheckNumbers(t, html, d, FormatNumber)
}

func TestBudgetFlags(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		b        Budget
		disagree bool
	}{
		{Budget{Estimated: f(10), Measured: f(10.9)}, false},
		{Budget{Estimated: f(10), Measured: f(12)}, true},
		{Budget{Estimated: f(10)}, false},
	} {
		if got := tc.b.Disagrees(Tolerance); got != tc.disagree {
			t.Errorf("%+v: Disagrees = %v", tc.b, got)
		}
	}
	for _, tc := range []struct {
		b        Budget
		unstable bool
	}{
		{Budget{Measured: f(16.3), Invocations: 3, MeasuredMin: f(12.1), MeasuredMax: f(16.3), MeasuredSpread: f(0.3)}, true},
		{Budget{Measured: f(16.3), Invocations: 3, MeasuredMin: f(15.9), MeasuredMax: f(16.3), MeasuredSpread: f(0.025)}, false},
		{Budget{Measured: f(16.3), Invocations: 1, MeasuredMin: f(16.3), MeasuredMax: f(16.3), MeasuredSpread: f(0)}, false},
		{Budget{Measured: f(16.3)}, false}, // a report from before invocations were repeated
	} {
		if got := tc.b.Unstable(Tolerance); got != tc.unstable {
			t.Errorf("%+v: Unstable = %v", tc.b, got)
		}
	}
	if !(Budget{Max: true, Limit: 5}).Met(5) || (Budget{Max: true, Limit: 5}).Met(5.1) || !(Budget{Limit: 5}).Met(6) {
		t.Error("Met")
	}
}

func TestEmptyDataRenders(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, &Data{Title: "empty"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No chart data") {
		t.Error("an empty report should say it has no charts")
	}
	b.Reset()
	if err := WriteMarkdown(&b, &Data{Title: "empty"}); err != nil {
		t.Fatal(err)
	}
}

func TestReadJSONUnknownField(t *testing.T) {
	_, err := ReadJSON(strings.NewReader(`{"title": "x", "budgts": []}`))
	if err == nil || !strings.Contains(err.Error(), "budgts") {
		t.Fatalf("err = %v, want one naming the unknown field", err)
	}
}

func markdown(t *testing.T, d *Data) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func html(t *testing.T, d *Data) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestReportSaysWhatIsEstimated (issue 17, class 2): the parent's column
// holds estimates (with the parent measured beside them only where a budget
// is relative to that measurement); every estimate carries
// the estimator's error band and the page names the host and date the band
// was measured on; each status says whether it judged a measurement or an
// estimate; the charts of estimated costs say so on their axis.
func TestReportSaysWhatIsEstimated(t *testing.T) {
	d := sample(t)
	page := html(t, d)
	for _, want := range []string{"<th>parent, estimated</th>", "<th>child, estimated</th>", "<th>child, measured</th>",
		"every parent figure is an estimate", "measured on the calibration&#39;s host (CPU model not recorded, 2 CPUs, 32 MiB last-level cache), 2026-12-01 16:36–16:50 UTC",
		"Whether the error band applies here is not known: nothing recorded differs from this host, but the CPU model cannot be compared",
		"memory, estimated (MiB)", "The terms are estimated"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Each budget row: the parent's and the child's estimate with the band,
	// the status naming what it judged.
	sec := regexp.MustCompile(`(?s)<section id="budgets">.*?</section>`).FindString(page)
	rows := regexp.MustCompile(`(?s)<tr(?: class="binding")?><td>([a-z ]+)(?: \(binding\))?</td>(.*?)</tr>`).FindAllStringSubmatch(sec, -1)
	if len(rows) != len(d.Budgets) {
		t.Fatalf("%d budget rows on the page, want %d", len(rows), len(d.Budgets))
	}
	for i, r := range rows {
		b := d.Budgets[i]
		band := fmt.Sprintf("±%.0f %%", 100**b.ErrorBand)
		if n := strings.Count(r[2], `<span class="band">`+band+`</span>`); n != 2 {
			t.Errorf("%s: the band %s is beside %d estimates, want the parent's and the child's", r[1], band, n)
		}
		how := "estimated"
		if b.Measured != nil {
			how = "measured"
		}
		if !regexp.MustCompile(`<td class="(met|missed)">(met|missed), ` + how + `</td>`).MatchString(r[2]) {
			t.Errorf("%s: the status does not say it judged the %s figure: %s", r[1], how, r[2])
		}
	}
	// The case: the parent's estimated TPOT is over the limit
	// (21.5 > 20 ms); the page must not let that read as a measurement.
	if tp := d.Budgets[1]; tp.Name != "tpot" || tp.Met(*tp.Parent) {
		t.Fatalf("the sample's TPOT row should have the parent over its limit: %+v", tp)
	}

	// A band measured elsewhere is said not to apply.
	o := sample(t)
	o.Estimator.Applies, o.Estimator.Why = "different", "this host has 16 CPUs, recorded 2"
	if page := html(t, o); !strings.Contains(page, "The error band does not apply here: this host has 16 CPUs, recorded 2.") {
		t.Error("a band measured on another host is not said not to apply")
	}

	// An estimate within its band of the limit is not a sure thing.
	c := sample(t)
	c.Budgets[2].Estimated = ptr(155) // ≥ 150 tok/s, ±6 %
	if page := html(t, c); !strings.Contains(page, "met, estimated, within its error band of the limit") {
		t.Error("an estimate within its error band of the limit is called met without saying so")
	}
	if strings.Contains(html(t, d), "within its error band") {
		t.Error("an estimate 67 % over its floor is said to be within its band of it")
	}

	// Without a known band or a measurement, the page says so.
	e := sample(t)
	e.Estimator = nil
	for i := range e.Budgets {
		e.Budgets[i].ErrorBand = nil
		e.Budgets[i].Measured, e.Budgets[i].Invocations = nil, 0
	}
	e.Memory.Measured = nil
	page = html(t, e)
	for _, want := range []string{"No error band is known", "Nothing was measured", "met, estimated"} {
		if !strings.Contains(page, want) {
			t.Errorf("without a band or a measurement, the page lacks %q", want)
		}
	}
	if strings.Contains(page, "met, measured") || strings.Contains(page, `class="band"`) {
		t.Error("a report without measurements or bands shows one")
	}
	// The child served here with no serving budget (a parameter budget
	// only): the page says it was measured and why no status uses it, not
	// that nothing was measured.
	e.ChildMeasured = true
	if page := html(t, e); strings.Contains(page, "Nothing was measured") || !strings.Contains(page, "The child was served by bench-serve on this machine, but no budget is a cost it measures") {
		t.Error("a measured child with no serving budget is said not to have been measured")
	}
	if md := markdown(t, e); strings.Contains(md, "Nothing was measured") {
		t.Error("the Markdown says nothing was measured although the child was")
	}
	// A parameter budget counted from the written child: "met, counted",
	// and still no serving measurement claimed.
	pc := 1.2
	e.Budgets = append(e.Budgets, Budget{Name: "params", Unit: "M", Max: true, Limit: 1.6, Estimated: &pc, Measured: &pc, Counted: true})
	if page := html(t, e); !strings.Contains(page, "met, counted") || strings.Contains(page, "Measured: the child served by bench-serve") {
		t.Error("a counted parameter budget is not shown as counted, or is taken for a serving measurement")
	}
	if md := markdown(t, e); strings.Contains(md, "every status judges the estimator's figures") || !strings.Contains(md, "a parameter budget judges the written child's exact count") {
		t.Error("with a counted parameter budget the note still says every status judges an estimate")
	}
	e.ChildMeasured = false
	if page := html(t, e); strings.Contains(page, "Nothing was measured") || !strings.Contains(page, "Nothing was served") {
		t.Error("with a counted budget and no serving, the note says nothing was measured")
	}
	e.ChildMeasured = true
	e.Budgets = e.Budgets[:len(e.Budgets)-1]
	e.ChildMeasured = false

	// A budget relative to the parent measured here: the parent's measured
	// figure stands beside its estimate, and the note no longer says the
	// parent is never measured.
	r := sample(t)
	r.Budgets[1].ParentMeasured = ptr(18.2)
	page = html(t, r)
	if strings.Contains(page, "every parent figure is an estimate") || !strings.Contains(page, `(measured <span data-json="budgets.1.parent_measured">18.2</span>)`) ||
		!strings.Contains(page, "the parent measured on this machine (bench-serve, the worst invocation) is shown beside its estimate") {
		t.Error("the parent measured for a relative budget is not shown as measured")
	}
	if md := markdown(t, r); !strings.Contains(md, "(measured 18.2)") || strings.Contains(md, "every parent figure is an estimate") {
		t.Errorf("the Markdown does not show the parent measured for a relative budget")
	}
	// Its estimate under the settings it was measured under stands beside
	// the measurement where the pipeline knows it.
	r.Budgets[1].ParentAsMeasured = ptr(17.5)
	page = html(t, r)
	if !strings.Contains(page, `(measured <span data-json="budgets.1.parent_measured">18.2</span>, estimated <span data-json="budgets.1.parent_as_measured">17.5</span> at the settings it was measured under)`) {
		t.Error("the parent's estimate at the settings it was measured under is not beside its measurement")
	}
	if md := markdown(t, r); !strings.Contains(md, "(measured 18.2, estimated 17.5 at the settings it was measured under)") {
		t.Error("the Markdown does not show the parent's estimate at the settings it was measured under")
	}

	// A band whose host is not known still says that it is not.
	e.Budgets[0].ErrorBand = d.Budgets[0].ErrorBand
	if page = html(t, e); !strings.Contains(page, "where and when they were taken is not recorded") {
		t.Error("a band of unknown origin is not said to be one")
	}
}

// TestReportConsistentWithBudgets (issue 17, class 3): every figure the
// page shows for a budgeted cost outside the budget table (the memory
// plan's total, budget and measured peak; the charts' budgets and chosen
// child) carries the budget row's JSON path, so the page is checked against
// the table; a memory plan priced otherwise than the table (the issue: 87.6
// MiB against the table's 41.5) is caught there and said on the page.
func TestReportConsistentWithBudgets(t *testing.T) {
	d := sample(t)
	for name, d := range map[string]*Data{"sample": d, "demo": demo(t)} {
		if bad := d.Inconsistencies(); len(bad) > 0 {
			t.Errorf("the %s report contradicts itself: %v", name, bad)
		}
		ms, _, err := browsertest.Mismatches(html(t, d), d, FormatNumber)
		if err != nil || len(ms) > 0 {
			t.Errorf("%s: %v %v", name, err, ms)
		}
	}
	page := html(t, d)
	for path, n := range map[string]int{"budgets.0.estimated": 4, "budgets.0.limit": 4, "budgets.0.measured": 3} {
		if got := strings.Count(page, `data-json="`+path+`"`); got != n {
			t.Errorf("%s is marked %d times on the page, want %d (the budget table, the memory table, the captions)", path, got, n)
		}
	}
	ms, _, err := browsertest.Mismatches(page, d, FormatNumber)
	if err != nil || len(ms) > 0 {
		t.Fatalf("%v %v", err, ms)
	}
	if strings.Contains(page, "contradicts itself") {
		t.Error("a consistent report says it contradicts itself")
	}

	for _, tc := range []struct {
		name  string
		edit  func(d *Data)
		paths []string
	}{
		{"memory plan without the workload", func(d *Data) {
			for i := range d.Memory.Terms {
				d.Memory.Terms[i].Value *= 87.6 / 55.1
			}
		}, []string{"budgets.0.estimated"}},
		{"memory budget", func(d *Data) { d.Memory.Budget = 45 }, []string{"budgets.0.limit"}},
		{"measured peak", func(d *Data) { d.Memory.Measured = ptr(60) }, []string{"budgets.0.measured"}},
		{"front's chosen child", func(d *Data) { d.Pareto[0].Points[2].Cost = 50 }, []string{"budgets.0.estimated"}},
		{"front's budget", func(d *Data) { d.Pareto[0].Limit = 60 }, []string{"budgets.0.limit"}},
		{"memory in GiB", func(d *Data) {
			d.Memory.Unit, d.Memory.Budget, *d.Memory.Measured = "GiB", d.Memory.Budget/1024, *d.Memory.Measured/1024
			for i := range d.Memory.Terms {
				d.Memory.Terms[i].Value /= 1024
			}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := sample(t)
			tc.edit(d)
			if len(d.Inconsistencies()) == 0 {
				t.Error("Inconsistencies finds nothing")
			}
			page := html(t, d)
			if !strings.Contains(page, "This report contradicts itself") {
				t.Error("the page does not say it contradicts itself")
			}
			ms, _, err := browsertest.Mismatches(page, d, FormatNumber)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.paths {
				found := false
				for _, m := range ms {
					found = found || strings.HasPrefix(m, p+":")
				}
				if !found {
					t.Errorf("no mismatch with %s on the page: %v", p, ms)
				}
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }

// TestRecoveryCost: the recovery's cost is priced at the measured rate and
// at the stated assumption, and shown on the page (each number marked for
// CheckNumbers) and in the Markdown.
func TestRecoveryCost(t *testing.T) {
	r := NewRecoveryCost(72_000, "torch", 2, "cpu", 2_000, 4_000_000, 2_000_000)
	if want := 72_000.0 / 2_000 / 3600 * 2; math.Abs(r.DeviceHours-want) > 1e-12 {
		t.Errorf("device-hours %g, want %g", r.DeviceHours, want)
	}
	if want := 72_000 * (2*4e6 + 6*2e6) / AssumedGPUFLOPs / 3600; math.Abs(r.AssumedGPUHours-want) > 1e-15 {
		t.Errorf("assumed GPU-hours %g, want %g", r.AssumedGPUHours, want)
	}
	if z := NewRecoveryCost(100, "native", 1, "cpu", 0, 1, 1); z.DeviceHours != 0 {
		t.Errorf("no rate measured, but %g device-hours", z.DeviceHours)
	}
	d := sample(t)
	d.Recovery = r
	page := html(t, d)
	for _, want := range []string{"Recovery cost", "torch on cpu", "Model-Optimizer PR #861", `data-json="recovery_cost.assumed_gpu_hours"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	browsertest.CheckNumbers(t, page, d, FormatNumber)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Recovery cost: 72") || !strings.Contains(md.String(), "tokens on torch on cpu, 2 rank(s)") {
		t.Errorf("the Markdown lacks the recovery cost:\n%s", md.String())
	}
}

// TestShapeMambaColumn: a hybrid parent's shape table shows each Mamba2
// mixer's heads × head_dim, parent and child, and marks a layer whose
// Mamba heads were cut as changed; a parent without one keeps the
// three-column table.
func TestShapeMambaColumn(t *testing.T) {
	d := &Data{Title: "hybrid",
		Parent: Shape{Name: "p", Layers: []Layer{{MambaHeads: 8, MambaHeadDim: 32}, {FFN: 384}, {Heads: 4, KVHeads: 2}}},
		Child:  Shape{Name: "c", Layers: []Layer{{MambaHeads: 6, MambaHeadDim: 32}, {FFN: 384}, {Heads: 4, KVHeads: 2}}}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"parent heads/KV/MLP/Mamba", "| 0 | — / — / — / 8×32 | — / — / — / 6×32 |", "| 1 | — / — / 384 / — | — / — / 384 / — |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	b.Reset()
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if !strings.Contains(h, "<th>child Mamba heads×dim</th>") || !strings.Contains(h, `<tr class="changed"><td>0</td><td>—</td><td>—</td><td>—</td><td>8×32</td>`) ||
		strings.Contains(h, `<tr class="changed"><td>1</td>`) {
		t.Errorf("HTML shape table: want a Mamba column and only layer 0 changed")
	}
	d.Parent.Layers, d.Child.Layers = d.Parent.Layers[1:], d.Child.Layers[1:]
	b.Reset()
	if err := WriteMarkdown(&b, d); err != nil {
		t.Fatal(err)
	}
	if md := b.String(); strings.Contains(md, "Mamba") || !strings.Contains(md, "| 0 | — / — / 384 | — / — / 384 |") {
		t.Errorf("a parent without Mamba2 mixers:\n%s", md)
	}
}

// TestShapeExperts: an MoE block's experts, width and top-k stand in the
// MLP column, parent and child, and a cut of experts marks the layer
// changed.
func TestShapeExperts(t *testing.T) {
	d := &Data{Title: "moe",
		Parent: Shape{Name: "p", Layers: []Layer{{Heads: 4, KVHeads: 2, Experts: 8, TopK: 2, ExpertWidth: 128}, {Heads: 4, KVHeads: 2, Experts: 8, TopK: 2, ExpertWidth: 128}}},
		Child:  Shape{Name: "c", Layers: []Layer{{Heads: 4, KVHeads: 2, Experts: 6, TopK: 2, ExpertWidth: 128}, {Heads: 4, KVHeads: 2, Experts: 8, TopK: 2, ExpertWidth: 128}}}}
	md := markdown(t, d)
	if !strings.Contains(md, "| 0 | 4 / 2 / 8 experts×128, top-2 | 4 / 2 / 6 experts×128, top-2 |") {
		t.Errorf("Markdown shape table:\n%s", md)
	}
	h := html(t, d)
	if !strings.Contains(h, `<tr class="changed"><td>0</td>`) || strings.Contains(h, `<tr class="changed"><td>1</td>`) {
		t.Error("HTML shape table: want layer 0 (experts cut) changed and layer 1 not")
	}
}
