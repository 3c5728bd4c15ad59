package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A piece is a part of the input on its way through pre-tokenization.
type piece struct {
	text    string
	atStart bool // the piece begins at byte 0 of the original input
}

// A preTokenizer splits pieces into smaller pieces (and may rewrite them).
type preTokenizer interface {
	preTokenize(ps []piece) ([]piece, error)
}

// splitBehavior says what happens to the matches of a split pattern.
type splitBehavior int

const (
	behaviorRemoved splitBehavior = iota
	behaviorIsolated
	behaviorMergedWithPrevious
	behaviorMergedWithNext
	behaviorContiguous
)

var behaviorNames = map[string]splitBehavior{
	"Removed":            behaviorRemoved,
	"Isolated":           behaviorIsolated,
	"MergedWithPrevious": behaviorMergedWithPrevious,
	"MergedWithNext":     behaviorMergedWithNext,
	"Contiguous":         behaviorContiguous,
}

type span struct {
	start, end int
	match      bool
}

// splitSpans cuts s at the given matches (sorted, non-overlapping) and applies
// behavior, as the HuggingFace NormalizedString::split does. Empty results are
// dropped.
func splitSpans(s string, matches [][2]int, invert bool, behavior splitBehavior) []span {
	var spans []span
	prev := 0
	for _, m := range matches {
		if m[0] > prev {
			spans = append(spans, span{prev, m[0], invert})
		}
		spans = append(spans, span{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev < len(s) {
		spans = append(spans, span{prev, len(s), invert})
	}
	var out []span
	switch behavior {
	case behaviorRemoved:
		for _, sp := range spans {
			if !sp.match {
				out = append(out, sp)
			}
		}
	case behaviorIsolated:
		out = spans
	case behaviorMergedWithPrevious:
		prevMatch := false
		for _, sp := range spans {
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	case behaviorMergedWithNext:
		prevMatch := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	case behaviorContiguous:
		prevMatch := false
		for i, sp := range spans {
			if i > 0 && sp.match == prevMatch {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, sp)
			}
			prevMatch = sp.match
		}
	}
	res := out[:0]
	for _, sp := range out {
		if sp.end > sp.start {
			res = append(res, sp)
		}
	}
	return res
}

// splitPieces applies a splitting function to every piece: f returns the
// (possibly rewritten) text of the piece and the spans to keep. A sub-piece
// starting at byte 0 of a piece that was at the start of the input is too.
func splitPieces(ps []piece, f func(piece) (string, []span, error)) ([]piece, error) {
	out := make([]piece, 0, len(ps))
	for _, p := range ps {
		s, spans, err := f(p)
		if err != nil {
			return nil, err
		}
		for _, sp := range spans {
			out = append(out, piece{text: s[sp.start:sp.end], atStart: p.atStart && sp.start == 0})
		}
	}
	return out, nil
}

// whole is the span list keeping all of s (nothing when s is empty).
func whole(s string) []span {
	if s == "" {
		return nil
	}
	return []span{{0, len(s), false}}
}

// splitPreTokenizer is the HuggingFace "Split" pre-tokenizer.
type splitPreTokenizer struct {
	pat      *pattern
	behavior splitBehavior
	invert   bool
}

func (t *splitPreTokenizer) preTokenize(ps []piece) ([]piece, error) {
	return splitPieces(ps, func(p piece) (string, []span, error) {
		ms, err := t.pat.findAll(p.text)
		if err != nil {
			return "", nil, err
		}
		return p.text, splitSpans(p.text, ms, t.invert, t.behavior), nil
	})
}

// gpt2SplitPattern is the GPT-2 pre-tokenization regex used by ByteLevel with use_regex.
const gpt2SplitPattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteLevelPreTokenizer is the HuggingFace "ByteLevel" pre-tokenizer: an
// optional prefix space, an optional GPT-2 split, then bytes to runes.
type byteLevelPreTokenizer struct {
	addPrefixSpace bool
	useRegex       bool
	split          *pattern
}

func (t *byteLevelPreTokenizer) preTokenize(ps []piece) ([]piece, error) {
	out, err := splitPieces(ps, func(p piece) (string, []span, error) {
		s := p.text
		if t.addPrefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		if !t.useRegex {
			return s, whole(s), nil
		}
		ms, err := t.split.findAll(s)
		if err != nil {
			return "", nil, err
		}
		return s, splitSpans(s, ms, false, behaviorIsolated), nil
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].text = byteLevelEncode(out[i].text)
	}
	return out, nil
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

// metaspacePreTokenizer replaces spaces by the replacement rune (▁), prepends
// one according to the scheme and optionally splits before each replacement.
type metaspacePreTokenizer struct {
	replacement rune
	scheme      prependScheme
	split       bool
}

func (t *metaspacePreTokenizer) preTokenize(ps []piece) ([]piece, error) {
	rep := string(t.replacement)
	return splitPieces(ps, func(p piece) (string, []span, error) {
		s := strings.ReplaceAll(p.text, " ", rep)
		if !strings.HasPrefix(s, rep) && (t.scheme == prependAlways || t.scheme == prependFirst && p.atStart) {
			s = rep + s
		}
		if !t.split {
			return s, whole(s), nil
		}
		lit := pattern{literal: rep}
		ms, _ := lit.findAll(s)
		return s, splitSpans(s, ms, false, behaviorMergedWithNext), nil
	})
}

// runeClassPreTokenizer splits on runes of one class (digits, punctuation,
// whitespace) with a behaviour.
type runeClassPreTokenizer struct {
	class    func(rune) bool
	behavior splitBehavior
	// each: every rune of the class is its own match; otherwise runs of
	// the class are one match.
	each bool
}

func (t *runeClassPreTokenizer) preTokenize(ps []piece) ([]piece, error) {
	return splitPieces(ps, func(p piece) (string, []span, error) {
		var ms [][2]int
		s := p.text
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !t.class(r) {
				i += n
				continue
			}
			j := i + n
			if !t.each {
				for j < len(s) {
					r2, n2 := utf8.DecodeRuneInString(s[j:])
					if !t.class(r2) {
						break
					}
					j += n2
				}
			}
			ms = append(ms, [2]int{i, j})
			i = j
		}
		return s, splitSpans(s, ms, false, t.behavior), nil
	})
}

// isPunctuation is the HuggingFace notion: ASCII punctuation or Unicode P*.
func isPunctuation(r rune) bool {
	return r < 128 && unicode.IsPunct(r) || r < 128 && unicode.IsSymbol(r) || unicode.IsPunct(r)
}

func isDigit(r rune) bool { return unicode.IsDigit(r) }

type sequencePreTokenizer []preTokenizer

func (seq sequencePreTokenizer) preTokenize(ps []piece) ([]piece, error) {
	var err error
	for _, t := range seq {
		if ps, err = t.preTokenize(ps); err != nil {
			return nil, err
		}
	}
	return ps, nil
}
