package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemoryError reports a model whose weights do not fit in the memory the
// machine has available, before any of it is allocated.
type MemoryError struct {
	Dir       string
	What      string // how it was to be loaded
	Need      int64  // bytes the weights need resident (activations not counted)
	Available int64  // bytes available (MemAvailable, or the cgroup's limit if lower)
	Hint      string // what to do instead, or ""
}

func (e *MemoryError) Error() string {
	msg := fmt.Sprintf("%s: %s needs about %s of memory for its weights (plus activations), but only %s is available", e.Dir, e.What, gib(e.Need), gib(e.Available))
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// availableMemory returns the bytes of memory available to this process:
// /proc/meminfo's MemAvailable, lowered to what the cgroup (v2) limit
// leaves, and false where neither can be read (then nothing is checked).
// A variable so that tests can pretend a small machine.
var availableMemory = func() (int64, bool) {
	avail, ok := memAvailable()
	if max, cur, ok2 := cgroupMemory(); ok2 && max > 0 {
		if left := max - cur; !ok || left < avail {
			avail, ok = left, true
		}
	}
	return avail, ok
}

func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

func cgroupMemory() (max, cur int64, ok bool) {
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil // "max" (no limit) does not parse
	}
	max, ok1 := read("memory.max")
	cur, ok2 := read("memory.current")
	return max, cur, ok1 && ok2
}

// checkFits returns a *MemoryError when need bytes exceed the memory
// available.
func checkFits(dir, what string, need int64, hint string) error {
	avail, ok := availableMemory()
	if !ok || need <= avail {
		return nil
	}
	return &MemoryError{Dir: dir, What: what, Need: need, Available: avail, Hint: hint}
}
