package main

import (
	"os"
	"testing"

	"github.com/autocompress/autocompress/estimate/nativecal"
)

// TestMain keeps the binaries these tests run from probing this host for
// the native calibration (and from writing its cache into the user's
// configuration directory): they use the committed coefficients, with a
// warning when this is not their host.
func TestMain(m *testing.M) {
	os.Setenv(nativecal.OfflineEnv, "1")
	os.Exit(m.Run())
}
