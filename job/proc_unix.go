//go:build unix

package job

import (
	"os"
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
