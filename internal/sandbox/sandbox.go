// Package sandbox runs untrusted Python programs (code a model wrote, for
// HumanEval and MBPP) with Debian's /usr/bin/python3, one program per
// process, so that a program that loops, allocates, forks, writes where it
// should not or opens a socket is stopped or refused and scores as failed,
// and the evaluation goes on.
//
// # What holds a program
//
//   - Its own process group (Setpgid), killed as a whole (SIGKILL) when
//     the program ends (before it is reaped, so the group's id cannot have
//     passed to another process), overruns its wall-clock limit or the
//     context is cancelled, so no child it made outlives it.
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
//
// The sandbox runs on Linux only; elsewhere New returns an
// *UnsupportedError, and code tasks fail with it.
package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// UnsupportedError reports a system the sandbox does not run on (it needs
// Linux).
type UnsupportedError struct{ OS string }

func (e *UnsupportedError) Error() string {
	return "sandbox: running generated programs needs Linux (this is " + e.OS + "): score code tasks on a Linux machine"
}

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
