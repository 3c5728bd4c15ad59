// Package dataset turns the data a command is given (its --data list) into
// what a model reads: documents, then packed rows of token ids.
//
// It is the one place where the stages read their data: importance's
// calibration text, the search's measured-proxy rows, distillation's
// training and held-out rows, and the pipeline's stages all go through Read
// and Pack (or Rows, which does both for one model).
//
// # Sources
//
// A source is one entry of a --data list:
//   - parent:SPLIT, a part of the embedded parent's text (parent.SplitDocs:
//     parent:test, parent:validation, parent:train-sample, or parent:train
//     from the corpora under the assets root);
//   - a token-id file (tokenizer.ReadIDs' text or binary form), chosen when
//     the caller says so (--ids), the name ends in .ids or the file starts
//     with tokenizer.BinaryIDsMagic: each of its sequences is one document;
//   - otherwise a UTF-8 text file, one document, cleaned (corpus.ReadText).
//
// # Packing
//
// Pack tokenizes the text documents, ends every document with the
// separator (the model's end-of-text id) and cuts the stream into rows of
// SeqLen+1 ids that overlap by one (corpus.Pack), so that a row gives
// SeqLen inputs and their next-token targets. Token ids must lie in the
// model's vocabulary, and a tokenizer with more ids than the model's
// vocabulary is refused: both mean the data was made for another model.
package dataset

import (
	"fmt"
	"os"
	"strings"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/tokenizer"
)

// Doc is one document of a source: text, or token ids already.
type Doc struct {
	// Name says where the document comes from: the file, or the corpus
	// name of a parent: document ("austen/emma/03"); id sequences after
	// the first of a file are named FILE:N (N from 1).
	Name string
	// Text is the document's text (IDs nil).
	Text string
	// IDs, when not nil, are the document's token ids.
	IDs []int32
}

// IsIDs tells whether the file at path holds token ids: flagged (--ids),
// a .ids name, or the binary magic at its start. A file that cannot be
// opened is not ids (reading it as text reports the error).
func IsIDs(path string, flagged bool) bool {
	if flagged || strings.HasSuffix(path, ".ids") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(tokenizer.BinaryIDsMagic))
	n, _ := f.Read(b)
	return string(b[:n]) == tokenizer.BinaryIDsMagic
}

// isParent tells whether a source names a part of the parent's text.
func isParent(source string) bool { return strings.HasPrefix(source, parent.DataPrefix) }

// NeedsTokenizer tells whether any of the sources is text (token-id files
// need no tokenizer); ids is the --ids flag.
func NeedsTokenizer(sources []string, ids bool) bool {
	for _, s := range sources {
		if isParent(s) || !IsIDs(s, ids) {
			return true
		}
	}
	return false
}

// Read reads the sources in order (see the package documentation); assets
// is the module root holding testdata/ext, for parent:train, and ids reads
// every file as token ids. An unknown parent: split is an
// *parent.UnknownSplitError (wrapped).
func Read(sources []string, assets string, ids bool) ([]Doc, error) {
	var docs []Doc
	for _, s := range sources {
		switch {
		case isParent(s):
			d, err := parentDocs(s, assets)
			if err != nil {
				return nil, err
			}
			for _, x := range d {
				docs = append(docs, Doc{Name: x.Name, Text: x.Text})
			}
		case IsIDs(s, ids):
			seqs, err := tokenizer.ReadIDsFile(s)
			if err != nil {
				return nil, err
			}
			for i, q := range seqs {
				name := s
				if i > 0 {
					name = fmt.Sprintf("%s:%d", s, i+1)
				}
				docs = append(docs, Doc{Name: name, IDs: toInt32(q)})
			}
		default:
			d, err := corpus.ReadText(s)
			if err != nil {
				return nil, err
			}
			docs = append(docs, Doc{Name: d.Name, Text: d.Text})
		}
	}
	return docs, nil
}

// Texts reads sources that must all be text (files or parent: splits) as
// corpus documents, in order: the form text-only consumers take (an
// in-domain evaluation suite, a tokenizer to train). A token-id file is an
// error naming it.
func Texts(sources []string, assets string) ([]corpus.Document, error) {
	var docs []corpus.Document
	for _, s := range sources {
		if isParent(s) {
			d, err := parentDocs(s, assets)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
			continue
		}
		if IsIDs(s, false) {
			return nil, fmt.Errorf("%s holds token ids; text is needed here", s)
		}
		d, err := corpus.ReadText(s)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// FromCorpus turns corpus documents into Docs.
func FromCorpus(docs []corpus.Document) []Doc {
	out := make([]Doc, len(docs))
	for i, d := range docs {
		out[i] = Doc{Name: d.Name, Text: d.Text}
	}
	return out
}

func parentDocs(source, assets string) ([]corpus.Document, error) {
	d, err := parent.SplitDocs(assets, strings.TrimPrefix(source, parent.DataPrefix))
	if err != nil {
		return nil, fmt.Errorf("data %q: %w", source, err)
	}
	return d, nil
}

func toInt32(s []int) []int32 {
	out := make([]int32, len(s))
	for i, v := range s {
		out[i] = int32(v)
	}
	return out
}
