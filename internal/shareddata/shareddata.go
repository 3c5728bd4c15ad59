// Package shareddata locates the read-only data folder that sits beside the
// repository (../shared/data) so that tests can use real measurements,
// configs, checkpoints and text when they are present and skip with a clear
// message when they are not. Nothing from that folder is ever copied into the
// repository.
//
// The folder is found, in order, from $AUTOCOMPRESS_SHARED_DATA or from
// ../shared/data relative to the module root (the directory holding go.mod).
//
// # Test caching
//
// Go caches a passing test's result keyed on the files and environment
// variables the test reads, but a folder outside the module that appears
// later does not invalidate it. scripts/test.sh therefore exports
// AUTOCOMPRESS_SHARED_DATA (the resolved folder, or "absent") and
// AUTOCOMPRESS_SHARED_DATA_STAMP (a digest of the folder's listing, sizes and
// times), and Dir reads both through os.Getenv, so adding or changing data
// reruns the tests that use it. The skip helper for tests is in package
// sdtest, so that this package, linked into the binary, does not import
// testing.
package shareddata

import (
	"os"
	"path/filepath"
)

// Dir returns the shared data folder and whether it exists.
func Dir() (string, bool) {
	_ = os.Getenv("AUTOCOMPRESS_SHARED_DATA_STAMP") // read so that go test's cache keys on it
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
