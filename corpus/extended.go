package corpus

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Locations of the corpora added for the retrained parent (issue #9),
// unpacked by scripts/fetch-assets.sh, relative to the module root.
const (
	// MobyDickDB is the R lazy-load database of Debian r-cran-tokenizers
	// 0.3.0-1, whose object "mobydick" is Project Gutenberg eBook #2701.
	MobyDickDB = "testdata/ext/deb/tokenizers/usr/lib/R/site-library/tokenizers/data/Rdata"
	// KJVFile is the King James Bible as Debian bible-kjv 4.38's bible(1)
	// writes it from bible-kjv-text 4.38 ("bible -m 8192 gen1:1-rev22:21").
	KJVFile = "testdata/ext/deb/bible-kjv/kjv.txt"
)

var (
	mobyChapterRE = regexp.MustCompile(`^CHAPTER ([0-9]+)\. `)
	gutenbergEnd  = "*** END OF THIS PROJECT GUTENBERG EBOOK"
)

// MobyDick reads Herman Melville's Moby Dick from the lazy-load database at
// base (the path without .rdx/.rdb) and returns one document per chapter,
// cleaned: "melville/mobydick/000" is the Etymology and Extracts, 001–135
// the chapters, 136 the Epilogue. The Project Gutenberg header and licence
// and the chapter heading lines are left out (a heading that wraps leaves
// its second line as the chapter's first paragraph).
func MobyDick(base string) ([]Document, error) {
	if _, err := os.Stat(base + ".rdx"); err != nil {
		return nil, fmt.Errorf("moby dick: %s.rdx: %w", base, ErrMissing)
	}
	db, err := OpenLazyLoadDB(base)
	if err != nil {
		return nil, err
	}
	v, err := db.Object("mobydick")
	if err != nil {
		return nil, err
	}
	if v.Type != rStr || len(v.Strings) != 1 || v.Strings[0] == nil {
		return nil, fmt.Errorf("moby dick: object \"mobydick\" is not one string (R type %d, %d elements)", v.Type, len(v.Strings))
	}
	text := strings.ReplaceAll(*v.Strings[0], "\r\n", "\n")
	start := strings.Index(text, "\nETYMOLOGY.\n")
	end := strings.Index(text, gutenbergEnd)
	if e := strings.LastIndex(text[:max(end, 0)], "End of Project Gutenberg"); e >= 0 {
		end = e // the line that closes the text before the marker
	}
	if start < 0 || end < start {
		return nil, fmt.Errorf("moby dick: the text has no ETYMOLOGY heading or Gutenberg end marker; is this r-cran-tokenizers 0.3.0-1?")
	}
	var docs []Document
	var cur []string
	n := 0
	flush := func() {
		if t := Clean(strings.Join(cur, "\n")); t != "" {
			docs = append(docs, Document{Name: fmt.Sprintf("melville/mobydick/%03d", n), Text: t})
		}
		cur = cur[:0]
	}
	for _, line := range strings.Split(text[start+1:end], "\n") {
		if m := mobyChapterRE.FindStringSubmatch(line); m != nil {
			flush()
			n, _ = strconv.Atoi(m[1])
			continue
		}
		if strings.TrimSpace(line) == "Epilogue" {
			flush()
			n++
			continue
		}
		cur = append(cur, line)
	}
	flush()
	if len(docs) != 137 {
		return nil, fmt.Errorf("moby dick: found %d parts, want 137 (front matter, 135 chapters, epilogue)", len(docs))
	}
	return docs, nil
}

var (
	kjvChapterRE = regexp.MustCompile(`^((?:[1-3] )?[A-Z][A-Za-z ]*[a-z]) ([0-9]+)$`)
	kjvVerseRE   = regexp.MustCompile(`^\s+[0-9]+ `)
)

// KJV reads the King James Bible as bible(1) prints it (a blank line and
// "Book N" before each chapter, "  N text" verses wrapped at 80 columns) and
// returns one document per chapter, "kjv/genesis/001", with one paragraph
// per verse and the verse numbers left out.
func KJV(path string) ([]Document, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("king james bible: %s: %w", path, ErrMissing)
		}
		return nil, err
	}
	defer f.Close()
	var docs []Document
	var name string
	var verses []string
	flush := func() {
		if name != "" {
			docs = append(docs, Document{Name: name, Text: Clean(strings.Join(verses, "\n\n"))})
		}
		verses = verses[:0]
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	prevBlank, line := true, 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%s:%d: not valid UTF-8", path, line)
		}
		switch {
		case strings.TrimSpace(s) == "":
			prevBlank = true
			continue
		case prevBlank && kjvChapterRE.MatchString(s):
			m := kjvChapterRE.FindStringSubmatch(s)
			flush()
			ch, _ := strconv.Atoi(m[2])
			name = fmt.Sprintf("kjv/%s/%03d", strings.ToLower(strings.ReplaceAll(m[1], " ", "")), ch)
		case name == "":
			return nil, fmt.Errorf("%s:%d: text before the first chapter heading (want \"Book N\")", path, line)
		case kjvVerseRE.MatchString(s):
			verses = append(verses, kjvVerseRE.ReplaceAllString(s, ""))
		case len(verses) > 0:
			verses[len(verses)-1] += "\n" + s // a wrapped verse
		default:
			return nil, fmt.Errorf("%s:%d: want a verse (\"  N text\") after the chapter heading", path, line)
		}
		prevBlank = false
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("king james bible: %s: %w", path, err)
	}
	flush()
	if len(docs) != 1189 {
		return nil, fmt.Errorf("king james bible: %s: found %d chapters, want 1189", path, len(docs))
	}
	return docs, nil
}

// Extended reads the corpus of the retrained parent: All (State of the
// Union, Jane Austen) followed by Moby Dick and the King James Bible. Any
// corpus missing is an error wrapping ErrMissing. Split it with
// ExtendedAssign, which keeps All's test documents the whole test split.
func Extended(root string) ([]Document, error) {
	docs, err := All(root)
	if err != nil {
		return nil, err
	}
	m, err := MobyDick(filepath.Join(root, MobyDickDB))
	if err != nil {
		return nil, err
	}
	k, err := KJV(filepath.Join(root, KJVFile))
	if err != nil {
		return nil, err
	}
	return append(append(docs, m...), k...), nil
}

// ExtendedAssign is the split of the Extended corpus: DefaultAssign for the
// documents of the original corpus (names "sotu/..." and "austen/..."), so
// that its test split is unchanged, document for document; the documents
// added later never go to test: those DefaultAssign would put there go to
// validation instead (so about 10 % of them are validation, 90 % train).
func ExtendedAssign(name string) Part {
	p := DefaultAssign(name)
	if p == Test && !strings.HasPrefix(name, "sotu/") && !strings.HasPrefix(name, "austen/") {
		return Validation
	}
	return p
}

// SplitBy returns the documents that assign puts in part p, in input order.
func SplitBy(docs []Document, p Part, assign func(name string) Part) []Document {
	var out []Document
	for _, d := range docs {
		if assign(d.Name) == p {
			out = append(out, d)
		}
	}
	return out
}

// Interleave orders docs round-robin by source (the name up to its first
// "/"), keeping each source's order: one document of every source, then the
// second of every source, and so on. The first rows of an interleaved
// validation split then sample every source, not only the first one.
func Interleave(docs []Document) []Document {
	var order []string
	by := map[string][]Document{}
	for _, d := range docs {
		src, _, _ := strings.Cut(d.Name, "/")
		if _, ok := by[src]; !ok {
			order = append(order, src)
		}
		by[src] = append(by[src], d)
	}
	out := make([]Document, 0, len(docs))
	for i := 0; len(out) < len(docs); i++ {
		for _, src := range order {
			if i < len(by[src]) {
				out = append(out, by[src][i])
			}
		}
	}
	return out
}

// Splits returns the training and validation documents of a built-in
// corpus by name: "builtin" (All, split by DefaultAssign) or "extended"
// (Extended, split by ExtendedAssign; the validation documents
// interleaved, so that the first rows of an evaluation sample every
// source). root is the module root holding testdata/ext.
func Splits(name, root string) (train, validation []Document, err error) {
	switch name {
	case "builtin":
		docs, err := All(root)
		if err != nil {
			return nil, nil, err
		}
		return Split(docs, Train), Split(docs, Validation), nil
	case "extended":
		docs, err := Extended(root)
		if err != nil {
			return nil, nil, err
		}
		return SplitBy(docs, Train, ExtendedAssign), Interleave(SplitBy(docs, Validation, ExtendedAssign)), nil
	}
	return nil, nil, fmt.Errorf("unknown corpus %q (known: builtin, extended)", name)
}
