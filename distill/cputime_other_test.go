//go:build !unix

package distill

// processCPUSeconds is unavailable on this system and returns 0.
func processCPUSeconds() float64 { return 0 }
