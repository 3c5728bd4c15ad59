package eval

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// MMLUShots is the number of dev examples before each MMLU question.
const MMLUShots = 5

// MMLURow is one MMLU question.
type MMLURow struct {
	Question string
	Choices  [4]string
	Answer   int // 0-3 for A-D
}

// ParseMMLUCSV reads an MMLU CSV file (hendrycks/test layout, no header):
// question, the four choices, the answer letter A-D. Fields may be quoted
// and span lines.
func ParseMMLUCSV(name string, r io.Reader) ([]MMLURow, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 6
	var rows []MMLURow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &FormatError{File: name, Line: pe.StartLine, Msg: fmt.Sprintf("want CSV rows question,A,B,C,D,answer: %v", pe.Err)}
			}
			return nil, &FormatError{File: name, Msg: err.Error()}
		}
		line, _ := cr.FieldPos(0)
		for _, f := range rec {
			if !utf8.ValidString(f) {
				return nil, &FormatError{File: name, Line: line, Msg: "not valid UTF-8"}
			}
		}
		a := strings.TrimSpace(rec[5])
		if len(a) != 1 || a[0] < 'A' || a[0] > 'D' {
			return nil, &FormatError{File: name, Line: line, Msg: fmt.Sprintf("want the answer letter A, B, C or D in the sixth field, got %q", rec[5])}
		}
		rows = append(rows, MMLURow{Question: rec[0], Choices: [4]string{rec[1], rec[2], rec[3], rec[4]}, Answer: int(a[0] - 'A')})
	}
	if len(rows) == 0 {
		return nil, &FormatError{File: name, Msg: "no questions"}
	}
	return rows, nil
}

// MMLUPrompt is the harness's MMLU prompt for q, after the subject's
// description and shots: "The following are multiple choice questions
// (with answers) about <subject>.\n\n", then each shot as
// "<question>\nA. ..\nB. ..\nC. ..\nD. ..\nAnswer: <letter>\n\n", then the
// question the same way ending in "Answer:".
func MMLUPrompt(subject string, shots []MMLURow, q MMLURow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The following are multiple choice questions (with answers) about %s.\n\n", strings.ReplaceAll(subject, "_", " "))
	for _, s := range shots {
		b.WriteString(mmluQuestion(s))
		fmt.Fprintf(&b, " %c\n\n", 'A'+s.Answer)
	}
	b.WriteString(mmluQuestion(q))
	return b.String()
}

func mmluQuestion(q MMLURow) string {
	return fmt.Sprintf("%s\nA. %s\nB. %s\nC. %s\nD. %s\nAnswer:", strings.TrimSpace(q.Question), q.Choices[0], q.Choices[1], q.Choices[2], q.Choices[3])
}

// MMLUTask builds a subject's items: 5-shot from the first MMLUShots dev
// rows (the harness's first_n sampler), choices "A".."D" (acc only).
func MMLUTask(subject string, test, dev []MMLURow) []Item {
	shots := dev[:min(MMLUShots, len(dev))]
	items := make([]Item, len(test))
	for i, q := range test {
		items[i] = Item{Context: MMLUPrompt(subject, shots, q), Choices: []string{"A", "B", "C", "D"}, Gold: q.Answer, Group: subject}
	}
	return items
}

// LoadMMLU reads MMLU from path: a directory holding test/ and dev/ (or
// data/test and data/dev) with <subject>_test.csv and <subject>_dev.csv, or
// one <subject>_test.csv whose dev file is in ../dev. Subjects are in name
// order, each a group (the harness's --limit applies per subject); acc is
// over all questions (weighted by subject size, as the harness's mmlu
// group).
func LoadMMLU(path string) (*Task, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	var tests []string
	if st.IsDir() {
		for _, d := range []string{path, filepath.Join(path, "data")} {
			if tests, _ = filepath.Glob(filepath.Join(d, "test", "*_test.csv")); len(tests) > 0 {
				break
			}
		}
		if len(tests) == 0 {
			return nil, &FormatError{File: path, Msg: "no test/*_test.csv in the directory (want the hendrycks/test layout: test/<subject>_test.csv and dev/<subject>_dev.csv)"}
		}
	} else {
		if !strings.HasSuffix(path, "_test.csv") {
			return nil, &FormatError{File: path, Msg: "want a directory with test/ and dev/, or a <subject>_test.csv file"}
		}
		tests = []string{path}
	}
	sort.Strings(tests)
	t := &Task{Name: "mmlu", Source: path, Kind: MultipleChoice, Delimiter: " "}
	for _, tp := range tests {
		subject := strings.TrimSuffix(filepath.Base(tp), "_test.csv")
		dp := filepath.Join(filepath.Dir(filepath.Dir(tp)), "dev", subject+"_dev.csv")
		test, err := readMMLU(tp)
		if err != nil {
			return nil, err
		}
		dev, err := readMMLU(dp)
		if err != nil {
			return nil, fmt.Errorf("%w (MMLU is 5-shot: the dev file holds the examples)", err)
		}
		t.Items = append(t.Items, MMLUTask(subject, test, dev)...)
	}
	return t, nil
}

func readMMLU(path string) ([]MMLURow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	return ParseMMLUCSV(path, f)
}
