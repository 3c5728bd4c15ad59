package parent_test

import (
	"fmt"

	"github.com/autocompress/autocompress/parent"
)

// The held-out text is embedded: no assets are needed (the assets
// directory is only read for the full "train" part).
func ExampleSplitDocs() {
	docs, err := parent.SplitDocs("", "test")
	if err != nil {
		fmt.Println(err)
		return
	}
	text, _ := parent.SplitText("", "test")
	fmt.Printf("%d documents, %d bytes; the first is %s\n", len(docs), len(text), docs[0].Name)
	// Output: 23 documents, 864820 bytes; the first is sotu/1790_george_washington_n
}
