package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// GSM8K follows lm-evaluation-harness's gsm8k_cot task
// (lm_eval/tasks/gsm8k/gsm8k-cot.yaml, version 3.0): eight fixed
// chain-of-thought exemplars (Wei et al.'s), each "Q: question\nA: worked
// answer", joined by blank lines, then "Q: question\nA:"; greedy
// generation until "Q:", "</s>" or "<|im_end|>"; the gold answer is the
// text after the reference's last "####". Two extractions of the model's
// answer, each scored by exact match (after removing ",", "$", anything up
// to "#### " and a final ".", ignoring case):
//
//   - exact_match,strict-match: the first "The answer is N." (the
//     exemplars' form), regex `The answer is (\-?[0-9\.\,]+).`;
//   - exact_match,flexible-extract: the last number in the completion,
//     regex `(-?[$0-9.,]{2,})|(-?[0-9]+)`.
//
// An answer that no regex finds is "[invalid]", which matches nothing.

// gsm8kShots are the exemplars of gsm8k-cot.yaml (fewshot_config.samples).
var gsm8kShots = [][2]string{
	{"There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. How many trees did the grove workers plant today?",
		"There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6. The answer is 6."},
	{"If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
		"There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5."},
	{"Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
		"Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39. The answer is 39."},
	{"Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
		"Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. The answer is 8."},
	{"Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
		"Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9. The answer is 9."},
	{"There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. How many computers are now in the server room?",
		"There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29."},
	{"Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
		"Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33."},
	{"Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
		"Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8."},
}

// GSM8KUntil are gsm8k-cot.yaml's stop sequences.
var GSM8KUntil = []string{"Q:", "</s>", "<|im_end|>"}

var (
	gsm8kStrict   = regexp.MustCompile(`The answer is (\-?[0-9\.\,]+).`)
	gsm8kFlexible = regexp.MustCompile(`(-?[$0-9.,]{2,})|(-?[0-9]+)`)
	// gsm8kIgnore are the metric's regexes_to_ignore, removed in order.
	gsm8kIgnore = []*regexp.Regexp{regexp.MustCompile(`,`), regexp.MustCompile(`\$`), regexp.MustCompile(`(?s).*#### `), regexp.MustCompile(`\.$`)}
)

// gsm8kInvalid is the harness's RegexFilter fallback.
const gsm8kInvalid = "[invalid]"

// GSM8KPrompt returns the 8-shot chain-of-thought prompt for a question.
func GSM8KPrompt(question string) string {
	var b strings.Builder
	for _, s := range gsm8kShots {
		b.WriteString("Q: " + s[0] + "\nA: " + s[1] + "\n\n")
	}
	b.WriteString("Q: " + question + "\nA:")
	return b.String()
}

// ParseGSM8K reads GSM8K: JSON lines {"question": ..., "answer": ...}
// (openai/grade-school-math's test.jsonl), every answer ending in
// "#### N". The task generates and scores as gsm8k_cot (see GSM8KPrompt,
// GSM8KExtract).
func ParseGSM8K(name string, r io.Reader) (*Task, error) {
	t := &Task{Name: "gsm8k", Source: name, Kind: Generation,
		Gen: &GenSpec{Until: GSM8KUntil, MaxTokens: DefaultMaxTokens, Score: scoreGSM8K}}
	want := `want a JSON object {"question": "...", "answer": "... #### N"}`
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var doc struct {
			Question *string `json:"question"`
			Answer   *string `json:"answer"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		if doc.Question == nil || doc.Answer == nil || strings.TrimSpace(*doc.Question) == "" {
			return &FormatError{File: name, Line: n, Msg: want + ": a question and an answer are required"}
		}
		i := strings.LastIndex(*doc.Answer, "####")
		gold := ""
		if i >= 0 {
			gold = strings.TrimSpace((*doc.Answer)[i+len("####"):])
		}
		if gold == "" {
			return &FormatError{File: name, Line: n, Msg: want + `: the answer has no final "#### N" line`}
		}
		t.Items = append(t.Items, Item{Context: GSM8KPrompt(*doc.Question), Ref: gold})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no problems"}
	}
	return t, nil
}

// GSM8KExtract returns the strict and the flexible answer of a completion
// (gsm8k_cot's filters: regex, then take_first), "[invalid]" where none is
// found.
func GSM8KExtract(completion string) (strict, flexible string) {
	strict, flexible = gsm8kInvalid, gsm8kInvalid
	if m := gsm8kStrict.FindStringSubmatch(completion); m != nil {
		strict = strings.TrimSpace(m[1])
	}
	// group_select -1: the last match; of its groups, the first non-empty.
	if all := gsm8kFlexible.FindAllStringSubmatch(completion, -1); len(all) > 0 {
		for _, g := range all[len(all)-1][1:] {
			if g != "" {
				flexible = strings.TrimSpace(g)
				break
			}
		}
	}
	return strict, flexible
}

// GSM8KMatch is the task's exact_match: both sides with the ignored
// patterns removed and lower-cased, then compared.
func GSM8KMatch(pred, gold string) bool {
	norm := func(s string) string {
		for _, re := range gsm8kIgnore {
			s = re.ReplaceAllString(s, "")
		}
		return strings.ToLower(s)
	}
	return norm(pred) == norm(gold)
}

func scoreGSM8K(_ context.Context, items []Item, completions []string) ([]Metric, error) {
	strict, flex := make([]float64, len(items)), make([]float64, len(items))
	for i, it := range items {
		gold, ok := it.Ref.(string)
		if !ok {
			return nil, fmt.Errorf("gsm8k item %d has no gold answer", i)
		}
		s, f := GSM8KExtract(completions[i])
		if GSM8KMatch(s, gold) {
			strict[i] = 1
		}
		if GSM8KMatch(f, gold) {
			flex[i] = 1
		}
	}
	return []Metric{meanMetric("exact_match,strict-match", strict), meanMetric("exact_match,flexible-extract", flex)}, nil
}
