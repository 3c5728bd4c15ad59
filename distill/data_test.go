package distill

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/parent"
)

// TestReadDocs: parent: names read the embedded parent's text through
// parent.SplitDocs (no assets: the directory is empty), files read one
// document each, in source order; parent:train without the corpora and
// unknown names fail with the resolver's errors.
func TestReadDocs(t *testing.T) {
	none := t.TempDir()
	file := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(file, []byte("It is a truth universally acknowledged."), 0o644); err != nil {
		t.Fatal(err)
	}
	docs, err := ReadDocs([]string{"parent:test", file, "parent:val"}, none)
	if err != nil {
		t.Fatal(err)
	}
	test, _ := parent.SplitDocs(none, "test")
	val, _ := parent.SplitDocs(none, "validation")
	if len(docs) != len(test)+1+len(val) || len(test) != 23 || len(val) != 166 {
		t.Fatalf("%d documents; want 23 + 1 + 166", len(docs))
	}
	if docs[0] != test[0] || docs[23].Text != "It is a truth universally acknowledged." || docs[24] != val[0] {
		t.Errorf("documents out of order: %q, %q, %q", docs[0].Name, docs[23].Name, docs[24].Name)
	}
	if _, err := ReadDocs([]string{"parent:train"}, none); !errors.Is(err, corpus.ErrMissing) {
		t.Errorf("parent:train without assets: %v", err)
	}
	var u *parent.UnknownSplitError
	if _, err := ReadDocs([]string{"parent:dev"}, none); !errors.As(err, &u) {
		t.Errorf("parent:dev: %v", err)
	}
}
