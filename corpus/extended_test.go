package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMobyDickReal(t *testing.T) {
	docs, err := MobyDick(filepath.Join(moduleRoot(t), MobyDickDB))
	if errors.Is(err, ErrMissing) {
		t.Skipf("Moby Dick absent (%v); run scripts/fetch-assets.sh", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := docs[1].Text; !strings.HasPrefix(got, "Call me Ishmael. Some years ago--never mind how long precisely--") {
		t.Errorf("chapter 1 starts %q", got[:80])
	}
	if docs[0].Name != "melville/mobydick/000" || !strings.HasPrefix(docs[0].Text, "ETYMOLOGY.") {
		t.Errorf("front matter %s starts %q", docs[0].Name, docs[0].Text[:40])
	}
	last := docs[len(docs)-1]
	if last.Name != "melville/mobydick/136" || !strings.HasSuffix(last.Text, "only found another orphan.") {
		t.Errorf("epilogue %s ends %q", last.Name, last.Text[len(last.Text)-60:])
	}
	total := 0
	for _, d := range docs {
		total += len(d.Text)
		for _, bad := range []string{"Gutenberg", "\r"} {
			if strings.Contains(d.Text, bad) {
				t.Errorf("%s contains %q", d.Name, bad)
			}
		}
	}
	// 1,257,296 bytes with the Gutenberg header, licence and CRLF.
	if total < 1_150_000 || total > 1_230_000 {
		t.Errorf("Moby Dick: %d bytes of text, want about 1.19 MB", total)
	}
}

func TestKJVReal(t *testing.T) {
	docs, err := KJV(filepath.Join(moduleRoot(t), KJVFile))
	if errors.Is(err, ErrMissing) {
		t.Skipf("King James Bible absent (%v); run scripts/fetch-assets.sh", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	first, last := docs[0], docs[len(docs)-1]
	if first.Name != "kjv/genesis/001" || !strings.HasPrefix(first.Text, "In the beginning God created the heaven and the earth.\n\nAnd the earth was without form, and void; and darkness was upon the face of the deep.") {
		t.Errorf("%s starts %q", first.Name, first.Text[:120])
	}
	if last.Name != "kjv/revelationofjohn/022" && !strings.HasPrefix(last.Name, "kjv/revelation") {
		t.Errorf("last chapter is %s", last.Name)
	}
	if !strings.HasSuffix(last.Text, "The grace of our Lord Jesus Christ be with you all. Amen.") {
		t.Errorf("%s ends %q", last.Name, last.Text[len(last.Text)-80:])
	}
	seen := map[string]bool{}
	verses := 0
	for _, d := range docs {
		if seen[d.Name] {
			t.Errorf("duplicate chapter %s", d.Name)
		}
		seen[d.Name] = true
		verses += strings.Count(d.Text, "\n\n") + 1
	}
	if verses != 31102 { // the verse count of the KJV
		t.Errorf("%d verses, want 31102", verses)
	}
}

func TestKJVFormatErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ text, want string }{
		{"  1 no heading\n", ":1: text before the first chapter heading"},
		{"\nGenesis 1\n\nnot a verse\n", ":4: want a verse"},
		{"\nGenesis 1\n\n  1 In the beginning.\n", "found 1 chapters, want 1189"},
	} {
		p := filepath.Join(dir, "kjv.txt")
		if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := KJV(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("KJV(%q): %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
	if _, err := KJV(filepath.Join(dir, "absent.txt")); !errors.Is(err, ErrMissing) {
		t.Errorf("absent file: %v, want ErrMissing", err)
	}
}

// TestExtendedSplitKeepsTest checks that the added corpora leave the test
// split of the original corpus exactly as it was, and pins the extended
// split in testdata/split-extended.golden (-update to rewrite).
func TestExtendedSplitKeepsTest(t *testing.T) {
	root := moduleRoot(t)
	docs, err := Extended(root)
	if errors.Is(err, ErrMissing) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	orig, err := All(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Split(orig, Test)
	got := SplitBy(docs, Test, ExtendedAssign)
	if len(got) != len(want) {
		t.Fatalf("extended test split has %d documents, the original %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("test document %d: %s, want %s (or its text changed)", i, got[i].Name, want[i].Name)
		}
	}
	for _, p := range []Part{Train, Validation} {
		o := Split(orig, p)
		e := SplitBy(docs[:len(orig)], p, ExtendedAssign)
		if len(o) != len(e) {
			t.Errorf("%s: the original documents' split changed (%d → %d)", p, len(o), len(e))
		}
	}
	var b strings.Builder
	counts, bytes := map[Part]int{}, map[Part]int{}
	for _, d := range docs[len(orig):] {
		p := ExtendedAssign(d.Name)
		counts[p]++
		bytes[p] += len(d.Text)
		if p != Train {
			fmt.Fprintf(&b, "%s\t%s\t%d\n", p, d.Name, len(d.Text))
		}
	}
	for _, d := range docs {
		p := ExtendedAssign(d.Name)
		counts[p+10]++
		bytes[p+10] += len(d.Text)
	}
	for _, p := range []Part{Train, Validation, Test} {
		fmt.Fprintf(&b, "added %s: %d documents, %d bytes\n", p, counts[p], bytes[p])
	}
	for _, p := range []Part{Train, Validation, Test} {
		fmt.Fprintf(&b, "total %s: %d documents, %d bytes\n", p, counts[p+10], bytes[p+10])
	}
	golden := filepath.Join("testdata", "split-extended.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestExtendedSplitKeepsTest -update)", err)
	}
	if b.String() != string(w) {
		t.Errorf("extended split differs from %s (-update to accept):\n%s", golden, b.String())
	}
}

func TestInterleave(t *testing.T) {
	in := []Document{{Name: "a/1"}, {Name: "a/2"}, {Name: "a/3"}, {Name: "b/1"}, {Name: "c/1"}, {Name: "c/2"}}
	var got []string
	for _, d := range Interleave(in) {
		got = append(got, d.Name)
	}
	want := "a/1 b/1 c/1 a/2 c/2 a/3"
	if strings.Join(got, " ") != want {
		t.Errorf("Interleave: %v, want %s", got, want)
	}
	if len(Interleave(nil)) != 0 {
		t.Error("Interleave(nil) is not empty")
	}
}

// TestSplits: the built-in corpora by name, as the train command takes
// them: training and validation documents that do not overlap, the
// extended corpus holding the builtin one; an unknown name is an error.
func TestSplits(t *testing.T) {
	if _, _, err := Splits("wiki", moduleRoot(t)); err == nil || !strings.Contains(err.Error(), "builtin, extended") {
		t.Errorf("unknown corpus: %v", err)
	}
	count := map[string][2]int{}
	for _, name := range []string{"builtin", "extended"} {
		tr, val, err := Splits(name, moduleRoot(t))
		if errors.Is(err, ErrMissing) {
			t.Skipf("%s corpus absent (%v); run scripts/fetch-assets.sh", name, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, d := range tr {
			seen[d.Name] = true
		}
		for _, d := range val {
			if seen[d.Name] {
				t.Errorf("%s: %s in both splits", name, d.Name)
			}
		}
		count[name] = [2]int{len(tr), len(val)}
	}
	b, e := count["builtin"], count["extended"]
	if b[0] == 0 || b[1] == 0 || e[0] <= b[0] || e[1] <= b[1] {
		t.Errorf("train/validation documents: builtin %v, extended %v", b, e)
	}
}
