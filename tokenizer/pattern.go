package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// pattern is the "pattern" of a Split pre-tokenizer or Replace
// normalizer/decoder: a literal string or a regular expression.
type pattern struct {
	literal string
	re      *regexp2.Regexp // nil for a literal
	source  string
	// fast, when set, is a hand-written matcher equivalent to re.
	fast func(string) [][2]int
}

func compileRegex(src string) (*pattern, error) {
	re, err := regexp2.Compile(src, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("compiling regex %q: %w", src, err)
	}
	return &pattern{re: re, source: src, fast: fastMatcher(src)}, nil
}

// findAll returns the byte ranges [start, end) of the non-overlapping matches
// of p in s, left to right.
func (p *pattern) findAll(s string) ([][2]int, error) {
	if p.re == nil {
		if p.literal == "" {
			return nil, nil
		}
		var out [][2]int
		for off := 0; ; {
			i := strings.Index(s[off:], p.literal)
			if i < 0 {
				return out, nil
			}
			out = append(out, [2]int{off + i, off + i + len(p.literal)})
			off += i + len(p.literal)
		}
	}
	if p.fast != nil {
		return p.fast(s), nil
	}
	runes := []rune(s)
	// byteAt[i] is the byte offset of rune i; byteAt[len(runes)] = len(s).
	byteAt := make([]int, len(runes)+1)
	b := 0
	for i, r := range runes {
		byteAt[i] = b
		b += utf8.RuneLen(r)
	}
	byteAt[len(runes)] = b
	var out [][2]int
	m, err := p.re.FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = p.re.FindNextMatch(m) {
		out = append(out, [2]int{byteAt[m.Index], byteAt[m.Index+m.Length]})
	}
	if err != nil {
		return nil, fmt.Errorf("matching regex %q: %w", p.source, err)
	}
	return out, nil
}

// replaceAll replaces every match of p in s by content.
func (p *pattern) replaceAll(s, content string) string {
	if p.re == nil {
		if p.literal == "" {
			return s
		}
		return strings.ReplaceAll(s, p.literal, content)
	}
	ms, err := p.findAll(s)
	if err != nil || len(ms) == 0 {
		return s
	}
	var sb strings.Builder
	prev := 0
	for _, m := range ms {
		sb.WriteString(s[prev:m[0]])
		sb.WriteString(content)
		prev = m[1]
	}
	sb.WriteString(s[prev:])
	return sb.String()
}

// isWhitespace is Rust's char::is_whitespace (the Unicode White_Space property).
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }
