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

type layout struct {
	Charts []struct {
		ID         string
		X, Y, W, H float64
	}
	Errors        []string
	Width, Height int
}

// Check renders the HTML file page in bin (see Browser) and checks it: the
// page's load handler ran without script errors, it holds charts charts
// (figure.chart elements) each at least 200×100 px and not blank in a
// screenshot, and every element marked data-json="PATH" shows the number
// at PATH of data (its JSON form) as format prints it.
func Check(t *testing.T, bin, page string, charts int, data any, format func(float64) string) {
	t.Helper()
	const width = 1280
	dom := chromium(t, bin, fmt.Sprintf("--window-size=%d,900", width), "--dump-dom", "file://"+page)
	m := regexp.MustCompile(`(?s)<pre id="layout" hidden="">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's load handler did not run (no layout in the rendered DOM):\n%.2000s", dom)
	}
	var lay layout
	if err := json.Unmarshal([]byte(stdhtml.UnescapeString(string(m[1]))), &lay); err != nil {
		t.Fatalf("layout: %v: %s", err, m[1])
	}
	if len(lay.Errors) > 0 {
		t.Errorf("script errors on load: %v", lay.Errors)
	}
	if len(lay.Charts) != charts {
		t.Fatalf("%d charts on the page, want %d: %+v", len(lay.Charts), charts, lay.Charts)
	}
	CheckNumbers(t, string(dom), data, format)

	shot := filepath.Join(t.TempDir(), "shot.png")
	chromium(t, bin, fmt.Sprintf("--window-size=%d,%d", width, lay.Height+20), "--screenshot="+shot, "file://"+page)
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
		t.Logf("chart %s: %v, %.1f %% ink, %d colours", c.ID, r, 100*ink, colours)
	}
	if out := os.Getenv("REPORT_SCREENSHOT"); out != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(out, b, 0o644) //output:not-an-output: a copy of a test's screenshot for a person to look at
	}
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
// format prints it.
func CheckNumbers(t *testing.T, html string, data any, format func(float64) string) {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`data-json="([^"]+)"[^>]*>([^<]*)<`)
	ms := re.FindAllStringSubmatch(html, -1)
	if len(ms) < 20 {
		t.Fatalf("only %d numbers marked on the page", len(ms))
	}
	for _, m := range ms {
		v, ok := lookup(tree, m[1])
		if !ok {
			t.Errorf("the page shows %q for %s, which the JSON lacks", m[2], m[1])
			continue
		}
		if got, want := strings.TrimSpace(stdhtml.UnescapeString(m[2])), format(v); got != want {
			t.Errorf("%s: the page shows %q, the JSON holds %v (%q)", m[1], got, v, want)
		}
	}
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
