package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// buildBinary builds the command once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "autocompress")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// How a command must stop after a signal: within stopCPU of CPU time
// (from /proc: load-independent), or where that cannot be read within
// stopWall; and in any case before stopLimit, when it is killed.
const (
	stopCPU   = 2 * time.Second
	stopWall  = 3 * time.Second
	stopLimit = 60 * time.Second
)

// cpuTime returns the user and system CPU time the process pid has used so
// far, from /proc/PID/stat (Linux); ok is false where it cannot be read.
func cpuTime(pid int) (d time.Duration, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	// The fields after the command name (which may hold spaces) start
	// with the state (field 3); utime and stime are fields 14 and 15, in
	// clock ticks of 1/100 s (USER_HZ).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// TestSignalsStopEveryCommand starts each long-running command on work that
// takes minutes, sends SIGINT or SIGTERM, and checks that it exits 130
// having done little more work (stopCPU) and leaves nothing in its output folder but what it
// documents (train's resumable checkpoint).
func TestSignalsStopEveryCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX signals")
	}
	bin := buildBinary(t)
	text := filepath.Join(t.TempDir(), "text.txt")
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, bytes.Repeat(append(readme, '\n'), 200_000/len(readme)+1), 0o644); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join("..", "..", "parent", "model", "tokenizer.json")
	type tc struct {
		name  string
		sig   syscall.Signal
		args  func(out string) []string
		stdin bool     // give a standard input that never ends
		allow []string // entries the command may leave in its output folder
		skip  string   // why the case cannot run here
	}
	cases := []tc{
		{name: "importance", sig: syscall.SIGINT, args: func(o string) []string {
			return []string{"importance", "--model", "parent", "--data", text, "--out", filepath.Join(o, "scores.safetensors"), "--seqs", "100000"}
		}},
		{name: "eval", sig: syscall.SIGTERM, args: func(string) []string {
			return []string{"eval", "--model", "parent", "--data", text}
		}},
		{name: "tokenize", sig: syscall.SIGINT, stdin: true, args: func(string) []string {
			return []string{"tokenize", "--tokenizer", tok}
		}},
		{name: "train", sig: syscall.SIGTERM, allow: []string{"model.ckpt"}, args: func(o string) []string {
			return []string{"train", "--preset", "parent", "--data", text, "--out", filepath.Join(o, "model"), "--steps", "100000",
				"--bpe-merges", "100", "--batch", "1", "--seq-len", "16", "--eval-every", "0", "--log-every", "100000"}
		}},
		{name: "bench-serve", sig: syscall.SIGINT, args: func(string) []string {
			return []string{"bench-serve", "--model", "parent", "--num-requests", "100000", "--repeats", "1"}
		}},
		{name: "generate", sig: syscall.SIGTERM, args: func(string) []string {
			return []string{"generate", "--model", "parent", "--prompt", "The", "--max-tokens", "500"}
		}},
		{name: "prune", skip: "prune of the 3M-parameter parent finishes in well under a second; its cancellation is tested in package prune"},
	}
	if gt, ok := shareddata.Path("groundtruth"); ok {
		cases = append(cases, tc{name: "calibrate", sig: syscall.SIGINT, args: func(o string) []string {
			return []string{"calibrate", "--groundtruth", gt, "--out", filepath.Join(o, "coefficients.json")}
		}})
	} else {
		cases = append(cases, tc{name: "calibrate", skip: "shared data groundtruth not found (../shared/data or $AUTOCOMPRESS_SHARED_DATA)"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			out := t.TempDir()
			cmd := exec.Command(bin, c.args(out)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if c.stdin {
				w, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				t.Fatalf("finished before the signal (%v): give it more work\n%s", err, stderr.String())
			case <-time.After(1500 * time.Millisecond):
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			cpuAtSignal, haveCPU := cpuTime(cmd.Process.Pid)
			var werr error
			limit := time.After(stopLimit)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				select {
				case werr = <-done:
					break wait
				case <-limit:
					cmd.Process.Kill()
					<-done
					t.Fatalf("still running %v after %v\n%s", stopLimit, c.sig, stderr.String())
				case <-tick.C:
					if now, ok := cpuTime(cmd.Process.Pid); haveCPU && ok && now-cpuAtSignal > stopCPU {
						cmd.Process.Kill()
						<-done
						t.Fatalf("still working after %v: %v of CPU since the signal (budget %v)\n%s", c.sig, now-cpuAtSignal, stopCPU, stderr.String())
					}
				}
			}
			wall := time.Since(sent)
			var ee *exec.ExitError
			if !errors.As(werr, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("after %v: %v, want exit status 130\n%s", c.sig, werr, stderr.String())
			}
			// Stopping is judged by the work done after the signal, which
			// load does not stretch: a command that ignores the signal keeps
			// computing (minutes of CPU) and exceeds the budget; one that
			// stops spends a fraction of a second winding down, however
			// long a loaded machine makes it wait for a core. Without
			// /proc the wall clock is the measure.
			if haveCPU {
				used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() - cpuAtSignal
				t.Logf("stopped %v after %v: %v of CPU after the signal", wall.Round(time.Millisecond), c.sig, used.Round(time.Millisecond))
				if used > stopCPU {
					t.Errorf("used %v of CPU after %v (budget %v): it kept working", used.Round(time.Millisecond), c.sig, stopCPU)
				}
			} else if wall > stopWall {
				t.Errorf("took %v to stop after %v (budget %v)", wall.Round(time.Millisecond), c.sig, stopWall)
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
			}
			ents, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				ok := false
				for _, a := range c.allow {
					ok = ok || e.Name() == a
				}
				if !ok {
					t.Errorf("left %s in the output folder after %v", e.Name(), c.sig)
				}
			}
		})
	}
}
