package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinaryLinksNoTestCode keeps test helpers out of the binary: the
// command's dependencies include neither package testing nor the helper
// packages built on it (sdtest, testutil, and gosource, the lint tests'
// walk of the module).
func TestBinaryLinksNoTestCode(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		if d == "testing" || strings.HasPrefix(d, "testing/") || strings.HasSuffix(d, "/sdtest") || strings.HasSuffix(d, "/testutil") || strings.HasSuffix(d, "/internal/gosource") {
			t.Errorf("the binary links %s", d)
		}
	}
}
