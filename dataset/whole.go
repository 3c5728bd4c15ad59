package dataset

import (
	"fmt"
	"os"
	"strings"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/tokenizer"
)

// Whole is one source read as a whole, the form a perplexity measurement
// scores: the text (Text) or token-id sequences (IDs, each scored on its
// own).
type Whole struct {
	Name string
	Text []byte
	IDs  [][]int
}

// ReadWhole reads one source as a whole: parent:SPLIT is that part of the
// embedded parent's text as one contiguous text (an unknown split is a
// *parent.UnknownSplitError, wrapped), a token-id file (IsIDs with ids) its
// sequences, any other file its bytes as they are. assets is the module
// root holding testdata/ext, for parent:train.
func ReadWhole(source, assets string, ids bool) (*Whole, error) {
	if part, ok := strings.CutPrefix(source, parent.DataPrefix); ok {
		text, err := parent.SplitText(assets, part)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return &Whole{Name: source, Text: []byte(text)}, nil
	}
	if IsIDs(source, ids) {
		seqs, err := tokenizer.ReadIDsFile(source)
		if err != nil {
			return nil, err
		}
		return &Whole{Name: source, IDs: seqs}, nil
	}
	text, err := os.ReadFile(source)
	if err != nil {
		return nil, err
	}
	return &Whole{Name: source, Text: text}, nil
}
