package tokenizer_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/tokenizer"
)

// A tiny SentencePiece-style BPE (Metaspace pre-tokenizer, byte fallback and
// a BOS template), written inline.
const tinyJSON = `{
  "added_tokens": [{"id": 0, "content": "<s>", "special": true}],
  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "byte_fallback": true, "merges": ["▁ h", "▁h i"],
    "vocab": {"<s>": 0, "▁": 1, "h": 2, "i": 3, "▁h": 4, "▁hi": 5, "<0x21>": 6}}
}`

func ExampleParse() {
	tok, err := tokenizer.Parse([]byte(tinyJSON))
	if err != nil {
		fmt.Println(err)
		return
	}
	ids, err := tok.Encode("hi hi!", true)
	if err != nil {
		fmt.Println(err)
		return
	}
	text, _ := tok.Decode(ids, true)
	bos, _ := tok.BOS()
	fmt.Println(ids, text, bos, tok.VocabSize())
	// Output: [0 5 5 6] hi hi! 0 7
}

func ExampleParse_unsupported() {
	_, err := tokenizer.Parse([]byte(`{"model": {"type": "WordPiece", "vocab": {}}}`))
	fmt.Println(err)
	// Output: tokenizer: unsupported model type "WordPiece" (supported: BPE)
}

func ExampleReadIDs() {
	seqs, err := tokenizer.ReadIDs(strings.NewReader("1 2 3\n4,5\n"))
	fmt.Println(seqs, err)

	var bin bytes.Buffer
	tokenizer.WriteIDsBinary(&bin, seqs)
	again, err := tokenizer.ReadIDs(&bin)
	fmt.Println(again, err, bin.Len())
	// Output:
	// [[1 2 3] [4 5]] <nil>
	// [[1 2 3] [4 5]] <nil> 0
}
