package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// The 8-shot prompt is byte for byte the harness's: the sha256 of the
// prompt for the question "X" as lm-evaluation-harness builds it from
// gsm8k-cot.yaml (doc_to_text 'Q: {{question}}\nA:', target delimiter " ",
// few-shot delimiter "\n\n"; computed with PyYAML from the YAML at
// b8d1d4fd, 2,148 bytes).
func TestGSM8KPromptIsTheHarness(t *testing.T) {
	p := GSM8KPrompt("X")
	sum := sha256.Sum256([]byte(p))
	if got := hex.EncodeToString(sum[:]); got != "48ff5a12ef42600a2aca3830672e9fbc3fbdce3a22b5ae7ad500f7473353bc35" || len(p) != 2148 {
		t.Errorf("prompt sha256 %s (%d bytes), want the harness's 48ff5a12… (2148 bytes); prompt:\n%s", got, len(p), p)
	}
	if !strings.HasPrefix(p, "Q: There are 15 trees") || !strings.HasSuffix(p, "The answer is 8.\n\nQ: X\nA:") {
		t.Errorf("prompt ends: %q … %q", p[:30], p[len(p)-40:])
	}
}

func TestGSM8KExtractWorkedExamples(t *testing.T) {
	for _, tc := range []struct {
		completion, gold string
		strict, flex     bool
		wantS, wantF     string
	}{
		{" Janet has 16 eggs. 16 - 3 - 4 = 9. 9 * 2 = 18. The answer is 18.\n\n", "18", true, true, "18", "18."},
		{" The answer is $1,450,000. So", "1,450,000", false, true, gsm8kInvalid, "$1,450,000."}, // no "$" in the strict regex
		{" The answer is 1,450,000. So", "1,450,000", true, true, "1,450,000.", "1,450,000."},
		{" She pays 5 + 3 = 8 dollars, so 12 left.", "12", false, true, gsm8kInvalid, "12"},
		{" The answer is 7. Then 9 more.", "7", true, false, "7.", "9"}, // the final "." is ignored
		{" no numbers at all", "3", false, false, gsm8kInvalid, gsm8kInvalid},
		{" The answer is -4.", "-4", true, true, "-4", "-4."},
		{" 3 apples", "3", false, true, gsm8kInvalid, "3"},
		{" The answer is 5", "5", false, true, gsm8kInvalid, "5"}, // strict needs a character after the number
	} {
		s, f := GSM8KExtract(tc.completion)
		if s != tc.wantS || f != tc.wantF {
			t.Errorf("%q: extracted %q / %q, want %q / %q", tc.completion, s, f, tc.wantS, tc.wantF)
		}
		if GSM8KMatch(s, tc.gold) != tc.strict || GSM8KMatch(f, tc.gold) != tc.flex {
			t.Errorf("%q vs %q: strict %v flexible %v, want %v %v", tc.completion, tc.gold, GSM8KMatch(s, tc.gold), GSM8KMatch(f, tc.gold), tc.strict, tc.flex)
		}
	}
}

// On the 1,319 reference solutions, extraction finds the gold answer every
// time: flexible extraction on the solution as written (its last number is
// the one after "####"), and strict extraction on the solution rewritten
// in the exemplars' form (calculator annotations dropped, lines joined,
// "#### N" turned into "The answer is N.").
func TestGSM8KReferenceSolutions(t *testing.T) {
	p := sdtest.Require(t, "eval/gsm8k_test.jsonl")
	tk, err := LoadTask("gsm8k", p)
	if err != nil {
		t.Fatal(err)
	}
	task := tk[0]
	if len(task.Items) != 1319 {
		t.Fatalf("%d problems, want 1319", len(task.Items))
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	annot := regexp.MustCompile(`<<[^>]*>>`)
	var flexible, strict []string
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var doc struct{ Answer string }
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		flexible = append(flexible, " "+doc.Answer)
		body, final, ok := strings.Cut(doc.Answer, "\n#### ")
		if !ok {
			t.Fatalf("line %d: no #### line", i+1)
		}
		cot := strings.Join(strings.Split(annot.ReplaceAllString(body, ""), "\n"), " ") + " The answer is " + final + "."
		strict = append(strict, " "+cot)
	}
	for _, tc := range []struct {
		name        string
		completions []string
		metric      string
	}{
		{"flexible on the solutions as written", flexible, "exact_match,flexible-extract"},
		{"strict on the solutions in the exemplars' form", strict, "exact_match,strict-match"},
	} {
		ms, err := task.Gen.Score(context.Background(), task.Items, tc.completions)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name == tc.metric && m.Value != 1 {
				for i, it := range task.Items {
					s, f := GSM8KExtract(tc.completions[i])
					if !GSM8KMatch(s, it.Ref.(string)) && !GSM8KMatch(f, it.Ref.(string)) {
						t.Logf("item %d: gold %q, extracted %q / %q from %q", i, it.Ref, s, f, tc.completions[i])
					}
				}
				t.Errorf("%s: %s = %.4f, want 1", tc.name, m.Name, m.Value)
			}
		}
	}
	// And the bare prompts' first exemplar answer is not this question's.
	ms, _ := task.Gen.Score(context.Background(), task.Items[:50], make([]string, 50))
	if ms[0].Value != 0 || ms[1].Value != 0 {
		t.Errorf("empty completions score %v, want 0", ms)
	}
}

func TestGSM8KFormatErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"question": "q", "answer": "no final line"}`, `f:1: want a JSON object {"question": "...", "answer": "... #### N"}: the answer has no final "#### N" line`},
		{"\n" + `{"question": "q"}`, `f:2: want a JSON object`},
		{`not json`, `f:1: want a JSON object`},
		{`{"question": "q", "answer": "#### "}`, `no final "#### N" line`},
		{"\n\n", `f: no problems`},
	} {
		_, err := ParseGSM8K("f", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseGSM8K(f *testing.F) {
	f.Add(`{"question": "How many?", "answer": "2 + 2 = <<2+2=4>>4\n#### 4"}` + "\n")
	f.Add(`{"question": "q", "answer": "#### 1,000"}`)
	f.Fuzz(func(t *testing.T, s string) {
		tk, err := ParseGSM8K("f", strings.NewReader(s))
		if err != nil {
			return
		}
		for i, it := range tk.Items {
			gold, ok := it.Ref.(string)
			if !ok || strings.TrimSpace(gold) == "" || !strings.HasSuffix(it.Context, "\nA:") {
				t.Fatalf("item %d: %+v", i, it)
			}
		}
	})
}
