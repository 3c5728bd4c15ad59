package corpus

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// rw writes R XDR serialization, independently of the reader, for tests.
type rw struct{ bytes.Buffer }

func (w *rw) int(v int32) { binary.Write(&w.Buffer, binary.BigEndian, v) }
func (w *rw) header(ver int32) {
	w.WriteString("X\n")
	w.int(ver)
	w.int(0x040201)
	w.int(0x030500)
	if ver == 3 {
		w.int(5)
		w.WriteString("UTF-8")
	}
}
func (w *rw) charsxp(s string) { w.int(0x00040009); w.int(int32(len(s))); w.WriteString(s) }
func (w *rw) strsxp(attr bool, ss ...string) {
	f := int32(16)
	if attr {
		f |= 1 << 9
	}
	w.int(f)
	w.int(int32(len(ss)))
	for _, s := range ss {
		w.charsxp(s)
	}
}

// namesAttr writes a one-cell pairlist tagged "names" holding a character vector.
func (w *rw) namesAttr(firstSym bool, names ...string) {
	w.int(2 | 1<<10)
	if firstSym {
		w.int(1)
		w.charsxp("names")
	} else {
		w.int(1<<8 | 255) // reference 1: the symbol "names" seen earlier
	}
	w.strsxp(false, names...)
	w.int(254)
}

func rdxFor(t *testing.T, objs map[string][]string, order []string) (rdx, rdb []byte) {
	var db bytes.Buffer
	locs := map[string][2]int32{}
	for _, n := range order {
		var o rw
		o.header(3)
		o.strsxp(false, objs[n]...)
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(o.Bytes())
		zw.Close()
		var rec bytes.Buffer
		binary.Write(&rec, binary.BigEndian, uint32(o.Len()))
		rec.Write(z.Bytes())
		locs[n] = [2]int32{int32(db.Len()), int32(rec.Len())}
		db.Write(rec.Bytes())
	}
	var w rw
	w.header(3)
	w.int(19 | 1<<9) // list(variables=, references=, compressed=)
	w.int(3)
	w.int(19 | 1<<9)
	w.int(int32(len(order)))
	for _, n := range order {
		w.int(13)
		w.int(2)
		w.int(locs[n][0])
		w.int(locs[n][1])
	}
	w.namesAttr(true, order...)
	w.int(19)
	w.int(0)
	w.int(10)
	w.int(1)
	w.int(1)
	w.namesAttr(false, "variables", "references", "compressed")
	var gz bytes.Buffer
	g := gzip.NewWriter(&gz)
	g.Write(w.Bytes())
	g.Close()
	return gz.Bytes(), db.Bytes()
}

func TestLazyLoadDBSynthetic(t *testing.T) {
	objs := map[string][]string{"alpha": {"one", "two"}, "beta": {"", "Chapter 1", "café"}}
	rdx, rdb := rdxFor(t, objs, []string{"alpha", "beta"})
	db, err := ParseLazyLoadDB(rdx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if got := db.Names(); !reflect.DeepEqual(got, []string{"alpha", "beta"}) {
		t.Fatalf("names %v", got)
	}
	for n, want := range objs {
		v, err := db.Object(n)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range v.Strings {
			got = append(got, *s)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q want %q", n, got, want)
		}
	}
	if _, err := db.Object("gamma"); err == nil || !strings.Contains(err.Error(), `no object "gamma"`) {
		t.Errorf("missing object: err = %v", err)
	}
}

func TestUnserializeRErrors(t *testing.T) {
	var ok rw
	ok.header(2)
	ok.strsxp(false, "a", "b")
	full := ok.Bytes()
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"magic", []byte("A\n\x00\x00\x00\x02"), "not XDR"},
		{"truncated", full[:len(full)-1], "unexpected end of data at byte"},
		{"version", append([]byte("X\n"), 0, 0, 0, 9), "unsupported serialization version 9"},
		{"type", append(append([]byte{}, full[:14]...), 0, 0, 0, 99), "unsupported R object type 99"},
		{"length", append(append([]byte{}, full[:14]...), 0, 0, 0, 16, 0x7f, 0, 0, 0), "bad vector length"},
		{"ref", append(append([]byte{}, full[:14]...), 0, 0, 5, 0xff), "reference 5 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnserializeR(bytes.NewReader(tc.in))
			var fe *RFormatError
			if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want RFormatError containing %q", err, tc.want)
			}
		})
	}
	v, err := UnserializeR(bytes.NewReader(full))
	if err != nil || len(v.Strings) != 2 || *v.Strings[1] != "b" {
		t.Fatalf("valid input: %v %v", v, err)
	}
}

func FuzzUnserializeR(f *testing.F) {
	var w rw
	w.header(3)
	w.strsxp(true, "x", "y")
	w.namesAttr(true, "p", "q")
	f.Add(w.Bytes())
	rdx, _ := rdxFor(nil, map[string][]string{"a": {"b"}}, []string{"a"})
	if zr, err := gzip.NewReader(bytes.NewReader(rdx)); err == nil {
		var b bytes.Buffer
		b.ReadFrom(zr)
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := UnserializeR(bytes.NewReader(b))
		if err == nil {
			_ = v.Names()
		}
	})
}

func FuzzParseLazyLoadDB(f *testing.F) {
	rdx, rdb := rdxFor(nil, map[string][]string{"a": {"b", "c"}}, []string{"a"})
	f.Add(rdx, rdb)
	f.Fuzz(func(t *testing.T, rdx, rdb []byte) {
		db, err := ParseLazyLoadDB(rdx, rdb)
		if err != nil {
			return
		}
		for _, n := range db.Names() {
			db.Object(n)
		}
	})
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, ok := shareddata.ModuleRoot()
	if !ok {
		t.Fatal("no module root")
	}
	return root
}

func TestAustenReal(t *testing.T) {
	base := filepath.Join(moduleRoot(t), AustenDB)
	if _, err := os.Stat(base + ".rdx"); err != nil {
		t.Skipf("Jane Austen corpus absent (%v); run scripts/fetch-assets.sh", err)
	}
	db, err := OpenLazyLoadDB(base)
	if err != nil {
		t.Fatal(err)
	}
	if got := db.Names(); !reflect.DeepEqual(got, AustenNovels) {
		t.Fatalf("objects %v, want %v", got, AustenNovels)
	}
	// assets.md §4: 73,422 lines over the six novels (the R data frame
	// austen_books() has one row per line).
	lines := 0
	for _, n := range AustenNovels {
		v, err := db.Object(n)
		if err != nil {
			t.Fatal(err)
		}
		lines += len(v.Strings)
	}
	if lines != 73422 {
		t.Errorf("%d lines, want 73422", lines)
	}
	docs, err := Austen(base)
	if err != nil {
		t.Fatal(err)
	}
	// One document per chapter plus front matter: 55+48+31+24+61+50 chapters.
	if len(docs) < 269 || len(docs) > 275 {
		t.Errorf("%d chapter documents, want 269..275", len(docs))
	}
	words := 0
	for _, d := range docs {
		words += len(strings.Fields(d.Text))
	}
	// assets.md: 717,537 words (tokenizer-defined); whitespace words differ a little.
	if words < 700000 || words > 740000 {
		t.Errorf("%d words, want about 717,537", words)
	}
	if !strings.HasPrefix(docs[1].Text, "Emma Woodhouse, handsome, clever, and rich") {
		t.Errorf("Emma chapter 1 starts %q", docs[1].Text[:60])
	}
}

func TestSOTUReal(t *testing.T) {
	docs, err := SOTU(filepath.Join(moduleRoot(t), SOTUDir))
	if errors.Is(err, ErrMissing) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 233 {
		t.Errorf("%d addresses, want 233", len(docs))
	}
	words := 0
	for _, d := range docs {
		words += len(strings.Fields(d.Text))
		if strings.ContainsAny(d.Text, "\u2019\u201c\r\t") {
			t.Errorf("%s: not cleaned", d.Name)
		}
	}
	// assets.md §4: 1,794,883 words.
	if words < 1.75e6 || words > 1.85e6 {
		t.Errorf("%d words, want about 1.79M", words)
	}
	if docs[0].Name != "sotu/1790_george_washington_n" || !strings.HasPrefix(docs[0].Text, "Fellow-Citizens of the Senate") {
		t.Errorf("first address %s: %.40q", docs[0].Name, docs[0].Text)
	}
}

func TestSplitDeterministicAndBalanced(t *testing.T) {
	var docs []Document
	for i := 0; i < 2000; i++ {
		docs = append(docs, Document{Name: fmt.Sprintf("doc/%d", i)})
	}
	n := map[Part]int{}
	for _, d := range docs {
		p := DefaultAssign(d.Name)
		if p != DefaultAssign(d.Name) {
			t.Fatal("not deterministic")
		}
		n[p]++
	}
	for p, lo := range map[Part]int{Train: 1700, Validation: 60, Test: 60} {
		if n[p] < lo {
			t.Errorf("%v: %d documents of 2000", p, n[p])
		}
	}
	if got := len(Split(docs, Train)) + len(Split(docs, Validation)) + len(Split(docs, Test)); got != len(docs) {
		t.Errorf("parts cover %d of %d", got, len(docs))
	}
	// Golden assignment: changing the hash would silently move documents
	// between train and test.
	if p := Assign("sotu/1790_george_washington_n", 5, 5); p != DefaultAssign("sotu/1790_george_washington_n") {
		t.Error("Assign and DefaultAssign disagree")
	}
}

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a\r\nb", "a b"},
		{"It\u2019s \u201cfine\u201d\u2014ok\u2026", "It's \"fine\"--ok..."},
		{"line one\nline two\n\n\n\nnext  para  ", "line one line two\n\nnext para"},
		{"_emphasis_ here\x02\x7f", "emphasis here"},
		{"  \n \t \n", ""},
		{"tab\tsep", "tab sep"},
	}
	for _, tc := range tests {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Clean(Clean(tc.in)); got != Clean(tc.in) {
			t.Errorf("Clean not idempotent on %q", tc.in)
		}
	}
}

func TestPack(t *testing.T) {
	rows := Pack([][]int32{{1, 2, 3}, {4, 5}, {6}}, 0, 3)
	// stream: 1 2 3 0 4 5 0 6 0  (9 tokens) -> rows of 4 overlapping by 1
	want := [][]int32{{1, 2, 3, 0}, {0, 4, 5, 0}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("got %v want %v", rows, want)
	}
	if r := Pack([][]int32{{1, 2}}, -1, 2); len(r) != 0 {
		t.Errorf("short stream gave %v", r)
	}
	if r := Pack([][]int32{{1, 2, 3}}, -1, 2); !reflect.DeepEqual(r, [][]int32{{1, 2, 3}}) {
		t.Errorf("no separator: %v", r)
	}
	if r := Pack([][]int32{{1}}, 0, 0); r != nil {
		t.Errorf("seqLen 0: %v", r)
	}
}

func ExamplePack() {
	rows := Pack([][]int32{{10, 11, 12}, {20, 21}}, 0, 3)
	for _, r := range rows {
		fmt.Println("inputs", r[:3], "targets", r[1:])
	}
	// Output:
	// inputs [10 11 12] targets [11 12 0]
	// inputs [0 20 21] targets [20 21 0]
}

func ExampleClean() {
	fmt.Printf("%q\n", Clean("\u201cWell,\u201d said\nEmma.\r\n\r\nNext."))
	// Output:
	// "\"Well,\" said Emma.\n\nNext."
}

func TestCheckUTF8AndReadText(t *testing.T) {
	if err := CheckUTF8("x", []byte("héllo")); err != nil {
		t.Errorf("valid: %v", err)
	}
	err := CheckUTF8("f.txt", []byte("abc\xffdef"))
	var ee *EncodingError
	if !errors.As(err, &ee) || ee.Offset != 3 || ee.Byte != 0xff || !strings.Contains(err.Error(), "byte offset 3") {
		t.Errorf("invalid: %v", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "e.txt")
	os.WriteFile(p, []byte(" \n\t\n"), 0o644)
	var em *EmptyError
	if _, err := ReadText(p); !errors.As(err, &em) {
		t.Errorf("empty: %v", err)
	}
	os.WriteFile(p, []byte("Hello\r\nworld"), 0o644)
	if d, err := ReadText(p); err != nil || d.Text != "Hello world" {
		t.Errorf("ReadText = %q, %v", d.Text, err)
	}
}

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestSplitGolden pins the validation and test documents of the real
// corpora: the parent model's held-out figures depend on them. Run with
// -update after an intended change.
func TestSplitGolden(t *testing.T) {
	docs, err := All(moduleRoot(t))
	if errors.Is(err, ErrMissing) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	counts := map[Part]int{}
	bytes := map[Part]int{}
	for _, d := range docs {
		p := DefaultAssign(d.Name)
		counts[p]++
		bytes[p] += len(d.Text)
		if p != Train {
			fmt.Fprintf(&b, "%s\t%s\t%d\n", p, d.Name, len(d.Text))
		}
	}
	for _, p := range []Part{Train, Validation, Test} {
		fmt.Fprintf(&b, "total %s: %d documents, %d bytes\n", p, counts[p], bytes[p])
	}
	golden := filepath.Join("testdata", "split.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSplitGolden -update)", err)
	}
	if b.String() != string(want) {
		t.Errorf("split differs from %s (-update to accept):\n%s", golden, b.String())
	}
}
