package eval

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestLMEvalTasksOnData: the shared copies load with the published counts
// and the harness's prompts, and every gold answer is in range.
func TestLMEvalTasksOnData(t *testing.T) {
	for _, tc := range []struct {
		kind, rel string
		tasks     map[string]int
		first     string // the first item's context (of its first choice)
		choices   []string
		gold      int
	}{
		{"arc_challenge", "eval/arc_challenge_test.jsonl", map[string]int{"arc_challenge": 1172},
			"Question: An astronomer observes that a planet rotates faster after a meteorite impact. Which is the most likely effect of this increase in rotation?\nAnswer:",
			[]string{"Planetary density will decrease.", "Planetary years will become longer.", "Planetary days will become shorter.", "Planetary gravity will become stronger."}, 2},
		{"arc_easy", "eval/arc_easy_test.jsonl", map[string]int{"arc_easy": 2376}, "", nil, -1},
		{"winogrande", "eval/winogrande_dev.jsonl", map[string]int{"winogrande": 1267},
			"Sarah was a much better surgeon than Maria so Sarah",
			[]string{"always got the easier cases.", "always got the easier cases."}, 1},
		{"truthfulqa", "eval/truthfulqa_mc.json", map[string]int{"truthfulqa_mc1": 817, "truthfulqa_mc2": 817}, "", nil, 0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			p := sdtest.Require(t, tc.rel)
			ts, err := LoadTask(tc.kind, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != len(tc.tasks) {
				t.Fatalf("%d tasks, want %d", len(ts), len(tc.tasks))
			}
			for _, tk := range ts {
				if n, ok := tc.tasks[tk.Name]; !ok || len(tk.Items) != n {
					t.Errorf("%s: %d items, want %d", tk.Name, len(tk.Items), n)
				}
				checkTask(t, tk, nil)
			}
			it := ts[0].Items[0]
			if tc.first != "" && it.contextOf(0) != tc.first {
				t.Errorf("context %q, want %q", it.contextOf(0), tc.first)
			}
			if tc.choices != nil && strings.Join(it.Choices, "|") != strings.Join(tc.choices, "|") {
				t.Errorf("choices %q, want %q", it.Choices, tc.choices)
			}
			if tc.gold >= 0 && it.Gold != tc.gold {
				t.Errorf("gold %d, want %d", it.Gold, tc.gold)
			}
		})
	}
}

// TestTruthfulQAOrderAndMC2: answers keep the file's order, the true mc2
// answers are those before the first false one, and the prompt is the
// harness's.
func TestTruthfulQAOrderAndMC2(t *testing.T) {
	data := `[{"question": "Q1?", "mc1_targets": {"z true": 1, "a false": 0, "m false": 0},
	  "mc2_targets": {"z true": 1, "y true": 1, "a false": 0, "late true": 1}}]`
	ts, err := ParseTruthfulQA("f.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	mc1, mc2 := ts[0], ts[1]
	if got := strings.Join(mc1.Items[0].Choices, "|"); got != "z true|a false|m false" {
		t.Errorf("mc1 order %q", got)
	}
	if got := mc2.Items[0].Correct; len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("mc2 true answers %v, want [0 1] (the harness splits at the first 0)", got)
	}
	if !strings.HasPrefix(mc1.Items[0].Context, "Q: What is human life expectancy") || !strings.HasSuffix(mc1.Items[0].Context, "Barcelona, Spain.\n\nQ: Q1?\nA:") {
		t.Errorf("context %q", mc1.Items[0].Context)
	}
}

// TestProbMass: MC2's score is the normalised probability on the true
// answers (checked by hand), also when log-likelihoods are so low that
// exp underflows.
func TestProbMass(t *testing.T) {
	tk := &Task{Name: "mc2", Kind: ProbMass, Items: []Item{
		{Choices: []string{"a", "b", "c"}, Correct: []int{0}},
		{Choices: []string{"a", "b", "c", "d"}, Correct: []int{0, 1}},
	}}
	ln := math.Log
	scores := [][]LogLik{
		{{LogProb: ln(0.2)}, {LogProb: ln(0.3)}, {LogProb: ln(0.5)}},                     // 0.2
		{{LogProb: -2000 + ln(3)}, {LogProb: -2000}, {LogProb: -2000}, {LogProb: -2000}}, // 4/6
	}
	r := Aggregate(tk, scores)
	m, _ := r.Metric("acc")
	want := (0.2 + 4.0/6) / 2
	if math.Abs(m.Value-want) > 1e-12 {
		t.Errorf("acc %v, want %v", m.Value, want)
	}
	if math.Abs(r.Chance-(1.0/3+0.5)/2) > 1e-12 {
		t.Errorf("chance %v", r.Chance)
	}
}

// TestWinograndePartialRequests: both options are scored on the same
// continuation tokens after their own contexts.
func TestWinograndePartialRequests(t *testing.T) {
	tk, err := ParseWinogrande("w.jsonl", strings.NewReader(`{"sentence": "Ann beat Bo so _ won.", "option1": "Ann", "option2": "Bo", "answer": "1"}`+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Scorer{LM: nil, Tok: byteTok{}, Prefix: []int32{0}}
	reqs, err := s.Requests(tk)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || string(ids(reqs[0].Cont)) != " won." || string(ids(reqs[1].Cont)) != " won." {
		t.Fatalf("continuations %q %q", ids(reqs[0].Cont), ids(reqs[1].Cont))
	}
	if string(ids(reqs[0].Context[1:])) != "Ann beat Bo so Ann" || string(ids(reqs[1].Context[1:])) != "Ann beat Bo so Bo" {
		t.Errorf("contexts %q %q", ids(reqs[0].Context), ids(reqs[1].Context))
	}
}

func ids(v []int32) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}

// TestLMEvalTaskErrors: a file in the wrong format names the line and
// what was expected.
func TestLMEvalTaskErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parse func() error
		want  []string
	}{
		{"arc answer", func() error {
			_, err := ParseARC("arc_easy", "a.jsonl", strings.NewReader("\n"+`{"question":{"stem":"s","choices":[{"text":"x","label":"A"},{"text":"y","label":"B"}]},"answerKey":"E"}`))
			return err
		}, []string{"a.jsonl:2:", `answerKey "E" is none of the choices' labels (A, B)`}},
		{"arc json", func() error {
			_, err := ParseARC("arc_easy", "a.jsonl", strings.NewReader("{nope"))
			return err
		}, []string{"a.jsonl:1:", "want a JSON object"}},
		{"winogrande blank", func() error {
			_, err := ParseWinogrande("w.jsonl", strings.NewReader(`{"sentence":"no blank","option1":"a","option2":"b","answer":"1"}`), nil)
			return err
		}, []string{"w.jsonl:1:", "no _ blank"}},
		{"winogrande answer", func() error {
			_, err := ParseWinogrande("w.jsonl", strings.NewReader(`{"sentence":"a _ b","option1":"a","option2":"b","answer":""}`), nil)
			return err
		}, []string{"w.jsonl:1:", "labels.lst"}},
		{"truthfulqa line", func() error {
			_, err := ParseTruthfulQA("t.json", []byte("[\n{\"question\": \"q\", \"mc1_targets\": {\"a\": 1, \"b\": 0},\n \"mc2_targets\": {\"a\": 2}}]"))
			return err
		}, []string{"t.json:2:", "question 1", `answer "a": want the label 1`}},
		{"truthfulqa not array", func() error {
			_, err := ParseTruthfulQA("t.json", []byte(`{"question": "q"}`))
			return err
		}, []string{"t.json:1:", "want a JSON array"}},
	} {
		err := tc.parse()
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FormatError", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
	}
}

func FuzzParseARC(f *testing.F) {
	f.Add(`{"question":{"stem":"s","choices":[{"text":"x","label":"1"},{"text":"y","label":"2"}]},"answerKey":"2"}`)
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseARC("arc_easy", "f", strings.NewReader(s))
		checkTask(t, tk, err)
	})
}

func FuzzParseWinogrande(f *testing.F) {
	f.Add(`{"sentence":"a _ b","option1":"x","option2":"y","answer":"2"}`)
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseWinogrande("f", strings.NewReader(s), nil)
		checkTask(t, tk, err)
		if err == nil {
			for _, it := range tk.Items {
				if len(it.Contexts) != len(it.Choices) {
					t.Fatalf("%+v", it)
				}
			}
		}
	})
}

func FuzzParseTruthfulQA(f *testing.F) {
	f.Add(`[{"question":"q","mc1_targets":{"a":1,"b":0},"mc2_targets":{"a":1,"c":1,"b":0}}]`)
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTruthfulQA("f", []byte(s))
		if err != nil {
			return
		}
		for _, tk := range ts {
			checkTask(t, tk, nil)
			for _, it := range tk.Items {
				for _, k := range it.Correct {
					if k < 0 || k >= len(it.Choices) {
						t.Fatalf("%+v", it)
					}
				}
			}
		}
	})
}
