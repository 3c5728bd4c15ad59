//go:build unix

package servebench

import "syscall"

// ProcessCPUSeconds returns the user and system CPU time this process has
// used so far (0 where unknown): on a shared machine, what a piece of work
// cost apart from the wait for the cores.
func ProcessCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
