package eval

import (
	"context"
	"fmt"
	"time"

	"github.com/autocompress/autocompress/internal/sandbox"
)

// CodeLimits bound every program a code task (HumanEval, MBPP) runs: the
// program is the model's completion with the task's tests, run by
// internal/sandbox. HumanEval's own harness allows 3 s of wall-clock time;
// these limits are looser so that a loaded machine does not fail a right
// answer, and a wrong answer that loops costs at most the CPU limit.
var CodeLimits = sandbox.Limits{CPU: 5 * time.Second, Wall: 60 * time.Second, Memory: 512 << 20}

// CodeWorkers is the number of programs run at once.
var CodeWorkers = 2

// RunPrograms runs each program in the sandbox (CodeLimits, CodeWorkers at
// a time) and returns whether it passed, with the sandbox's reports. A
// program that fails in any way (a syntax error, a failed assert, a
// timeout, a refused system call) is a false, not an error; the error is
// for the sandbox itself (no python3).
func RunPrograms(ctx context.Context, programs []string) ([]bool, []*sandbox.Result, error) {
	sb, err := sandbox.New("", CodeLimits)
	if err != nil {
		return nil, nil, fmt.Errorf("scoring programs: %w", err)
	}
	res, err := sb.RunAll(ctx, programs, CodeWorkers)
	if err != nil {
		return nil, nil, fmt.Errorf("scoring programs: %w", err)
	}
	pass := make([]bool, len(res))
	for i, r := range res {
		pass[i] = r.Passed
	}
	return pass, res, nil
}

// program is a code task's item: the program that checks a completion.
type program interface {
	Program(completion string) string
}

// scoreCode is a code task's scorer: pass@1 of greedy completions, the
// share of items whose program passes, with the harness's standard error.
func scoreCode(ctx context.Context, items []Item, completions []string) ([]Metric, error) {
	progs := make([]string, len(items))
	for i, it := range items {
		p, ok := it.Ref.(program)
		if !ok {
			return nil, fmt.Errorf("item %d has no tests to run", i)
		}
		progs[i] = p.Program(completions[i])
	}
	pass, _, err := RunPrograms(ctx, progs)
	if err != nil {
		return nil, err
	}
	x := make([]float64, len(pass))
	for i, p := range pass {
		if p {
			x[i] = 1
		}
	}
	return []Metric{meanMetric("pass@1", x)}, nil
}
