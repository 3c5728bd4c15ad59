package eval

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"
)

// HumanEval follows lm-evaluation-harness's humaneval_greedy task
// (lm_eval/tasks/humaneval/humaneval-greedy.yaml and utils.py): zero-shot,
// the prompt (imports, signature, docstring) as the context, greedy
// generation until "\nclass", "\ndef", "\n#", "\nif" or "\nprint"; the
// program prompt + completion + "\n" + test + "\ncheck(entry_point)" is
// run (here in internal/sandbox) and passes when it raises nothing
// (pass@1).

// HumanEvalUntil are the task's stop sequences.
var HumanEvalUntil = []string{"\nclass", "\ndef", "\n#", "\nif", "\nprint"}

// HumanEvalProblem is one line of HumanEval.jsonl.
type HumanEvalProblem struct {
	TaskID            string `json:"task_id"`
	Prompt            string `json:"prompt"`
	CanonicalSolution string `json:"canonical_solution"`
	Test              string `json:"test"`
	EntryPoint        string `json:"entry_point"`
}

// Program returns the program that checks completion (the upstream
// human_eval/execution.py check_program, and the harness's
// build_predictions + build_references).
func (p HumanEvalProblem) Program(completion string) string {
	return p.Prompt + completion + "\n" + p.Test + "\n" + "check(" + p.EntryPoint + ")"
}

var pyIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadHumanEval reads HumanEval problems: JSON lines with task_id, prompt,
// test and entry_point (canonical_solution optional), as in
// openai/human-eval's HumanEval.jsonl.
func ReadHumanEval(name string, r io.Reader) ([]HumanEvalProblem, error) {
	var out []HumanEvalProblem
	want := `want a JSON object {"task_id", "prompt", "canonical_solution", "test", "entry_point"}`
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var p HumanEvalProblem
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		switch {
		case p.Prompt == "" || p.Test == "":
			return &FormatError{File: name, Line: n, Msg: want + ": prompt and test are required"}
		case !pyIdent.MatchString(p.EntryPoint):
			return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("%s: entry_point %q is not a Python function name", want, p.EntryPoint)}
		case !strings.Contains(p.Test, "def check("):
			return &FormatError{File: name, Line: n, Msg: want + ": the test defines no check(candidate) function"}
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &FormatError{File: name, Msg: "no problems"}
	}
	return out, nil
}

// ParseHumanEval reads HumanEval (ReadHumanEval) into a Generation task
// scored by pass@1.
func ParseHumanEval(name string, r io.Reader) (*Task, error) {
	ps, err := ReadHumanEval(name, r)
	if err != nil {
		return nil, err
	}
	t := &Task{Name: "humaneval", Source: name, Kind: Generation,
		Gen: &GenSpec{Until: HumanEvalUntil, MaxTokens: DefaultMaxTokens, Score: scoreCode}}
	for _, p := range ps {
		t.Items = append(t.Items, Item{Context: p.Prompt, Ref: p})
	}
	return t, nil
}

// openMaybeGzip opens path, decompressing it when it ends in .gz, and
// parses it.
func openMaybeGzip[T any](path string, parse func(string, io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return zero, &FormatError{File: path, Msg: "not a gzip file: " + err.Error()}
		}
		defer z.Close()
		r = z
	}
	return parse(path, r)
}
