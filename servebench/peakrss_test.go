package servebench

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestResetPeakRSS: after a reset the peak is this process's current
// resident set, not the peak of a large allocation freed before it.
func TestResetPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM and clear_refs are Linux's")
	}
	big := make([]byte, 256<<20)
	for i := range big {
		big[i] = 1
	}
	before := PeakRSS()
	if before < 256<<20 {
		t.Fatalf("peak %d after touching 256 MiB", before)
	}
	big = nil
	runtime.GC()
	debug.FreeOSMemory()
	if !ResetPeakRSS() {
		t.Skip("this kernel refused the reset (clear_refs)")
	}
	if after := PeakRSS(); after >= before-128<<20 {
		t.Errorf("peak %d MiB after the reset, %d MiB before: not reset", after>>20, before>>20)
	}
}
