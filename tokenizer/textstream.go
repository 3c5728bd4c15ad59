package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// TextStream decodes generated ids as they come, for printing: Add returns
// the text an id completes, holding back text that is not final yet (a
// character split across byte tokens, or a decoding that a later id
// changes), so that the pieces printed add up to the decoded whole.
type TextStream struct {
	t           *Tokenizer
	skipSpecial bool
	ids         []int
	printed     string
}

// NewTextStream starts a stream; skipSpecial leaves special tokens out of
// the text.
func (t *Tokenizer) NewTextStream(skipSpecial bool) *TextStream {
	return &TextStream{t: t, skipSpecial: skipSpecial}
}

// Add appends id and returns the new final text ("" when none is).
func (s *TextStream) Add(id int) string {
	s.ids = append(s.ids, id)
	text := s.Text()
	if !strings.HasPrefix(text, s.printed) || !utf8.ValidString(text) || strings.HasSuffix(text, "\uFFFD") {
		return ""
	}
	piece := text[len(s.printed):]
	s.printed = text
	return piece
}

// Rest returns the text that Add has not returned, for the end of the
// stream: all of it if the decoding no longer extends what was returned.
func (s *TextStream) Rest() string {
	text := s.Text()
	rest, ok := strings.CutPrefix(text, s.printed)
	if !ok {
		return ""
	}
	s.printed = text
	return rest
}

// Text is the decoding of every id added so far ("" if it fails).
func (s *TextStream) Text() string {
	text, err := s.t.Decode(s.ids, s.skipSpecial)
	if err != nil {
		return ""
	}
	return text
}
