//go:build unix

package tokenizer

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time of this process, so that
// benchmarks can report throughput per CPU-second, which stays meaningful on
// a machine shared with other jobs (wall-clock MB/s does not).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
