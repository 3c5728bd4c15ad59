package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"

	"github.com/autocompress/autocompress/internal/output"
)

// StepLog is a JSON-lines log of a run's training steps and evaluations, the
// data of a loss curve and a held-out curve. Each line is a LogLine. A
// resumed run appends to the log of the run it continues, after dropping the
// lines of the steps it will redo.
type StepLog struct {
	f       *os.File
	perStep int64
	err     error
}

// LogLine is one line of a StepLog: a training step (Loss, LR, GradNorm) or
// an evaluation (ValLoss, ValPPL).
type LogLine struct {
	Step       int      `json:"step"`
	Tokens     int64    `json:"tokens"` // training tokens of the whole run up to this step
	Loss       *float64 `json:"loss,omitempty"`
	LR         *float64 `json:"lr,omitempty"`
	GradNorm   *float64 `json:"grad_norm,omitempty"`
	TokensPerS *float64 `json:"tokens_per_s,omitempty"` // rate of this process so far
	ValLoss    *float64 `json:"val_loss,omitempty"`
	ValPPL     *float64 `json:"val_ppl,omitempty"`
}

// OpenStepLog opens the log at path for a run of perStep tokens per step.
// With resumeStep < 0 (a fresh run) an existing log is emptied; otherwise
// its lines up to step resumeStep are kept, later ones (steps the resumed
// run redoes) and a torn last line are dropped, and new lines follow.
// Without force, an existing file that is not a step log (its first line is
// not one of ours) is the user's: an *output.ExistsError, left as it is.
func OpenStepLog(path string, resumeStep int, perStep int64, force bool) (*StepLog, error) {
	if !force {
		if err := CheckStepLog(path); err != nil {
			return nil, err
		}
	}
	var keep bytes.Buffer
	if resumeStep >= 0 {
		b, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("train: log: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var x LogLine
			if json.Unmarshal(sc.Bytes(), &x) != nil || x.Step > resumeStep {
				continue
			}
			keep.Write(sc.Bytes())
			keep.WriteByte('\n')
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644) //output:not-an-output: an append-only step log, extended by a resumed run
	if err != nil {
		return nil, fmt.Errorf("train: log: %w", err)
	}
	if _, err := f.Write(keep.Bytes()); err != nil {
		f.Close()
		return nil, fmt.Errorf("train: log %s: %w", path, err)
	}
	return &StepLog{f: f, perStep: perStep}, nil
}

// CheckStepLog returns an *output.ExistsError when path holds something
// other than a step log. Every line of a step log starts with the step (a
// torn line too: a crash cuts lines at their end).
func CheckStepLog(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("train: log: %w", err)
	}
	defer f.Close()
	head := make([]byte, len(stepLogPrefix))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil // empty: a log opened before its first step
	case err != nil && !errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("train: log: %w", err)
	case n < len(head) || string(head) != stepLogPrefix:
		return &output.ExistsError{Path: path}
	}
	return nil
}

// stepLogPrefix starts every line of a step log (LogLine's first field).
const stepLogPrefix = `{"step":`

// Write appends s as one line; use it as (or from) Options.OnStep. A write
// error is kept for Close: the log never stops a run.
func (l *StepLog) Write(s StepInfo) {
	x := LogLine{Step: s.Step, Tokens: int64(s.Step) * l.perStep}
	if s.Eval {
		ppl := math.Exp(s.ValLoss)
		x.ValLoss, x.ValPPL = &s.ValLoss, &ppl
	} else {
		x.Loss, x.LR, x.GradNorm = &s.Loss, &s.LR, &s.GradNorm
		if s.Elapsed > 0 {
			r := float64(s.Tokens) / s.Elapsed.Seconds()
			x.TokensPerS = &r
		}
	}
	b, err := json.Marshal(x)
	if err == nil {
		_, err = l.f.Write(append(b, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = fmt.Errorf("train: log %s: %w", l.f.Name(), err)
	}
}

// Close closes the log and returns the first write error, if any.
func (l *StepLog) Close() error {
	err := l.f.Close()
	if l.err != nil {
		return l.err
	}
	return err
}
