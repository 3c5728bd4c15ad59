package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// ifCheck tells whether a response follows one instruction.
type ifCheck func(response string) bool

// ifArgs are one instruction's kwargs, and the prompt (for the checks that
// compare with it).
type ifArgs struct {
	kw     map[string]json.RawMessage
	prompt string
}

func (a ifArgs) has(k string) bool {
	v, ok := a.kw[k]
	return ok && string(v) != "null"
}

func (a ifArgs) int(k string) (int, error) {
	if !a.has(k) {
		return 0, fmt.Errorf("argument %q is missing (want a whole number)", k)
	}
	var n int
	if err := json.Unmarshal(a.kw[k], &n); err != nil || n < 0 {
		return 0, fmt.Errorf("argument %q = %s: want a whole number >= 0", k, a.kw[k])
	}
	return n, nil
}

func (a ifArgs) str(k string) (string, error) {
	if !a.has(k) {
		return "", fmt.Errorf("argument %q is missing (want a string)", k)
	}
	var s string
	if err := json.Unmarshal(a.kw[k], &s); err != nil {
		return "", fmt.Errorf("argument %q = %s: want a string", k, a.kw[k])
	}
	return s, nil
}

func (a ifArgs) strs(k string) ([]string, error) {
	if !a.has(k) {
		return nil, fmt.Errorf("argument %q is missing (want a list of strings)", k)
	}
	var s []string
	if err := json.Unmarshal(a.kw[k], &s); err != nil {
		return nil, fmt.Errorf("argument %q = %s: want a list of strings", k, a.kw[k])
	}
	return s, nil
}

// relation reads a "less than" / "at least" comparison with its threshold
// and returns the test of a count.
func (a ifArgs) relation(rel, num string) (func(int) bool, error) {
	n, err := a.int(num)
	if err != nil {
		return nil, err
	}
	r, err := a.str(rel)
	if err != nil {
		return nil, err
	}
	switch r {
	case "less than":
		return func(c int) bool { return c < n }, nil
	case "at least":
		return func(c int) bool { return c >= n }, nil
	}
	return nil, fmt.Errorf("argument %q = %q: want \"less than\" or \"at least\"", rel, r)
}

// userRegexp compiles text the reference puts into a Python regular
// expression as it is (keywords, section and postscript markers); text Go
// cannot compile as such is matched literally.
func userRegexp(prefix, text, suffix string) *regexp.Regexp {
	if re, err := regexp.Compile(prefix + text + suffix); err == nil {
		return re
	}
	return regexp.MustCompile(prefix + regexp.QuoteMeta(text) + suffix)
}

// ifCheckers are the instruction checkers by id: each reads its kwargs
// and returns the check, reproducing the check_following of the class
// google-research's instructions_registry.py maps the id to (in
// instructions.py, commit 83282e4).
var ifCheckers = map[string]func(ifArgs) (ifCheck, error){
	// ResponseLanguageChecker: langdetect's language of the whole
	// response is the one asked; undetectable text counts as followed.
	"language:response_language": func(a ifArgs) (ifCheck, error) {
		lang, err := a.str("language")
		if err != nil {
			return nil, err
		}
		return func(r string) bool {
			got, ok := detectLanguage(r)
			return !ok || got == lang
		}, nil
	},
	// NumberOfSentences.
	"length_constraints:number_sentences": func(a ifArgs) (ifCheck, error) {
		ok, err := a.relation("relation", "num_sentences")
		if err != nil {
			return nil, err
		}
		return func(r string) bool { return ok(countSentences(r)) }, nil
	},
	// PlaceholderChecker: at least N of [...].
	"detectable_content:number_placeholders": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_placeholders")
		if err != nil {
			return nil, err
		}
		return func(r string) bool { return len(placeholderRE.FindAllString(r, -1)) >= n }, nil
	},
	// BulletListChecker: exactly N lines starting with "* " or "-".
	"detectable_format:number_bullet_lists": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_bullets")
		if err != nil {
			return nil, err
		}
		return func(r string) bool {
			return len(starBulletRE.FindAllString(r, -1))+len(dashBulletRE.FindAllString(r, -1)) == n
		}, nil
	},
	// ConstrainedResponseChecker: one of the three answers appears.
	"detectable_format:constrained_response": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			r = strings.TrimSpace(r)
			for _, o := range []string{"My answer is yes.", "My answer is no.", "My answer is maybe."} {
				if strings.Contains(r, o) {
					return true
				}
			}
			return false
		}, nil
	},
	// HighlightSectionChecker: at least N *highlighted* (and **bold**,
	// counted again) non-blank spans within a line.
	"detectable_format:number_highlighted_sections": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_highlights")
		if err != nil {
			return nil, err
		}
		return func(r string) bool {
			c := 0
			for _, h := range highlightRE.FindAllString(r, -1) {
				if strings.TrimSpace(strings.Trim(h, "*")) != "" {
					c++
				}
			}
			for _, h := range boldRE.FindAllString(r, -1) {
				if strings.TrimSpace(h[2:len(h)-2]) != "" {
					c++
				}
			}
			return c >= n
		}, nil
	},
	// SectionChecker: the response splits into at least N sections at
	// "<splitter> <number>".
	"detectable_format:multiple_sections": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_sections")
		if err != nil {
			return nil, err
		}
		sp, err := a.str("section_spliter")
		if err != nil {
			return nil, err
		}
		re := userRegexp(`\s?`, strings.TrimSpace(sp), `\s?\d+\s?`)
		return func(r string) bool { return len(re.FindAllStringIndex(r, -1)) >= n }, nil
	},
	// ParagraphChecker: exactly N paragraphs divided by "***"; an empty
	// paragraph is allowed only first or last.
	"length_constraints:number_paragraphs": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_paragraphs")
		if err != nil {
			return nil, err
		}
		return func(r string) bool {
			ps := dividerRE.Split(r, -1)
			c := len(ps)
			for i, p := range ps {
				if strings.TrimSpace(p) == "" {
					if i != 0 && i != len(ps)-1 {
						return false
					}
					c--
				}
			}
			return c == n
		}, nil
	},
	// PostscriptChecker: a line holds the marker (case-insensitive; P.S.
	// and P.P.S with optional spaces after the dots).
	"detectable_content:postscript": func(a ifArgs) (ifCheck, error) {
		m, err := a.str("postscript_marker")
		if err != nil {
			return nil, err
		}
		m = strings.TrimSpace(m)
		var re *regexp.Regexp
		switch m {
		case "P.P.S":
			re = regexp.MustCompile(`(?m)\s*p\.\s?p\.\s?s.*$`)
		case "P.S.":
			re = regexp.MustCompile(`(?m)\s*p\.\s?s\..*$`)
		default:
			re = userRegexp(`(?m)\s*`, strings.ToLower(m), `.*$`)
		}
		return func(r string) bool { return re.MatchString(strings.ToLower(r)) }, nil
	},
	// KeywordChecker: every keyword occurs (a case-insensitive regular
	// expression search).
	"keywords:existence": func(a ifArgs) (ifCheck, error) {
		kws, err := a.strs("keywords")
		if err != nil {
			return nil, err
		}
		var res []*regexp.Regexp
		for _, k := range kws {
			res = append(res, userRegexp(`(?i)`, k, ""))
		}
		return func(r string) bool {
			for _, re := range res {
				if !re.MatchString(r) {
					return false
				}
			}
			return true
		}, nil
	},
	// KeywordFrequencyChecker: the keyword's (case-insensitive,
	// non-overlapping) occurrences compared with the frequency.
	"keywords:frequency": func(a ifArgs) (ifCheck, error) {
		ok, err := a.relation("relation", "frequency")
		if err != nil {
			return nil, err
		}
		k, err := a.str("keyword")
		if err != nil {
			return nil, err
		}
		re := userRegexp(`(?i)`, strings.TrimSpace(k), "")
		return func(r string) bool { return ok(len(re.FindAllStringIndex(r, -1))) }, nil
	},
	// NumberOfWords: words are runs of \w (NLTK's RegexpTokenizer(r"\w+")).
	"length_constraints:number_words": func(a ifArgs) (ifCheck, error) {
		ok, err := a.relation("relation", "num_words")
		if err != nil {
			return nil, err
		}
		return func(r string) bool { return ok(countWords(r)) }, nil
	},
	// JsonFormat: the response, stripped of ``` fences, parses as JSON.
	"detectable_format:json_format": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			v := strings.TrimSpace(r)
			for _, p := range []string{"```json", "```Json", "```JSON", "```"} {
				v = strings.TrimPrefix(v, p)
			}
			v = strings.TrimSpace(strings.TrimSuffix(v, "```"))
			return json.Valid([]byte(v))
		}, nil
	},
	// ParagraphFirstWordCheck: exactly N paragraphs divided by "\n\n", and
	// paragraph n (counted in the split, blank ones included) begins with
	// the word.
	"length_constraints:nth_paragraph_first_word": func(a ifArgs) (ifCheck, error) {
		n, err := a.int("num_paragraphs")
		if err != nil {
			return nil, err
		}
		nth, err := a.int("nth_paragraph")
		if err != nil {
			return nil, err
		}
		if nth < 1 || nth > n {
			return nil, fmt.Errorf("nth_paragraph %d: want 1 to num_paragraphs %d", nth, n)
		}
		word, err := a.str("first_word")
		if err != nil {
			return nil, err
		}
		word = strings.ToLower(word)
		return func(r string) bool {
			ps := strings.Split(r, "\n\n")
			c := len(ps)
			for _, p := range ps {
				if strings.TrimSpace(p) == "" {
					c--
				}
			}
			if nth > c {
				return false
			}
			p := strings.TrimSpace(ps[nth-1])
			if p == "" {
				return false
			}
			w := strings.TrimLeft(strings.TrimLeft(strings.Fields(p)[0], "'"), `"`)
			var first strings.Builder
			for _, ch := range w {
				if strings.ContainsRune(`.,?!'"`, ch) {
					break
				}
				first.WriteString(strings.ToLower(string(ch)))
			}
			return c == n && first.String() == word
		}, nil
	},
	// ForbiddenWords: none of the words occurs as a whole word
	// (case-insensitive).
	"keywords:forbidden_words": func(a ifArgs) (ifCheck, error) {
		ws, err := a.strs("forbidden_words")
		if err != nil {
			return nil, err
		}
		var res []*regexp.Regexp
		for _, w := range ws {
			res = append(res, userRegexp(`(?i)\b`, w, `\b`))
		}
		return func(r string) bool {
			for _, re := range res {
				if re.MatchString(r) {
					return false
				}
			}
			return true
		}, nil
	},
	// TwoResponsesChecker: exactly two different answers divided by
	// "******"; an empty part is allowed only first or last.
	"combination:two_responses": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			parts := strings.Split(r, "******")
			var valid []string
			for i, p := range parts {
				if strings.TrimSpace(p) == "" {
					if i != 0 && i != len(parts)-1 {
						return false
					}
					continue
				}
				valid = append(valid, p)
			}
			return len(valid) == 2 && strings.TrimSpace(valid[0]) != strings.TrimSpace(valid[1])
		}, nil
	},
	// RepeatPromptThenAnswer: the response starts with the request
	// (case-insensitive).
	"combination:repeat_prompt": func(a ifArgs) (ifCheck, error) {
		p, err := a.str("prompt_to_repeat")
		if err != nil {
			return nil, err
		}
		if p == "" {
			return nil, errors.New(`argument "prompt_to_repeat" is empty`)
		}
		p = strings.ToLower(strings.TrimSpace(p))
		return func(r string) bool { return strings.HasPrefix(strings.ToLower(strings.TrimSpace(r)), p) }, nil
	},
	// EndChecker: the response (stripped of spaces and double quotes) ends
	// with the phrase (case-insensitive).
	"startend:end_checker": func(a ifArgs) (ifCheck, error) {
		p, err := a.str("end_phrase")
		if err != nil {
			return nil, err
		}
		p = strings.ToLower(strings.TrimSpace(p))
		return func(r string) bool {
			return strings.HasSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(r), `"`)), p)
		}, nil
	},
	// TitleChecker: a non-blank <<title>> on one line.
	"detectable_format:title": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			for _, t := range titleRE.FindAllString(r, -1) {
				if strings.TrimSpace(strings.TrimRight(strings.TrimLeft(t, "<"), ">")) != "" {
					return true
				}
			}
			return false
		}, nil
	},
	// LetterFrequencyChecker: occurrences of the letter, case-insensitive.
	// (The reference draws a random letter when the argument is not one
	// of a-z, which two prompts' "#" and "!" are; the character given is
	// counted here, so that a score is reproducible.)
	"keywords:letter_frequency": func(a ifArgs) (ifCheck, error) {
		ok, err := a.relation("let_relation", "let_frequency")
		if err != nil {
			return nil, err
		}
		l, err := a.str("letter")
		if err != nil {
			return nil, err
		}
		l = strings.ToLower(strings.TrimSpace(l))
		if len([]rune(l)) != 1 {
			return nil, fmt.Errorf("argument \"letter\" = %q: want one character", l)
		}
		return func(r string) bool { return ok(strings.Count(strings.ToLower(r), l)) }, nil
	},
	// CapitalLettersEnglishChecker: all cased letters upper case, and the
	// language English (undetectable: followed).
	"change_case:english_capital": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			if !pyIsUpper(r) {
				return false
			}
			l, ok := detectLanguage(r)
			return !ok || l == "en"
		}, nil
	},
	// LowercaseLettersEnglishChecker: all cased letters lower case, and
	// English.
	"change_case:english_lowercase": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			if !pyIsLower(r) {
				return false
			}
			l, ok := detectLanguage(r)
			return !ok || l == "en"
		}, nil
	},
	// CommaChecker.
	"punctuation:no_comma": func(ifArgs) (ifCheck, error) {
		return func(r string) bool { return !strings.Contains(r, ",") }, nil
	},
	// CapitalWordFrequencyChecker: words (NLTK's word_tokenize; here
	// wordTokens) in all capitals compared with the frequency.
	"change_case:capital_word_frequency": func(a ifArgs) (ifCheck, error) {
		ok, err := a.relation("capital_relation", "capital_frequency")
		if err != nil {
			return nil, err
		}
		return func(r string) bool {
			c := 0
			for _, w := range wordTokens(r) {
				if pyIsUpper(w) {
					c++
				}
			}
			return ok(c)
		}, nil
	},
	// QuotationChecker: the stripped response begins and ends with '"'.
	"startend:quotation": func(ifArgs) (ifCheck, error) {
		return func(r string) bool {
			v := strings.TrimSpace(r)
			return len(v) > 1 && v[0] == '"' && v[len(v)-1] == '"'
		}, nil
	},
}

var (
	placeholderRE = regexp.MustCompile(`\[.*?\]`)
	starBulletRE  = regexp.MustCompile(`(?m)^\s*\*[^\*].*$`)
	dashBulletRE  = regexp.MustCompile(`(?m)^\s*-.*$`)
	highlightRE   = regexp.MustCompile(`\*[^\n\*]*\*`)
	boldRE        = regexp.MustCompile(`\*\*[^\n\*]*\*\*`)
	dividerRE     = regexp.MustCompile(`\s?\*\*\*\s?`)
	titleRE       = regexp.MustCompile(`<<[^\n]+>>`)
)

// pyIsUpper is Python's str.isupper: at least one cased character, and
// no lower-case (or title-case) one.
func pyIsUpper(s string) bool {
	cased := false
	for _, r := range s {
		switch {
		case unicode.IsLower(r) || unicode.IsTitle(r):
			return false
		case unicode.IsUpper(r):
			cased = true
		}
	}
	return cased
}

// pyIsLower is Python's str.islower.
func pyIsLower(s string) bool {
	cased := false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) || unicode.IsTitle(r):
			return false
		case unicode.IsLower(r):
			cased = true
		}
	}
	return cased
}
