package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsCheckedBeforeWork (issue 17, class 8): an output, and every
// input the end of a job needs, is checked before the work, not after it.
// The commands run as a user runs them (a fresh process each, so the
// environment is read as it is on a first call). Each refusal must come
// with nothing measured, fitted or computed: the test reads what the
// command printed, never how long it took.
func TestOutputsCheckedBeforeWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; runs without -short")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	run := func(env []string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String()
	}
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable := filepath.Join(file, "sub", "out.json") // its parent is a file
	rows, err := filepath.Abs(filepath.Join("..", "..", "estimate", "nativecal", "sweep.csv"))
	if err != nil {
		t.Fatal(err)
	}

	// The case: the local override named by the environment does
	// not exist yet; calibrate-native is what writes it.
	newJSON := filepath.Join(dir, "new.json")
	env := []string{"AUTOCOMPRESS_NATIVE_COEFFS=" + newJSON}
	if code, out := run(env, "calibrate-native", "--from-rows", rows); code != 0 {
		t.Fatalf("calibrate-native into a new $AUTOCOMPRESS_NATIVE_COEFFS: exit %d: %s", code, out)
	}
	if _, err := os.Stat(newJSON); err != nil {
		t.Fatalf("calibrate-native did not write the override: %v", err)
	}
	est := []string{"estimate", "--engine", "native", "--gpu", "cpu-local", "--model", "parent", "--isl", "64", "--osl", "16", "--concurrency", "1"}
	if code, out := run(env, est...); code != 0 || !strings.Contains(out, "native@"+newJSON) {
		t.Errorf("estimate with the new override: exit %d: %s", code, out)
	}

	// An override that does not exist: estimate and run say so at once,
	// naming the variable (run before its importance stage).
	missing := []string{"AUTOCOMPRESS_NATIVE_COEFFS=" + filepath.Join(dir, "missing.json")}
	if code, out := run(missing, est...); code == 0 || !strings.Contains(out, "AUTOCOMPRESS_NATIVE_COEFFS") || !strings.Contains(out, "does not exist") {
		t.Errorf("estimate with a missing override: exit %d: %s", code, out)
	}
	runDir := filepath.Join(dir, "run")
	if code, out := run(missing, "run", "--dir", runDir); code == 0 || !strings.Contains(out, "AUTOCOMPRESS_NATIVE_COEFFS") || strings.Contains(out, "importance") {
		t.Errorf("run with a missing override: exit %d: %s", code, out)
	}
	if ents, _ := os.ReadDir(runDir); len(ents) > 0 {
		t.Errorf("run with a missing override left %v", ents)
	}

	// Outputs that could not be written are refused before the work.
	for _, tc := range []struct {
		name string
		args []string
		work string // what the command prints once the work has started
	}{
		{"calibrate-native --out", []string{"calibrate-native", "--quick", "--out", unwritable}, "measuring"},
		{"calibrate-native --rows-out", []string{"calibrate-native", "--quick", "--out", filepath.Join(dir, "q.json"), "--rows-out", unwritable}, "measuring"},
		{"calibrate --out", []string{"calibrate", "--user", rows, "--out", unwritable}, "measurement rows"},
		{"search --out", []string{"search", "--model", "parent", "--gpu", "cpu-local", "--engine", "native", "--isl", "64", "--osl", "16",
			"--concurrency", "1", "--max-params", "1B", "--out", filepath.Join(file, "child")}, "candidates"},
	} {
		code, out := run(nil, tc.args...)
		if code == 0 || !strings.Contains(out, "not a directory") || strings.Contains(out, tc.work) {
			t.Errorf("%s into %s: exit %d: %s", tc.name, unwritable, code, out)
		}
	}
}
