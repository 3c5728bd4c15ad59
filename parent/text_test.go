package parent

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/internal/shareddata"
)

// TestEmbeddedText: the embedded parts need no assets (the assets dir here
// is empty) and have the sizes README.md gives, and each is in its part of
// the split.
func TestEmbeddedText(t *testing.T) {
	none := t.TempDir()
	for _, c := range []struct {
		name        string
		docs, bytes int
		part        corpus.Part
	}{
		{"test", 23, 864820, corpus.Test},
		{"val", 166, 1316807, corpus.Validation},
		{"validation", 166, 1316807, corpus.Validation},
		{TrainSample, 329, 3847812, corpus.Train},
	} {
		docs, err := SplitDocs(none, c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		text, err := SplitText(none, c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(docs) != c.docs || len(text) != c.bytes {
			t.Errorf("%s: %d documents, %d bytes; want %d and %d (README.md)", c.name, len(docs), len(text), c.docs, c.bytes)
		}
		if text != corpus.Join(docs) {
			t.Errorf("%s: SplitText is not corpus.Join of SplitDocs", c.name)
		}
		seen := map[string]bool{}
		for _, d := range docs {
			if p := corpus.ExtendedAssign(d.Name); p != c.part || seen[d.Name] || d.Text == "" {
				t.Errorf("%s: document %q is in %v (want %v), repeated %v or empty", c.name, d.Name, p, c.part, seen[d.Name])
			}
			seen[d.Name] = true
		}
	}
	// The sample and the validation part cover all four corpora; the test
	// part only the original two (corpus.ExtendedAssign).
	for _, c := range []struct {
		name    string
		sources []string
	}{
		{TrainSample, []string{"sotu", "austen", "melville", "kjv"}},
		{"validation", []string{"sotu", "austen", "melville", "kjv"}},
		{"test", []string{"sotu", "austen"}},
	} {
		docs, _ := SplitDocs(none, c.name)
		by := map[string]int{}
		for _, d := range docs {
			src, _, _ := strings.Cut(d.Name, "/")
			by[src]++
		}
		for _, s := range c.sources {
			if by[s] == 0 {
				t.Errorf("%s: no documents of %s (%v)", c.name, s, by)
			}
		}
		if len(by) != len(c.sources) {
			t.Errorf("%s: documents of %d sources %v, want %v", c.name, len(by), by, c.sources)
		}
	}
}

// TestSplitDocsErrors: the full train split without assets names the
// script that fetches them and the embedded sample; an unknown name says
// which are known.
func TestSplitDocsErrors(t *testing.T) {
	_, err := SplitDocs(t.TempDir(), "train")
	if !errors.Is(err, corpus.ErrMissing) || !strings.Contains(err.Error(), "scripts/fetch-assets.sh") || !strings.Contains(err.Error(), "parent:train-sample") {
		t.Errorf("train without assets: %v", err)
	}
	for _, name := range []string{"dev", "", "Test", "train_sample"} {
		_, err := SplitText(".", name)
		var u *UnknownSplitError
		if !errors.As(err, &u) || u.Name != name || !strings.Contains(err.Error(), "want test, validation, train-sample or train") {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestEmbeddedTextRegenerates: with the assets present, the generator
// gives exactly the embedded documents (compared after decompression, byte
// for byte: gzip's output may change between Go releases, its content may
// not), and the train sample is every TrainSampleEvery-th document of the
// full train split.
func TestEmbeddedTextRegenerates(t *testing.T) {
	root, _ := shareddata.ModuleRoot()
	files, err := BuildText(root)
	if errors.Is(err, corpus.ErrMissing) {
		t.Skipf("corpus absent (scripts/fetch-assets.sh), cannot regenerate parent/text: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(embeddedText) {
		t.Fatalf("generator wrote %d files, %d are embedded", len(files), len(embeddedText))
	}
	for name, path := range embeddedText {
		emb, err := textFiles.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		gen, ok := files[filepath.Base(path)]
		if !ok {
			t.Fatalf("generator wrote no %s", path)
		}
		a, b := gunzip(t, emb), gunzip(t, gen)
		if !bytes.Equal(a, b) {
			n := 0
			for n < min(len(a), len(b)) && a[n] == b[n] {
				n++
			}
			t.Errorf("%s: embedded %s (%d bytes) differs from the regenerated text (%d bytes) at byte %d: run go generate ./parent", name, path, len(a), len(b), n)
		}
	}
	train, err := SplitDocs(root, "train")
	if err != nil {
		t.Fatal(err)
	}
	sample, _ := SplitDocs(root, TrainSample)
	if want := (len(train) + TrainSampleEvery - 1) / TrainSampleEvery; len(sample) != want || len(train) != 1645 {
		t.Fatalf("train %d documents (README.md: 1,645), sample %d (want %d)", len(train), len(sample), want)
	}
	for i, d := range sample {
		if train[i*TrainSampleEvery] != d {
			t.Fatalf("sample document %d is %q, train document %d is %q", i, d.Name, i*TrainSampleEvery, train[i*TrainSampleEvery].Name)
		}
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
