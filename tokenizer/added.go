package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's "added_tokens".
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"` // match only as a whole word
	LStrip     bool   `json:"lstrip"`      // absorb whitespace on the left
	RStrip     bool   `json:"rstrip"`      // absorb whitespace on the right
	Normalized bool   `json:"normalized"`  // match in normalized text (else raw text)
	Special    bool   `json:"special"`     // skipped by Decode with skipSpecial
}

// addedMatcher finds added tokens in text, leftmost-longest as the
// aho-corasick automaton of the HuggingFace library does.
type addedMatcher struct {
	byFirst  map[byte][]*AddedToken // candidates by first byte, longest first
	first    [256]bool              // bytes that start some candidate
	contents map[*AddedToken]string // the text matched (normalized when Normalized)
}

func newAddedMatcher(tokens []*AddedToken, contents []string) *addedMatcher {
	m := &addedMatcher{byFirst: map[byte][]*AddedToken{}}
	idx := map[*AddedToken]string{}
	for i, t := range tokens {
		c := contents[i]
		if c == "" {
			continue
		}
		idx[t] = c
		m.byFirst[c[0]] = append(m.byFirst[c[0]], t)
		m.first[c[0]] = true
	}
	for b, ts := range m.byFirst {
		// Longest first; stable by id for equal lengths.
		for i := 1; i < len(ts); i++ {
			for j := i; j > 0 && len(idx[ts[j]]) > len(idx[ts[j-1]]); j-- {
				ts[j], ts[j-1] = ts[j-1], ts[j]
			}
		}
		m.byFirst[b] = ts
	}
	m.contents = idx
	return m
}

// segment is a part of the text: either an added token (id >= 0) or text to
// be encoded by the model.
type segment struct {
	text    string
	id      int // -1 for ordinary text
	atStart bool
}

func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r)
}

// split cuts s into ordinary text and added tokens.
func (m *addedMatcher) split(s string, atStart bool) []segment {
	if m == nil || len(m.byFirst) == 0 {
		return []segment{{text: s, id: -1, atStart: atStart}}
	}
	var out []segment
	startOff := 0 // end of the previous match
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		// Leftmost-longest, as the aho-corasick automaton of the
		// HuggingFace library: the longest token starting here wins.
		var hit *AddedToken
		for _, t := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], m.contents[t]) {
				hit = t
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		if hit.SingleWord {
			// A match inside a word is dropped (and, as there, the
			// matcher resumes after it).
			end := i + len(m.contents[hit])
			before, _ := utf8.DecodeLastRuneInString(s[:i])
			after, _ := utf8.DecodeRuneInString(s[end:])
			if i > 0 && isWordChar(before) || end < len(s) && isWordChar(after) {
				i = end
				continue
			}
		}
		start, stop := i, i+len(m.contents[hit])
		if hit.LStrip {
			for start > startOff {
				r, n := utf8.DecodeLastRuneInString(s[:start])
				if !isWhitespace(r) {
					break
				}
				start -= n
			}
		}
		if hit.RStrip {
			for stop < len(s) {
				r, n := utf8.DecodeRuneInString(s[stop:])
				if !isWhitespace(r) {
					break
				}
				stop += n
			}
		}
		if start > startOff {
			out = append(out, segment{text: s[startOff:start], id: -1, atStart: atStart && startOff == 0})
		}
		out = append(out, segment{text: s[start:stop], id: hit.ID})
		startOff = stop
		i = stop
	}
	if startOff < len(s) {
		out = append(out, segment{text: s[startOff:], id: -1, atStart: atStart && startOff == 0})
	}
	return out
}
