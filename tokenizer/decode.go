package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// A decoder turns the token strings of a sequence back into text pieces; the
// final text is their concatenation (HuggingFace's decode_chain).
type decoder interface {
	decodeChain(tokens []string) []string
}

// byteLevelDecoder maps byte-level runes back to bytes, replacing invalid
// UTF-8 by U+FFFD.
type byteLevelDecoder struct{}

func (byteLevelDecoder) decodeChain(tokens []string) []string {
	var buf []byte
	for _, t := range tokens {
		start := len(buf)
		ok := true
		for _, r := range t {
			b, in := runeToByte[r]
			if !in {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:start], t...)
		}
	}
	return []string{strings.ToValidUTF8(string(buf), "\uFFFD")}
}

// metaspaceDecoder turns the replacement rune back into spaces, dropping it
// from the first token unless the prepend scheme is "never".
type metaspaceDecoder struct {
	replacement rune
	scheme      prependScheme
}

func (d metaspaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		var sb strings.Builder
		for _, r := range t {
			if r == d.replacement {
				if i == 0 && d.scheme != prependNever {
					continue
				}
				r = ' '
			}
			sb.WriteRune(r)
		}
		out[i] = sb.String()
	}
	return out
}

// byteFallbackDecoder turns runs of <0xXX> tokens into the text they encode,
// or one U+FFFD per byte when the run is not valid UTF-8.
type byteFallbackDecoder struct{}

func parseByteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range []byte(t[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

func (byteFallbackDecoder) decodeChain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range tokens {
		if b, ok := parseByteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// fuseDecoder joins all tokens into one.
type fuseDecoder struct{}

func (fuseDecoder) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

// stripDecoder removes up to start leading and stop trailing copies of a rune
// from every token.
type stripDecoder struct {
	content     rune
	start, stop int
}

func (d stripDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rs := []rune(t)
		lo := 0
		for lo < d.start && lo < len(rs) && rs[lo] == d.content {
			lo++
		}
		hi := len(rs)
		for k := 0; k < d.stop && hi > lo && rs[hi-1] == d.content; k++ {
			hi--
		}
		out[i] = string(rs[lo:hi])
	}
	return out
}

// replaceDecoder replaces a pattern in every token.
type replaceDecoder struct {
	pat     *pattern
	content string
}

func (d replaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = d.pat.replaceAll(t, d.content)
	}
	return out
}

type sequenceDecoder []decoder

func (seq sequenceDecoder) decodeChain(tokens []string) []string {
	for _, d := range seq {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}
