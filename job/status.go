package job

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/autocompress/autocompress/internal/progress"
)

// Result is result.json (CONTRACT.md).
type Result struct {
	Version    int               `json:"version"`
	Kind       Kind              `json:"kind"`
	Engine     string            `json:"engine,omitempty"`
	Status     string            `json:"status"` // done, stopped, failed
	Error      string            `json:"error,omitempty"`
	Steps      int               `json:"steps"`
	Tokens     int64             `json:"tokens"`
	Elapsed    float64           `json:"elapsed_s,omitempty"`
	TokensPerS float64           `json:"tokens_per_s,omitempty"`
	WorldSize  int               `json:"world_size,omitempty"`
	Device     string            `json:"device,omitempty"`
	Losses     []float64         `json:"losses,omitempty"`
	Checkpoint string            `json:"checkpoint,omitempty"`
	SHA256     map[string]string `json:"sha256,omitempty"`
	Perplexity *float64          `json:"perplexity,omitempty"`
	Loss       *float64          `json:"loss,omitempty"`
	KL         *float64          `json:"kl,omitempty"`
	Importance string            `json:"importance,omitempty"`
}

// Result statuses.
const (
	StatusDone    = "done"
	StatusStopped = "stopped"
	StatusFailed  = "failed"
)

// ParseResult decodes result.json and checks its status.
func ParseResult(b []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("job: result.json: %w", err)
	}
	switch {
	case r.Version != ResultVersion:
		return nil, fmt.Errorf("job: result.json: version %d, want %d", r.Version, ResultVersion)
	case r.Status != StatusDone && r.Status != StatusStopped && r.Status != StatusFailed:
		return nil, fmt.Errorf("job: result.json: status %q: want done, stopped or failed", r.Status)
	}
	return &r, nil
}

// StepLine is one line of progress.jsonl.
type StepLine struct {
	Event      string   `json:"event,omitempty"` // "", checkpoint, resumed
	Step       int      `json:"step"`
	Steps      int      `json:"steps"`
	Loss       *float64 `json:"loss,omitempty"`
	LR         *float64 `json:"lr,omitempty"`
	Tokens     int64    `json:"tokens,omitempty"`
	Elapsed    float64  `json:"elapsed_s,omitempty"`
	TokensPerS float64  `json:"tokens_per_s,omitempty"`
}

// readProgress returns the lines of progress.jsonl that parse (a torn last
// line, or any line not an object, is skipped); none when it is absent.
func readProgress(path string) ([]StepLine, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	var out []StepLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l StepLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out, nil
}

// SlurmFile is where --launch slurm records the job id.
const SlurmFile = "slurm.json"

// Slurm is slurm.json.
type Slurm struct {
	JobID     string `json:"job_id"`
	Submitted string `json:"submitted"`
}

// Status is where a job stands, from its files.
type Status struct {
	Dir    string  `json:"dir"`
	Kind   Kind    `json:"kind"`
	Engine string  `json:"engine"`
	State  string  `json:"state"` // emitted, running, submitted, done, stopped, failed
	Step   int     `json:"step"`
	Steps  int     `json:"steps"`
	Loss   float64 `json:"loss,omitempty"`
	// TokensPerS is the last progress line's rate.
	TokensPerS float64 `json:"tokens_per_s,omitempty"`
	SlurmJob   string  `json:"slurm_job,omitempty"`
	Result     *Result `json:"result,omitempty"`
}

// States a job is in before its result.
const (
	StateEmitted   = "emitted"
	StateRunning   = "running"
	StateSubmitted = "submitted"
)

// ReadStatus reads the job at dir: its contract, progress lines, Slurm
// record and result.
func ReadStatus(dir string) (*Status, error) {
	c, err := Load(dir)
	if err != nil {
		return nil, err
	}
	s := &Status{Dir: dir, Kind: c.Kind, Engine: c.Engine, State: StateEmitted, Steps: c.Recipe.Steps}
	if b, err := os.ReadFile(filepath.Join(dir, SlurmFile)); err == nil {
		var sl Slurm
		if json.Unmarshal(b, &sl) == nil {
			s.SlurmJob, s.State = sl.JobID, StateSubmitted
		}
	}
	lines, err := readProgress(filepath.Join(dir, c.Outputs.StepLog))
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if l.Event != "" {
			continue
		}
		s.State, s.Step = StateRunning, l.Step
		if l.Steps > 0 {
			s.Steps = l.Steps
		}
		if l.Loss != nil {
			s.Loss = *l.Loss
		}
		if l.TokensPerS > 0 {
			s.TokensPerS = l.TokensPerS
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, c.Outputs.Result))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	r, err := ParseResult(b)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	s.Result, s.State = r, r.Status
	return s, nil
}

// Ended reports whether the job has a result.
func (s *Status) Ended() bool { return s.Result != nil }

// Wait polls the job at dir every poll (default 2 s) until it has a
// result, reporting its steps (stage "job", unit "step"); it returns the
// final status, or ctx.Err() when cancelled first (the job runs on).
func Wait(ctx context.Context, dir string, poll time.Duration, pf progress.Func) (*Status, error) {
	if poll <= 0 {
		poll = 2 * time.Second
	}
	var task *progress.Task
	last := -1
	for {
		s, err := ReadStatus(dir)
		if err != nil {
			return nil, err
		}
		if s.Step != last && s.Steps > 0 {
			if task == nil {
				task = progress.Start(pf, progress.Event{Stage: "job", Unit: "step", Total: int64(s.Steps)})
				task.Resume(int64(s.Step))
			}
			task.Set(int64(s.Step), fmt.Sprintf("loss %.4f", s.Loss))
			last = s.Step
		}
		if s.Ended() {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(poll):
		}
	}
}
