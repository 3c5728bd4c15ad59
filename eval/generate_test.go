package eval

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/engine"
)

// letters decodes ids of a 26-token vocabulary as one letter each, so that
// text and tokens correspond one to one.
func letters(ids []int32) (string, error) {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte('a' + id)
	}
	return string(b), nil
}

func refGenerate(t *testing.T, m *engine.Model, prompt []int32, n int, eos []int) string {
	t.Helper()
	ids, err := m.Generate(context.Background(), prompt, engine.GenerateOptions{MaxTokens: n, Greedy: true, EOS: eos})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := letters(ids)
	return s
}

// Batched generation gives, for every request, the tokens that one-prompt
// greedy generation (engine.Generate) gives: with more requests than
// batch slots, prompts fed in chunks, and a shared few-shot prefix run
// once and copied.
func TestGenerateMatchesOnePromptAtATime(t *testing.T) {
	m := tinyModel(t, 26, 7)
	r := rand.New(rand.NewPCG(3, 4))
	shared := make([]int32, 20)
	for i := range shared {
		shared[i] = int32(r.IntN(26))
	}
	var reqs []GenRequest
	for i := range 7 {
		p := append([]int32(nil), shared...)
		for range 1 + r.IntN(12) {
			p = append(p, int32(r.IntN(26)))
		}
		reqs = append(reqs, GenRequest{Prompt: p, MaxTokens: 5 + i})
	}
	for _, o := range []GenOptions{
		{Batch: 3, PrefillTokens: 7, EOS: []int32{}},
		{Batch: 32, EOS: []int32{}},
		{Batch: 1, PrefillTokens: 1, EOS: []int32{}},
	} {
		o.Decode = letters
		got, err := (&EngineLM{Model: m}).Generate(context.Background(), reqs, o)
		if err != nil {
			t.Fatal(err)
		}
		for i, g := range got {
			want := refGenerate(t, m, reqs[i].Prompt, reqs[i].MaxTokens, []int{})
			if g.Text != want || g.Reason != StopLength || g.Tokens != reqs[i].MaxTokens {
				t.Errorf("batch %d, budget %d, request %d: got %q (%s, %d tokens), want %q (length)", o.Batch, o.PrefillTokens, i, g.Text, g.Reason, g.Tokens, want)
			}
		}
	}
	// Without the shared prefix (prompts differ at the first token) too.
	reqs[0].Prompt = append([]int32{(reqs[1].Prompt[0] + 1) % 26}, reqs[0].Prompt...)
	got, err := (&EngineLM{Model: m}).Generate(context.Background(), reqs, GenOptions{Decode: letters, Batch: 4, EOS: []int32{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if want := refGenerate(t, m, reqs[i].Prompt, reqs[i].MaxTokens, []int{}); g.Text != want {
			t.Errorf("no shared prefix, request %d: got %q, want %q", i, g.Text, want)
		}
	}
}

func TestGenerateStops(t *testing.T) {
	m := tinyModel(t, 26, 11)
	prompt := []int32{1, 2, 3, 4, 5}
	full := refGenerate(t, m, prompt, 30, []int{})
	stop := full[6:9]
	first := strings.Index(full, stop)
	e := &EngineLM{Model: m}
	got, err := e.Generate(context.Background(), []GenRequest{
		{Prompt: prompt, MaxTokens: 30, Until: []string{"zzzzzzzz", stop}},
		{Prompt: prompt, MaxTokens: 30},
	}, GenOptions{Decode: letters, EOS: []int32{}})
	if err != nil {
		t.Fatal(err)
	}
	if g := got[0]; g.Text != full[:first] || g.Reason != StopSequence || g.Tokens != first+len(stop) {
		t.Errorf("with stop %q: got %q (%s, %d tokens), want %q (stop, %d tokens)", stop, g.Text, g.Reason, g.Tokens, full[:first], first+len(stop))
	}
	if g := got[1]; g.Text != full || g.Reason != StopLength {
		t.Errorf("without stops: got %q (%s), want %q (length)", g.Text, g.Reason, full)
	}
	// The model's EOS (id 0): the default EOS list ends where
	// engine.Generate ends, with the EOS token left out.
	var prompts [][]int32
	for a := range int32(26) {
		prompts = append(prompts, []int32{a, (a * 7) % 26})
	}
	sawEOS := false
	for _, p := range prompts {
		want := refGenerate(t, m, p, 40, nil)
		got, err := e.Generate(context.Background(), []GenRequest{{Prompt: p, MaxTokens: 40}}, GenOptions{Decode: letters})
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Text != want {
			t.Fatalf("prompt %v with EOS: got %q, want %q", p, got[0].Text, want)
		}
		if got[0].Reason == StopEOS {
			sawEOS = true
			if len(want) >= 40 {
				t.Errorf("prompt %v: EOS reported after %d tokens", p, len(want))
			}
		}
	}
	if !sawEOS {
		t.Log("no prompt reached EOS with this model (the EOS path was not exercised)")
	}
}

// A prompt too long for the window less the new tokens is cut from the
// left (the harness's rule); new tokens filling the window are refused.
func TestGenerateContextLimit(t *testing.T) {
	m := tinyModel(t, 26, 5) // 64 positions
	prompt := make([]int32, 60)
	for i := range prompt {
		prompt[i] = int32(i % 26)
	}
	e := &EngineLM{Model: m}
	got, err := e.Generate(context.Background(), []GenRequest{{Prompt: prompt, MaxTokens: 10}}, GenOptions{Decode: letters, EOS: []int32{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := refGenerate(t, m, prompt[6:], 10, []int{}); got[0].Text != want || got[0].PromptCut != 6 {
		t.Errorf("got %q cut %d, want %q cut 6", got[0].Text, got[0].PromptCut, want)
	}
	_, err = e.Generate(context.Background(), []GenRequest{{Prompt: prompt, MaxTokens: 64}}, GenOptions{Decode: letters})
	var ce *ContextError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "64 new tokens") {
		t.Errorf("64 new tokens in 64 positions: got %v, want a *ContextError", err)
	}
	for _, bad := range []GenRequest{{Prompt: nil, MaxTokens: 3}, {Prompt: []int32{1}, MaxTokens: 0}, {Prompt: []int32{99}, MaxTokens: 3}} {
		if _, err := e.Generate(context.Background(), []GenRequest{bad}, GenOptions{Decode: letters}); err == nil {
			t.Errorf("request %+v: no error", bad)
		}
	}
	for _, o := range []GenOptions{{}, {Decode: letters, Batch: -1}, {Decode: letters, PrefillTokens: -2}} {
		if _, err := e.Generate(context.Background(), []GenRequest{{Prompt: prompt[:3], MaxTokens: 2}}, o); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Generate(ctx, []GenRequest{{Prompt: prompt[:5], MaxTokens: 5}}, GenOptions{Decode: letters}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
}

func TestCutAtStop(t *testing.T) {
	for _, tc := range []struct {
		text  string
		until []string
		want  string
	}{
		{"abc Q: def", []string{"Q:"}, "abc "},
		{"x\ndef f\nclass", []string{"\nclass", "\ndef"}, "x"},
		{"no stop", []string{"Q:", ""}, "no stop"},
		{"a[DONE]b[DONE]", []string{"[DONE]"}, "a"},
	} {
		if got := cutAtStop(tc.text, tc.until); got != tc.want {
			t.Errorf("cutAtStop(%q, %q) = %q, want %q", tc.text, tc.until, got, tc.want)
		}
	}
}

// A task asking for as many new tokens as the model's window generates
// half the window instead of failing.
func TestGenerationTaskFitsSmallWindow(t *testing.T) {
	m := tinyModel(t, 256, 3) // 64 positions; byte ids
	task := &Task{Name: "t", Kind: Generation, Items: []Item{{Context: strings.Repeat("long prompt ", 20)}},
		Gen: &GenSpec{MaxTokens: 256, Score: func(_ context.Context, items []Item, c []string) ([]Metric, error) {
			return []Metric{{Name: "len", Value: float64(len(c[0]))}}, nil
		}}}
	r, err := (&Scorer{LM: &EngineLM{Model: m}, Tok: byteDecTok{}}).Evaluate(context.Background(), task, TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Metrics[0].Value; n > 32 {
		t.Errorf("%v bytes generated in a 64-position window, want at most 32", n)
	}
}
