package tokenizer

import (
	"os"
	"testing"
)

// BenchmarkLoad measures parsing the Qwen3 tokenizer.json (11 MB, 151,643
// tokens, 151,387 merges); MB/s is of JSON.
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(extFile(b, tokPaths["qwen3"]))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
