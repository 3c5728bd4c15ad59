// Command gentext writes the parent's embedded text (parent/text/*.jsonl.gz)
// from the corpora that scripts/fetch-assets.sh unpacks: run it through
// `go generate ./parent` from the module root, with the assets present.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/autocompress/autocompress/parent"
)

func main() {
	assets := flag.String("assets", "..", "module root holding testdata/ext")
	out := flag.String("out", "text", "directory to write the .jsonl.gz files to")
	flag.Parse()
	if err := parent.WriteText(*assets, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gentext:", err)
		os.Exit(1)
	}
}
