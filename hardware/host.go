package hardware

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Host identifies the CPU machine a measurement was taken on, as far as a
// calibration records it: what a figure measured there (the native
// engine's error band) is about, and what a later run compares with its
// own to say whether that figure applies to it. It is the fingerprint a
// per-host native calibration is cached under (Key). A zero field is "not
// recorded".
type Host struct {
	CPU      string `json:"cpu,omitempty"`       // model name (/proc/cpuinfo)
	CPUs     int    `json:"cpus,omitempty"`      // logical CPUs the process could use
	LLCBytes int64  `json:"llc_bytes,omitempty"` // last-level cache
	// L1DBytes and L2Bytes are the first core's level-1 data and level-2
	// caches (sysfs).
	L1DBytes int64 `json:"l1d_bytes,omitempty"`
	L2Bytes  int64 `json:"l2_bytes,omitempty"`
	// Backend is the BLAS backend the native engine's products run on
	// (engine/blas.Backend; the caller fills it: this package does not
	// know the engine).
	Backend string `json:"backend,omitempty"`
}

// Key is a short stable name of the fingerprint, for a file name: the
// first 16 hex digits of the SHA-256 of its JSON.
func (h Host) Key() string {
	b, _ := json.Marshal(h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Zero reports whether nothing of the host is recorded.
func (h Host) Zero() bool { return h == Host{} }

// String describes the host, naming what is not recorded.
func (h Host) String() string {
	cpu, cpus, llc := h.CPU, "CPU count not recorded", "cache not recorded"
	if cpu == "" {
		cpu = "CPU model not recorded"
	}
	if h.CPUs > 0 {
		cpus = fmt.Sprintf("%d CPUs", h.CPUs)
	}
	if h.LLCBytes > 0 {
		llc = fmt.Sprintf("%s last-level cache", formatCache(h.LLCBytes))
	}
	out := cpu + ", " + cpus + ", " + llc
	if h.L1DBytes > 0 || h.L2Bytes > 0 {
		out += fmt.Sprintf(" (L1d %s, L2 %s)", formatCache(h.L1DBytes), formatCache(h.L2Bytes))
	}
	if h.Backend != "" {
		out += ", BLAS " + h.Backend
	}
	return out
}

func formatCache(b int64) string {
	if b < 1<<20 && b%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// HostMatch says whether a recorded host is the current one.
type HostMatch string

// The answers of Host.Compare.
const (
	SameHost      HostMatch = "same"      // every recorded field agrees, the CPU model among them
	OtherHost     HostMatch = "different" // a recorded field differs
	UncertainHost HostMatch = "unknown"   // nothing disagrees, but too little was recorded to tell
)

// Compare compares the recorded host h with cur (the current one) and says
// why: which fields differ, or what was not recorded. Only fields known on
// both sides are compared.
func (h Host) Compare(cur Host) (HostMatch, string) {
	var diff, missing []string
	if h.CPU != "" && cur.CPU != "" && h.CPU != cur.CPU {
		diff = append(diff, fmt.Sprintf("CPU %s, recorded %s", cur.CPU, h.CPU))
	}
	if h.CPUs > 0 && cur.CPUs > 0 && h.CPUs != cur.CPUs {
		diff = append(diff, fmt.Sprintf("%d CPUs, recorded %d", cur.CPUs, h.CPUs))
	}
	if h.LLCBytes > 0 && cur.LLCBytes > 0 && h.LLCBytes != cur.LLCBytes {
		diff = append(diff, fmt.Sprintf("last-level cache %s, recorded %s", formatCache(cur.LLCBytes), formatCache(h.LLCBytes)))
	}
	for _, c := range []struct {
		name     string
		rec, cur int64
	}{{"L1d cache", h.L1DBytes, cur.L1DBytes}, {"L2 cache", h.L2Bytes, cur.L2Bytes}} {
		if c.rec > 0 && c.cur > 0 && c.rec != c.cur {
			diff = append(diff, fmt.Sprintf("%s %s, recorded %s", c.name, formatCache(c.cur), formatCache(c.rec)))
		}
	}
	if h.Backend != "" && cur.Backend != "" && h.Backend != cur.Backend {
		diff = append(diff, fmt.Sprintf("BLAS backend %s, recorded %s", cur.Backend, h.Backend))
	}
	if len(diff) > 0 {
		return OtherHost, "this host has " + strings.Join(diff, "; ")
	}
	if h.CPU == "" || cur.CPU == "" {
		missing = append(missing, "the CPU model")
	}
	if h.CPUs == 0 || cur.CPUs == 0 {
		missing = append(missing, "the CPU count")
	}
	if h.LLCBytes == 0 || cur.LLCBytes == 0 {
		missing = append(missing, "the cache size")
	}
	if len(missing) > 0 {
		return UncertainHost, "nothing recorded differs from this host, but " + strings.Join(missing, ", ") + " cannot be compared"
	}
	return SameHost, "this host has the recorded CPU, CPU count and cache"
}

// ThisHost returns the current machine's identity: the CPU model and the
// caches from /proc/cpuinfo and sysfs (Linux; elsewhere only the CPU
// count), and the CPUs the process may run on. Backend is left for the
// caller.
func ThisHost() Host {
	h := Host{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		var cacheKB int64
		h.CPU, cacheKB = parseCPUInfo(b)
		h.LLCBytes = cacheKB << 10
	}
	const dir = "/sys/devices/system/cpu/cpu0/cache"
	if llc := sysfsLLC(dir); llc > 0 {
		h.LLCBytes = llc
	}
	h.L1DBytes, h.L2Bytes = sysfsLevel(dir, 1), sysfsLevel(dir, 2)
	return h
}

// sysfsLevel returns the size of the data or unified cache of the given
// level listed under dir (0 when none can be read).
func sysfsLevel(dir string, level int) int64 {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	for _, d := range idx {
		lb, err1 := os.ReadFile(filepath.Join(d, "level"))
		sb, err2 := os.ReadFile(filepath.Join(d, "size"))
		tb, _ := os.ReadFile(filepath.Join(d, "type"))
		if err1 != nil || err2 != nil || strings.TrimSpace(string(tb)) == "Instruction" {
			continue
		}
		if l, err := strconv.Atoi(strings.TrimSpace(string(lb))); err == nil && l == level {
			return parseCacheSize(strings.TrimSpace(string(sb)))
		}
	}
	return 0
}

// parseCPUInfo returns the first processor's model name and its "cache
// size" in KiB (0 when absent).
func parseCPUInfo(b []byte) (model string, cacheKB int64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && model == "":
			model = v
		case k == "cache size" && cacheKB == 0:
			n, err := strconv.ParseInt(strings.TrimSuffix(v, " KB"), 10, 64)
			if err == nil && n > 0 {
				cacheKB = n
			}
		}
	}
	return model, cacheKB
}

// sysfsLLC returns the size of the highest-level cache listed under dir
// (…/cpu0/cache: index*/level and index*/size such as "32768K"), 0 when
// none can be read.
func sysfsLLC(dir string) int64 {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	level, size := 0, int64(0)
	for _, d := range idx {
		lb, err1 := os.ReadFile(filepath.Join(d, "level"))
		sb, err2 := os.ReadFile(filepath.Join(d, "size"))
		if err1 != nil || err2 != nil {
			continue
		}
		l, err := strconv.Atoi(strings.TrimSpace(string(lb)))
		s := parseCacheSize(strings.TrimSpace(string(sb)))
		if err != nil || s <= 0 {
			continue
		}
		if l > level || (l == level && s > size) {
			level, size = l, s
		}
	}
	return size
}

// parseCacheSize reads sysfs cache sizes: "32768K", "1M", "512".
func parseCacheSize(s string) int64 {
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n * mul
}
