package eval

import (
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"
)

// ParseLAMBADA reads LAMBADA: one passage per line, either as JSON
// {"text": ...} (OpenAI's lambada_test.jsonl, the harness's
// lambada_openai) or as plain text. As in the harness, the target is the
// passage's last space-separated word and the context everything before
// that space; the task is Cloze (acc: greedy decoding gives the word;
// perplexity of the word). Blank lines are skipped.
func ParseLAMBADA(name string, r io.Reader) (*Task, error) {
	t := &Task{Name: "lambada", Source: name, Kind: Cloze, Delimiter: " "}
	err := lines(name, r, func(n int, line string) error {
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		if strings.TrimSpace(line) == "" {
			return nil
		}
		text := line
		if strings.HasPrefix(strings.TrimSpace(line), "{") {
			var doc struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				return &FormatError{File: name, Line: n, Msg: "want a JSON object {\"text\": \"...\"} or a plain passage: " + err.Error()}
			}
			if doc.Text == nil {
				return &FormatError{File: name, Line: n, Msg: "the JSON object has no \"text\" field (want {\"text\": \"...\"})"}
			}
			text = *doc.Text
		}
		text = strings.TrimRight(text, " \t\r\n")
		i := strings.LastIndex(text, " ")
		if i <= 0 || i == len(text)-1 {
			return &FormatError{File: name, Line: n, Msg: "want a passage of at least two space-separated words (the last is the target)"}
		}
		t.Items = append(t.Items, Item{Context: text[:i], Choices: []string{text[i+1:]}})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: name, Msg: "no passages"}
	}
	return t, nil
}
