package report

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
	"testing"
	"time"

	stdhtml "html"
)

// browser returns a headless Chromium, or skips: Debian's
// chromium-headless-shell (scripts/test.sh installs it) or chromium.
func browser(t *testing.T) string {
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

// TestReportInBrowser renders the sample report in headless Chromium and
// checks what a person would see: the page loads without script errors,
// every chart is on the page with a size and is not blank in a screenshot,
// and every number in the tables is the number in the run's JSON.
func TestReportInBrowser(t *testing.T) {
	bin := browser(t)
	d := sample(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
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
	if len(lay.Charts) != 5 {
		t.Fatalf("%d charts on the page, want 5: %+v", len(lay.Charts), lay.Charts)
	}
	checkNumbers(t, string(dom), d)

	shot := filepath.Join(dir, "shot.png")
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
	if testing.Verbose() {
		if out := os.Getenv("REPORT_SCREENSHOT"); out != "" {
			data, _ := os.ReadFile(shot)
			os.WriteFile(out, data, 0o644)
		}
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
