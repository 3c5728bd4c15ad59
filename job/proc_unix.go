//go:build unix

package job

import (
	"os"
	"runtime"
	"syscall"
)

// ownGroup starts a child as the leader of its own process group, so that a
// terminal's Ctrl-C reaches autocompress alone and the job is stopped the
// way Launch chooses (SIGTERM, then the grace period).
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// terminate sends SIGTERM to the launcher, which passes it to every rank.
func terminate(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

// killGroup kills the launcher's whole process group.
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// peakRSS is a waited child's ru_maxrss in bytes (KiB on Linux and the
// BSDs, bytes on Darwin), 0 where the system does not say.
func peakRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}
