package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/nativecal"
)

// TestCalibrateNativeFromRows refits the committed rows into a temporary
// file: the result must be the embedded coefficient file's fit, and
// validate-native must print its report from the same rows.
func TestCalibrateNativeFromRows(t *testing.T) {
	rows, err := nativecal.CommittedRows()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Skip("no committed sweep rows (estimate/nativecal/sweep.csv is empty)")
	}
	dir := t.TempDir()
	csv := filepath.Join("..", "..", "estimate", "nativecal", "sweep.csv")
	out := filepath.Join(dir, "native.json")
	code, stdout, stderr := genRunCLI("calibrate-native", "--from-rows", csv, "--out", out)
	if code != 0 || !strings.Contains(stdout, "held out") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// Byte for byte the committed file: everything in it comes from the rows.
	committed, err := os.ReadFile(filepath.Join("..", "..", "estimate", "native_coefficients.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(committed) {
		t.Errorf("calibrate-native --from-rows sweep.csv differs from estimate/native_coefficients.json:\n%s", b)
	}
	f, err := estimate.ParseNativeCoeffs(b)
	if err != nil {
		t.Fatal(err)
	}
	got, want := f.Machines["cpu-local"].TimeVector(), estimate.DefaultNativeCoeffs().Machines["cpu-local"].TimeVector()
	for k := range got {
		if d := got[k] - want[k]; d > 1e-9*want[k]+1e-15 || -d > 1e-9*want[k]+1e-15 {
			t.Errorf("%s: refitted %g, embedded %g", estimate.NativeTimeNames[k], got[k], want[k])
		}
	}
	// An existing file is not replaced without --force.
	if code, _, stderr := genRunCLI("calibrate-native", "--from-rows", csv, "--out", out); code != ExistsExit || !strings.Contains(stderr, "--force") {
		t.Errorf("overwrite without --force: exit %d, %s", code, stderr)
	}
	code, stdout, stderr = genRunCLI("validate-native", "--coeffs", out, "--json")
	var rep nativecal.Report
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || rep.HeldOut.Rows == 0 {
		t.Fatalf("validate-native: exit %d: %s %s", code, stdout, stderr)
	}
}

func TestCalibrateNativeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"calibrate-native", "--from-rows", "x.csv", "--quick"}, "does not combine"},
		{[]string{"calibrate-native", "--repeats", "0"}, "-repeats"},
		{[]string{"calibrate-native", "--from-rows", "/nonexistent.csv", "--out", filepath.Join(t.TempDir(), "o.json")}, "--from-rows"},
		{[]string{"validate-native", "--rows", "/nonexistent.csv"}, "--rows"},
		{[]string{"validate-native", "extra"}, "unexpected"},
	} {
		code, _, stderr := genRunCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, %q (want %q)", tc.args, code, stderr, tc.msg)
		}
	}
}
