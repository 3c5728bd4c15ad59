package parent

import (
	"fmt"

	"github.com/autocompress/autocompress/corpus"
)

// SplitText returns the text of one part of the parent's data split (train,
// validation or test, as corpus.ParsePart reads them): the documents of
// corpus.All under assets (the module root holding testdata/ext, unpacked
// by scripts/fetch-assets.sh) that corpus.DefaultAssign puts in that part,
// in corpus order, joined by corpus.Join. It is the text README.md's
// held-out figures are measured on; `autocompress eval --data parent:test`
// reads it.
func SplitText(assets, part string) (string, error) {
	p, err := corpus.ParsePart(part)
	if err != nil {
		return "", fmt.Errorf("parent: %w", err)
	}
	docs, err := corpus.All(assets)
	if err != nil {
		return "", fmt.Errorf("parent: the %s split is cut from the training corpora: %w", p, err)
	}
	return corpus.Join(corpus.Split(docs, p)), nil
}
