package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MBPP follows lm-evaluation-harness's mbpp task
// (lm_eval/tasks/mbpp/mbpp.yaml, version 1.0): the 500 test problems
// (task_id 11–510), three-shot with problems 2, 3 and 4 (utils.py
// list_fewshot_samples, the original paper's prompt), each shot
// "You are an expert Python programmer, and here is your task: TEXT Your
// code should pass these tests:\n\nTEST1\nTEST2\nTEST3\n[BEGIN]" + "\n" +
// code + "\n[DONE]", shots joined by blank lines; greedy generation until
// "[DONE]"; the program completion + "\n" + the tests is run (here in
// internal/sandbox) and passes when it raises nothing (pass@1). One
// difference: test_setup_code (non-empty for problems 367 and 927, which
// build a Node class their tests use) runs between the completion and the
// tests, as the MBPP authors' evaluation does; the harness leaves it out,
// so under it problem 367 fails for every model that does not write its
// own Node class.

// MBPPUntil is the task's stop sequence.
var MBPPUntil = []string{"[DONE]"}

// mbppShots are the few-shot problems and the test split (task ids).
var (
	mbppShots                = []int{2, 3, 4}
	mbppTestFrom, mbppTestTo = 11, 510
)

// MBPPProblem is one line of mbpp.jsonl.
type MBPPProblem struct {
	TaskID            int      `json:"task_id"`
	Text              string   `json:"text"`
	Code              string   `json:"code"`
	TestSetupCode     string   `json:"test_setup_code"`
	TestList          []string `json:"test_list"`
	ChallengeTestList []string `json:"challenge_test_list"`
}

// Program returns the program that checks completion: the completion, the
// test setup code and the asserts of test_list.
func (p MBPPProblem) Program(completion string) string {
	var b strings.Builder
	b.WriteString(completion + "\n")
	if p.TestSetupCode != "" {
		b.WriteString(p.TestSetupCode + "\n")
	}
	b.WriteString(strings.Join(p.TestList, "\n"))
	return b.String()
}

// mbppText is the harness's doc_to_text.
func (p MBPPProblem) mbppText() string {
	tests := p.TestList[:min(3, len(p.TestList))]
	return "You are an expert Python programmer, and here is your task: " + p.Text + " Your code should pass these tests:\n\n" + strings.Join(tests, "\n") + "\n[BEGIN]"
}

// ReadMBPP reads MBPP problems: JSON lines {"text", "code", "task_id",
// "test_setup_code", "test_list", "challenge_test_list"}
// (google-research's mbpp.jsonl).
func ReadMBPP(name string, r io.Reader) ([]MBPPProblem, error) {
	var out []MBPPProblem
	want := `want a JSON object {"task_id": N, "text": ..., "code": ..., "test_list": [...], ...}`
	seen := map[int]int{}
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var p MBPPProblem
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		switch {
		case p.TaskID <= 0:
			return &FormatError{File: name, Line: n, Msg: want + ": a positive task_id is required"}
		case strings.TrimSpace(p.Text) == "" || len(p.TestList) == 0:
			return &FormatError{File: name, Line: n, Msg: want + ": text and at least one test are required"}
		}
		if first, dup := seen[p.TaskID]; dup {
			return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("task_id %d again (first on line %d)", p.TaskID, first)}
		}
		seen[p.TaskID] = n
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

// ParseMBPP reads MBPP (ReadMBPP) into the harness's task: the test
// problems (task_id 11–510) with the three-shot prompt of problems 2–4,
// which the file must hold.
func ParseMBPP(name string, r io.Reader) (*Task, error) {
	ps, err := ReadMBPP(name, r)
	if err != nil {
		return nil, err
	}
	byID := map[int]MBPPProblem{}
	for _, p := range ps {
		byID[p.TaskID] = p
	}
	var shots strings.Builder
	for _, id := range mbppShots {
		p, ok := byID[id]
		if !ok {
			return nil, &FormatError{File: name, Msg: fmt.Sprintf("no problem with task_id %d: the three-shot prompt uses problems 2, 3 and 4 (use the full mbpp.jsonl)", id)}
		}
		shots.WriteString(p.mbppText() + "\n" + p.Code + "\n[DONE]\n\n")
	}
	t := &Task{Name: "mbpp", Source: name, Kind: Generation,
		Gen: &GenSpec{Until: MBPPUntil, MaxTokens: DefaultMaxTokens, Score: scoreCode}}
	for _, p := range ps {
		if p.TaskID >= mbppTestFrom && p.TaskID <= mbppTestTo {
			t.Items = append(t.Items, Item{Context: shots.String() + p.mbppText(), Ref: p})
		}
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: fmt.Sprintf("no test problems (task_id %d–%d)", mbppTestFrom, mbppTestTo)}
	}
	return t, nil
}
