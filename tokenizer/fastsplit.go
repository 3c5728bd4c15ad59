package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the two pre-tokenization regexes that nearly all
// byte-level BPE tokenizers use, about ten times faster than the
// backtracking engine. They reproduce regexp2's leftmost, first-alternative,
// backtracking semantics exactly (FuzzFastSplit checks them against regexp2),
// with regexp2's classes: \s = unicode.IsSpace, \p{L} = unicode.IsLetter,
// \p{N} = unicode.IsNumber.

// qwen2Pattern is the Qwen2/Qwen3 split regex; llama3Pattern differs only in
// \p{N}{1,3}.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// fastMatcher returns the hand-written matcher for a known regex, or nil.
func fastMatcher(src string) func(string) [][2]int {
	switch src {
	case gpt2SplitPattern:
		return matchGPT2
	case qwen2Pattern:
		return func(s string) [][2]int { return matchLlama3(s, 1) }
	case llama3Pattern:
		return func(s string) [][2]int { return matchLlama3(s, 3) }
	}
	return nil
}

func isL(r rune) bool {
	return r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') || r >= utf8.RuneSelf && unicode.IsLetter(r)
}
func isN(r rune) bool {
	return r < utf8.RuneSelf && '0' <= r && r <= '9' || r >= utf8.RuneSelf && unicode.IsNumber(r)
}
func isS(r rune) bool { return unicode.IsSpace(r) }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

// runAt returns the end of the run of runes satisfying f from i.
func runAt(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !f(r) {
			break
		}
		i += n
	}
	return i
}

// at decodes the rune at i (utf8.RuneError, 0 at the end).
func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return utf8.RuneError, 0
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitively when
// fold), returning the end or -1.
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	lower := func(c byte) byte {
		if fold && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v', 'l':
		if i+2 < len(s) {
			want := map[byte]byte{'r': 'e', 'v': 'e', 'l': 'l'}[lower(s[i+1])]
			if lower(s[i+2]) == want {
				return i + 3
			}
		}
	}
	return -1
}

// spaceRun matches \s+(?!\S)|\s+ at i, where s[i] is whitespace.
func spaceRun(s string, i int) int {
	j := runAt(s, i, isS)
	if j == len(s) {
		return j
	}
	// Give back the last whitespace rune so that (?!\S) holds, if the run
	// is longer than one rune; otherwise \s+ takes the single rune.
	_, n := utf8.DecodeLastRuneInString(s[:j])
	if j-n > i {
		return j - n
	}
	return j
}

// matchGPT2 is gpt2SplitPattern:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(s string) [][2]int {
	out := make([][2]int, 0, len(s)/4+1)
	for i := 0; i < len(s); {
		end := contraction(s, i, false)
		if end < 0 {
			r, n := at(s, i)
			start := i
			if r == ' ' {
				if r2, n2 := at(s, i+n); n2 > 0 && !isS(r2) {
					r, n, start = r2, n2, i+1
				}
			}
			switch {
			case isL(r):
				end = runAt(s, start+n, isL)
			case isN(r):
				end = runAt(s, start+n, isN)
			case !isS(r):
				end = runAt(s, start+n, isOther)
			default:
				end = spaceRun(s, i)
			}
		}
		out = append(out, [2]int{i, end})
		i = end
	}
	return out
}

// matchLlama3 is qwen2Pattern (maxDigits 1) or llama3Pattern (maxDigits 3):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchLlama3(s string, maxDigits int) [][2]int {
	out := make([][2]int, 0, len(s)/4+1)
	isCRLF := func(r rune) bool { return r == '\r' || r == '\n' }
	for i := 0; i < len(s); {
		end := contraction(s, i, true)
		r, n := at(s, i)
		if end < 0 {
			// [^\r\n\p{L}\p{N}]?\p{L}+
			if isL(r) {
				end = runAt(s, i+n, isL)
			} else if !isCRLF(r) && !isN(r) {
				if r2, n2 := at(s, i+n); n2 > 0 && isL(r2) {
					end = runAt(s, i+n+n2, isL)
				}
			}
		}
		if end < 0 && isN(r) {
			// \p{N}{1,maxDigits}
			end = i + n
			for k := 1; k < maxDigits; k++ {
				r2, n2 := at(s, end)
				if n2 == 0 || !isN(r2) {
					break
				}
				end += n2
			}
		}
		if end < 0 {
			// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
			start := i
			r1, n1 := r, n
			if r == ' ' {
				if r2, n2 := at(s, i+n); n2 > 0 && isOther(r2) {
					r1, n1, start = r2, n2, i+1
				}
			}
			if isOther(r1) {
				end = runAt(s, start+n1, isOther)
				end = runAt(s, end, isCRLF)
			}
		}
		if end < 0 {
			// s[i] is whitespace. \s*[\r\n]+: the whitespace run up to and
			// including its last \r or \n, if it has one.
			j := runAt(s, i, isS)
			last := -1
			for k := i; k < j; k++ {
				if s[k] == '\r' || s[k] == '\n' {
					last = k
				}
			}
			if last >= 0 {
				end = last + 1
			} else {
				end = spaceRun(s, i)
			}
		}
		out = append(out, [2]int{i, end})
		i = end
	}
	return out
}
