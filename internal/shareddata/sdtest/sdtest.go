// Package sdtest holds the test helpers of package shareddata, kept apart
// so that the binary, which links shareddata (calibrate finds the ground
// truth through it), does not link package testing.
package sdtest

import (
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// Require returns the path of rel inside the shared data folder, or skips the
// test with a message naming what is missing and where it was looked for.
func Require(tb testing.TB, rel string) string {
	tb.Helper()
	p, ok := shareddata.Path(rel)
	if !ok {
		tb.Skipf("shared data %q not found (looked in $AUTOCOMPRESS_SHARED_DATA or ../shared/data beside the repository); skipping", rel)
	}
	return p
}
