package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// LoadWinogrande reads a Winogrande file; labels are taken from each
// line's "answer" or, when the lines have none (the test split), from a
// line-aligned NAME-labels.lst beside it (PIQALabelsPath's naming: the
// v1.1 zip ships dev.jsonl with dev-labels.lst).
func LoadWinogrande(path string) (*Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	var labels []int
	lp := PIQALabelsPath(path)
	if lf, err := os.Open(lp); err == nil {
		defer lf.Close()
		err := lines(lp, lf, func(n int, line string) error {
			s := strings.TrimSpace(line)
			if s == "" {
				return nil
			}
			if s != "1" && s != "2" {
				return &FormatError{File: lp, Line: n, Msg: fmt.Sprintf("want a label 1 or 2, got %q", line)}
			}
			labels = append(labels, int(s[0]-'1'))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return ParseWinogrande(path, f, labels)
}

// ParseWinogrande reads Winogrande (JSON lines {"sentence", "option1",
// "option2", "answer"}, the sentence holding one "_") with
// lm-evaluation-harness's partial scoring (lm_eval/tasks/winogrande/
// default.yaml and preprocess_winogrande.py): each option fills the blank
// in a context that ends there (the sentence up to "_", then the option),
// and both are scored on the same continuation, the rest of the sentence
// after the blank, stripped, after a space. acc only. labels, when not
// nil, give the gold option (0 or 1) of each item in order and override
// "answer".
func ParseWinogrande(name string, r io.Reader, labels []int) (*Task, error) {
	t := &Task{Name: "winogrande", Source: name, Kind: MultipleChoice, Delimiter: " "}
	want := `want a JSON object {"sentence": "... _ ...", "option1": ..., "option2": ..., "answer": "1" or "2"}`
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var doc struct {
			Sentence *string `json:"sentence"`
			Option1  *string `json:"option1"`
			Option2  *string `json:"option2"`
			Answer   string  `json:"answer"`
		}
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		if doc.Sentence == nil || doc.Option1 == nil || doc.Option2 == nil {
			return &FormatError{File: name, Line: n, Msg: want + ": a field is missing"}
		}
		blank := strings.Index(*doc.Sentence, "_")
		if blank < 0 {
			return &FormatError{File: name, Line: n, Msg: want + ": the sentence has no _ blank"}
		}
		rest := strings.TrimSpace((*doc.Sentence)[blank+1:])
		if rest == "" {
			return &FormatError{File: name, Line: n, Msg: want + ": nothing follows the blank to score"}
		}
		k := len(t.Items)
		gold := -1
		switch {
		case labels != nil:
			if k >= len(labels) {
				return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("item %d has no label: the labels file holds %d", k+1, len(labels))}
			}
			gold = labels[k]
		default:
			g, err := strconv.Atoi(doc.Answer)
			if err != nil || (g != 1 && g != 2) {
				return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("%s: answer %q (without answers, put NAME-labels.lst beside the file)", want, doc.Answer)}
			}
			gold = g - 1
		}
		prefix := (*doc.Sentence)[:blank]
		t.Items = append(t.Items, Item{
			Contexts: []string{prefix + *doc.Option1, prefix + *doc.Option2},
			Choices:  []string{rest, rest},
			Gold:     gold,
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no items"}
	}
	if labels != nil && len(labels) != len(t.Items) {
		return nil, &FormatError{File: name, Msg: fmt.Sprintf("%d labels for %d items", len(labels), len(t.Items))}
	}
	return t, nil
}
