package eval

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// QuizChoices is the number of choices of a quiz question: the answer and
// three other answers of the same quiz.
const QuizChoices = 4

// QuizExpand renders one field of a bsdgames quiz(6) file in its full
// form: optional text {x} is kept, of alternatives a|b (at the top level
// or in [a|b]) the first is taken, and a backslash keeps the character
// after it. "{The }Merchant{ of Venice}" is "The Merchant of Venice",
// "strain['|e]d" is "strain'd".
func QuizExpand(s string) string {
	var b strings.Builder
	// skip[d] tells whether the text at bracket depth d is past the first
	// alternative; depth 0 is the field itself.
	skip := []bool{false}
	for i := 0; i < len(s); i++ {
		top := len(skip) - 1
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) {
				i++
				if !anySkip(skip) {
					b.WriteByte(s[i])
				}
			}
		case '{', '[':
			skip = append(skip, false)
		case '}', ']':
			if top > 0 {
				skip = skip[:top]
			}
		case '|':
			skip[top] = true
		default:
			if !anySkip(skip) {
				b.WriteByte(c)
			}
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func anySkip(s []bool) bool {
	for _, v := range s {
		if v {
			return true
		}
	}
	return false
}

// QuizFields splits a quiz line into its ':'-separated fields (a ':' inside
// {} or [] or after a backslash does not split).
func QuizFields(line string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '{', '[':
			depth++
		case '}', ']':
			depth = max(0, depth-1)
		case ':':
			if depth == 0 {
				out = append(out, line[start:i])
				start = i + 1
			}
		}
	}
	return append(out, line[start:])
}

// ParseQuizLines reads a quiz file: one record per line, a trailing
// backslash continuing it on the next line; it returns each record's
// fields with the physical line it starts on. want is the number of fields
// every record must have (0: at least two).
func ParseQuizLines(name string, r io.Reader, want int) (recs [][]string, at []int, err error) {
	var cur strings.Builder
	start := 0
	flush := func() error {
		rec := cur.String()
		cur.Reset()
		if strings.TrimSpace(rec) == "" {
			return nil
		}
		f := QuizFields(rec)
		if (want > 0 && len(f) != want) || len(f) < 2 {
			n := want
			if n == 0 {
				n = 2
			}
			return &FormatError{File: name, Line: start, Msg: fmt.Sprintf("want %d ':'-separated fields (quiz(6) format), got %d", n, len(f))}
		}
		recs, at = append(recs, f), append(at, start)
		return nil
	}
	err = lines(name, r, func(n int, line string) error {
		if !utf8.ValidString(line) {
			return &FormatError{File: name, Line: n, Msg: "not valid UTF-8"}
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") && !strings.HasSuffix(line, "\\\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			return nil
		}
		cur.WriteString(line)
		return flush()
	})
	if err == nil {
		err = flush()
	}
	return recs, at, err
}

// QuizItems makes multiple-choice items from a quiz's records: the context
// "<label of field 0>: <field 0>\n<label of field 1>:" and as choices the
// record's field 1 and QuizChoices−1 other distinct field-1 answers of the
// quiz, drawn with a fixed seed (the item's index and the quiz's name:
// the same items on every run). Records with
// an empty question or answer are skipped; a quiz with fewer than two
// distinct answers gives no items.
func QuizItems(quiz string, labels [2]string, recs [][]string) []Item {
	type qa struct{ q, a string }
	var pairs []qa
	var answers []string
	seen := map[string]bool{}
	for _, r := range recs {
		q, a := QuizExpand(r[0]), QuizExpand(r[1])
		if q == "" || a == "" {
			continue
		}
		pairs = append(pairs, qa{q, a})
		if !seen[a] {
			seen[a] = true
			answers = append(answers, a)
		}
	}
	if len(answers) < 2 {
		return nil
	}
	l0, l1 := QuizExpand(labels[0]), QuizExpand(labels[1])
	h := fnv.New64a()
	h.Write([]byte(quiz))
	var items []Item
	for i, p := range pairs {
		r := rand.New(rand.NewPCG(uint64(i), h.Sum64()))
		others := make([]string, 0, len(answers)-1)
		for _, a := range answers {
			if a != p.a {
				others = append(others, a)
			}
		}
		r.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
		choices := append([]string{p.a}, others[:min(QuizChoices-1, len(others))]...)
		r.Shuffle(len(choices), func(i, j int) { choices[i], choices[j] = choices[j], choices[i] })
		gold := 0
		for k, c := range choices {
			if c == p.a {
				gold = k
			}
		}
		items = append(items, Item{Context: fmt.Sprintf("%s: %s\n%s:", l0, p.q, l1), Choices: choices, Gold: gold, Group: quiz})
	}
	return items
}

// LoadQuiz reads the bsdgames quiz directory (Debian bsdgames 2.17:
// /usr/share/games/bsdgames/quiz): its index names each quiz file (by
// path; the base name is looked up in dir) and its fields' labels. Every
// quiz gives items from its first two fields (QuizItems), a group each, in
// index order.
func LoadQuiz(dir string) (*Task, error) {
	idx := filepath.Join(dir, "index")
	f, err := os.Open(idx)
	if err != nil {
		return nil, fmt.Errorf("eval: %w (want the bsdgames quiz directory, which holds an index file)", err)
	}
	defer f.Close()
	entries, _, err := ParseQuizLines(idx, f, 0)
	if err != nil {
		return nil, err
	}
	t := &Task{Name: "quiz", Source: dir, Kind: MultipleChoice, Delimiter: " ", Norm: true}
	for _, e := range entries {
		if len(e) < 3 {
			continue // a quiz needs a question and an answer field
		}
		name := filepath.Base(e[0])
		qf, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("eval: quiz %s named in %s: %w", name, idx, err)
		}
		recs, _, err := ParseQuizLines(filepath.Join(dir, name), qf, 0)
		qf.Close()
		if err != nil {
			return nil, err
		}
		t.Items = append(t.Items, QuizItems(name, [2]string{e[1], e[2]}, recs)...)
	}
	if len(t.Items) == 0 {
		return nil, &FormatError{File: idx, Msg: "no quiz items"}
	}
	return t, nil
}
