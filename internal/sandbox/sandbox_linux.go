//go:build linux

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// New returns a sandbox for python (DefaultPython when ""), checking that
// it runs and finding out whether a network namespace can be made.
func New(python string, l Limits) (*Sandbox, error) {
	if python == "" {
		python = DefaultPython
	}
	if _, err := exec.LookPath(python); err != nil {
		return nil, &NoPythonError{Path: python, Err: err}
	}
	s := &Sandbox{Python: python, Limits: l.withDefaults()}
	root := os.Geteuid() == 0
	if root {
		s.User = "nobody"
	}
	base := func() *syscall.SysProcAttr {
		a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if root {
			a.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, NoSetGroups: true}
		}
		return a
	}
	withNet := func() *syscall.SysProcAttr {
		a := base()
		a.Cloneflags = syscall.CLONE_NEWNET
		if !root {
			uid, gid := os.Getuid(), os.Getgid()
			a.Cloneflags |= syscall.CLONE_NEWUSER
			a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			a.GidMappingsEnableSetgroups = false
		}
		return a
	}
	s.base = base
	probe := exec.Command(python, "-I", "-S", "-c", "pass")
	probe.Env = []string{"PATH=/usr/bin:/bin"}
	probe.Dir = os.TempDir()
	probe.SysProcAttr = withNet()
	if err := probe.Run(); err == nil {
		s.attr, s.Network = withNet, "namespace"
	} else {
		check := exec.Command(python, "-I", "-S", "-c", "pass")
		check.Env, check.Dir, check.SysProcAttr = probe.Env, probe.Dir, base()
		if err := check.Run(); err != nil {
			return nil, &NoPythonError{Path: python, Err: err}
		}
		s.attr, s.Network = base, "audit hook"
	}
	return s, nil
}

const nobody = 65534

// Run runs program (Python source) and reports how it ended. The error is
// for the sandbox itself failing (no scratch directory, the interpreter
// would not start) or ctx being cancelled; whatever the program does is
// in the Result.
func (s *Sandbox) Run(ctx context.Context, program string) (*Result, error) {
	l := s.Limits
	dir, err := os.MkdirTemp("", "autocompress-sandbox-") //output:not-an-output: the program's scratch directory, removed when it ends
	if err != nil {
		return nil, fmt.Errorf("sandbox: scratch directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if s.User == "nobody" {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			return nil, fmt.Errorf("sandbox: scratch directory: %w", err)
		}
	}
	prog := filepath.Join(dir, "program.py")
	if err := os.WriteFile(prog, []byte(program), 0o644); err != nil { //output:not-an-output: the program to run, in its scratch directory
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, fmt.Errorf("sandbox: nonce: %w", err)
	}
	nonce := hex.EncodeToString(nb[:])
	procs := 0
	if s.User == "nobody" {
		procs = l.Procs
	}
	wctx, cancel := context.WithTimeout(ctx, l.Wall)
	defer cancel()
	cmd := exec.CommandContext(wctx, s.Python, "-I", "-S", "-B", "-c", prelude(l, procs))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8", "PYTHONHASHSEED=0"}
	cmd.Stdin = strings.NewReader(nonce + "\n")
	stdout, stderr := &capped{max: l.Output}, &capped{max: l.Output}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = s.attr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting %s: %w", s.Python, err)
	}
	// Whatever the program left behind in its group goes with it, killed
	// while the program is a zombie, so that the group's id is still its.
	waitExited(cmd.Process.Pid)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	werr := cmd.Wait()
	r := &Result{Wall: time.Since(t0), Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode()}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ee *exec.ExitError
	switch {
	case wctx.Err() != nil:
		r.Reason = "timeout"
	case werr == nil:
		if strings.HasSuffix(strings.TrimRight(string(stdout.tail), "\n"), nonce) {
			r.Passed = true
			r.Stdout = strings.TrimSuffix(r.Stdout, "\n"+nonce+"\n")
		} else {
			r.Reason = "exited before the end of the program"
		}
	case errors.As(werr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || (ws.Signal() == syscall.SIGKILL && cpuUsed(cmd.ProcessState) >= l.CPU)):
			r.Reason = "cpu time limit"
		case ws.Signaled():
			r.Reason = "signal " + ws.Signal().String()
		default:
			r.Reason = lastLine(r.Stderr)
			if r.Reason == "" {
				r.Reason = "exit " + strconv.Itoa(r.ExitCode)
			}
		}
	default:
		return nil, fmt.Errorf("sandbox: %w", werr)
	}
	return r, nil
}

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WNOWAIT), so that its id, its process group's, cannot be
// given to another process while what is left of the group is killed.
func waitExited(pid int) {
	const pPID, wNOWAIT = 1, 0x1000000
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}
