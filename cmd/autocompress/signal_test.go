package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// testSpeeds returns the relative machine speeds the signal test simulates:
// $AUTOCOMPRESS_TEST_SPEED as a comma-separated list (4 is a machine four
// times faster than the one the work sizes were chosen on, 0.5 one twice as
// slow), by default 0.5, 1 and 4, so that every run of the suite shows that
// it passes on a machine 4x faster and one 2x slower.
func testSpeeds(t *testing.T) []float64 {
	t.Helper()
	v := os.Getenv("AUTOCOMPRESS_TEST_SPEED")
	if v == "" {
		v = "0.5,1,4"
	}
	var out []float64
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0) || x > 1000 {
			t.Fatalf("AUTOCOMPRESS_TEST_SPEED=%q: want positive speeds like 4 or 0.5,1,4", v)
		}
		out = append(out, x)
	}
	return out
}

// work scales an amount of work n to a machine speed times as fast: the
// same wall time there holds speed× the work, so a faster machine is
// simulated by less of it (and a slower one by more).
func work(n int, speed float64) string {
	return strconv.Itoa(max(1, int(float64(n)/speed)))
}

// unit scales the work in one step (a batch) to a machine speed times as
// fast: a slower machine spends longer in each step, so the step the command
// must finish after a signal is larger; a faster one is simulated by the
// step as it is (steps do not shrink below one row).
func unit(n int, speed float64) string {
	return strconv.Itoa(max(n, int(float64(n)/speed)))
}

// readyCPU is the sign, for commands that print nothing while they work,
// that one is working: the CPU time it has used. The binary's start (runtime
// set-up and the signal handler, before main's first line) takes a few
// milliseconds of it, loading the parent about a hundred; the work that
// follows takes minutes of CPU at any of the simulated speeds.
const readyCPU = 300 * time.Millisecond

// TestSignalsStopEveryCommand starts each long-running command on work that
// does not end by itself within the test (minutes of CPU at every simulated
// speed, see testSpeeds), waits for a sign that it is working (its first
// output, or readyCPU of CPU time; never a guessed duration), sends SIGINT or
// SIGTERM, and checks that it exits 130 having done little more work
// (stopCPU) and leaves nothing in its output folder but what it documents
// (train's resumable checkpoint).
//
// No part of it depends on how fast the machine is: the work is unbounded
// for a faster machine, the sign waits as long as a slower machine needs,
// and stopping is judged by CPU time, which load does not stretch.
// AUTOCOMPRESS_TEST_SPEED simulates other machines (README, "Tests").
func TestSignalsStopEveryCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("POSIX signals")
	}
	bin := buildBinary(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join("..", "..", "parent", "model", "tokenizer.json")
	gt, haveGT := shareddata.Path("groundtruth")
	for _, speed := range testSpeeds(t) {
		// The evaluation text: about 400 KB on this machine's speed, some
		// 25,000 windows, tens of minutes of evaluation.
		text := filepath.Join(t.TempDir(), "text.txt")
		if err := os.WriteFile(text, bytes.Repeat(append(readme, '\n'), int(400_000/speed)/len(readme)+1), 0o644); err != nil {
			t.Fatal(err)
		}
		type tc struct {
			name  string
			sig   syscall.Signal
			args  func(out string) []string
			ready func(stdout, stderr string) bool // the command's own sign that it works; nil: readyCPU
			stdin bool                             // give a standard input that never ends, echoing one line first
			allow []string                         // entries the command may leave in its output folder
			skip  string                           // why the case cannot run here
		}
		printed := func(what string) func(stdout, stderr string) bool {
			return func(stdout, stderr string) bool { return strings.Contains(stdout+stderr, what) }
		}
		cases := []tc{
			{name: "importance", sig: syscall.SIGINT, ready: printed("importance ["), args: func(o string) []string {
				return []string{"importance", "--model", "parent", "--data", text, "--out", filepath.Join(o, "scores.safetensors"),
					"--seqs", work(100_000, speed), "--batch", unit(8, speed)}
			}},
			{name: "eval", sig: syscall.SIGTERM, ready: printed("eval parent perplexity ["), args: func(string) []string {
				return []string{"eval", "--model", "parent", "--data", text, "--batch", unit(8, speed)}
			}},
			{name: "tokenize", sig: syscall.SIGINT, stdin: true, ready: func(stdout, _ string) bool { return strings.Contains(stdout, "\n") },
				args: func(string) []string { return []string{"tokenize", "--tokenizer", tok} }},
			{name: "train", sig: syscall.SIGTERM, allow: []string{"model.ckpt"}, ready: printed("steps of"), args: func(o string) []string {
				return []string{"train", "--preset", "parent", "--data", text, "--out", filepath.Join(o, "model"), "--steps", work(100_000, speed),
					"--bpe-merges", "100", "--batch", unit(1, speed), "--seq-len", "16", "--eval-every", "0", "--log-every", "100000"}
			}},
			{name: "bench-serve", sig: syscall.SIGINT, args: func(string) []string {
				return []string{"bench-serve", "--model", "parent", "--num-requests", work(100_000, speed), "--repeats", "1"}
			}},
			// Generation streams its text: the first piece is the sign. Past
			// the trained context and whatever the tokens, 20,000 of them
			// take minutes (attention grows with the context).
			{name: "generate", sig: syscall.SIGTERM, ready: func(stdout, _ string) bool { return stdout != "" }, args: func(string) []string {
				return []string{"generate", "--model", "parent", "--prompt", "The", "--max-tokens", work(20_000, speed), "--allow-long-context", "--ignore-eos"}
			}},
			{name: "prune", skip: "prune of the 3M-parameter parent finishes in well under a second; its cancellation is tested in package prune"},
		}
		if haveGT {
			// The fit takes over a minute of CPU here; its iterations scale.
			cases = append(cases, tc{name: "calibrate", sig: syscall.SIGINT, args: func(o string) []string {
				return []string{"calibrate", "--groundtruth", gt, "--out", filepath.Join(o, "coefficients.json"), "--iter", work(400, speed)}
			}})
		} else {
			cases = append(cases, tc{name: "calibrate", skip: "shared data groundtruth not found (../shared/data or $AUTOCOMPRESS_SHARED_DATA)"})
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/speed=%g", c.name, speed), func(t *testing.T) {
				if c.skip != "" {
					t.Skip(c.skip)
				}
				out := t.TempDir()
				stopAfterSignal(t, bin, c.args(out), out, c.sig, c.ready, c.stdin, c.allow)
			})
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a command's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stopAfterSignal runs bin with args, waits for ready (or readyCPU of CPU
// time where ready is nil), sends sig and checks how the command stops: exit
// 130, little work after the signal, and nothing in the output folder out
// but the entries allow names.
func stopAfterSignal(t *testing.T, bin string, args []string, out string, sig syscall.Signal, ready func(stdout, stderr string) bool, stdin bool, allow []string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin {
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// One line, echoed as ids once the command reads its input: the sign
		// that it is in its loop. The pipe then stays open.
		if _, err := io.WriteString(w, "The sign that it reads.\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait for the sign, however long a slow or loaded machine takes; the
	// backstop only ends a command that never shows one.
	backstop := time.After(stopLimit)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	_, procOK := cpuTime(cmd.Process.Pid)
	fallback := time.After(1500 * time.Millisecond) // only where /proc cannot be read
	for started := false; !started; {
		select {
		case err := <-done:
			t.Fatalf("finished before the signal (%v), so the work is not unbounded: give it more\nstdout: %.500s\nstderr: %s", err, stdout.String(), stderr.String())
		case <-backstop:
			cmd.Process.Kill()
			<-done
			t.Fatalf("no sign of work after %v\nstdout: %.500s\nstderr: %s", stopLimit, stdout.String(), stderr.String())
		case <-fallback:
			started = ready == nil && !procOK
		case <-poll.C:
			if ready != nil {
				started = ready(stdout.String(), stderr.String())
			} else if used, ok := cpuTime(cmd.Process.Pid); ok {
				started = used >= readyCPU
			}
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
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
			t.Fatalf("still running %v after %v\n%s", stopLimit, sig, stderr.String())
		case <-tick.C:
			if now, ok := cpuTime(cmd.Process.Pid); haveCPU && ok && now-cpuAtSignal > stopCPU {
				cmd.Process.Kill()
				<-done
				t.Fatalf("still working after %v: %v of CPU since the signal (budget %v)\n%s", sig, now-cpuAtSignal, stopCPU, stderr.String())
			}
		}
	}
	wall := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("after %v: %v, want exit status 130\n%s", sig, werr, stderr.String())
	}
	// Stopping is judged by the work done after the signal, which load does
	// not stretch: a command that ignores the signal keeps computing
	// (minutes of CPU) and exceeds the budget; one that stops spends a
	// fraction of a second winding down, however long a loaded machine
	// makes it wait for a core. Without /proc the wall clock is the measure.
	if haveCPU {
		used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() - cpuAtSignal
		t.Logf("stopped %v after %v: %v of CPU after the signal", wall.Round(time.Millisecond), sig, used.Round(time.Millisecond))
		if used > stopCPU {
			t.Errorf("used %v of CPU after %v (budget %v): it kept working", used.Round(time.Millisecond), sig, stopCPU)
		}
	} else if wall > stopWall {
		t.Errorf("took %v to stop after %v (budget %v)", wall.Round(time.Millisecond), sig, stopWall)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr.String())
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !slices.Contains(allow, e.Name()) {
			t.Errorf("left %s in the output folder after %v", e.Name(), sig)
		}
	}
}
