package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTextStream: the pieces a stream returns, one id at a time, are valid
// UTF-8 without replacement characters and add up to the whole decoding,
// also when characters span several byte tokens.
func TestTextStream(t *testing.T) {
	tok, err := Load(filepath.Join("..", "parent", "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"The President of the United States.", "café — naïve 日本語 🙂 end", "a"} {
		ids, err := tok.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		s := tok.NewTextStream(true)
		var b strings.Builder
		held := 0
		for _, id := range ids {
			p := s.Add(id)
			if !utf8.ValidString(p) || strings.ContainsRune(p, utf8.RuneError) {
				t.Errorf("%q: piece %q is not final text", text, p)
			}
			if p == "" {
				held++
			}
			b.WriteString(p)
		}
		b.WriteString(s.Rest())
		if got := b.String(); got != text || s.Text() != text {
			t.Errorf("pieces add up to %q (Text %q), want %q", got, s.Text(), text)
		}
		if strings.ContainsAny(text, "é日🙂") && held == 0 {
			t.Errorf("%q: no id was held back, yet multi-byte characters span byte tokens", text)
		}
		if s.Rest() != "" {
			t.Error("Rest after Rest is not empty")
		}
	}
}
