package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// byteLevelTiny builds a small GPT-2-style tokenizer: the 256 byte-level
// runes, a few dozen merges of common English, the GPT-2 split regex and an
// <|endoftext|> special token.
func byteLevelTiny(tb testing.TB) []byte {
	tb.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[byteToStr[b]] = len(vocab)
	}
	var merges [][2]string
	add := func(a, b string) {
		a, b = byteLevelEncode(a), byteLevelEncode(b)
		if _, ok := vocab[a+b]; ok {
			return
		}
		merges = append(merges, [2]string{a, b})
		vocab[a+b] = len(vocab)
	}
	for _, m := range [][2]string{
		{" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"}, {"in", "g"}, {"e", "r"}, {" ", "a"},
		{"o", "n"}, {" a", "n"}, {" an", "d"}, {"r", "e"}, {" ", " "}, {"  ", "  "}, {"\n", "\n"},
		{"\xc3", "\xa9"}, {"é", "t"}, {"\xe4", "\xb8"}, {"1", "2"}, {"12", "3"}, {"'", "s"}, {"!", "!"},
	} {
		add(m[0], m[1])
	}
	vocab["<|endoftext|>"] = len(vocab)
	f := map[string]any{
		"added_tokens":  []any{map[string]any{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// metaspaceTiny builds a small Llama-2-style tokenizer: <0x00>..<0xFF>
// byte-fallback tokens, a few characters and merges, the Prepend + Replace
// normalizer and the Replace/ByteFallback/Fuse/Strip decoder.
func metaspaceTiny(tb testing.TB) []byte {
	tb.Helper()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := 0; b < 256; b++ {
		vocab[fmt.Sprintf("<0x%02X>", b)] = len(vocab)
	}
	for _, t := range []string{"▁", "a", "b", "t", "h", "e", "é", "日", "▁t", "he", "▁the", "▁▁", "▁▁▁▁"} {
		vocab[t] = len(vocab)
	}
	f := map[string]any{
		"added_tokens": []any{map[string]any{"id": 1, "content": "<s>", "special": true}, map[string]any{"id": 2, "content": "</s>", "special": true}},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{1}}}},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
			"merges": []string{"▁ t", "h e", "▁t he", "▁ ▁", "▁▁ ▁▁"}},
	}
	b, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func FuzzEncode(f *testing.F) {
	tok, err := Parse(byteLevelTiny(f))
	if err != nil {
		f.Fatal(err)
	}
	meta, err := Parse(metaspaceTiny(f))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"", "the and there", "Hello  world's 12345 café!!\n\n  end   ", "日本語 😀 👨‍👩‍👧",
		"a<|endoftext|>b", "\t\r\n \u00a0x", "<|endoftext|><|endoftext|>", "'s'S'", "étéété 123123",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := tok.Encode(s, true)
		if !utf8.ValidString(s) {
			if err == nil {
				t.Fatalf("Encode accepted invalid UTF-8 %q", s)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%q): %v", s, err)
		}
		back, err := tok.Decode(ids, false)
		if err != nil {
			t.Fatalf("Decode(%v): %v", ids, err)
		}
		if back != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, back, ids)
		}
		// The SentencePiece-style tokenizer round-trips too (skipping the
		// BOS it adds), except for a literal "▁", which decodes as a space,
		// and the special tokens written in the text.
		if strings.Contains(s, "▁") || strings.Contains(s, "<s>") || strings.Contains(s, "</s>") {
			return
		}
		ids, err = meta.Encode(s, true)
		if err != nil {
			t.Fatalf("metaspace Encode(%q): %v", s, err)
		}
		back, err = meta.Decode(ids, true)
		if err != nil {
			t.Fatalf("metaspace Decode(%v): %v", ids, err)
		}
		if back != s {
			t.Fatalf("metaspace Decode(Encode(%q)) = %q (ids %v)", s, back, ids)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(byteLevelTiny(f))
	seeds := []string{
		`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`,
		`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]],"unk_token":"a","fuse_unk":true,"byte_fallback":true}}`,
		`{"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
		  "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
		  "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[0],"tokens":["<s>"]}}},
		  "added_tokens":[{"id":0,"content":"<s>","special":true,"normalized":false}],
		  "model":{"type":"BPE","vocab":{"<s>":0,"▁":1,"a":2,"▁a":3,"<0x62>":4},"merges":["▁ a"],"byte_fallback":true}}`,
		`{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},{"type":"Digits","individual_digits":true}]},
		  "added_tokens":[{"id":1,"content":"[m]","single_word":true,"lstrip":true,"rstrip":true,"normalized":true}],
		  "normalizer":{"type":"NFKC"},
		  "model":{"type":"BPE","vocab":{"a":0,"[m]":1,"▁":2},"merges":[],"unk_token":"a","ignore_merges":true}}`,
		`{"model":{"type":"WordPiece","vocab":{}}}`,
		`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a c"]}}`,
		`{"post_processor":{"type":"RobertaProcessing","cls":["<s>",0],"sep":["</s>",0]},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`,
		`{"model": {"type": "BPE", "vocab": {"a": 0,}}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		// Every accessor must work on whatever Parse accepted.
		tok.VocabSize()
		tok.BOS()
		tok.EOS()
		tok.AddedTokens()
		for _, s := range []string{"", "a b", "ab [m] 12345", "<s>a", "é\u00a0日"} {
			ids, err := tok.Encode(s, true)
			if err != nil {
				continue
			}
			if _, err := tok.Decode(ids, true); err != nil {
				t.Fatalf("Decode(Encode(%q) = %v): %v", s, ids, err)
			}
		}
		for id := -1; id <= tok.VocabSize(); id++ {
			tok.Token(id)
			tok.Decode([]int{id}, false)
		}
	})
}
