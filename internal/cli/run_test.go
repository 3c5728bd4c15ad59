package cli

import "testing"

// TestMeasureBinary: the measure stage runs bench-serve with this binary
// whatever it is named (a renamed autocompress measured in process before,
// so its report had no peak memory); only go test binaries measure in
// process.
func TestMeasureBinary(t *testing.T) {
	for _, c := range []struct {
		path string
		test bool
	}{
		{"/usr/local/bin/autocompress", false},
		{"/tmp/ac-h2h", false},
		{`C:\tools\ac.exe`, false},
		{"/tmp/go-build1/b001/cli.test", true},
		{`C:\x\cli.test.exe`, true},
		{"/tmp/testdata", false},
	} {
		if got := isTestBinary(c.path); got != c.test {
			t.Errorf("isTestBinary(%q) = %v, want %v", c.path, got, c.test)
		}
	}
	self, err := measureBinary()
	if err != nil || self != "" {
		t.Errorf("under go test: measureBinary() = %q, %v; want in process", self, err)
	}
}
