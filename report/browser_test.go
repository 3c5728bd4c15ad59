package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/internal/browsertest"
)

// TestReportInBrowser renders the sample report in headless Chromium and
// checks what a person would see: the page loads without script errors,
// every chart is on the page with a size and is not blank in a screenshot,
// and every number in the tables is the number in the run's JSON.
func TestReportInBrowser(t *testing.T) {
	bin := browsertest.Browser(t)
	d := sample(t)
	page := filepath.Join(t.TempDir(), "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	browsertest.Check(t, bin, page, 5, d, FormatNumber)
}
