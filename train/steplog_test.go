package train

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/autocompress/autocompress/internal/output"
)

func readLog(t *testing.T, path string) []LogLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []LogLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x LogLine
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, x)
	}
	return out
}

func TestStepLogResumeDropsRedoneSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	l, err := OpenStepLog(path, -1, 256, false)
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= 6; s++ {
		l.Write(StepInfo{Step: s, Loss: 5 - float64(s)/10, LR: 1e-3, Tokens: int64(s) * 256, Elapsed: time.Duration(s) * time.Second})
		if s%2 == 0 {
			l.Write(StepInfo{Step: s, Eval: true, ValLoss: 4})
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn last line, as a kill -9 mid-write leaves.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":7,"tok`)
	f.Close()

	// Resumed from the checkpoint of step 4: steps 5 and 6 are redone.
	l, err = OpenStepLog(path, 4, 256, false)
	if err != nil {
		t.Fatal(err)
	}
	l.Write(StepInfo{Step: 5, Loss: 4.5, LR: 1e-3, Tokens: 256, Elapsed: time.Second})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readLog(t, path)
	var steps []int
	for _, x := range got {
		steps = append(steps, x.Step)
	}
	want := []int{1, 2, 2, 3, 4, 4, 5}
	if len(steps) != len(want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("steps %v, want %v", steps, want)
		}
	}
	ev := got[2]
	if ev.ValLoss == nil || *ev.ValLoss != 4 || ev.ValPPL == nil || ev.Loss != nil || ev.Tokens != 512 {
		t.Errorf("evaluation line %+v", ev)
	}
	last := got[len(got)-1]
	if last.Loss == nil || *last.Loss != 4.5 || last.Tokens != 5*256 || last.TokensPerS == nil || *last.TokensPerS != 256 {
		t.Errorf("resumed line %+v", last)
	}

	// A fresh run empties the log.
	l, err = OpenStepLog(path, -1, 256, false)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if n := len(readLog(t, path)); n != 0 {
		t.Errorf("fresh run kept %d lines", n)
	}
}

// TestStepLogKeepsOtherFiles: a file that is not a step log is the user's,
// refused without force; an empty file or a log whose first line is torn
// is a step log.
func TestStepLogKeepsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body string
		ours bool
	}{
		{"", true},
		{`{"step":1,"tok`, true},
		{`{"step":1,"tokens":256,"loss":5}` + "\n", true},
		{"my notes\n", false},
		{`{"st`, false},
		{`{"id":3}` + "\n", false},
	} {
		path := filepath.Join(dir, "log")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, resume := range []int{-1, 0} {
			l, err := OpenStepLog(path, resume, 256, false)
			var ee *output.ExistsError
			if tc.ours != (err == nil) || !tc.ours && !errors.As(err, &ee) {
				t.Errorf("%q (resume %d): %v, want a step log: %v", tc.body, resume, err, tc.ours)
			}
			if err == nil {
				l.Close()
				os.WriteFile(path, []byte(tc.body), 0o644)
			} else if b, _ := os.ReadFile(path); string(b) != tc.body {
				t.Errorf("%q: refused but changed to %q", tc.body, b)
			}
		}
		l, err := OpenStepLog(path, -1, 256, true)
		if err != nil {
			t.Fatalf("%q with force: %v", tc.body, err)
		}
		l.Close()
	}
}
