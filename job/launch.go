package job

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/autocompress/autocompress/internal/progress"
)

// Launch modes.
const (
	LaunchPrint = "print" // say the commands; run nothing
	LaunchLocal = "local" // run launch.sh here and wait for it
	LaunchSlurm = "slurm" // sbatch launch.sbatch and record the job id
)

// LaunchModes lists the modes.
var LaunchModes = []string{LaunchPrint, LaunchLocal, LaunchSlurm}

// LaunchLog is the local launch's copy of the job's output.
const LaunchLog = "launch.log"

// LaunchConfig says how to start an emitted job.
type LaunchConfig struct {
	Dir  string
	Mode string
	// Python is the interpreter of a local launch (default /usr/bin/python3
	// where it exists, the Debian one with python3-torch, else python3 on
	// PATH).
	Python string
	// Sbatch is the sbatch command of a Slurm launch (default "sbatch").
	Sbatch string
	// Output receives the job's stdout and stderr as it runs (local; it
	// also goes to launch.log). nil: launch.log only.
	Output io.Writer `json:"-"`
	// Grace is how long a cancelled local job is given to checkpoint
	// after SIGTERM before it is killed (default 10 minutes).
	Grace time.Duration
	// Poll is the interval progress.jsonl is read at (default 500 ms).
	Poll time.Duration

	Progress progress.Func `json:"-"`
}

// EnsureDefaults fills unset fields and returns c.
func (c *LaunchConfig) EnsureDefaults() *LaunchConfig {
	if c.Mode == "" {
		c.Mode = LaunchPrint
	}
	if c.Python == "" {
		c.Python = "python3"
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			c.Python = "/usr/bin/python3"
		}
	}
	if c.Sbatch == "" {
		c.Sbatch = "sbatch"
	}
	if c.Grace == 0 {
		c.Grace = 10 * time.Minute
	}
	if c.Poll == 0 {
		c.Poll = 500 * time.Millisecond
	}
	return c
}

// Validate reports the first invalid field (after EnsureDefaults).
func (c *LaunchConfig) Validate() error {
	ok := false
	for _, m := range LaunchModes {
		ok = ok || c.Mode == m
	}
	switch {
	case !ok:
		return fmt.Errorf("job: launch mode %q: want print, local or slurm", c.Mode)
	case c.Dir == "":
		return errors.New("job: no job directory given")
	case c.Grace < 0 || c.Poll < 0:
		return errors.New("job: the grace period and the poll interval must be >= 0")
	}
	return nil
}

// Launched is what a launch did.
type Launched struct {
	Mode     string   `json:"mode"`
	Commands []string `json:"commands,omitempty"` // print: what to run
	JobID    string   `json:"slurm_job,omitempty"`
	Result   *Result  `json:"result,omitempty"` // local: the job's result
	// CPUSeconds (local) is the CPU time, user and system, of launch.sh
	// and the ranks it waited for; PeakRSSBytes the largest peak resident
	// set among them (Linux's ru_maxrss of a waited child; it counts this
	// process's resident set at the fork too; 0 where unknown).
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
}

// ModuleError is a Python module a local launch needs and the interpreter
// cannot import.
type ModuleError struct {
	Python, Module, Engine, Output string
}

func (e *ModuleError) Error() string {
	fix := "pip install -r requirements.txt in the job directory"
	if e.Module == "torch" {
		fix = "install PyTorch (Debian: apt-get install python3-torch; else pip install torch)"
	}
	return fmt.Sprintf("job: %s cannot import %s, which engine %s needs: %s, or choose an interpreter that has it (%s)", e.Python, e.Module, e.Engine, fix, strings.TrimSpace(lastLine(e.Output)))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// CheckModules imports each of the engine's modules with python, before
// any work: a missing one is a *ModuleError.
func CheckModules(ctx context.Context, python string, e EngineInfo) error {
	for _, m := range e.Modules {
		out, err := exec.CommandContext(ctx, python, "-c", "import "+m).CombinedOutput()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &ModuleError{Python: python, Module: m, Engine: e.Name, Output: string(out) + err.Error()}
		}
	}
	return nil
}

// Launch starts the job at c.Dir as c.Mode says. Every launch first checks
// the directory against its contract (hashes, Verify); a local launch
// also checks that the interpreter imports the engine's modules. A local
// job runs as its own process group with its output in launch.log (and
// c.Output), progress.jsonl reported as it grows; cancelling ctx sends it
// SIGTERM and waits (up to c.Grace) for its checkpoint, then returns
// ctx.Err(). Launching a stopped or failed job again resumes it; a done
// one is not run again.
func Launch(ctx context.Context, c LaunchConfig) (*Launched, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ct, err := Load(c.Dir)
	if err != nil {
		return nil, err
	}
	eng, _ := LookupEngine(ct.Engine)
	abs, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	if c.Mode == LaunchPrint {
		return &Launched{Mode: c.Mode, Commands: []string{
			fmt.Sprintf("cd %s && PYTHON=%s bash launch.sh 2>&1 | tee %s", shellQuote(abs), shellQuote(c.Python), LaunchLog),
			fmt.Sprintf("cd %s && sbatch launch.sbatch", shellQuote(abs)),
			fmt.Sprintf("autocompress job wait %s", shellQuote(abs)),
		}}, nil
	}
	if err := Verify(c.Dir, ct); err != nil {
		return nil, err
	}
	if c.Mode == LaunchSlurm {
		return submit(ctx, c)
	}
	if s, err := ReadStatus(c.Dir); err != nil {
		return nil, err
	} else if s.Result != nil && s.Result.Status == StatusDone {
		c.Progress.Notef("job", "%s is done already (%s): not run again", c.Dir, ct.Outputs.Result)
		return &Launched{Mode: c.Mode, Result: s.Result}, nil
	}
	if err := CheckModules(ctx, c.Python, eng); err != nil {
		return nil, err
	}
	return runLocal(ctx, c, ct)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// submit runs sbatch --parsable launch.sbatch in the job directory and
// records the job id in slurm.json.
func submit(ctx context.Context, c LaunchConfig) (*Launched, error) {
	cmd := exec.CommandContext(ctx, c.Sbatch, "--parsable", "launch.sbatch")
	cmd.Dir = c.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("job: submitting launch.sbatch with %s: %w: %s", c.Sbatch, err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";")
	if id == "" || strings.ContainsAny(id, " \n\t") {
		return nil, fmt.Errorf("job: sbatch printed %q, not a job id", strings.TrimSpace(string(out)))
	}
	b, _ := json.MarshalIndent(Slurm{JobID: id, Submitted: time.Now().UTC().Format(time.RFC3339)}, "", "  ")
	if err := os.WriteFile(filepath.Join(c.Dir, SlurmFile), append(b, '\n'), 0o644); err != nil { //output:not-an-output: the job directory's record of its Slurm submission, beside its contract
		return nil, fmt.Errorf("job: %w", err)
	}
	c.Progress.Notef("job", "submitted Slurm job %s", id)
	return &Launched{Mode: c.Mode, JobID: id}, nil
}

// freePort returns a TCP port free on the loopback now (for MASTER_PORT,
// so that two local jobs do not collide).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runLocal runs bash launch.sh as its own process group and waits for it.
func runLocal(ctx context.Context, c LaunchConfig, ct *Contract) (*Launched, error) {
	resultPath := filepath.Join(c.Dir, ct.Outputs.Result)
	if err := os.Remove(resultPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("job: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("job: choosing a rendezvous port: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, LaunchLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644) //output:not-an-output: the job's append-only launch log
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	defer logf.Close()
	var w io.Writer = logf
	if c.Output != nil {
		w = io.MultiWriter(logf, c.Output)
	}
	cmd := exec.Command("bash", "launch.sh")
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "PYTHON="+c.Python, fmt.Sprintf("MASTER_PORT=%d", port))
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = ownGroup()
	old, _ := readProgress(filepath.Join(c.Dir, ct.Outputs.StepLog))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("job: starting launch.sh: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var task *progress.Task
	seen := len(old) // lines of earlier launches (a resumed job appends) are not this one's
	report := func() {
		lines, _ := readProgress(filepath.Join(c.Dir, ct.Outputs.StepLog))
		for _, l := range lines[min(seen, len(lines)):] {
			if l.Event == "resumed" {
				c.Progress.Notef("job", "resumed at step %d", l.Step)
			}
			if l.Event != "" || l.Steps == 0 {
				continue
			}
			if task == nil {
				task = progress.Start(c.Progress, progress.Event{Stage: "job", Unit: "step", Total: int64(l.Steps)})
				task.Resume(int64(max(0, l.Step-1))) // a resumed job's first line is its first new step
			}
			msg := ""
			if l.Loss != nil {
				msg = fmt.Sprintf("loss %.4f", *l.Loss)
			}
			task.Set(int64(l.Step), msg)
		}
		seen = len(lines)
	}
	tick := time.NewTicker(c.Poll)
	defer tick.Stop()
	var waitErr error
	cancelled := false
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-tick.C:
			report()
		case <-ctx.Done():
			cancelled = true
			c.Progress.Notef("job", "interrupted: asking the job to checkpoint (SIGTERM), waiting up to %s", c.Grace)
			terminate(cmd.Process)
			select {
			case waitErr = <-done:
			case <-time.After(c.Grace):
				killGroup(cmd.Process)
				waitErr = <-done
			}
			break loop
		}
	}
	report()
	b, rerr := os.ReadFile(resultPath)
	var res *Result
	if rerr == nil {
		if res, rerr = ParseResult(b); rerr != nil {
			return nil, rerr
		}
	}
	l := &Launched{Mode: c.Mode, Result: res}
	if ps := cmd.ProcessState; ps != nil {
		l.CPUSeconds = (ps.UserTime() + ps.SystemTime()).Seconds()
		l.PeakRSSBytes = peakRSS(ps)
	}
	if cancelled {
		if res != nil && res.Status == StatusStopped {
			c.Progress.Notef("job", "the job checkpointed and stopped at step %d; launch it again to resume", res.Steps)
		}
		return l, ctx.Err()
	}
	if res == nil {
		return nil, fmt.Errorf("job: launch.sh ended (%v) without writing %s; its output is in %s: %s", waitErr, ct.Outputs.Result, filepath.Join(c.Dir, LaunchLog), tail(filepath.Join(c.Dir, LaunchLog)))
	}
	if res.Status == StatusFailed {
		return l, fmt.Errorf("job: the %s job failed: %s (output in %s)", ct.Kind, res.Error, filepath.Join(c.Dir, LaunchLog))
	}
	if waitErr != nil && res.Status == StatusDone {
		return l, fmt.Errorf("job: launch.sh ended with %v after writing a done result: a rank failed (output in %s)", waitErr, filepath.Join(c.Dir, LaunchLog))
	}
	return l, nil
}

// tail returns the last lines of a file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}
