package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ParseHellaSwag reads HellaSwag in either published layout, told apart by
// the first non-blank line:
//
//   - the official JSON lines (hellaswag_val.jsonl): activity_label, ctx_a,
//     ctx_b, endings (4) and label. As in lm-evaluation-harness, the
//     context is preprocess(activity_label + ": " + ctx_a + " " +
//     capitalize(ctx_b)) and each ending is preprocess(ending);
//   - llama.cpp's text layout, 6 lines per item: "activity_label: ctx",
//     the gold index 0–3, four endings. Those files were preprocessed when
//     made (brackets removed, " [title]" to ". "); preprocess is applied
//     again, which leaves such text unchanged. ctx_b cannot be told apart
//     from ctx_a there, so it is not capitalised.
//
// The task is MultipleChoice with acc_norm.
func ParseHellaSwag(name string, r io.Reader) (*Task, error) {
	t := &Task{Name: "hellaswag", Source: name, Kind: MultipleChoice, Delimiter: " ", Norm: true}
	var block []string // the current 6-line item
	start := 0
	layout := 0 // 0 unknown, 1 JSON, 2 text
	err := lines(name, r, func(n int, line string) error {
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		if layout == 0 {
			if strings.TrimSpace(line) == "" {
				return nil
			}
			layout = 2
			if strings.HasPrefix(strings.TrimSpace(line), "{") {
				layout = 1
			}
		}
		if layout == 1 {
			if strings.TrimSpace(line) == "" {
				return nil
			}
			it, err := hellaswagJSON(line)
			if err != nil {
				return &FormatError{File: name, Line: n, Msg: err.Error()}
			}
			t.Items = append(t.Items, it)
			return nil
		}
		if len(block) == 0 {
			start = n
		}
		block = append(block, line)
		if len(block) < 6 {
			return nil
		}
		gold, err := strconv.Atoi(strings.TrimSpace(block[1]))
		if err != nil || gold < 0 || gold > 3 {
			return &FormatError{File: name, Line: start + 1, Msg: fmt.Sprintf("want the gold ending index 0-3 (line 2 of the 6-line item that starts at line %d: context, label, four endings), got %q", start, block[1])}
		}
		it := Item{Context: hellaswagPreprocess(block[0]), Gold: gold}
		for _, e := range block[2:] {
			it.Choices = append(it.Choices, hellaswagPreprocess(e))
		}
		t.Items = append(t.Items, it)
		block = block[:0]
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(block) > 0 && strings.TrimSpace(strings.Join(block, "")) != "" {
		return nil, &FormatError{File: name, Line: start, Msg: fmt.Sprintf("an item of %d lines at the end (want 6: context, label 0-3, four endings)", len(block))}
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no items"}
	}
	return t, nil
}

func hellaswagJSON(line string) (Item, error) {
	var doc struct {
		ActivityLabel *string  `json:"activity_label"`
		CtxA          *string  `json:"ctx_a"`
		CtxB          *string  `json:"ctx_b"`
		Endings       []string `json:"endings"`
		Label         any      `json:"label"`
	}
	want := "want a JSON object with activity_label, ctx_a, ctx_b, endings (4 strings) and label (0-3)"
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		return Item{}, fmt.Errorf("%s: %v", want, err)
	}
	if doc.ActivityLabel == nil || doc.CtxA == nil || doc.CtxB == nil || len(doc.Endings) != 4 {
		return Item{}, fmt.Errorf("%s: a field is missing or endings has %d entries", want, len(doc.Endings))
	}
	gold, ok := -1, false
	switch v := doc.Label.(type) {
	case float64:
		gold, ok = int(v), v == float64(int(v))
	case string: // the Hugging Face copy stores "0".."3"
		g, err := strconv.Atoi(v)
		gold, ok = g, err == nil
	}
	if !ok || gold < 0 || gold > 3 {
		return Item{}, fmt.Errorf("%s: label %v", want, doc.Label)
	}
	ctx := *doc.CtxA + " " + pyCapitalize(*doc.CtxB)
	it := Item{Context: hellaswagPreprocess(*doc.ActivityLabel + ": " + ctx), Gold: gold}
	for _, e := range doc.Endings {
		it.Choices = append(it.Choices, hellaswagPreprocess(e))
	}
	return it, nil
}

var bracketRE = regexp.MustCompile(`\[.*?\]`)

// hellaswagPreprocess is the harness's preprocess: strip, " [title]" to
// ". ", drop bracketed WikiHow markers, one pass of double space to single.
func hellaswagPreprocess(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, " [title]", ". ")
	s = bracketRE.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "  ", " ")
}

// pyCapitalize is Python's str.capitalize: the first character upper case,
// the rest lower case.
func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}
