package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/autocompress/autocompress/internal/browsertest"
)

func writePage(t *testing.T, d *Data) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestReportInBrowser renders the sample report in headless Chromium and
// checks what a person would see: the page loads without script errors,
// every chart is on the page with a size, is not blank in a screenshot and
// has nothing covering its data, and every number on the page is the
// number in the run's JSON (a figure repeated outside the budget table, the
// one in the table). REPORT_SCREENSHOT=FILE keeps the screenshot.
func TestReportInBrowser(t *testing.T) {
	bin := browsertest.Browser(t)
	d := sample(t)
	browsertest.Check(t, bin, writePage(t, d), 5, d, FormatNumber)
}

// TestReportChartsDoNotOverlap (issue 17, class 10): in the browser, no
// legend or label covers a point, bar or line, no two texts overlap,
// nothing sticks out of its chart, the type is sans-serif and large enough,
// and every chart takes the page's width, for the sample and for data that
// crowd the places legends used to sit (points in every corner, the held-out
// loss at the top right, a total at its budget, 32 layers) and for a real
// demo run's report. The check itself finds a legend drawn over the data.
func TestReportChartsDoNotOverlap(t *testing.T) {
	bin := browsertest.Browser(t)
	crowded := sample(t)
	crowded.Parent.Layers, crowded.Child.Layers, crowded.Child.Kept = nil, nil, nil
	for i := range 32 {
		crowded.Parent.Layers = append(crowded.Parent.Layers, Layer{Heads: 32, KVHeads: 8, FFN: 14336})
		if i%5 != 3 {
			crowded.Child.Layers = append(crowded.Child.Layers, Layer{Heads: 32 - i%3*8, KVHeads: 8, FFN: 14336 - i*256})
			crowded.Child.Kept = append(crowded.Child.Kept, i)
		}
	}
	pts := crowded.Pareto[0].Points
	pts = append(pts, Point{Cost: 40, Quality: 1}, Point{Cost: 80.2, Quality: 0.61}, Point{Cost: 79, Quality: 0.99}, Point{Cost: 41, Quality: 0.99, Feasible: true})
	crowded.Pareto[0].Points = pts
	crowded.HeldOut = append(crowded.HeldOut[:1], HeldOutPoint{Step: 200, Tokens: 204800, Loss: 6.3}) // ends above where it began
	crowded.Memory.Terms[3].Value = 64 - 8.9 - 2.4 - 4.1                                              // the total at its budget
	crowded.Budgets[0].Estimated = ptr(crowded.Memory.Total())
	crowded.Pareto[0].Points[2].Cost = *crowded.Budgets[0].Estimated
	if bad := crowded.Inconsistencies(); len(bad) > 0 {
		t.Fatalf("the crowded data contradict themselves: %v", bad)
	}
	for name, d := range map[string]*Data{"sample": sample(t), "crowded": crowded, "demo": demo(t)} {
		t.Run(name, func(t *testing.T) {
			charts, err := Charts(d)
			if err != nil {
				t.Fatal(err)
			}
			lay := browsertest.Check(t, bin, writePage(t, d), len(charts), d, FormatNumber) // Check reports lay.Problems()
			roles := map[string]int{}
			for _, c := range lay.Charts {
				for _, p := range c.Parts {
					roles[p.Role]++
				}
			}
			if roles["legend"] == 0 || roles["data"] == 0 || roles["line"] == 0 || roles["label"] == 0 {
				t.Fatalf("the charts' parts are not all marked (legend, data, line, label): %v", roles)
			}
		})
	}

	// A legend drawn over the data, as gonum's own legend was, is found.
	p := newPlot("x", "y")
	sc, err := plotter.NewScatter(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(data(sc), tagged{overLegend{}, "legend"})
	svg, err := render(chartWidth, 200, panel{p: p})
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "bad.html")
	doc := strings.Replace(html(t, &Data{Title: "bad"}), `<p class="note">No chart data.</p>`,
		`<figure class="chart" id="chart-bad">`+svg+`</figure>`, 1)
	if err := os.WriteFile(page, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	lay, _ := browsertest.Load(t, bin, page)
	found := false
	for _, s := range lay.Problems() {
		found = found || strings.Contains(s, "legend text \"over the point\" covers data")
	}
	if !found {
		t.Errorf("a legend over a data point is not found: %v", lay.Problems())
	}
}

// overLegend writes a legend entry at the top right of the data, where the
// scatter's point (1, 1) is.
type overLegend struct{}

func (overLegend) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	sty := textStyle(labelSize)
	sty.XAlign = draw.XRight
	c.FillText(sty, vg.Point{X: x(1) + 10, Y: y(1)}, "over the point")
}

func TestLayerLabels(t *testing.T) {
	for n, want := range map[int]string{8: "0 1 2 3 4 5 6 7", 16: "0 2 4 6 8 10 12 14", 32: "0 4 8 12 16 20 24 28"} {
		var got []string
		for _, l := range layerLabels(n) {
			if l != "" {
				got = append(got, l)
			}
		}
		if s := strings.Join(got, " "); s != want {
			t.Errorf("%d layers: labels %s, want %s", n, s, want)
		}
	}
	if s := fmt.Sprint(fmtTokens(204800), " ", fmtTokens(1.5e6), " ", fmtTokens(900)); s != "204.8k 1.5M 900" {
		t.Errorf("token labels %s", s)
	}
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{{0, 512, "0 250 500"}, {0, 14336, "0 4000 8000 12,000"}, {0.5, 1, "0.5 0.75 1"}} {
		var got []string
		for _, tk := range plainTicks.Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("ticks over %g–%g: %s, want %s", tc.lo, tc.hi, s, tc.want)
		}
	}
}
