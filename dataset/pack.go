package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/workload"
)

// Encoder tokenizes the text of one document (no special tokens added).
type Encoder interface {
	Encode(ctx context.Context, text string) ([]int32, error)
}

// Tokenizer is the Encoder of a tokenizer.json tokenizer; it stops when ctx
// is cancelled.
func Tokenizer(t *tokenizer.Tokenizer) Encoder { return hfEncoder{t} }

type hfEncoder struct{ t *tokenizer.Tokenizer }

func (e hfEncoder) Encode(ctx context.Context, text string) ([]int32, error) {
	ids, err := e.t.EncodeContext(ctx, text, false)
	if err != nil {
		return nil, err
	}
	return toInt32(ids), nil
}

// TrainedBPE is the Encoder of a byte-level BPE trained by this program.
func TrainedBPE(t *tokenizer.TrainedBPE) Encoder { return bpeEncoder{t} }

type bpeEncoder struct{ t *tokenizer.TrainedBPE }

func (e bpeEncoder) Encode(ctx context.Context, text string) ([]int32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.t.Encode(text), nil
}

// PackOptions say how documents become rows.
type PackOptions struct {
	// SeqLen is the number of inputs per row; rows hold SeqLen+1 ids.
	SeqLen int
	// Sep ends every document (the end-of-text id); negative: none.
	Sep int32
	// Vocab is the model's vocabulary size: every token id must lie in
	// [0, Vocab) (0: not checked).
	Vocab int
	// MaxRows keeps the first MaxRows rows (0: all).
	MaxRows int
}

// Packed is the result of Pack.
type Packed struct {
	// Rows are the packed rows, each SeqLen+1 ids; at most MaxRows.
	Rows [][]int32
	// Docs and Tokens count the documents and their tokens (separators
	// included), Bytes the UTF-8 bytes of the text documents, over all the
	// data (not only the rows kept).
	Docs, Tokens, Bytes int
	// Available is the number of rows the data fills before MaxRows cuts
	// it: fewer than MaxRows means the data is short of what was asked.
	Available int
}

// ShortError is data that does not fill one row.
type ShortError struct {
	Docs, Tokens, SeqLen int
}

func (e *ShortError) Error() string {
	return fmt.Sprintf("the data (%d documents) gives %d tokens, fewer than one sequence of --seq-len+1 = %d: give more data or a smaller --seq-len",
		e.Docs, e.Tokens, e.SeqLen+1)
}

// Pack tokenizes the text documents with enc (nil when every document is
// ids already), checks every id against o.Vocab and packs the documents in
// order into rows (corpus.Pack). No row at all is a *ShortError; an id
// out of range an *IDError naming the document.
func Pack(ctx context.Context, docs []Doc, enc Encoder, o PackOptions) (*Packed, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := &Packed{Docs: len(docs)}
	seqs := make([][]int32, len(docs))
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ids := d.IDs
		if ids == nil {
			if enc == nil {
				return nil, fmt.Errorf("%s is text but no tokenizer was given for it", d.Name)
			}
			var err error
			if ids, err = enc.Encode(ctx, d.Text); err != nil {
				return nil, fmt.Errorf("tokenizing %s: %w", d.Name, err)
			}
			p.Bytes += len(d.Text)
		}
		if o.Vocab > 0 {
			for j, id := range ids {
				if id < 0 || int(id) >= o.Vocab {
					return nil, &IDError{Doc: d.Name, Pos: j, ID: id, Vocab: o.Vocab}
				}
			}
		}
		seqs[i] = ids
		p.Tokens += len(ids)
		if o.Sep >= 0 {
			p.Tokens++
		}
	}
	rows := corpus.Pack(seqs, o.Sep, o.SeqLen)
	if len(rows) == 0 {
		return nil, &ShortError{Docs: len(docs), Tokens: p.Tokens, SeqLen: o.SeqLen}
	}
	p.Available = len(rows)
	if o.MaxRows > 0 && len(rows) > o.MaxRows {
		rows = rows[:o.MaxRows]
	}
	p.Rows = rows
	return p, nil
}

// Options say how Rows reads a --data list for one model; ForModel fills
// the model's part.
type Options struct {
	PackOptions
	// Assets is the module root holding testdata/ext (for parent:train).
	Assets string
	// IDs reads every file as token ids (--ids).
	IDs bool
	// Tokenizer encodes the text sources. When nil it is loaded, only if a
	// source is text, from TokenizerFile, else ModelDir/tokenizer.json
	// (LoadTokenizer).
	Tokenizer     *tokenizer.Tokenizer
	TokenizerFile string
	ModelDir      string
	// MaxPositions is the model's max_position_embeddings: SeqLen must fit
	// it by the one context rule (workload.FitContext) unless AllowLong
	// (0: not checked).
	MaxPositions int
	AllowLong    bool
}

// ForModel returns the options of a model: its vocabulary, its first
// end-of-text id as the separator (none when it has none), its positions,
// and dir (the checkpoint directory, "" for none) for its tokenizer.
func ForModel(m *architecture.Model, dir string) Options {
	o := Options{ModelDir: dir, MaxPositions: m.MaxPositions}
	o.Vocab, o.Sep = m.Vocab, -1
	if len(m.EOS) > 0 {
		o.Sep = int32(m.EOS[0])
	}
	return o
}

// Rows reads sources (Read), tokenizes and packs them (Pack): the data of
// one model. Errors a user fixes by changing the command line are typed:
// *workload.ContextError (SeqLen past the model's positions),
// *parent.UnknownSplitError, *MismatchError (a tokenizer of another
// model), *IDError, *ShortError.
func Rows(ctx context.Context, sources []string, o Options) (*Packed, error) {
	if len(sources) == 0 {
		return nil, errors.New("dataset: no data given")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.MaxPositions > 0 {
		w := workload.FixedClosed(o.SeqLen, 0, 1)
		if _, err := w.FitContext(workload.ContextRule{MaxPositions: o.MaxPositions, AllowLong: o.AllowLong, What: fmt.Sprintf("--seq-len %d", o.SeqLen)}); err != nil {
			return nil, err
		}
	}
	docs, err := Read(sources, o.Assets, o.IDs)
	if err != nil {
		return nil, err
	}
	var enc Encoder
	tok := o.Tokenizer
	for _, d := range docs {
		if d.IDs != nil {
			continue
		}
		if tok == nil {
			if tok, err = LoadTokenizer(o.ModelDir, o.TokenizerFile); err != nil {
				return nil, err
			}
		}
		if o.Vocab > 0 && tok.VocabSize() > o.Vocab {
			return nil, &MismatchError{TokenizerVocab: tok.VocabSize(), ModelVocab: o.Vocab}
		}
		enc = Tokenizer(tok)
		break
	}
	return Pack(ctx, docs, enc, o.PackOptions)
}

// MismatchError is a tokenizer with more ids than the model's vocabulary.
type MismatchError struct{ TokenizerVocab, ModelVocab int }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("the tokenizer has %d tokens but the model's vocabulary has %d: use the tokenizer.json that belongs to the model", e.TokenizerVocab, e.ModelVocab)
}

// LoadTokenizer loads the tokenizer.json at path, or, when path is "",
// the one in the model directory dir; a directory without one is an error
// that says what to pass instead.
func LoadTokenizer(dir, path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		if dir == "" {
			return nil, errors.New("text data needs a tokenizer: pass --tokenizer, or token ids with --ids")
		}
		path = filepath.Join(dir, "tokenizer.json")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("the model directory %s has no tokenizer.json: pass --tokenizer, or token ids with --ids", dir)
		}
	}
	return tokenizer.Load(path)
}

// IDError is a token id outside the model's vocabulary.
type IDError struct {
	Doc   string
	Pos   int
	ID    int32
	Vocab int
}

func (e *IDError) Error() string {
	return fmt.Sprintf("%s: token id %d at position %d is outside the model's vocabulary of %d tokens (are these ids made with this model's tokenizer?)", e.Doc, e.ID, e.Pos, e.Vocab)
}
