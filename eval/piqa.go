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

// PIQALabelsPath returns where the labels of a PIQA file are published:
// valid.jsonl → valid-labels.lst.
func PIQALabelsPath(path string) string {
	return strings.TrimSuffix(path, ".jsonl") + "-labels.lst"
}

// LoadPIQA reads a PIQA file and its labels (labels "" = PIQALabelsPath,
// used when it exists; without it every line needs a label field).
func LoadPIQA(path, labels string) (*Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	if labels == "" {
		if _, err := os.Stat(PIQALabelsPath(path)); err == nil {
			labels = PIQALabelsPath(path)
		}
	}
	var lr io.Reader
	if labels != "" {
		lf, err := os.Open(labels)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		defer lf.Close()
		lr = lf
	}
	return ParsePIQA(path, f, labels, lr)
}

// ParsePIQA reads PIQA: JSON lines {"goal", "sol1", "sol2"} and, when
// labelsName is not "", the line-aligned labels (0: sol1, 1: sol2); without
// labels each object needs "label". As in the harness the context is
// "Question: <goal>\nAnswer:" and the choices sol1 and sol2
// (MultipleChoice with acc_norm).
func ParsePIQA(name string, r io.Reader, labelsName string, labels io.Reader) (*Task, error) {
	t := &Task{Name: "piqa", Source: name, Kind: MultipleChoice, Delimiter: " ", Norm: true}
	var gold []int
	if labels != nil {
		err := lines(labelsName, labels, func(n int, line string) error {
			s := strings.TrimSpace(line)
			if s == "" {
				return nil
			}
			g, err := strconv.Atoi(s)
			if err != nil || (g != 0 && g != 1) {
				return &FormatError{File: labelsName, Line: n, Msg: fmt.Sprintf("want a label 0 or 1, got %q", line)}
			}
			gold = append(gold, g)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err := lines(name, r, func(n int, line string) error {
		if strings.TrimSpace(line) == "" {
			return nil
		}
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		var doc struct {
			Goal  *string `json:"goal"`
			Sol1  *string `json:"sol1"`
			Sol2  *string `json:"sol2"`
			Label *int    `json:"label"`
		}
		want := "want a JSON object {\"goal\", \"sol1\", \"sol2\"}"
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return &FormatError{File: name, Line: n, Msg: want + ": " + err.Error()}
		}
		if doc.Goal == nil || doc.Sol1 == nil || doc.Sol2 == nil {
			return &FormatError{File: name, Line: n, Msg: want + ": a field is missing"}
		}
		k := len(t.Items)
		g := -1
		switch {
		case labels != nil:
			if k >= len(gold) {
				return &FormatError{File: labelsName, Msg: fmt.Sprintf("%d labels for more items (item %d is at %s:%d)", len(gold), k+1, name, n)}
			}
			g = gold[k]
		case doc.Label != nil && (*doc.Label == 0 || *doc.Label == 1):
			g = *doc.Label
		default:
			return &FormatError{File: name, Line: n, Msg: fmt.Sprintf("no label: want %s beside the file (one 0/1 per line) or a \"label\" field of 0 or 1", PIQALabelsPath(name))}
		}
		t.Items = append(t.Items, Item{Context: "Question: " + *doc.Goal + "\nAnswer:", Choices: []string{*doc.Sol1, *doc.Sol2}, Gold: g})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no items"}
	}
	if labels != nil && len(gold) != len(t.Items) {
		return nil, &FormatError{File: labelsName, Msg: fmt.Sprintf("%d labels for %d items in %s", len(gold), len(t.Items), name)}
	}
	return t, nil
}
