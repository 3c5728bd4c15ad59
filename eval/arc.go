package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ParseARC reads an AI2 ARC file (ARC-V1-Feb2018 JSON lines: id,
// question {stem, choices [{text, label}]}, answerKey) as the task name
// ("arc_challenge" or "arc_easy"). As lm-evaluation-harness's
// lm_eval/tasks/arc/arc_easy.yaml (which arc_challenge.yaml includes): the
// context is "Question: <stem>\nAnswer:", the choices are the choice texts
// in file order, the gold one is the choice whose label is answerKey, and
// both acc and acc_norm are reported. Labels are not always A-D (some
// questions use 1-4, three or five choices), so the answer is looked up
// among the question's own labels.
func ParseARC(task, name string, r io.Reader) (*Task, error) {
	t := &Task{Name: task, Source: name, Kind: MultipleChoice, Delimiter: " ", Norm: true}
	want := `want a JSON object {"question": {"stem": ..., "choices": [{"text": ..., "label": ...}, ...]}, "answerKey": ...}`
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var doc struct {
			Question *struct {
				Stem    *string `json:"stem"`
				Choices []struct {
					Text  *string `json:"text"`
					Label string  `json:"label"`
				} `json:"choices"`
			} `json:"question"`
			AnswerKey string `json:"answerKey"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		q := doc.Question
		if q == nil || q.Stem == nil || len(q.Choices) < 2 {
			return &FormatError{File: name, Line: n, Msg: want + ": no question stem or fewer than two choices"}
		}
		it := Item{Context: "Question: " + *q.Stem + "\nAnswer:", Gold: -1}
		for k, c := range q.Choices {
			if c.Text == nil {
				return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("%s: choice %d has no text", want, k+1)}
			}
			if c.Label == doc.AnswerKey && it.Gold < 0 {
				it.Gold = k
			}
			it.Choices = append(it.Choices, *c.Text)
		}
		if it.Gold < 0 {
			labels := make([]string, len(q.Choices))
			for k, c := range q.Choices {
				labels[k] = c.Label
			}
			return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("answerKey %q is none of the choices' labels (%s)", doc.AnswerKey, strings.Join(labels, ", "))}
		}
		t.Items = append(t.Items, it)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no questions"}
	}
	return t, nil
}
