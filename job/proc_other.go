//go:build !unix

package job

import (
	"os"
	"syscall"
)

func ownGroup() *syscall.SysProcAttr { return nil }

func terminate(p *os.Process) { _ = p.Signal(os.Interrupt) }

func killGroup(p *os.Process) { _ = p.Kill() }

// peakRSS is unknown here.
func peakRSS(*os.ProcessState) int64 { return 0 }
