package eval

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/internal/progress"
)

// cannedLM answers every generation request with the completion listed for
// its prompt (decoded from byteTok ids), cut at the request's stop
// sequences as a real generator would.
type cannedLM struct {
	byPrompt map[string]string
	seen     []GenRequest
}

func (c *cannedLM) LogLikelihood(context.Context, []Request, progress.Func) ([]LogLik, error) {
	return nil, errors.New("not a log-likelihood model")
}

func (c *cannedLM) Generate(_ context.Context, reqs []GenRequest, o GenOptions) ([]Completion, error) {
	out := make([]Completion, len(reqs))
	for i, r := range reqs {
		c.seen = append(c.seen, r)
		b := make([]byte, len(r.Prompt))
		for k, id := range r.Prompt {
			b[k] = byte(id)
		}
		out[i] = Completion{Text: cutAtStop(c.byPrompt[string(b)], r.Until), Reason: StopSequence}
	}
	return out, nil
}

// byteDecTok is byteTok with a decoder.
type byteDecTok struct{ byteTok }

func (byteDecTok) Decode(ids []int, _ bool) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b), nil
}

// A HumanEval task whose completions loop forever, allocate without
// bound, fork, write outside their directory, open a socket, are wrong or
// right: the misbehaving ones score as failed, the evaluation completes,
// and pass@1 counts the right ones.
func TestCodeTaskGoesOnPastBadPrograms(t *testing.T) {
	requirePython(t)
	old := CodeLimits
	CodeLimits.CPU = time.Second
	t.Cleanup(func() { CodeLimits = old })
	prompt := "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n"
	test := "def check(candidate):\n    assert candidate(2, 3) == 5\n"
	completions := []string{
		"    while True:\n        pass\n",
		"    x = []\n    while True:\n        x.append(bytearray(1 << 24))\n",
		"    import os\n    while True:\n        os.fork()\n",
		"    open('/tmp/autocompress-escape', 'w').write('x')\n    return a + b\n",
		"    import socket\n    socket.socket().connect(('127.0.0.1', 80))\n    return a + b\n",
		"    return a - b\n",
		"    return a + b\n\ndef other():\n    pass\n", // cut at "\ndef"
		"    return b + a\n",
	}
	task := &Task{Name: "humaneval", Kind: Generation, Gen: &GenSpec{Until: HumanEvalUntil, Score: scoreCode}}
	lm := &cannedLM{byPrompt: map[string]string{}}
	for i, c := range completions {
		p := strings.Replace(prompt, "Return", "Return ("+itoa(i)+")", 1)
		lm.byPrompt[p] = c
		task.Items = append(task.Items, Item{Context: p, Ref: HumanEvalProblem{Prompt: p, Test: test, EntryPoint: "add"}})
	}
	s := &Scorer{LM: lm, Tok: byteDecTok{}}
	r, err := s.Evaluate(context.Background(), task, TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.Metric("pass@1")
	if !ok || !approx(m.Value, 2.0/8) || r.Kind != "generation" || r.Items != 8 {
		t.Errorf("got %+v, want pass@1 = 2/8 over 8 generation items", r)
	}
	if lm.seen[0].MaxTokens != DefaultMaxTokens || len(lm.seen[0].Until) != len(HumanEvalUntil) {
		t.Errorf("request %+v: want the default token limit and the task's stop sequences", lm.seen[0])
	}
	// --limit applies to generation tasks too.
	r, err = s.Evaluate(context.Background(), task, TaskOptions{Limit: 1})
	if err != nil || r.Items != 1 {
		t.Errorf("limit 1: %+v, %v", r, err)
	}
}

func TestGenerationTaskErrors(t *testing.T) {
	task := &Task{Name: "gsm8k", Kind: Generation, Items: []Item{{Context: "Q: 1+1?\nA:", Ref: "2"}}, Gen: &GenSpec{Score: scoreGSM8K}}
	lm := &cannedLM{byPrompt: map[string]string{"Q: 1+1?\nA:": " 1 + 1 = 2. The answer is 2.\n"}}
	for _, tc := range []struct {
		name string
		s    *Scorer
		want string
	}{
		{"no decoder", &Scorer{LM: lm, Tok: byteTok{}}, "eval: gsm8k: the tokenizer cannot decode ids to text"},
		{"not a generator", &Scorer{LM: unigramLM{}, Tok: byteDecTok{}}, "eval: gsm8k: this model cannot generate"},
	} {
		_, err := tc.s.Evaluate(context.Background(), task, TaskOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	r, err := (&Scorer{LM: lm, Tok: byteDecTok{}}).Evaluate(context.Background(), task, TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := r.Metric("exact_match,strict-match"); m.Value != 1 {
		t.Errorf("got %+v, want strict exact match 1", r.Metrics)
	}
	// A model without a tokenizer cannot run a task.
	_, err = Run(context.Background(), []Model{{Name: "m", Model: tinyModel(t, 26, 1)}}, Config{Tasks: []*Task{task}})
	if err == nil || !strings.Contains(err.Error(), "eval: m: tasks need a tokenizer") {
		t.Errorf("no tokenizer: got %v", err)
	}
}
