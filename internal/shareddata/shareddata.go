// Package shareddata locates the read-only data folder that sits beside the
// repository (../shared/data) so that tests can use real measurements,
// configs, checkpoints and text when they are present and skip with a clear
// message when they are not. Nothing from that folder is ever copied into the
// repository.
//
// The folder is found, in order, from $AUTOCOMPRESS_SHARED_DATA or from
// ../shared/data relative to the module root (the directory holding go.mod).
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the shared data folder and whether it exists.
func Dir() (string, bool) {
	if d := os.Getenv("AUTOCOMPRESS_SHARED_DATA"); d != "" {
		st, err := os.Stat(d)
		return d, err == nil && st.IsDir()
	}
	root, ok := moduleRoot()
	if !ok {
		return "", false
	}
	d := filepath.Join(root, "..", "shared", "data")
	st, err := os.Stat(d)
	return d, err == nil && st.IsDir()
}

// Path returns the path of rel inside the shared data folder and whether it exists.
func Path(rel string) (string, bool) {
	d, ok := Dir()
	if !ok {
		return "", false
	}
	p := filepath.Join(d, filepath.FromSlash(rel))
	_, err := os.Stat(p)
	return p, err == nil
}

// Require returns the path of rel inside the shared data folder, or skips the
// test with a message naming what is missing.
func Require(tb testing.TB, rel string) string {
	tb.Helper()
	p, ok := Path(rel)
	if !ok {
		tb.Skipf("shared data %q not found (looked in $AUTOCOMPRESS_SHARED_DATA or ../shared/data beside the repository); skipping", rel)
	}
	return p
}

// ModuleRoot returns the directory that holds go.mod, searching upward from
// the working directory.
func ModuleRoot() (string, bool) { return moduleRoot() }

func moduleRoot() (string, bool) {
	d, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, true
		}
		p := filepath.Dir(d)
		if p == d {
			return "", false
		}
		d = p
	}
}
