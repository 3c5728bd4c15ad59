// Package browsertest renders a page in headless Chromium for tests and
// checks what a person would see: no script errors, charts present and not
// blank in a screenshot, and the numbers on the page equal to the data they
// came from. It is imported by tests only.
package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	stdhtml "html"
)

// Browser returns a headless Chromium, or skips the test: Debian's
// chromium-headless-shell (.ci/run installs it), chromium, or
// $AUTOCOMPRESS_CHROMIUM.
func Browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AUTOCOMPRESS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no headless Chromium found (apt-get install chromium-headless-shell, or set $AUTOCOMPRESS_CHROMIUM); skipping the browser check of the report")
	return ""
}

func chromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--user-data-dir=" + t.TempDir(), "--no-first-run",
		"--virtual-time-budget=3000"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, errb.String())
	}
	return out.Bytes()
}

// Box is a rectangle on the page, in CSS pixels from its top left.
type Box struct{ X, Y, W, H float64 }

// Intersects reports whether b and o share more than tol pixels each way.
func (b Box) Intersects(o Box, tol float64) bool {
	return b.X+b.W-tol > o.X && o.X+o.W-tol > b.X && b.Y+b.H-tol > o.Y && o.Y+o.H-tol > b.Y
}

// Inside reports whether b lies within o, give or take tol pixels.
func (b Box) Inside(o Box, tol float64) bool {
	return b.X >= o.X-tol && b.Y >= o.Y-tol && b.X+b.W <= o.X+o.W+tol && b.Y+b.H <= o.Y+o.H+tol
}

// Part is one drawn element of a chart's SVG: its box, its role (the
// data-role of the group it is in: "data" for points and bars, "line" for
// lines, "legend", "label"; "axis" for the rest), its tag, and for text its
// content and computed font family.
type Part struct {
	Box
	Role, Tag, Text, Font string
}

// Chart is one figure.chart on the page: its SVG's box and parts.
type Chart struct {
	ID string
	Box
	Parts []Part
}

// Layout is what the page's load handler records in its <pre id="layout">.
type Layout struct {
	Charts []Chart
	Errors []string
	// Content is the width of the page's content column.
	Content       float64
	Width, Height int
}

// Readability limits of Problems.
const (
	// MinTextPx is the smallest height on the page of a chart's text.
	MinTextPx = 13
	// MinChartShare is the smallest share of the content width a chart
	// may take.
	MinChartShare = 0.9
)

// Problems lists what would make a person misread or struggle with the
// charts: a legend or label covering a data point, bar or line; two texts
// overlapping; anything drawn outside its chart; type smaller than
// MinTextPx or in a serif face; a chart narrower than MinChartShare of the
// content column.
func (l *Layout) Problems() []string {
	var out []string
	for _, c := range l.Charts {
		if l.Content > 0 && c.W < MinChartShare*l.Content {
			out = append(out, fmt.Sprintf("%s: %.0f px wide, %.0f %% of the page's %.0f px", c.ID, c.W, 100*c.W/l.Content, l.Content))
		}
		var texts, covers, covered []Part
		for _, p := range c.Parts {
			if !p.Inside(c.Box, 1) {
				out = append(out, fmt.Sprintf("%s: %s sticks out of the chart (%+v, chart %+v)", c.ID, p.name(), p.Box, c.Box))
			}
			if p.Tag == "text" {
				texts = append(texts, p)
				if p.H < MinTextPx {
					out = append(out, fmt.Sprintf("%s: %s is %.1f px high, under %d px", c.ID, p.name(), p.H, MinTextPx))
				}
				if f := strings.ToLower(p.Font); strings.Contains(f, "serif") && !strings.Contains(f, "sans") {
					out = append(out, fmt.Sprintf("%s: %s is set in %s", c.ID, p.name(), p.Font))
				}
			}
			switch p.Role {
			case "legend", "label":
				covers = append(covers, p)
			case "data", "line":
				if p.Role == "line" { // a line's box has no height or width of its own
					p.Box = Box{p.X - 1, p.Y - 1, p.W + 2, p.H + 2}
				}
				covered = append(covered, p)
			}
		}
		for _, a := range covers {
			for _, b := range covered {
				if a.Intersects(b.Box, 0.5) {
					out = append(out, fmt.Sprintf("%s: %s %s covers %s %s (%+v over %+v)", c.ID, a.Role, a.name(), b.Role, b.name(), a.Box, b.Box))
				}
			}
		}
		for i, a := range texts {
			for _, b := range texts[i+1:] {
				if a.Intersects(b.Box, 0.5) {
					out = append(out, fmt.Sprintf("%s: texts %s and %s overlap", c.ID, a.name(), b.name()))
				}
			}
		}
	}
	return out
}

func (p Part) name() string {
	if p.Tag == "text" {
		return fmt.Sprintf("text %q", p.Text)
	}
	return p.Tag
}

// Load renders the HTML file page in bin (see Browser) and returns the
// layout its load handler recorded and the rendered DOM.
func Load(t *testing.T, bin, page string) (*Layout, string) {
	t.Helper()
	dom := chromium(t, bin, fmt.Sprintf("--window-size=%d,900", pageWidth), "--dump-dom", "file://"+page)
	m := regexp.MustCompile(`(?s)<pre id="layout" hidden="">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's load handler did not run (no layout in the rendered DOM):\n%.2000s", dom)
	}
	var lay Layout
	if err := json.Unmarshal([]byte(stdhtml.UnescapeString(string(m[1]))), &lay); err != nil {
		t.Fatalf("layout: %v: %.2000s", err, m[1])
	}
	return &lay, string(dom)
}

// pageWidth is the browser window's width.
const pageWidth = 1280

// Check renders the HTML file page in bin (see Browser) and checks it: the
// page's load handler ran without script errors, it holds charts charts
// (figure.chart elements) each at least 200×100 px, not blank in a
// screenshot and without any of the Problems a person would have reading
// it, and every element marked data-json="PATH" shows the number at PATH
// of data (its JSON form) as format prints it. It returns the layout.
//
// $REPORT_SCREENSHOT names a file to keep the screenshot in for a person to
// look at, or an existing folder to keep one per test in.
func Check(t *testing.T, bin, page string, charts int, data any, format func(float64) string) *Layout {
	t.Helper()
	lay, dom := Load(t, bin, page)
	if len(lay.Errors) > 0 {
		t.Errorf("script errors on load: %v", lay.Errors)
	}
	if len(lay.Charts) != charts {
		t.Fatalf("%d charts on the page, want %d: %+v", len(lay.Charts), charts, lay.Charts)
	}
	CheckNumbers(t, dom, data, format)
	for _, p := range lay.Problems() {
		t.Error(p)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	chromium(t, bin, fmt.Sprintf("--window-size=%d,%d", pageWidth, lay.Height+20), "--screenshot="+shot, "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	for _, c := range lay.Charts {
		if c.W < 200 || c.H < 100 {
			t.Errorf("chart %s is %gx%g px on the page, too small to read", c.ID, c.W, c.H)
			continue
		}
		r := image.Rect(int(c.X), int(c.Y), int(c.X+c.W), int(c.Y+c.H)).Intersect(img.Bounds())
		ink, colours := inkAndColours(img, r)
		if ink < 0.01 || colours < 3 {
			t.Errorf("chart %s looks blank in the screenshot: %.2f %% ink, %d colours in %v", c.ID, 100*ink, colours, r)
		}
		t.Logf("chart %s: %v, %.1f %% ink, %d colours, %d parts", c.ID, r, 100*ink, colours, len(c.Parts))
	}
	if out := os.Getenv("REPORT_SCREENSHOT"); out != "" {
		if fi, err := os.Stat(out); err == nil && fi.IsDir() {
			out = filepath.Join(out, strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())+".png")
		}
		b, _ := os.ReadFile(shot)
		os.WriteFile(out, b, 0o644) //output:not-an-output: a copy of a test's screenshot for a person to look at
	}
	return lay
}

// inkAndColours returns the fraction of non-white pixels in r and the number
// of distinct (coarsely quantised) colours.
func inkAndColours(img image.Image, r image.Rectangle) (float64, int) {
	if r.Empty() {
		return 0, 0
	}
	ink, total := 0, 0
	seen := map[uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			total++
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				ink++
			}
			seen[(cr>>12)<<8|(cg>>12)<<4|cb>>12] = true
		}
	}
	return float64(ink) / float64(total), len(seen)
}

// CheckNumbers finds every element of html marked data-json="PATH" and
// checks that its text is the number at PATH of data's JSON form, as
// format prints it (see Mismatches).
func CheckNumbers(t *testing.T, html string, data any, format func(float64) string) {
	t.Helper()
	ms, n, err := Mismatches(html, data, format)
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d numbers marked on the page", n)
	}
	for _, m := range ms {
		t.Error(m)
	}
}

// Mismatches lists the elements of html marked data-json="PATH" whose text
// is not the number at PATH of data's JSON form as format prints it, and
// counts the marked elements. A figure derived from another (a memory
// plan's total, a caption's budget) carries the path of the one it must
// equal, so this checks it against that.
func Mismatches(html string, data any, format func(float64) string) ([]string, int, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, 0, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, 0, err
	}
	re := regexp.MustCompile(`data-json="([^"]+)"[^>]*>([^<]*)<`)
	ms := re.FindAllStringSubmatch(html, -1)
	var out []string
	for _, m := range ms {
		v, ok := lookup(tree, m[1])
		if !ok {
			out = append(out, fmt.Sprintf("the page shows %q for %s, which the JSON lacks", m[2], m[1]))
			continue
		}
		if got, want := strings.TrimSpace(stdhtml.UnescapeString(m[2])), format(v); got != want {
			out = append(out, fmt.Sprintf("%s: the page shows %q, the JSON holds %v (%q)", m[1], got, v, want))
		}
	}
	return out, len(ms), nil
}

func lookup(tree any, path string) (float64, bool) {
	cur := tree
	for _, k := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[k]
			if !ok {
				return 0, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return 0, false
			}
			cur = c[i]
		default:
			return 0, false
		}
	}
	f, ok := cur.(float64)
	return f, ok
}
