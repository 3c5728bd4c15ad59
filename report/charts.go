package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is one rendered figure.
type Chart struct {
	ID      string // HTML id, e.g. "chart-shape"
	Title   string
	Caption caption // the caption, with its figures marked (see captionPart)
	SVG     string  // inline <svg> markup
}

// caption is a figure's caption: text parts, some of them numbers taken from the
// data, each with the JSON path of the figure it must equal (so that a test
// checks the caption against the budget table or the data).
type caption []captionPart

type captionPart struct {
	Text string
	Path string // "": plain text
}

func (t caption) String() string {
	var b strings.Builder
	for _, p := range t {
		b.WriteString(p.Text)
	}
	return b.String()
}

// words and fig build a caption.
func words(s string) captionPart             { return captionPart{Text: s} }
func fig(v float64, path string) captionPart { return captionPart{Text: fmtNum(v), Path: path} }

var (
	colParent = color.RGBA{R: 0x9e, G: 0x9e, B: 0x9e, A: 0xff}
	colChild  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colTotal  = color.RGBA{R: 0x0b, G: 0x3d, B: 0x6b, A: 0xff}
	colBad    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colGood   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colOther  = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colInk    = color.RGBA{R: 0x22, G: 0x22, B: 0x22, A: 0xff}
)

// The charts are drawn chartWidth points wide and shown at the page's
// content width (about 1,100 px: 1 pt here is about 1.3 px there), in a
// sans-serif face of tickSize and labelSize points.
const (
	chartWidth = 840
	tickSize   = 11
	labelSize  = 12
)

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: colInk, Font: font.From(sans, size), XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot in the report's type, without a title (the
// figure's heading is HTML) or a legend (drawn beside the data, see key).
func newPlot(xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, labelSize)
		a.Label.TextStyle.Color = colInk
		a.Tick.Label.Font = font.From(sans, tickSize)
		a.Tick.Label.Color = colInk
		a.Label.Padding = vg.Points(4)
	}
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks, plainTicks
	return p
}

// plainTicks are gonum's ticks labelled without trailing zeros ("500",
// not "500.00") and with thousands separators ("14,336").
var plainTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = trimZeros(ts[i].Label)
		if v, err := strconv.ParseInt(ts[i].Label, 10, 64); err == nil && (v >= 10000 || v <= -10000) {
			ts[i].Label = groupThousands(v)
		}
	}
	return ts
})

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
		if err := add(paretoChart(d, i)); err != nil {
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

// A key is one legend entry. Legends are drawn in a strip above the data
// area, never over it.
type key struct {
	name   string
	thumbs []plot.Thumbnailer
}

// panel is one plot and its legend.
type panel struct {
	p    *plot.Plot
	keys []key
}

const (
	keyRow   = 18 // points per legend row
	keyThumb = 22 // thumbnail width
)

// keyRows lays keys out left to right in rows of width w and returns each
// key's row and x offset, and the number of rows.
func keyRows(keys []key, w vg.Length) (rows []int, xs []vg.Length, n int) {
	sty := textStyle(labelSize)
	var x vg.Length
	row := 0
	for _, k := range keys {
		kw := keyThumb + 6 + sty.Width(k.name)
		if x > 0 && x+kw > w {
			row, x = row+1, 0
		}
		rows, xs = append(rows, row), append(xs, x)
		x += kw + 20
	}
	if len(keys) == 0 {
		return nil, nil, 0
	}
	return rows, xs, row + 1
}

// drawPanel draws p into c: its legend in a strip along the top, the plot
// below it.
func drawPanel(c draw.Canvas, pn panel) {
	rows, xs, n := keyRows(pn.keys, c.Size().X)
	strip := vg.Length(n*keyRow) + 6
	if n == 0 {
		strip = 8
	}
	sty := textStyle(labelSize)
	for i, k := range pn.keys {
		y := c.Max.Y - vg.Length(rows[i]*keyRow) - keyRow/2
		x := c.Min.X + xs[i]
		mark(c, "begin:legend")
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y - keyRow/2 + 4}, Max: vg.Point{X: x + keyThumb, Y: y + keyRow/2 - 4}}}
		for _, t := range k.thumbs {
			t.Thumbnail(&tc)
		}
		c.FillText(sty, vg.Point{X: x + keyThumb + 6, Y: y}, k.name)
		mark(c, "end")
	}
	// A few points of margin left and right: the browser's box of the
	// rotated axis label reaches past the face's own.
	pn.p.Draw(draw.Crop(c, 6, -6, 0, -strip))
}

// render draws the panels side by side, w points wide in all and h high,
// and returns the inline SVG.
func render(w, h vg.Length, panels ...panel) (string, error) {
	cv := vgsvg.New(w, h)
	dc := draw.New(cv)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pw := w / vg.Length(len(panels))
	for i, pn := range panels {
		left := pw * vg.Length(i)
		drawPanel(draw.Crop(dc, left, -(w-left-pw), 0, 0), pn)
	}
	var b bytes.Buffer
	if _, err := cv.WriteTo(&b); err != nil {
		return "", fmt.Errorf("report: rendering chart: %w", err)
	}
	s := b.String()
	// Drop the XML prolog so the SVG can sit inline in HTML.
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	s = markRE.ReplaceAllStringFunc(s, func(m string) string {
		role := markRE.FindStringSubmatch(m)[1]
		if role == "end" {
			return "</g>\n"
		}
		return `<g data-role="` + strings.TrimPrefix(role, "begin:") + `">` + "\n"
	})
	// The face the text was measured in, then its metric twins.
	s = strings.ReplaceAll(s, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	return s, nil
}

// Marks delimit the elements of one role (data, line, legend, label) in
// the SVG: render turns them into <g data-role="..."> groups, which the
// browser test reads the boxes of to check that no legend or label covers
// the data.
const markPrefix = "@@mark:"

var markRE = regexp.MustCompile(`<text[^>]*>` + markPrefix + `([a-z:]+)@@</text>\n?`)

var markFace = font.DefaultCache.Lookup(font.From(sans, 1), 1)

func mark(c draw.Canvas, what string) {
	c.Canvas.FillString(markFace, vg.Point{}, markPrefix+what+"@@")
}

// tagged draws a plotter inside a role's marks.
type tagged struct {
	pl   plot.Plotter
	role string
}

func (t tagged) Plot(c draw.Canvas, p *plot.Plot) {
	mark(c, "begin:"+t.role)
	t.pl.Plot(c, p)
	mark(c, "end")
}

func (t tagged) DataRange() (xmin, xmax, ymin, ymax float64) {
	if r, ok := t.pl.(plot.DataRanger); ok {
		return r.DataRange()
	}
	return math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
}

func (t tagged) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	if g, ok := t.pl.(plot.GlyphBoxer); ok {
		return g.GlyphBoxes(p)
	}
	return nil
}

func data(pl plot.Plotter) plot.Plotter { return tagged{pl, "data"} }
func line(pl plot.Plotter) plot.Plotter { return tagged{pl, "line"} }

var dashes = []vg.Length{vg.Points(5), vg.Points(3)}

// parentName is how the legend names the parent: "parent", with its name
// where it has one of its own.
func parentName(d *Data) string {
	if n := d.Parent.Name; n != "" && n != "parent" {
		return "parent (" + n + ")"
	}
	return "parent"
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
	top := 0.0
	for i, l := range d.Parent.Layers {
		pv[i] = val(l)
		top = math.Max(top, pv[i])
	}
	aligned := d.Child.Aligned(n)
	cv := make(plotter.Values, len(aligned))
	for i, l := range aligned {
		if l != nil {
			cv[i] = val(*l)
		}
	}
	title, unit := "MLP width per layer", "MLP width (neurons)"
	if what == "heads" {
		title, unit = "Query heads per layer", "query heads"
	}
	p := newPlot("layer", unit)
	// Two bars per layer, filling about 70 % of the layer's slot.
	bw := vg.Length(math.Min(24, 0.35*(chartWidth-80)/float64(len(aligned))))
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
	p.Add(data(bp), data(bc))
	p.Y.Min, p.Y.Max = 0, 1.05*top
	p.NominalX(layerLabels(len(aligned))...)
	svg, err := render(chartWidth, 250, panel{p, []key{{parentName(d), []plot.Thumbnailer{bp}}, {"child", []plot.Thumbnailer{bc}}}})
	if err != nil {
		return nil, err
	}
	removed := n - len(d.Child.Layers)
	cap := caption{words(fmt.Sprintf("The parent has %d layers, the child %d", n, len(d.Child.Layers)))}
	if removed > 0 {
		cap = append(cap, words(fmt.Sprintf(" (%d removed: no blue bar)", removed)))
	}
	cap = append(cap, words("; a missing blue bar in a kept layer is a removed sub-block."))
	return &Chart{ID: "chart-shape-" + what, Title: title, Caption: cap, SVG: svg}, nil
}

func layerLabels(n int) []string {
	out := make([]string, n)
	step := 1
	if n > 24 {
		step = 4
	} else if n > 12 {
		step = 2
	}
	for i := range out {
		if i%step == 0 {
			out[i] = fmt.Sprint(i)
		}
	}
	return out
}

// budgetIndex returns the index of the budget named name, or -1.
func budgetIndex(d *Data, name string) int {
	for i, b := range d.Budgets {
		if b.Name == name {
			return i
		}
	}
	return -1
}

// paretoChart draws the quality proxy against one budgeted cost, the feasible
// and infeasible candidates, the chosen one and the budget line.
func paretoChart(d *Data, i int) (*Chart, error) {
	f := &d.Pareto[i]
	if len(f.Points) == 0 {
		return nil, nil
	}
	var ok, bad, chosen plotter.XYs
	lo, hi := math.Inf(1), math.Inf(-1)
	var pick *Point
	for k, pt := range f.Points {
		xy := plotter.XY{X: pt.Cost, Y: pt.Quality}
		switch {
		case pt.Chosen:
			chosen = append(chosen, xy)
			pick = &f.Points[k]
		case pt.Feasible:
			ok = append(ok, xy)
		default:
			bad = append(bad, xy)
		}
		lo, hi = math.Min(lo, pt.Quality), math.Max(hi, pt.Quality)
	}
	p := newPlot(f.Cost+", estimated ("+f.Unit+")", f.Quality)
	p.Add(plotter.NewGrid())
	var keys []key
	for _, s := range []struct {
		xy    plotter.XYs
		c     color.Color
		shape draw.GlyphDrawer
		r     vg.Length
		name  string
	}{
		{bad, colParent, draw.CircleGlyph{}, 3.5, "misses a budget as searched"},
		{ok, colChild, draw.CircleGlyph{}, 3.5, "meets every budget as searched"},
		{chosen, colBad, draw.PyramidGlyph{}, 7, "the chosen child"},
	} {
		if len(s.xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xy)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.c, s.shape, s.r
		p.Add(data(sc))
		keys = append(keys, key{s.name, []plot.Thumbnailer{sc}})
	}
	if f.Limit > 0 && !math.IsInf(lo, 0) {
		pad := math.Max(0.05*(hi-lo), 0.01)
		ln, err := plotter.NewLine(plotter.XYs{{X: f.Limit, Y: lo - pad}, {X: f.Limit, Y: hi + pad}})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		ln.Color, ln.Dashes, ln.Width = colBad, dashes, vg.Points(1.5)
		p.Add(line(ln))
		keys = append(keys, key{fmt.Sprintf("budget %s %s %s", sense(d, f.Cost), fmtNum(f.Limit), f.Unit), []plot.Thumbnailer{ln}})
	}
	svg, err := render(chartWidth, 330, panel{p, keys})
	if err != nil {
		return nil, err
	}
	cap := caption{words(fmt.Sprintf("%d candidates, each cost as the estimator priced it; \"as searched\": every estimate within its limit less the margin for the estimator's error, and within the limits the measured checks tightened, so a candidate inside this budget can miss another", len(f.Points)))}
	bi := budgetIndex(d, f.Cost)
	bp := fmt.Sprintf("budgets.%d.", bi)
	if f.Limit > 0 && bi >= 0 {
		cap = append(cap, words(fmt.Sprintf("; the dashed line is the %s budget, %s ", f.Cost, sense(d, f.Cost))), fig(f.Limit, bp+"limit"), words(" "+f.Unit))
	}
	if pick != nil && bi >= 0 {
		cap = append(cap, words("; the chosen child at "), fig(pick.Cost, bp+"estimated"), words(" "+f.Unit+" estimated"))
	}
	cap = append(cap, words("."))
	return &Chart{ID: fmt.Sprintf("chart-pareto-%d", i), Title: "Quality proxy against " + f.Cost, Caption: cap, SVG: svg}, nil
}

// sense is "≤" for a ceiling, "≥" for a floor.
func sense(d *Data, name string) string {
	if i := budgetIndex(d, name); i >= 0 && !d.Budgets[i].Max {
		return "≥"
	}
	return "≤"
}

// barLabels writes each bar's value above it, or above a reference line
// (avoid, in data units) that the text would cross.
type barLabels struct {
	xs, vals []float64
	avoid    []float64
}

func (b barLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := textStyle(tickSize)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YBottom
	h := sty.Height("0")
	mark(c, "begin:label")
	for i, v := range b.vals {
		txt := fmtNum(v)
		x, y := trX(b.xs[i]), trY(v)+3
		crosses := func(y vg.Length) bool {
			for _, a := range b.avoid {
				if ay := trY(a); ay >= y-3 && ay <= y+h+3 {
					return true
				}
			}
			return false
		}
		if crosses(y) {
			for _, a := range b.avoid {
				y = max(y, trY(a)+4)
			}
		}
		c.FillText(sty, vg.Point{X: x, Y: y}, txt)
	}
	mark(c, "end")
}

// memoryChart draws the memory plan as one bar per term, the total and the
// measured peak, beside the budget.
func memoryChart(d *Data) (*Chart, error) {
	m := &d.Memory
	if len(m.Terms) == 0 {
		return nil, nil
	}
	unit := m.Unit
	if unit == "" {
		unit = "GiB"
	}
	p := newPlot("", "memory ("+unit+")")
	bw := vg.Points(46)
	var names []string
	var terms plotter.Values
	for _, t := range m.Terms {
		names = append(names, t.Name)
		terms = append(terms, t.Value)
	}
	tb, err := plotter.NewBarChart(terms, bw)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	tb.Color, tb.LineStyle.Width = colChild, 0
	total := m.Total()
	names = append(names, "total")
	tot, err := plotter.NewBarChart(plotter.Values{total}, bw)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	tot.Color, tot.LineStyle.Width, tot.XMin = colTotal, 0, float64(len(terms))
	p.Add(data(tb), data(tot))
	keys := []key{{"estimated, by term", []plot.Thumbnailer{tb}}, {"estimated total", []plot.Thumbnailer{tot}}}
	lab := barLabels{vals: append(append([]float64{}, terms...), total)}
	top := total
	if m.Measured != nil {
		names = append(names, "measured")
		mb, err := plotter.NewBarChart(plotter.Values{*m.Measured}, bw)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		mb.Color, mb.LineStyle.Width, mb.XMin = colGood, 0, float64(len(terms)+1)
		p.Add(data(mb))
		keys = append(keys, key{"measured peak", []plot.Thumbnailer{mb}})
		lab.vals = append(lab.vals, *m.Measured)
		top = math.Max(top, *m.Measured)
	}
	for i := range lab.vals {
		lab.xs = append(lab.xs, float64(i))
	}
	if m.Budget > 0 {
		ln, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: m.Budget}, {X: float64(len(names)) - 0.5, Y: m.Budget}})
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		ln.Color, ln.Dashes, ln.Width = colBad, dashes, vg.Points(1.5)
		p.Add(line(ln))
		keys = append(keys, key{fmt.Sprintf("budget ≤ %s %s", fmtNum(m.Budget), unit), []plot.Thumbnailer{ln}})
		lab.avoid = []float64{m.Budget}
		top = math.Max(top, m.Budget)
	}
	p.Add(lab)
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, 1.15*top // room for the values above the bars
	svg, err := render(chartWidth, 280, panel{p, keys})
	if err != nil {
		return nil, err
	}
	cap := caption{words("The child's memory at the workload's context and concurrency, as the search priced it: estimated total ")}
	bi := budgetIndex(d, "memory")
	bp := fmt.Sprintf("budgets.%d.", bi)
	if bi >= 0 && d.Budgets[bi].Unit == unit {
		cap = append(cap, fig(total, bp+"estimated"))
	} else {
		cap = append(cap, words(fmtNum(total)))
	}
	cap = append(cap, words(" "+unit))
	if m.Measured != nil {
		cap = append(cap, words(", measured peak "))
		if bi >= 0 && d.Budgets[bi].Measured != nil && d.Budgets[bi].Unit == unit {
			cap = append(cap, fig(*m.Measured, bp+"measured"))
		} else {
			cap = append(cap, words(fmtNum(*m.Measured)))
		}
		cap = append(cap, words(" "+unit))
	}
	if m.Budget > 0 && bi >= 0 && d.Budgets[bi].Unit == unit {
		cap = append(cap, words(", budget ≤ "), fig(m.Budget, bp+"limit"), words(" "+unit))
	}
	cap = append(cap, words("."))
	return &Chart{ID: "chart-memory", Title: "Memory plan", Caption: cap, SVG: svg}, nil
}

// tokenTicks labels a token axis in thousands (k) and millions (M).
var tokenTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = fmtTokens(ts[i].Value)
		}
	}
	return ts
})

func fmtTokens(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimZeros(fmt.Sprintf("%.2f", v/1e6)) + "M"
	case a >= 1e3:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "k"
	}
	return fmt.Sprintf("%.0f", v)
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// trainingChart draws the recovery: the training loss (the distillation
// objective) against tokens, and beside it, on an axis of its own, the
// held-out cross-entropy from before the first step to the end, with the
// parent's.
func trainingChart(d *Data) (*Chart, error) {
	if len(d.Training) < 2 {
		return nil, nil
	}
	var tr plotter.XYs
	top := 0.0
	for _, t := range d.Training {
		tr = append(tr, plotter.XY{X: float64(t.Tokens), Y: t.Loss})
		top = math.Max(top, t.Loss)
	}
	p := newPlot("training tokens", "training loss (nats per token)")
	p.X.Tick.Marker = tokenTicks
	p.Add(plotter.NewGrid())
	l, err := plotter.NewLine(tr)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	l.Color, l.Width = colChild, vg.Points(1.5)
	p.Add(line(l))
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1.05*top
	panels := []panel{{p, []key{{"training loss (distillation objective)", []plot.Thumbnailer{l}}}}}
	cap := caption{words("Left: the training loss")}
	if d.Objective != "" {
		cap = append(cap, words(", the "+d.Objective))
	}
	last := len(d.Training) - 1
	cap = append(cap, words(fmt.Sprintf(", %s after %s tokens.", fmtNum(d.Training[last].Loss), groupThousands(d.Training[last].Tokens))))
	if len(d.HeldOut) > 0 {
		q := newPlot("training tokens", "held-out cross-entropy (nats per token)")
		q.X.Tick.Marker = tokenTicks
		q.Add(plotter.NewGrid())
		var ho plotter.XYs
		var before plotter.XYs
		for _, h := range d.HeldOut {
			ho = append(ho, plotter.XY{X: float64(h.Tokens), Y: h.Loss})
			if h.Step == 0 {
				before = append(before, plotter.XY{X: float64(h.Tokens), Y: h.Loss})
			}
		}
		var keys []key
		if d.ParentHeldOut != nil {
			x0, x1 := 0.0, float64(d.Training[last].Tokens)
			pl, err := plotter.NewLine(plotter.XYs{{X: x0, Y: *d.ParentHeldOut}, {X: x1, Y: *d.ParentHeldOut}})
			if err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			pl.Color, pl.Dashes, pl.Width = colInk, dashes, vg.Points(1.2)
			q.Add(line(pl))
			keys = append(keys, key{"the parent", []plot.Thumbnailer{pl}})
		}
		e, s, err := plotter.NewLinePoints(ho)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		e.Color, e.Width = colOther, vg.Points(1.5)
		s.Color, s.Shape, s.Radius = colOther, draw.CircleGlyph{}, 3.5
		q.Add(line(e), data(s))
		keys = append(keys, key{"the child", []plot.Thumbnailer{e, s}})
		if len(before) > 0 {
			b, err := plotter.NewScatter(before)
			if err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			b.Color, b.Shape, b.Radius = colOther, draw.BoxGlyph{}, 5
			q.Add(data(b))
			keys = append(keys, key{"before distillation", []plot.Thumbnailer{b}})
		}
		q.X.Min = 0
		panels = append(panels, panel{q, keys})
		cap = append(cap, words(" Right: the child's cross-entropy on held-out text, measured"))
		if d.HeldOut[0].Step == 0 {
			cap = append(cap, words(" before distillation ("), fig(d.HeldOut[0].Loss, "held_out.0.loss"), words(")"))
		}
		if k := len(d.HeldOut) - 1; k > 0 {
			cap = append(cap, words(" and at the end ("), fig(d.HeldOut[k].Loss, fmt.Sprintf("held_out.%d.loss", k)), words(")"))
		}
		if d.ParentHeldOut != nil {
			cap = append(cap, words("; the parent's, "), fig(*d.ParentHeldOut, "parent_held_out"), words(", is the dashed line"))
		}
		cap = append(cap, words("."))
	}
	svg, err := render(chartWidth, 290, panels...)
	if err != nil {
		return nil, err
	}
	return &Chart{ID: "chart-training", Title: "Recovery", Caption: cap, SVG: svg}, nil
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
		return groupThousands(int64(v))
	case a >= 1e6:
		return fmt.Sprintf("%.4g", v)
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return trimZeros(fmt.Sprintf("%.1f", v))
	case a >= 1:
		return fmt.Sprintf("%.3g", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// groupThousands prints an integer with comma thousands separators.
func groupThousands(v int64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	s := fmt.Sprint(v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
