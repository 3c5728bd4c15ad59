package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/workload"
)

const sample = "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.\n\n" +
	"However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so well fixed."

// fixture is a model directory holding a small trained tokenizer, with
// the architecture that goes with it.
type fixture struct {
	dir  string
	tok  *tokenizer.Tokenizer
	arch *architecture.Model
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	bpe, err := tokenizer.TrainBPE(context.Background(), []string{sample}, tokenizer.BPETrainOptions{Merges: 30, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := bpe.Save(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	eot := int(bpe.Special["<|endoftext|>"])
	return fixture{dir: dir, tok: tok, arch: &architecture.Model{Vocab: tok.VocabSize(), EOS: []int{eot}, MaxPositions: 64}}
}

func write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func idsText(t *testing.T, seqs [][]int) []byte {
	var b bytes.Buffer
	if err := tokenizer.WriteIDs(&b, seqs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func idsBinary(t *testing.T, seqs [][]int) []byte {
	var b bytes.Buffer
	if err := tokenizer.WriteIDsBinary(&b, seqs); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// want packs the reference way, written out here: every document's ids
// then the separator, one stream, cut into windows of seqLen+1 that start
// seqLen apart.
func want(docs [][]int32, sep int32, seqLen, maxRows int) [][]int32 {
	var stream []int32
	for _, d := range docs {
		stream = append(stream, d...)
		stream = append(stream, sep)
	}
	var rows [][]int32
	for off := 0; off+seqLen < len(stream); off += seqLen {
		rows = append(rows, append([]int32(nil), stream[off:off+seqLen+1]...))
		if maxRows > 0 && len(rows) == maxRows {
			break
		}
	}
	return rows
}

func enc(t *testing.T, tok *tokenizer.Tokenizer, text string) []int32 {
	ids, err := tok.Encode(corpus.Clean(text), false)
	if err != nil {
		t.Fatal(err)
	}
	return toInt32(ids)
}

// TestRows: every form of source, alone and mixed, packs to the rows the
// reference packing gives, in source order.
func TestRows(t *testing.T) {
	f := newFixture(t)
	sep := int32(f.arch.EOS[0])
	text := write(t, "a.txt", []byte(sample))
	idSeqs := [][]int{{1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12}}
	idA := []int32{1, 2, 3, 4, 5, 6, 7}
	idB := []int32{8, 9, 10, 11, 12}
	idsFile := write(t, "b.ids", idsText(t, idSeqs))
	binFile := write(t, "c.bin", idsBinary(t, idSeqs))
	idsAsTxt := write(t, "d.txt", idsText(t, idSeqs))
	textIDs := enc(t, f.tok, sample)
	pdocs, err := parent.SplitDocs(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	var parentIDs [][]int32
	for _, d := range pdocs[:3] {
		parentIDs = append(parentIDs, enc(t, f.tok, d.Text))
	}
	tests := []struct {
		name    string
		sources []string
		ids     bool
		seqLen  int
		maxRows int
		docs    [][]int32 // the documents' ids, in order, for the reference
	}{
		{"text", []string{text}, false, 8, 0, [][]int32{textIDs}},
		{"text first rows", []string{text}, false, 8, 3, [][]int32{textIDs}},
		{"ids by name", []string{idsFile}, false, 4, 0, [][]int32{idA, idB}},
		{"ids by magic", []string{binFile}, false, 4, 0, [][]int32{idA, idB}},
		{"ids flagged", []string{idsAsTxt}, true, 4, 0, [][]int32{idA, idB}},
		{"mixed in order", []string{idsFile, text, binFile}, false, 8, 0, [][]int32{idA, idB, textIDs, idA, idB}},
		{"parent split", []string{"parent:test"}, false, 16, 40, parentIDs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ForModel(f.arch, f.dir)
			o.SeqLen, o.MaxRows, o.IDs, o.Assets = tc.seqLen, tc.maxRows, tc.ids, t.TempDir()
			p, err := Rows(context.Background(), tc.sources, o)
			if err != nil {
				t.Fatal(err)
			}
			w := want(tc.docs, sep, tc.seqLen, tc.maxRows)
			if tc.name == "parent split" {
				// Only the first three documents are in the reference;
				// 40 rows of 16 lie within them.
				if n := len(w); n < 40 {
					t.Fatalf("reference has %d rows; the test needs 40", n)
				}
			}
			if !reflect.DeepEqual(p.Rows, w) {
				t.Fatalf("rows differ from the reference packing:\n got %v\nwant %v", p.Rows, w)
			}
			for i, r := range p.Rows {
				if len(r) != tc.seqLen+1 {
					t.Fatalf("row %d has %d ids, want seq-len+1 = %d", i, len(r), tc.seqLen+1)
				}
			}
			if tc.maxRows > 0 && p.Available < len(p.Rows) {
				t.Errorf("Available %d < %d rows kept", p.Available, len(p.Rows))
			}
		})
	}
}

// TestRowsCounts: Tokens counts separators, Bytes the text only, and
// Available the rows before MaxRows.
func TestRowsCounts(t *testing.T) {
	f := newFixture(t)
	text := write(t, "a.txt", []byte(sample))
	idsFile := write(t, "b.ids", idsText(t, [][]int{{1, 2, 3}}))
	o := ForModel(f.arch, f.dir)
	o.SeqLen, o.MaxRows = 4, 2
	p, err := Rows(context.Background(), []string{text, idsFile}, o)
	if err != nil {
		t.Fatal(err)
	}
	n := len(enc(t, f.tok, sample))
	if p.Docs != 2 || p.Tokens != n+1+3+1 || p.Bytes != len(corpus.Clean(sample)) {
		t.Errorf("docs %d tokens %d bytes %d; want 2, %d, %d", p.Docs, p.Tokens, p.Bytes, n+5, len(corpus.Clean(sample)))
	}
	if wantAvail := (p.Tokens - 1) / 4; p.Available != wantAvail || len(p.Rows) != 2 {
		t.Errorf("available %d, kept %d; want %d and 2", p.Available, len(p.Rows), wantAvail)
	}
}

// TestRowsErrors: each way the data can be wrong for the model is its own
// error, typed where the user fixes it on the command line.
func TestRowsErrors(t *testing.T) {
	f := newFixture(t)
	text := write(t, "a.txt", []byte(sample))
	big := write(t, "big.ids", idsText(t, [][]int{{1, 2, f.arch.Vocab}}))
	short := write(t, "s.txt", []byte("Hello."))
	empty := write(t, "e.txt", []byte("\n \n"))
	bad := write(t, "u.txt", []byte("abc\xff"))
	noTok := t.TempDir()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		sources []string
		edit    func(*Options)
		ctx     context.Context
		check   func(error) bool
		msg     string
	}{
		{"id outside the vocabulary", []string{big}, nil, nil, func(err error) bool { var e *IDError; return errors.As(err, &e) && e.Pos == 2 }, "this model's tokenizer"},
		{"tokenizer of a larger model", []string{text}, func(o *Options) { o.Vocab = 100 }, nil, func(err error) bool { var e *MismatchError; return errors.As(err, &e) }, "belongs to the model"},
		{"short", []string{short}, func(o *Options) { o.SeqLen = 60 }, nil, func(err error) bool { var e *ShortError; return errors.As(err, &e) }, "fewer than one sequence of the sequence length+1 = 61"},
		{"past the positions", []string{text}, func(o *Options) { o.SeqLen = 65 }, nil, func(err error) bool { var e *workload.ContextError; return errors.As(err, &e) }, "sequence length 65"},
		{"unknown split", []string{"parent:dev"}, nil, nil, func(err error) bool { var e *parent.UnknownSplitError; return errors.As(err, &e) }, "parent:dev"},
		{"train split without assets", []string{"parent:train"}, nil, nil, func(err error) bool { return errors.Is(err, corpus.ErrMissing) }, "not embedded"},
		{"no tokenizer", []string{text}, func(o *Options) { o.ModelDir = noTok }, nil, func(err error) bool { var e *NoTokenizerError; return errors.As(err, &e) }, "has no tokenizer.json: name a tokenizer.json"},
		{"no tokenizer, no model", []string{text}, func(o *Options) { o.ModelDir = "" }, nil, nil, "needs a tokenizer"},
		{"empty text", []string{empty}, nil, nil, func(err error) bool { var e *corpus.EmptyError; return errors.As(err, &e) }, "no text"},
		{"not UTF-8", []string{bad}, nil, nil, func(err error) bool { var e *corpus.EncodingError; return errors.As(err, &e) }, "byte offset 3"},
		{"missing file", []string{filepath.Join(noTok, "none.txt")}, nil, nil, func(err error) bool { return errors.Is(err, os.ErrNotExist) }, "none.txt"},
		{"no sources", nil, nil, nil, nil, "no data"},
		{"cancelled", []string{text}, nil, cancelled, func(err error) bool { return errors.Is(err, context.Canceled) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ForModel(f.arch, f.dir)
			o.SeqLen, o.Assets = 8, t.TempDir()
			if tc.edit != nil {
				tc.edit(&o)
			}
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			_, err := Rows(ctx, tc.sources, o)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.check != nil && !tc.check(err) {
				t.Errorf("error of the wrong kind (%T): %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// TestRowsAllowLong: --allow-long-context lets --seq-len pass the
// positions; token ids need no tokenizer at all.
func TestRowsAllowLong(t *testing.T) {
	f := newFixture(t)
	var seq []int
	for i := range 200 {
		seq = append(seq, i%f.arch.Vocab)
	}
	idsFile := write(t, "long.ids", idsText(t, [][]int{seq}))
	o := ForModel(f.arch, "")
	o.SeqLen, o.AllowLong = 100, true
	p, err := Rows(context.Background(), []string{idsFile}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 2 || len(p.Rows[0]) != 101 {
		t.Errorf("%d rows of %d; want 2 of 101", len(p.Rows), len(p.Rows[0]))
	}
}

// TestForModel: the separator is the model's first end-of-text id, none
// without one.
func TestForModel(t *testing.T) {
	o := ForModel(&architecture.Model{Vocab: 10, EOS: []int{7, 9}, MaxPositions: 32}, "d")
	if o.Sep != 7 || o.Vocab != 10 || o.MaxPositions != 32 || o.ModelDir != "d" {
		t.Errorf("%+v", o)
	}
	if o := ForModel(&architecture.Model{Vocab: 10}, ""); o.Sep != -1 {
		t.Errorf("no EOS: separator %d, want -1", o.Sep)
	}
}

// TestPackEncoders: Pack takes either kind of tokenizer; a text document
// with none is an error.
func TestPackEncoders(t *testing.T) {
	bpe, err := tokenizer.TrainBPE(context.Background(), []string{sample}, tokenizer.BPETrainOptions{Merges: 30, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	docs := []Doc{{Name: "a", Text: sample}, {Name: "b", IDs: []int32{1, 2, 3}}}
	sep := bpe.Special["<|endoftext|>"]
	p, err := Pack(context.Background(), docs, TrainedBPE(bpe), PackOptions{SeqLen: 8, Sep: sep, Vocab: bpe.VocabSize()})
	if err != nil {
		t.Fatal(err)
	}
	if w := want([][]int32{bpe.Encode(sample), {1, 2, 3}}, sep, 8, 0); !reflect.DeepEqual(p.Rows, w) {
		t.Errorf("trained BPE rows differ from the reference")
	}
	if _, err := Pack(context.Background(), docs, nil, PackOptions{SeqLen: 8, Sep: sep}); err == nil || !strings.Contains(err.Error(), "a is text but no tokenizer") {
		t.Errorf("text without a tokenizer: %v", err)
	}
}

// TestReadNamesAndTexts: id sequences are named FILE, FILE:2, …; Texts
// reads text and parent: splits in order and refuses token ids.
func TestReadNamesAndTexts(t *testing.T) {
	none := t.TempDir()
	idsFile := write(t, "b.ids", idsText(t, [][]int{{1}, {2}, {3}}))
	docs, err := Read([]string{idsFile}, none, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 || docs[0].Name != idsFile || docs[2].Name != idsFile+":3" {
		t.Errorf("names %q", []string{docs[0].Name, docs[1].Name, docs[2].Name})
	}
	file := write(t, "a.txt", []byte("It is a truth universally acknowledged."))
	texts, err := Texts([]string{"parent:test", file, "parent:val"}, none)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := parent.SplitDocs(none, "test")
	val, _ := parent.SplitDocs(none, "validation")
	if len(texts) != len(test)+1+len(val) || texts[0] != test[0] || texts[len(test)].Text != "It is a truth universally acknowledged." || texts[len(test)+1] != val[0] {
		t.Errorf("Texts: %d documents out of order", len(texts))
	}
	if _, err := Texts([]string{idsFile}, none); err == nil || !strings.Contains(err.Error(), "holds token ids") {
		t.Errorf("Texts of ids: %v", err)
	}
	if !NeedsTokenizer([]string{idsFile, "parent:test"}, false) || NeedsTokenizer([]string{idsFile}, false) || !NeedsTokenizer([]string{file}, false) {
		t.Error("NeedsTokenizer")
	}
}
