package eval

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/progress"
)

// byteTok encodes text as its bytes (id = byte value).
type byteTok struct{}

func (byteTok) Encode(s string, _ bool) ([]int, error) {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids, nil
}
func (byteTok) VocabSize() int { return 256 }

// unigramLM ignores the context: byte b has probability p[b] when listed,
// and the remaining mass is shared equally by the other bytes, so every
// log-likelihood below is a sum of logs computed by hand.
type unigramLM struct{ p map[byte]float64 }

func (u unigramLM) logp(b int32) float64 {
	if v, ok := u.p[byte(b)]; ok {
		return math.Log(v)
	}
	var s float64
	for _, v := range u.p {
		s += v
	}
	return math.Log((1 - s) / float64(256-len(u.p)))
}

// greedy tells whether no byte is likelier than b.
func (u unigramLM) greedy(b int32) bool {
	for c := range int32(256) {
		if u.logp(c) > u.logp(b) {
			return false
		}
	}
	return true
}

func (u unigramLM) LogLikelihood(_ context.Context, reqs []Request, pf progress.Func) ([]LogLik, error) {
	out := make([]LogLik, len(reqs))
	for i, r := range reqs {
		out[i].Greedy = true
		for _, t := range r.Cont {
			out[i].LogProb += u.logp(t)
			out[i].Greedy = out[i].Greedy && u.greedy(t)
		}
	}
	pf.Report(progress.Event{Stage: "eval", Done: int64(len(reqs)), Total: int64(len(reqs)), Unit: "req"})
	return out, nil
}

var (
	lnA     = math.Log(0.5)  // 'a'
	lnSpace = math.Log(0.25) // ' '
	lnOther = math.Log(0.25 / 254)
)

// taskCase is a worked example: a tiny file of one task's format, the
// log-likelihood of each item's choices written out by hand, and the
// metrics that follow.
type taskCase struct {
	name, task, file string
	lm               unigramLM
	want             [][]float64 // per item, per choice
	metrics          map[string][2]float64
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestTaskScoringWorkedExamples(t *testing.T) {
	ua := unigramLM{map[byte]float64{'a': 0.5, ' ': 0.25}}
	uC := unigramLM{map[byte]float64{'C': 0.5, ' ': 0.25}}
	lnC := math.Log(0.5)
	for _, tc := range []taskCase{{
		// Item 1: " ab" is likelier in total, " aaaaaaab" per character
		// (acc wrong, acc_norm right); item 2: " aa" wins both ways.
		name: "hellaswag 6-line", task: "hellaswag",
		file: "Test: x\n1\nab\naaaaaaab\nbz\nbzz\n" + "Test: y\n0\naa\nbz\nbzz\nbzzz\n",
		lm:   ua,
		want: [][]float64{
			{lnSpace + lnA + lnOther, lnSpace + 7*lnA + lnOther, lnSpace + 2*lnOther, lnSpace + 3*lnOther},
			{lnSpace + 2*lnA, lnSpace + 2*lnOther, lnSpace + 3*lnOther, lnSpace + 4*lnOther},
		},
		// acc = 1/2, stderr √(½·½/(2−1)) = ½; acc_norm = 1, stderr 0.
		metrics: map[string][2]float64{"acc": {0.5, 0.5}, "acc_norm": {1, 0}},
	}, {
		// The harness's preprocessing: "[title]" becomes ". ", brackets go,
		// ctx_b is capitalised; a bracket in an ending is dropped ("a[x]a"
		// scores as "aa").
		name: "hellaswag jsonl", task: "hellaswag",
		file:    `{"activity_label":"Test","ctx_a":"x [title] y","ctx_b":"then","endings":["b","a[x]a","bb","bbb"],"label":1}` + "\n",
		lm:      ua,
		want:    [][]float64{{lnSpace + lnOther, lnSpace + 2*lnA, lnSpace + 2*lnOther, lnSpace + 3*lnOther}},
		metrics: map[string][2]float64{"acc": {1, 0}, "acc_norm": {1, 0}},
	}, {
		name: "piqa with label field", task: "piqa",
		file: `{"goal":"g","sol1":"bb","sol2":"aa","label":1}` + "\n" + `{"goal":"g","sol1":"aab","sol2":"b","label":0}` + "\n",
		lm:   ua,
		// Item 2: " b" wins in total (−8.31 against −9.70), " aab" per
		// character (−3.23 against −8.31).
		want:    [][]float64{{lnSpace + 2*lnOther, lnSpace + 2*lnA}, {lnSpace + 2*lnA + lnOther, lnSpace + lnOther}},
		metrics: map[string][2]float64{"acc": {0.5, 0.5}, "acc_norm": {1, 0}},
	}, {
		// LAMBADA: ' ' and 'a' are the likeliest bytes (3/8 each), so the
		// target " aa" is a greedy continuation (acc 1) and " ab" is not;
		// perplexity is exp(−mean log-likelihood) over the items.
		name: "lambada", task: "lambada",
		file: `{"text": "one two aa"}` + "\n" + "three ab\n",
		lm:   unigramLM{map[byte]float64{'a': 0.375, ' ': 0.375}},
		want: [][]float64{{3 * math.Log(0.375)}, {2*math.Log(0.375) + math.Log(0.25/254)}},
		metrics: map[string][2]float64{"acc": {0.5, 0.5},
			"perplexity": {math.Exp(-(5*math.Log(0.375) + math.Log(0.25/254)) / 2), -1}},
	}, {
		// MMLU: the choices are the letters " A".." D"; the model prefers C.
		name: "mmlu", task: "mmlu",
		lm: uC,
		want: [][]float64{{lnSpace + lnOther, lnSpace + lnOther, lnSpace + lnC, lnSpace + lnOther},
			{lnSpace + lnOther, lnSpace + lnOther, lnSpace + lnC, lnSpace + lnOther}},
		metrics: map[string][2]float64{"acc": {0.5, 0.5}},
	}, {
		name: "suite", task: "suite",
		file:    `{"kind":"choice","context":"c","choices":["bb","aa"],"label":1}` + "\n" + `{"kind":"cloze","context":"c","target":"aa"}` + "\n",
		lm:      ua,
		want:    [][]float64{{lnSpace + 2*lnOther, lnSpace + 2*lnA}},
		metrics: map[string][2]float64{"acc": {1, 0}, "acc_norm": {1, 0}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.name
			var tasks []*Task
			var err error
			switch tc.task {
			case "mmlu":
				tasks = []*Task{{Name: "mmlu", Kind: MultipleChoice, Delimiter: " ", Items: MMLUTask("x",
					[]MMLURow{{Question: "q1", Choices: [4]string{"1", "2", "3", "4"}, Answer: 2}, {Question: "q2", Choices: [4]string{"1", "2", "3", "4"}, Answer: 0}},
					[]MMLURow{{Question: "s", Choices: [4]string{"1", "2", "3", "4"}, Answer: 1}})}}
			case "suite":
				tasks, err = ParseSuite(path, strings.NewReader(tc.file))
				tasks = tasks[1:] // the choice task; the cloze one is like lambada
			case "piqa":
				var tk *Task
				tk, err = ParsePIQA(path, strings.NewReader(tc.file), "", nil)
				tasks = []*Task{tk}
			case "lambada":
				var tk *Task
				tk, err = ParseLAMBADA(path, strings.NewReader(tc.file))
				tasks = []*Task{tk}
			case "hellaswag":
				var tk *Task
				tk, err = ParseHellaSwag(path, strings.NewReader(tc.file))
				tasks = []*Task{tk}
			}
			if err != nil {
				t.Fatal(err)
			}
			s := &Scorer{LM: tc.lm, Tok: byteTok{}}
			res, err := s.Evaluate(context.Background(), tasks[0], TaskOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Scores) != len(tc.want) {
				t.Fatalf("%d items, want %d", len(res.Scores), len(tc.want))
			}
			for i, w := range tc.want {
				for k, ll := range w {
					if !approx(res.Scores[i][k].LogProb, ll) {
						t.Errorf("item %d choice %d: log-likelihood %.6f, want %.6f", i, k, res.Scores[i][k].LogProb, ll)
					}
				}
			}
			for name, w := range tc.metrics {
				m, ok := res.Metric(name)
				if !ok {
					t.Fatalf("no metric %s in %+v", name, res.Metrics)
				}
				if !approx(m.Value, w[0]) || (w[1] >= 0 && !approx(m.Stderr, w[1])) {
					t.Errorf("%s = %.6f ± %.6f, want %.6f ± %.6f", name, m.Value, m.Stderr, w[0], w[1])
				}
			}
			if len(res.Metrics) != len(tc.metrics) {
				t.Errorf("metrics %+v, want only %v", res.Metrics, tc.metrics)
			}
		})
	}
}

// TestMMLUPromptFormat pins the harness's 5-shot prompt.
func TestMMLUPromptFormat(t *testing.T) {
	shot := MMLURow{Question: " 1+1? ", Choices: [4]string{"1", "2", "3", "4"}, Answer: 1}
	got := MMLUPrompt("high_school_math", []MMLURow{shot}, MMLURow{Question: "2+2?", Choices: [4]string{"4", "5", "6", "7"}})
	want := "The following are multiple choice questions (with answers) about high school math.\n\n" +
		"1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n" +
		"2+2?\nA. 4\nB. 5\nC. 6\nD. 7\nAnswer:"
	if got != want {
		t.Errorf("prompt\n%q\nwant\n%q", got, want)
	}
}

// TestRequestsMoveTrailingSpace: the context's trailing space joins the
// continuation (the harness's _encode_pair), and Prefix comes first.
func TestRequestsMoveTrailingSpace(t *testing.T) {
	s := &Scorer{Tok: byteTok{}, Prefix: []int32{7}}
	reqs, err := s.Requests(&Task{Name: "x", Delimiter: "", Items: []Item{{Context: "ab ", Choices: []string{"c"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := reqs[0].Context; len(got) != 3 || got[0] != 7 || got[1] != 'a' || got[2] != 'b' {
		t.Errorf("context %v", got)
	}
	if got := reqs[0].Cont; len(got) != 2 || got[0] != ' ' || got[1] != 'c' {
		t.Errorf("continuation %v", got)
	}
}

// TestLimitPerGroup: --limit keeps the first items of every group.
func TestLimitPerGroup(t *testing.T) {
	tk := &Task{Items: []Item{{Group: "a"}, {Group: "a"}, {Group: "b"}, {Group: "a"}, {Group: "b"}, {Group: "b"}}}
	got := tk.Limit(2).Items
	if len(got) != 4 || got[0].Group != "a" || got[1].Group != "a" || got[2].Group != "b" || got[3].Group != "b" {
		t.Errorf("limit 2: %+v", got)
	}
}

// TestBootstrapStderrOfMean: for the mean, the bootstrap agrees with the
// analytic standard error s/√n within its own noise.
func TestBootstrapStderrOfMean(t *testing.T) {
	x := make([]float64, 400)
	for i := range x {
		x[i] = float64(i%7) - 3
	}
	m := meanMetric("m", x)
	b := bootstrapStderr(x, mean)
	if math.Abs(b-m.Stderr)/m.Stderr > 0.1 {
		t.Errorf("bootstrap stderr %.4f, analytic %.4f", b, m.Stderr)
	}
}
