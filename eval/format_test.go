package eval

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestEngineLMMatchesFullForward: the grouped, cached, chunked scoring
// equals a straightforward full forward pass over context+continuation
// with an own log-softmax, for shared and distinct contexts, one- and
// many-token continuations, and a context cut from the left to the
// model's 64 positions, and contexts sharing a prefix across questions.
func TestEngineLMMatchesFullForward(t *testing.T) {
	m := tinyModel(t, 64, 3)
	r := rand.New(rand.NewPCG(5, 6))
	seq := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(64))
		}
		return s
	}
	shared := seq(9)
	// Few-shot-like contexts: a common 30-token prefix, then each its own.
	fewShot := seq(30)
	shot := func(n int) []int32 { return append(append([]int32(nil), fewShot...), seq(n)...) }
	reqs := []Request{{shared, seq(1)}, {shared, seq(4)}, {shared, seq(7)}, {seq(3), seq(2)}, {seq(70), seq(5)}, {shared, seq(1)}}
	s1, s2 := shot(3), shot(5)
	reqs = append(reqs, Request{s1, seq(2)}, Request{s1, seq(1)}, Request{s2, seq(3)}, Request{shot(1), seq(1)}, Request{fewShot, seq(2)})
	for _, budget := range []int{1, 16, 60, 0} {
		got, err := (&EngineLM{Model: m, StepTokens: budget}).LogLikelihood(context.Background(), reqs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range reqs {
			c := q.Context
			if len(c)+len(q.Cont)-1 > 64 {
				c = c[len(c)-(65-len(q.Cont)):]
			}
			full := append(append([]int32(nil), c...), q.Cont...)
			n := len(full) - 1
			logits, err := m.Forward(full[:n], 1, n)
			if err != nil {
				t.Fatal(err)
			}
			var want float64
			greedy := true
			for p := len(c) - 1; p < n; p++ {
				row := logits[p*64 : (p+1)*64]
				mx, arg := math.Inf(-1), 0
				for k, v := range row {
					if float64(v) > mx {
						mx, arg = float64(v), k
					}
				}
				var s float64
				for _, v := range row {
					s += math.Exp(float64(v) - mx)
				}
				want += float64(row[full[p+1]]) - mx - math.Log(s)
				greedy = greedy && int32(arg) == full[p+1]
			}
			if math.Abs(got[i].LogProb-want) > 1e-4 || got[i].Greedy != greedy {
				t.Errorf("budget %d request %d: %+v, want log-likelihood %.6f greedy %v", budget, i, got[i], want, greedy)
			}
		}
	}
	if _, err := (&EngineLM{Model: m}).LogLikelihood(context.Background(), []Request{{seq(3), seq(65)}}, nil); err == nil {
		t.Error("a continuation longer than the model's positions was scored")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (&EngineLM{Model: m}).LogLikelihood(ctx, reqs, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestQuizExpand(t *testing.T) {
	for in, want := range map[string]string{
		"{The }Merchant{ of Venice{ IV-i}}": "The Merchant of Venice IV-i",
		"strain['|e]d":                      "strain'd",
		"Alabama|Ala|AL":                    "Alabama",
		"forget{-| }me{-| }not":             "forget-me-not",
		"M[iddle{-}Earth|E]":                "Middle-Earth",
		"Cal{if{ornia}}|CA":                 "California",
		`a\|b`:                              "a|b",
		"":                                  "",
	} {
		if got := QuizExpand(in); got != want {
			t.Errorf("QuizExpand(%q) = %q, want %q", in, got, want)
		}
	}
	if got := QuizFields(`a{b:c}:d\:e:f`); len(got) != 3 || got[0] != "a{b:c}" || got[1] != `d\:e` {
		t.Errorf("QuizFields: %q", got)
	}
}

// TestQuizWorkedExample: a two-record quiz with a continued line; the
// model likes 'a', so the question whose answer is "aa" is right and the
// one whose answer is "bb" wrong (its choices are "bb" and "aa").
func TestQuizWorkedExample(t *testing.T) {
	recs, at, err := ParseQuizLines("q", strings.NewReader("one:\\\naa\ntwo:bb\n"), 0)
	if err != nil || len(recs) != 2 || at[1] != 3 {
		t.Fatalf("%q %v %v", recs, at, err)
	}
	items := QuizItems("q", [2]string{"ques{tion}", "ans{wer}"}, recs)
	if len(items) != 2 || items[0].Context != "question: one\nanswer:" {
		t.Fatalf("%+v", items)
	}
	tk := &Task{Name: "quiz", Kind: MultipleChoice, Delimiter: " ", Norm: true, Items: items}
	s := &Scorer{LM: unigramLM{map[byte]float64{'a': 0.5, ' ': 0.25}}, Tok: byteTok{}}
	res, err := s.Evaluate(context.Background(), tk, TaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		for k, c := range it.Choices {
			want := lnSpace + 2*lnOther
			if c == "aa" {
				want = lnSpace + 2*lnA
			}
			if !approx(res.Scores[i][k].LogProb, want) {
				t.Errorf("item %d choice %q: %.6f, want %.6f", i, c, res.Scores[i][k].LogProb, want)
			}
		}
	}
	if m, _ := res.Metric("acc"); m.Value != 0.5 || res.Chance != 0.5 {
		t.Errorf("acc %+v chance %v", m, res.Chance)
	}
}

// TestFormatErrors: a file in the wrong format is an error naming the
// file, the line and what was expected.
func TestFormatErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		line             int
		parse            func(string, string) error
	}{
		{"lambada json", "{\"text\": \"a b\"}\n{\"txt\": \"a b\"}\n", `no "text" field`, 2, lambadaP},
		{"lambada word", "a b\nalone\n", "at least two", 2, lambadaP},
		{"hellaswag label", "ctx\nx\na\nb\nc\nd\n", "gold ending index 0-3", 2, hellaswagP},
		{"hellaswag short", "ctx\n1\na\nb\nc\nd\nctx2\n0\n", "want 6", 7, hellaswagP},
		{"hellaswag json", "{\"ctx_a\": \"a\"}\n", "activity_label", 1, hellaswagP},
		{"piqa", "{\"goal\":\"g\",\"sol1\":\"a\"}\n", "a field is missing", 1, piqaP},
		{"piqa no label", "{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\"}\n", "no label", 1, piqaP},
		{"mmlu letter", "q,a,b,c,d,A\nq,a,b,c,d,E\n", "answer letter", 2, mmluP},
		{"mmlu fields", "q,a,b,c,d,A\n\"multi\nline\",a,b,c,d,B\nq,a,b,A\n", "question,A,B,C,D,answer", 4, mmluP},
		{"quiz", "a:b\nalone\n", "':'-separated fields", 2, quizP},
		{"suite", "{\"kind\":\"choice\",\"context\":\"c\",\"choices\":[\"a\"],\"label\":0}\n", "at least two choices", 1, suiteP},
		{"suite kind", "{\"kind\":\"other\"}\n", "unknown kind", 1, suiteP},
		{"utf8", "a \xff\n", "UTF-8", 1, lambadaP},
	} {
		err := tc.parse("bad.file", tc.text)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.File != "bad.file" || fe.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a FormatError at bad.file:%d saying %q", tc.name, err, tc.line, tc.want)
		}
	}
}

func lambadaP(n, s string) error   { _, err := ParseLAMBADA(n, strings.NewReader(s)); return err }
func hellaswagP(n, s string) error { _, err := ParseHellaSwag(n, strings.NewReader(s)); return err }
func piqaP(n, s string) error      { _, err := ParsePIQA(n, strings.NewReader(s), "", nil); return err }
func mmluP(n, s string) error      { _, err := ParseMMLUCSV(n, strings.NewReader(s)); return err }
func quizP(n, s string) error      { _, _, err := ParseQuizLines(n, strings.NewReader(s), 0); return err }
func suiteP(n, s string) error     { _, err := ParseSuite(n, strings.NewReader(s)); return err }

func TestPIQALabelsFile(t *testing.T) {
	_, err := ParsePIQA("v.jsonl", strings.NewReader("{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\"}\n"), "v-labels.lst", strings.NewReader("1\n0\n"))
	if err == nil || !strings.Contains(err.Error(), "2 labels for 1 items") {
		t.Errorf("label count mismatch: %v", err)
	}
	tk, err := ParsePIQA("v.jsonl", strings.NewReader("{\"goal\":\"g\",\"sol1\":\"a\",\"sol2\":\"b\"}\n"), "v-labels.lst", strings.NewReader("1\n"))
	if err != nil || tk.Items[0].Gold != 1 || tk.Items[0].Context != "Question: g\nAnswer:" {
		t.Errorf("%+v %v", tk, err)
	}
}

// TestRealEvalFiles reads the copies in ../shared/data/eval and the
// bsdgames quiz directory when present: the published item counts.
func TestRealEvalFiles(t *testing.T) {
	for _, tc := range []struct {
		task, rel string
		items     int
		long      bool // decompressing or parsing takes seconds: not with -short
	}{
		{"lambada", "eval/lambada_openai_test.jsonl", 5153, false},
		{"hellaswag", "eval/hellaswag_val_full.txt.bz2", 10042, true},
		{"piqa", "eval/piqa_valid.jsonl", 1838, false},
		{"mmlu", "eval/mmlu", 14080, true},
	} {
		t.Run(tc.task, func(t *testing.T) {
			if tc.long && testing.Short() {
				t.Skip("reading all of it takes seconds; run without -short")
			}
			p := sdtest.Require(t, tc.rel)
			ts, err := LoadTask(tc.task, p)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ts[0].Items); n != tc.items {
				t.Errorf("%d items, want %d", n, tc.items)
			}
			if tc.task == "piqa" {
				ones := 0
				for _, it := range ts[0].Items {
					ones += it.Gold
				}
				if ones != 928 {
					t.Errorf("%d labels of 1, want 928", ones)
				}
			}
		})
	}
	t.Run("quiz", func(t *testing.T) {
		dir := quizDir()
		if dir == "" {
			t.Skip("bsdgames quiz files absent (scripts/fetch-assets.sh unpacks Debian bsdgames 2.17-29+b1 into testdata/ext/deb/bsdgames; or set AUTOCOMPRESS_QUIZ_DIR)")
		}
		ts, err := LoadTask("quiz", dir)
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string]int{}
		for _, it := range ts[0].Items {
			groups[it.Group]++
			if len(it.Choices) != QuizChoices && it.Group != "chinese" && it.Group != "greek" {
				t.Errorf("%s: %d choices: %+v", it.Group, len(it.Choices), it)
			}
		}
		if len(groups) < 30 || groups["africa"] != 56 || groups["bard"] < 50 {
			t.Errorf("groups %v", groups)
		}
	})
}

// quizDir finds the bsdgames quiz directory for tests: $AUTOCOMPRESS_QUIZ_DIR
// or testdata/ext/deb/bsdgames under the module root; "" when absent.
func quizDir() string {
	if d := os.Getenv("AUTOCOMPRESS_QUIZ_DIR"); d != "" {
		return d
	}
	root, ok := shareddata.ModuleRoot()
	if !ok {
		return ""
	}
	d := filepath.Join(root, "testdata/ext/deb/bsdgames/usr/share/games/bsdgames/quiz")
	if _, err := os.Stat(filepath.Join(d, "index")); err != nil {
		return ""
	}
	return d
}

// TestLoadTaskSpec: NAME=PATH is split and checked before any file is read.
func TestLoadTaskSpec(t *testing.T) {
	var se *SpecError
	for _, spec := range []string{"lambada", "lambada=", "=x"} {
		_, err := LoadTaskSpec(spec)
		if spec == "=x" {
			var ue *UnknownTaskError
			if !errors.As(err, &ue) {
				t.Errorf("%q: %v, want an UnknownTaskError", spec, err)
			}
			continue
		}
		if !errors.As(err, &se) || se.Spec != spec {
			t.Errorf("%q: %v, want a SpecError", spec, err)
		}
	}
	var ue *UnknownTaskError
	if _, err := LoadTaskSpec("arc=/nonexistent"); !errors.As(err, &ue) || ue.Name != "arc" {
		t.Errorf("arc: %v, want an UnknownTaskError", err)
	}
	p := filepath.Join(t.TempDir(), "l.jsonl")
	if err := os.WriteFile(p, []byte(`{"text": "the cat sat on the mat"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := LoadTaskSpec("lambada=" + p)
	if err != nil || len(ts) != 1 || len(ts[0].Items) != 1 {
		t.Fatalf("lambada=%s: %v", p, err)
	}
}
