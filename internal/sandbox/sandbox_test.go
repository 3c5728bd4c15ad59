//go:build linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newSandbox(t *testing.T, l Limits) *Sandbox {
	t.Helper()
	s, err := New("", l)
	var np *NoPythonError
	if errors.As(err, &np) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Each misbehaving program is stopped or refused and reported as failed
// with its reason, and the programs after it still run. Run by root the
// programs run as nobody in a network namespace; run unprivileged (the
// test binary started with setpriv --reuid=65534 --regid=65534
// --clear-groups) in a user and network namespace; both pass.
func TestSandboxHolds(t *testing.T) {
	// A wall-clock limit far past the CPU limit, so that the CPU limit
	// stops the loop however loaded the machine is; sleeping (no CPU) is
	// stopped by the wall-clock limit of a second sandbox.
	s := newSandbox(t, Limits{CPU: time.Second, Wall: 5 * time.Minute, Memory: 256 << 20})
	t.Logf("network: %s; user: %q", s.Network, s.User)
	outside := filepath.Join(os.TempDir(), "autocompress-sandbox-escape-test")
	os.Remove(outside)
	t.Cleanup(func() { os.Remove(outside) })
	cases := []struct {
		name, program, reason string
	}{
		{"passes", "def f(x):\n    return x + 1\nassert f(1) == 2\nprint('hello')\n", ""},
		{"assertion", "assert 1 == 2\n", "AssertionError"},
		{"loops forever", "while True:\n    pass\n", "cpu time limit"},
		{"allocates without bound", "x = []\nwhile True:\n    x.append(bytearray(1 << 20))\n", "MemoryError"},
		{"fork bomb", "import os\nwhile True:\n    os.fork()\n", "PermissionError: sandbox: os.fork is not allowed"},
		{"thread bomb", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n", "RuntimeError: can't start new thread"},
		{"subprocess", "import subprocess\nsubprocess.run(['sh', '-c', 'echo hi'])\n", "PermissionError: sandbox: subprocess.Popen is not allowed"},
		{"os.system", "import os\nos.system('true')\n", "PermissionError: sandbox: os.system is not allowed"},
		{"ctypes", "import ctypes\nctypes.CDLL(None).fork()\n", "PermissionError: sandbox: ctypes.dlopen is not allowed"},
		{"writes outside", "open(" + quote(outside) + ", 'w').write('x')\n", "PermissionError: sandbox: writing outside the scratch directory"},
		{"os.open outside", "import os\nos.open(" + quote(outside) + ", os.O_CREAT | os.O_WRONLY)\n", "PermissionError: sandbox: writing outside the scratch directory"},
		{"removes outside", "import os\nos.remove('/etc/hostname')\n", "PermissionError: sandbox: os.remove outside"},
		{"chdir then write", "import os\nos.chdir('/tmp')\nopen('x', 'w')\n", "PermissionError: sandbox: os.chdir outside"},
		{"opens a socket", "import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=1)\n", "PermissionError: sandbox: socket"},
		{"raises its limits", "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (100, 100))\n", "PermissionError: sandbox: resource.setrlimit is not allowed"},
		{"exits early", "import sys\nsys.exit(0)\nassert False\n", "sandbox: the program exited early"},
		{"os._exit early", "import os\nos._exit(0)\n", "exited before the end of the program"},
		{"writes inside", "open('scratch.txt', 'w').write('ok')\nimport os, tempfile\nassert os.path.exists('scratch.txt')\ntempfile.NamedTemporaryFile().write(b'x')\nassert os.environ['HOME'] == os.getcwd()\n", ""},
	}
	programs := make([]string, len(cases))
	for i, c := range cases {
		programs[i] = c.program
	}
	res, err := s.RunAll(context.Background(), programs, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		r := res[i]
		if c.reason == "" {
			if !r.Passed {
				t.Errorf("%s: failed (%s), want passed; stderr:\n%s", c.name, r.Reason, r.Stderr)
			}
			continue
		}
		if r.Passed || !strings.HasPrefix(r.Reason, c.reason) {
			t.Errorf("%s: passed %v, reason %q; want failed with %q; stderr:\n%s", c.name, r.Passed, r.Reason, c.reason, r.Stderr)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("a program wrote %s", outside)
	}
	if res[0].Stdout != "hello\n" {
		t.Errorf("stdout of the passing program: %q, want %q", res[0].Stdout, "hello\n")
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// Without a network namespace (where none can be made), the audit hook
// alone refuses sockets, forks and writes outside.
func TestSandboxHookAlone(t *testing.T) {
	s := newSandbox(t, Limits{CPU: time.Second, Wall: 5 * time.Minute})
	s.attr, s.Network = s.base, "audit hook"
	for _, c := range []struct{ program, reason string }{
		{"import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)\n", "PermissionError: sandbox: socket.__new__ is not allowed"},
		{"import _socket\n_socket.socket()\n", "PermissionError: sandbox: socket.__new__ is not allowed"},
		{"import os\nos.fork()\n", "PermissionError: sandbox: os.fork is not allowed"},
		{"open('/tmp/autocompress-sandbox-hook-test', 'a')\n", "PermissionError: sandbox: writing outside"},
		{"print('ok')\n", ""},
	} {
		r, err := s.Run(context.Background(), c.program)
		if err != nil {
			t.Fatal(err)
		}
		if c.reason == "" {
			if !r.Passed {
				t.Errorf("%q: failed (%s): %s", c.program, r.Reason, r.Stderr)
			}
		} else if r.Passed || !strings.HasPrefix(r.Reason, c.reason) {
			t.Errorf("%q: passed %v, reason %q; want %q", c.program, r.Passed, r.Reason, c.reason)
		}
	}
}

func TestSandboxWallClock(t *testing.T) {
	s := newSandbox(t, Limits{Wall: 500 * time.Millisecond})
	r, err := s.Run(context.Background(), "import time\ntime.sleep(60)\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.Passed || r.Reason != "timeout" {
		t.Errorf("sleeping past the wall-clock limit: passed %v, reason %q; want a timeout", r.Passed, r.Reason)
	}
}

func TestSandboxCancelled(t *testing.T) {
	s := newSandbox(t, Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := s.Run(ctx, "import time\ntime.sleep(30)\n"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled run: got %v, want the context's error", err)
	}
}

func TestNoPython(t *testing.T) {
	_, err := New("/nonexistent/python3", Limits{})
	var np *NoPythonError
	if !errors.As(err, &np) || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("got %v, want a *NoPythonError naming the path", err)
	}
}
