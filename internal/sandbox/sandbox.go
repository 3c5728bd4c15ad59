// Package sandbox runs untrusted Python programs (code a model wrote, for
// HumanEval and MBPP) with Debian's /usr/bin/python3, one program per
// process, so that a program that loops, allocates, forks, writes where it
// should not or opens a socket is stopped or refused and scores as failed,
// and the evaluation goes on.
//
// # What holds a program
//
//   - Its own process group (Setpgid), killed as a whole (SIGKILL) when
//     the program ends, overruns its wall-clock limit or the context is
//     cancelled, so no child it made outlives it.
//   - A fresh scratch directory as its working directory, HOME and TMPDIR,
//     removed afterwards; the environment is otherwise cleared (PATH,
//     LANG only) and python3 runs isolated (-I: no PYTHON* variables, no
//     user site) without site packages (-S) and without writing bytecode.
//   - Resource limits set by a Python prelude (the resource module) before
//     the program's first line: CPU time (RLIMIT_CPU: SIGXCPU at the limit,
//     SIGKILL a second later), address space (RLIMIT_AS: allocation past it
//     raises MemoryError), file size (RLIMIT_FSIZE), no core files, and,
//     when the process runs as its own user (below), the process count
//     (RLIMIT_NPROC). The limits are set inside the process, after the
//     interpreter has started; a program cannot raise them again (hard
//     limits, and a non-root process).
//   - The same prelude installs an audit hook (PEP 578, sys.addaudithook,
//     which cannot be removed) that refuses, with PermissionError: creating
//     a socket; fork, exec, spawn, os.system and subprocess; loading native
//     code with ctypes; changing resource limits; sending signals; and
//     opening a file for writing, or removing, renaming, linking, creating
//     or changing the mode of a path, outside the scratch directory.
//   - Network: when a network namespace can be made (CLONE_NEWNET; as a
//     non-root user inside a new user namespace, CLONE_NEWUSER, where the
//     kernel allows it unprivileged), the program runs in an empty one with
//     no interfaces but a downed loopback, so nothing can be reached even by
//     native code. Where it cannot, the audit hook is the only barrier.
//     Sandbox.Network says which holds.
//   - Run by root, the program runs as the user nobody (65534), so the
//     file system's permissions apply to it and RLIMIT_NPROC (which root
//     ignores) bounds its processes.
//   - Success needs more than exit status 0: the prelude prints a nonce
//     (read from stdin before the program starts) after the program ran to
//     its end, so a program that exits early (sys.exit(0), os._exit(0))
//     has failed.
//
// # Limits of the isolation
//
// This keeps generated code from doing harm by accident — the infinite
// loops, runaway allocations and stray file writes that evaluated models
// produce — not a determined adversary. The audit hook acts at the Python
// level: a program that reaches native code some other way (an extension
// module already loaded, a bug in the interpreter) is not stopped by it;
// without a network namespace it could then open a socket, and without the
// user switch (when not run by root) write wherever its user can and fork
// up to that user's process limit until the wall-clock limit kills its
// group. Run evaluations of untrusted models in a container or VM as well.
package sandbox

import (
	"bytes"
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
	"sync"
	"syscall"
	"time"
)

// DefaultPython is Debian's interpreter.
const DefaultPython = "/usr/bin/python3"

// Limits bound one program. Zero fields take the defaults.
type Limits struct {
	CPU    time.Duration // CPU time (default 10 s)
	Wall   time.Duration // wall-clock time (default 30 s)
	Memory int64         // address space in bytes (default 512 MiB)
	// Procs is the most processes of the sandbox user (RLIMIT_NPROC; only
	// when running as nobody; default 64).
	Procs int
	// FileSize is the largest file the program may write (default 16 MiB).
	FileSize int64
	// Output is the most bytes of stdout and of stderr kept (default 64 KiB).
	Output int
}

func (l Limits) withDefaults() Limits {
	if l.CPU <= 0 {
		l.CPU = 10 * time.Second
	}
	if l.Wall <= 0 {
		l.Wall = 30 * time.Second
	}
	if l.Memory <= 0 {
		l.Memory = 512 << 20
	}
	if l.Procs <= 0 {
		l.Procs = 64
	}
	if l.FileSize <= 0 {
		l.FileSize = 16 << 20
	}
	if l.Output <= 0 {
		l.Output = 64 << 10
	}
	return l
}

// Sandbox runs programs with one set of limits. It is safe for concurrent
// use.
type Sandbox struct {
	Python string
	Limits Limits
	// Network is how the network is kept from programs: "namespace" (an
	// empty network namespace, and the audit hook) or "audit hook" (the
	// hook alone, where no namespace could be made).
	Network string
	// User is "nobody" when programs run as the user nobody (the sandbox
	// was made by root), else "" (they run as the caller).
	User string

	attr func() *syscall.SysProcAttr // how programs start
	base func() *syscall.SysProcAttr // the same without a network namespace
}

// NoPythonError reports that the interpreter is missing.
type NoPythonError struct {
	Path string
	Err  error
}

func (e *NoPythonError) Error() string {
	return fmt.Sprintf("sandbox: no Python interpreter at %s (%v): install Debian's python3 (apt-get install python3)", e.Path, e.Err)
}

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

// Result is the outcome of one program.
type Result struct {
	// Passed is true when the program ran to its end: exit status 0 and the
	// prelude's nonce printed after it.
	Passed bool
	// Reason says why it failed: "timeout" (the wall-clock limit), "cpu
	// time limit", "signal NAME", the last line of its traceback (e.g.
	// "MemoryError", "AssertionError", "PermissionError: sandbox: ...") or
	// "exit N"; "" when it passed.
	Reason         string
	ExitCode       int // -1 when killed by a signal
	Stdout, Stderr string
	Wall           time.Duration
}

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
	werr := cmd.Wait()
	// Whatever the program left behind in its group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
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

func cpuUsed(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// RunAll runs programs on workers processes at a time (at least 1) and
// returns their results in order.
func (s *Sandbox) RunAll(ctx context.Context, programs []string, workers int) ([]*Result, error) {
	workers = max(1, min(workers, len(programs)))
	out := make([]*Result, len(programs))
	errs := make([]error, len(programs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = s.Run(ctx, programs[i])
			}
		}()
	}
feed:
	for i := range programs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("program %d: %w", i, err)
		}
	}
	return out, nil
}

// capped keeps the first max bytes written to it, and the last bytes
// (where the nonce is) whatever the length.
type capped struct {
	buf  bytes.Buffer // not embedded: io.Copy would use its ReadFrom
	max  int
	tail []byte
}

func (c *capped) String() string { return c.buf.String() }

const tailBytes = 128

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	c.tail = append(c.tail, p[max(0, len(p)-tailBytes):]...)
	if len(c.tail) > tailBytes {
		c.tail = c.tail[len(c.tail)-tailBytes:]
	}
	return len(p), nil
}
