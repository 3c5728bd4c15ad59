//go:build !unix

package servebench

// ProcessCPUSeconds returns 0: this platform's process CPU time is not read.
func ProcessCPUSeconds() float64 { return 0 }
