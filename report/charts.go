package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/autocompress/autocompress/internal/human"
)

// Chart is one rendered figure.
type Chart struct {
	ID      string // HTML id, e.g. "chart-shape"
	Title   string
	Caption string
	SVG     string // inline <svg> markup
}

var (
	colParent = color.RGBA{R: 0x9e, G: 0x9e, B: 0x9e, A: 0xff}
	colChild  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colBad    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colGood   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colOther  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	palette   = []color.Color{colChild, colOther, colGood, colBad,
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}}
)

// Charts renders every chart the data supports, in report order.
func Charts(d *Data) ([]Chart, error) {
	var out []Chart
	add := func(c *Chart, err error) error {
		if err != nil {
			return err
		}
		if c != nil {
			out = append(out, *c)
		}
		return nil
	}
	if err := add(shapeChart(d, "ffn")); err != nil {
		return nil, err
	}
	if err := add(shapeChart(d, "heads")); err != nil {
		return nil, err
	}
	for i := range d.Pareto {
		if err := add(paretoChart(&d.Pareto[i], i)); err != nil {
			return nil, err
		}
	}
	if err := add(memoryChart(d)); err != nil {
		return nil, err
	}
	if err := add(trainingChart(d)); err != nil {
		return nil, err
	}
	return out, nil
}

func render(p *plot.Plot, w, h vg.Length) (string, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return "", fmt.Errorf("report: rendering chart: %w", err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return "", fmt.Errorf("report: rendering chart: %w", err)
	}
	s := b.String()
	// Drop the XML prolog so the SVG can sit inline in HTML.
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s, nil
}

// shapeChart draws per layer the child's MLP width (or query heads) beside
// the parent's, so removed layers and sub-blocks show as gaps.
func shapeChart(d *Data, what string) (*Chart, error) {
	if len(d.Parent.Layers) == 0 || len(d.Child.Layers) == 0 {
		return nil, nil
	}
	val := func(l Layer) float64 {
		if what == "ffn" {
			return float64(l.FFN)
		}
		return float64(l.Heads)
	}
	n := len(d.Parent.Layers)
	pv := make(plotter.Values, n)
	for i, l := range d.Parent.Layers {
		pv[i] = val(l)
	}
	// The child's layers are aligned to the parent's when the child keeps
	// every layer; otherwise they are drawn on their own axis positions.
	aligned := d.Child.Aligned(n)
	cv := make(plotter.Values, len(aligned))
	for i, l := range aligned {
		if l != nil {
			cv[i] = val(*l)
		}
	}
	p := plot.New()
	title, unit := "MLP width per layer", "neurons"
	if what == "heads" {
		title, unit = "Query heads per layer", "heads"
	}
	p.Title.Text = title
	p.X.Label.Text = "layer"
	p.Y.Label.Text = unit
	bw := vg.Points(7)
	bp, err := plotter.NewBarChart(pv, bw)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	bp.Color, bp.LineStyle.Width, bp.Offset = colParent, 0, -bw/2
	bc, err := plotter.NewBarChart(cv, bw)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	bc.Color, bc.LineStyle.Width, bc.Offset = colChild, 0, bw/2
	p.Add(bp, bc)
	p.Legend.Add("parent ("+d.Parent.Name+")", bp)
	p.Legend.Add("child", bc)
	p.Legend.Top = true
	p.Y.Min = 0
	top := 0.0
	for _, v := range pv {
		top = math.Max(top, v)
	}
	p.Y.Max = 1.3 * top // room for the legend above the bars
	p.NominalX(layerLabels(len(aligned))...)
	svg, err := render(p, 16*vg.Centimeter, 8*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	cap := fmt.Sprintf("Parent %d layers, child %d; a zero bar is a removed sub-block.", n, len(d.Child.Layers))
	return &Chart{ID: "chart-shape-" + what, Title: title, Caption: cap, SVG: svg}, nil
}

func layerLabels(n int) []string {
	out := make([]string, n)
	for i := range out {
		if n <= 16 || i%4 == 0 {
			out[i] = fmt.Sprint(i)
		}
	}
	return out
}

// paretoChart draws the quality proxy against one budgeted cost, the feasible
// and infeasible candidates, the chosen one and the budget line.
func paretoChart(f *Pareto, i int) (*Chart, error) {
	if len(f.Points) == 0 {
		return nil, nil
	}
	var ok, bad, chosen plotter.XYs
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range f.Points {
		xy := plotter.XY{X: pt.Cost, Y: pt.Quality}
		switch {
		case pt.Chosen:
			chosen = append(chosen, xy)
		case pt.Feasible:
			ok = append(ok, xy)
		default:
			bad = append(bad, xy)
		}
		lo, hi = math.Min(lo, pt.Quality), math.Max(hi, pt.Quality)
	}
	p := plot.New()
	p.Title.Text = "Quality proxy against " + f.Cost
	p.X.Label.Text = f.Cost + " (" + f.Unit + ")"
	p.Y.Label.Text = f.Quality
	for _, s := range []struct {
		xy    plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
		r     vg.Length
		name  string
	}{
		{bad, colParent, draw.CircleGlyph{}, 2, "over a budget"},
		{ok, colChild, draw.CircleGlyph{}, 2.5, "meets every budget"},
		{chosen, colBad, draw.PyramidGlyph{}, 6, "chosen"},
	} {
		if len(s.xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xy)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.c, s.shape, s.r
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	if f.Limit > 0 && !math.IsInf(lo, 0) {
		if lo == hi {
			lo, hi = lo-1, hi+1
		}
		ln, err := plotter.NewLine(plotter.XYs{{X: f.Limit, Y: lo}, {X: f.Limit, Y: hi}})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		ln.Color, ln.Dashes, ln.Width = colBad, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1.5)
		p.Add(ln)
		p.Legend.Add(fmt.Sprintf("budget %s %s", fmtNum(f.Limit), f.Unit), ln)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	svg, err := render(p, 16*vg.Centimeter, 10*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	cap := fmt.Sprintf("%d candidates; the dashed line is the %s budget.", len(f.Points), f.Cost)
	return &Chart{ID: fmt.Sprintf("chart-pareto-%d", i), Title: p.Title.Text, Caption: cap, SVG: svg}, nil
}

// memoryChart draws the memory plan as one bar per term, beside the budget.
func memoryChart(d *Data) (*Chart, error) {
	if len(d.Memory.Terms) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Memory plan"
	p.Y.Label.Text = "GiB"
	bw := vg.Points(22)
	names := make([]string, 0, len(d.Memory.Terms)+2)
	var bars []*plotter.BarChart
	vals := make(plotter.Values, 0, len(d.Memory.Terms)+2)
	for _, t := range d.Memory.Terms {
		names = append(names, t.Name)
		vals = append(vals, t.GiB)
	}
	names = append(names, "total")
	vals = append(vals, d.Memory.TotalGiB())
	if d.Memory.MeasuredGiB != nil {
		names = append(names, "measured")
		vals = append(vals, *d.Memory.MeasuredGiB)
	}
	b, err := plotter.NewBarChart(vals, bw)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	b.Color, b.LineStyle.Width = colChild, 0
	bars = append(bars, b)
	for _, b := range bars {
		p.Add(b)
	}
	p.NominalX(names...)
	p.Y.Min = 0
	if d.Memory.BudgetGiB > 0 {
		ln, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: d.Memory.BudgetGiB}, {X: float64(len(names)) - 0.5, Y: d.Memory.BudgetGiB}})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		ln.Color, ln.Dashes, ln.Width = colBad, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1.5)
		p.Add(ln)
		p.Legend.Add(fmt.Sprintf("budget %s GiB", fmtNum(d.Memory.BudgetGiB)), ln)
		p.Y.Max = math.Max(p.Y.Max, d.Memory.BudgetGiB*1.1)
	}
	p.Legend.Top = true
	svg, err := render(p, 16*vg.Centimeter, 8*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "chart-memory", Title: "Memory plan", Caption: "Estimated memory of the child at the workload's context and concurrency, by term.", SVG: svg}, nil
}

// trainingChart draws the recovery loss (and held-out loss) against tokens.
func trainingChart(d *Data) (*Chart, error) {
	if len(d.Training) < 2 {
		return nil, nil
	}
	var tr, ev plotter.XYs
	for _, t := range d.Training {
		tr = append(tr, plotter.XY{X: float64(t.Tokens), Y: t.Loss})
		if t.EvalLoss != nil {
			ev = append(ev, plotter.XY{X: float64(t.Tokens), Y: *t.EvalLoss})
		}
	}
	p := plot.New()
	p.Title.Text = "Recovery: loss against tokens"
	p.X.Label.Text = "tokens"
	p.Y.Label.Text = "loss"
	l, err := plotter.NewLine(tr)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	l.Color, l.Width = colChild, vg.Points(1.2)
	p.Add(l)
	p.Legend.Add("training loss", l)
	if len(ev) > 0 {
		e, s, err := plotter.NewLinePoints(ev)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		e.Color, e.Width, s.Color = colOther, vg.Points(1.5), colOther
		p.Add(e, s)
		p.Legend.Add("held-out loss", e, s)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	svg, err := render(p, 16*vg.Centimeter, 8*vg.Centimeter)
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "chart-training", Title: p.Title.Text, Caption: fmt.Sprintf("%d logged steps.", len(d.Training)), SVG: svg}, nil
}

// FormatNumber prints a number as the report shows it: integers of a
// million and more with thousands separators, others with up to four
// significant digits and no exponent for everyday magnitudes.
func FormatNumber(v float64) string { return fmtNum(v) }

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1e6 && v == math.Trunc(v) && a < 1e18:
		return human.Thousands(int64(v))
	case a >= 1e6:
		return fmt.Sprintf("%.4g", v)
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.3g", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
