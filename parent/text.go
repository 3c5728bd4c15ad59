package parent

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/internal/output"
)

// DataPrefix names the parent's text as data: "parent:test",
// "parent:validation" (or "parent:val"), "parent:train-sample",
// "parent:train". Every command that reads data resolves such names with
// SplitDocs or SplitText.
const DataPrefix = "parent:"

// TrainSample is the name of the embedded training sample.
const TrainSample = "train-sample"

// TrainSampleEvery is the stride of the training sample: it holds the
// train split's documents 0, TrainSampleEvery, 2·TrainSampleEvery, … in
// corpus order, whole.
const TrainSampleEvery = 5

// SplitNames lists the names SplitDocs resolves (besides the aliases "val"
// and "valid" for validation), embedded ones first.
var SplitNames = []string{"test", "validation", TrainSample, "train"}

// embeddedText maps the embedded names to their files in text/.
var embeddedText = map[string]string{
	"test":       "text/test.jsonl.gz",
	"validation": "text/validation.jsonl.gz",
	TrainSample:  "text/train-sample.jsonl.gz",
}

//go:generate go run ./internal/gentext -assets .. -out text

//go:embed text/*.jsonl.gz
var textFiles embed.FS

// UnknownSplitError reports a name SplitDocs does not know.
type UnknownSplitError struct{ Name string }

func (e *UnknownSplitError) Error() string {
	return fmt.Sprintf("parent: unknown split %q (want test, validation, train-sample or train)", e.Name)
}

// canonical returns the canonical name of a split name, or "".
func canonical(name string) string {
	if name == TrainSample {
		return TrainSample
	}
	p, err := corpus.ParsePart(name)
	if err != nil {
		return ""
	}
	return p.String()
}

// SplitDocs returns the documents of one part of the parent's data, in
// corpus order: "test" and "validation" (or "val") are the held-out parts
// of the split (corpus.ExtendedAssign over corpus.Extended, the corpus the
// parent was trained on; its test part is corpus.DefaultAssign's over
// corpus.All, document for document), and "train-sample"
// every TrainSampleEvery-th document of the train part; these three are
// embedded in the binary and need no assets. "train" is the whole train
// part, cut from the corpora under assets (the module root holding
// testdata/ext, unpacked by scripts/fetch-assets.sh); without them the
// error wraps corpus.ErrMissing. An unknown name is an *UnknownSplitError.
func SplitDocs(assets, name string) ([]corpus.Document, error) {
	c := canonical(name)
	switch c {
	case "":
		return nil, &UnknownSplitError{Name: name}
	case "train":
		docs, err := corpus.Extended(assets)
		if err != nil {
			return nil, fmt.Errorf("parent: the full train split is not embedded (parent:%s, every %dth of its documents, is); it is cut from the corpora under %s: %w",
				TrainSample, TrainSampleEvery, filepath.Join(assets, "testdata/ext"), err)
		}
		return corpus.SplitBy(docs, corpus.Train, corpus.ExtendedAssign), nil
	}
	b, err := textFiles.ReadFile(embeddedText[c])
	if err != nil {
		return nil, fmt.Errorf("parent: %w", err) // cannot happen: the files are embedded
	}
	docs, err := decodeDocs(b)
	if err != nil {
		return nil, fmt.Errorf("parent: embedded %s text: %w", c, err)
	}
	return docs, nil
}

// SplitText returns the text of SplitDocs(assets, name): the documents
// joined by corpus.Join, so that packing sees the same document
// boundaries. README.md's held-out figures are measured on it; `autocompress
// eval --data parent:test` reads it.
func SplitText(assets, name string) (string, error) {
	docs, err := SplitDocs(assets, name)
	if err != nil {
		return "", err
	}
	return corpus.Join(docs), nil
}

// BuildText cuts the embedded texts out of the corpora under assets: for
// each name of embeddedText (keyed by file name in text/), the gzipped
// documents that SplitDocs returns for it. go generate (gentext) writes
// them; TestEmbeddedTextRegenerates compares them with the embedded ones.
func BuildText(assets string) (map[string][]byte, error) {
	all, err := corpus.Extended(assets)
	if err != nil {
		return nil, fmt.Errorf("parent: %w", err)
	}
	train := corpus.SplitBy(all, corpus.Train, corpus.ExtendedAssign)
	var sample []corpus.Document
	for i := 0; i < len(train); i += TrainSampleEvery {
		sample = append(sample, train[i])
	}
	parts := map[string][]corpus.Document{
		"test":       corpus.SplitBy(all, corpus.Test, corpus.ExtendedAssign),
		"validation": corpus.SplitBy(all, corpus.Validation, corpus.ExtendedAssign),
		TrainSample:  sample,
	}
	out := make(map[string][]byte, len(parts))
	for name, docs := range parts {
		b, err := encodeDocs(docs)
		if err != nil {
			return nil, fmt.Errorf("parent: %s: %w", name, err)
		}
		out[filepath.Base(embeddedText[name])] = b
	}
	return out, nil
}

// WriteText writes BuildText(assets) into dir (parent/text), each file
// atomically.
func WriteText(assets, dir string) error {
	files, err := BuildText(assets)
	if err != nil {
		return err
	}
	for name, b := range files {
		if err := output.WriteFile(filepath.Join(dir, name), b, true); err != nil {
			return fmt.Errorf("parent: %w", err)
		}
	}
	return nil
}

// textDoc is one line of an embedded text file.
type textDoc struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// encodeDocs writes docs as gzipped JSON lines ({"name","text"}), with no
// gzip name or time, so the output depends on the documents only.
func encodeDocs(docs []corpus.Document) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	for _, d := range docs {
		if err := enc.Encode(textDoc{d.Name, d.Text}); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeDocs reads encodeDocs's form.
func decodeDocs(b []byte) ([]corpus.Document, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bufio.NewReader(zr))
	var docs []corpus.Document
	for {
		var d textDoc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, corpus.Document{Name: d.Name, Text: d.Text})
	}
	if err := zr.Close(); err != nil {
		return nil, err
	}
	return docs, nil
}
