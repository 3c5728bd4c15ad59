package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"
)

// IFEval is Google's instruction-following evaluation (Zhou et al., 2023):
// 541 prompts, each with one or more verifiable instructions ("answer in
// fewer than 100 words", "no commas"). A model's response is generated
// greedily from the prompt and then checked, instruction by instruction,
// by the checkers of google-research/google-research
// instruction_following_eval/instructions.py (re-implemented here, not
// copied; the reference's behaviour is kept, including its quirks, and
// where it calls out to NLTK or langdetect the approximation is said at
// the checker). The four scores, as lm-evaluation-harness's ifeval task
// (lm_eval/tasks/ifeval/ifeval.yaml) names them:
//
//   - prompt_level_strict_acc: the share of prompts whose every
//     instruction is followed by the response;
//   - inst_level_strict_acc: the share of all instructions followed;
//   - prompt_level_loose_acc, inst_level_loose_acc: the same, an
//     instruction counting as followed when any of eight variants of the
//     response follows it (evaluation_lib.py's
//     test_instruction_following_loose: the response, without its first
//     line, without its last line, without both, and each of those four
//     with every "*" removed).
//
// An empty (or whitespace-only) response follows nothing, as in the
// reference.

// IFEvalPrompt is one prompt of the IFEval input file.
type IFEvalPrompt struct {
	Key          int
	Prompt       string
	Instructions []string // instruction ids, e.g. "punctuation:no_comma"
	checks       []ifCheck
}

// IFEvalMetrics are the names of IFEval's four scores, in report order.
var IFEvalMetrics = []string{"prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc", "inst_level_loose_acc"}

// IFEvalInstructions returns the instruction ids the checkers cover,
// sorted.
func IFEvalInstructions() []string {
	ids := make([]string, 0, len(ifCheckers))
	for id := range ifCheckers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// LoadIFEval reads an IFEval input file (ParseIFEval).
func LoadIFEval(path string) ([]IFEvalPrompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return ParseIFEval(path, f)
}

// ParseIFEval reads IFEval's input_data.jsonl: JSON lines {"key",
// "prompt", "instruction_id_list", "kwargs"}, kwargs a list aligned with
// the ids ({} for an instruction without arguments; null values are
// unset). An unknown instruction id or an argument of the wrong type is a
// *FormatError naming the line.
func ParseIFEval(name string, r io.Reader) ([]IFEvalPrompt, error) {
	var out []IFEvalPrompt
	want := `want a JSON object {"key": N, "prompt": ..., "instruction_id_list": [...], "kwargs": [{...}, ...]}`
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var doc struct {
			Key    int                          `json:"key"`
			Prompt *string                      `json:"prompt"`
			IDs    []string                     `json:"instruction_id_list"`
			Kwargs []map[string]json.RawMessage `json:"kwargs"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		if doc.Prompt == nil || len(doc.IDs) == 0 {
			return &FormatError{File: name, Line: n, Msg: want + ": no prompt or no instructions"}
		}
		if len(doc.Kwargs) != len(doc.IDs) {
			return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("%s: %d kwargs for %d instructions (want one object per instruction)", want, len(doc.Kwargs), len(doc.IDs))}
		}
		p := IFEvalPrompt{Key: doc.Key, Prompt: *doc.Prompt, Instructions: doc.IDs}
		for k, id := range doc.IDs {
			mk, ok := ifCheckers[id]
			if !ok {
				return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("unknown instruction %q (known: %s)", id, strings.Join(IFEvalInstructions(), ", "))}
			}
			c, err := mk(ifArgs{kw: doc.Kwargs[k], prompt: *doc.Prompt})
			if err != nil {
				return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("instruction %s: %v", id, err)}
			}
			p.checks = append(p.checks, c)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &FormatError{File: name, Msg: "no prompts"}
	}
	return out, nil
}

// IFEvalFollowed tells, for each instruction of p, whether response
// follows it: strictly, and loosely (any of the eight variants).
func IFEvalFollowed(p *IFEvalPrompt, response string) (strict, loose []bool) {
	variants := looseVariants(response)
	for _, c := range p.checks {
		strict = append(strict, followed(c, response))
		l := false
		for _, v := range variants {
			if followed(c, v) {
				l = true
				break
			}
		}
		loose = append(loose, l)
	}
	return strict, loose
}

func followed(c ifCheck, r string) bool { return strings.TrimSpace(r) != "" && c(r) }

// looseVariants are the responses the loose score tries, in the
// reference's order.
func looseVariants(r string) []string {
	ls := strings.Split(r, "\n")
	join := func(a []string) string { return strings.TrimSpace(strings.Join(a, "\n")) }
	first := join(ls[1:])
	last := join(ls[:len(ls)-1])
	both := ""
	if len(ls) > 2 {
		both = join(ls[1 : len(ls)-1])
	}
	star := func(s string) string { return strings.ReplaceAll(s, "*", "") }
	return []string{r, star(r), first, last, both, star(first), star(last), star(both)}
}

// ScoreIFEval scores responses (one per prompt, in order) and returns the
// task's result: the four accuracies with their standard errors (the
// harness's mean_stderr over prompts, and over instructions for the
// instruction-level ones, where the harness reports none) and, as
// subtasks, the strict instruction-level accuracy per instruction group
// ("punctuation", "keywords", ...).
func ScoreIFEval(name string, prompts []IFEvalPrompt, responses []string) (*TaskResult, error) {
	if len(responses) != len(prompts) {
		return nil, fmt.Errorf("eval: %s: %d responses for %d prompts", name, len(responses), len(prompts))
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("eval: %s: no prompts", name)
	}
	var ps, pl, is, il []float64
	groups := map[string][]float64{}
	var order []string
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for i := range prompts {
		strict, loose := IFEvalFollowed(&prompts[i], responses[i])
		allS, allL := true, true
		for k := range strict {
			allS, allL = allS && strict[k], allL && loose[k]
			is, il = append(is, b(strict[k])), append(il, b(loose[k]))
			g, _, _ := strings.Cut(prompts[i].Instructions[k], ":")
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], b(strict[k]))
		}
		ps, pl = append(ps, b(allS)), append(pl, b(allL))
	}
	r := &TaskResult{Task: "ifeval", Kind: "generation", Items: len(prompts), Source: name, Metrics: []Metric{
		meanMetric(IFEvalMetrics[0], ps), meanMetric(IFEvalMetrics[1], is),
		meanMetric(IFEvalMetrics[2], pl), meanMetric(IFEvalMetrics[3], il),
	}}
	sort.Strings(order)
	for _, g := range order {
		r.Subtasks = append(r.Subtasks, TaskResult{Task: g, Kind: "generation", Items: len(groups[g]), Metrics: []Metric{meanMetric(IFEvalMetrics[1], groups[g])}})
	}
	return r, nil
}

// IFEvalMaxTokens is the most tokens a response may have
// (lm_eval/tasks/ifeval/ifeval.yaml: max_gen_toks 1280, until [] so that
// only end-of-text stops it, greedy).
const IFEvalMaxTokens = 1280

// IFEvalTask builds the generation task of prompts read from name: each
// prompt is answered greedily (until end-of-text or IFEvalMaxTokens; the
// native engine's cap on small windows applies, GenSpec) and scored by
// ScoreIFEval.
func IFEvalTask(name string, prompts []IFEvalPrompt) *Task {
	items := make([]Item, len(prompts))
	for i := range prompts {
		items[i] = Item{Context: prompts[i].Prompt, Ref: &prompts[i]}
	}
	return &Task{Name: "ifeval", Source: name, Kind: Generation, Items: items,
		Gen: &GenSpec{MaxTokens: IFEvalMaxTokens, Score: func(_ context.Context, items []Item, completions []string) ([]Metric, error) {
			ps := make([]IFEvalPrompt, len(items))
			for i, it := range items {
				p, ok := it.Ref.(*IFEvalPrompt)
				if !ok {
					return nil, fmt.Errorf("eval: %s item %d is not an IFEval prompt", name, i)
				}
				ps[i] = *p
			}
			r, err := ScoreIFEval(name, ps, completions)
			if err != nil {
				return nil, err
			}
			return r.Metrics, nil
		}}}
}
