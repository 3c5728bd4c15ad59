package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The ids in assets.md §2.3, produced there with node from the npm reference
// packages, for one string with doubled spaces, a contraction, digits, an
// accent, punctuation, newlines and trailing spaces.
func TestAssetsTableIDs(t *testing.T) {
	const text = "Hello  world's 12345 café!!\n\n  end   "
	tests := []struct {
		name       string
		addSpecial bool
		want       []int
	}{
		{"gpt2", false, []int{15496, 220, 995, 338, 17031, 2231, 40304, 3228, 628, 220, 886, 220, 220, 220}},
		{"llama2", true, []int{1, 15043, 29871, 3186, 29915, 29879, 29871, 29896, 29906, 29941, 29946, 29945, 274, 28059, 6824, 13, 13, 29871, 1095, 1678}},
		{"mistral", true, []int{1, 22557, 28705, 1526, 28742, 28713, 28705, 28740, 28750, 28770, 28781, 28782, 28345, 3946, 13, 13, 28705, 948, 2287}},
		{"qwen3", false, []int{9707, 220, 1879, 594, 220, 16, 17, 18, 19, 20, 51950, 24796, 220, 835, 262}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := refTokenizer(t, tc.name)
			got, err := tok.Encode(text, tc.addSpecial)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Encode = %v\nwant     %v", got, tc.want)
			}
			back, err := tok.Decode(got, true)
			if err != nil {
				t.Fatal(err)
			}
			if back != text {
				t.Errorf("Decode(Encode) = %q, want %q", back, text)
			}
		})
	}
}

func TestReferenceMetadata(t *testing.T) {
	tests := []struct {
		name           string
		vocab          int
		bos, eos       int // -1: unknown
		token          string
		id             int
		specialInText  string
		specialInTextI []int
	}{
		{"gpt2", 50257, -1, 50256, "Ġthe", 262, "a<|endoftext|>b", []int{64, 50256, 65}},
		{"qwen3", 151669, -1, 151645, "Hello", 9707, "<|im_start|>user", []int{151644, 872}},
		{"mistral", 32000, 1, 2, "▁Hello", 22557, "<s>[INST]", []int{1, 733, 16289, 28793}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := refTokenizer(t, tc.name)
			if got := tok.VocabSize(); got != tc.vocab {
				t.Errorf("VocabSize = %d, want %d", got, tc.vocab)
			}
			if id, ok := tok.BOS(); tc.bos >= 0 && (!ok || id != tc.bos) || tc.bos < 0 && ok {
				t.Errorf("BOS = %d, %v; want %d", id, ok, tc.bos)
			}
			if id, ok := tok.EOS(); !ok || id != tc.eos {
				t.Errorf("EOS = %d, %v; want %d", id, ok, tc.eos)
			}
			if id, ok := tok.TokenID(tc.token); !ok || id != tc.id {
				t.Errorf("TokenID(%q) = %d, %v; want %d", tc.token, id, ok, tc.id)
			}
			if s, ok := tok.Token(tc.id); !ok || s != tc.token {
				t.Errorf("Token(%d) = %q, %v; want %q", tc.id, s, ok, tc.token)
			}
			got, err := tok.Encode(tc.specialInText, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.specialInTextI) {
				t.Errorf("Encode(%q) = %v, want %v", tc.specialInText, got, tc.specialInTextI)
			}
		})
	}
}

// The examples of the HuggingFace SplitDelimiterBehavior documentation.
func TestSplitBehaviors(t *testing.T) {
	const s = "the-final--countdown"
	tests := []struct {
		behavior splitBehavior
		invert   bool
		want     []string
	}{
		{behaviorRemoved, false, []string{"the", "final", "countdown"}},
		{behaviorIsolated, false, []string{"the", "-", "final", "-", "-", "countdown"}},
		{behaviorMergedWithPrevious, false, []string{"the-", "final-", "-", "countdown"}},
		{behaviorMergedWithNext, false, []string{"the", "-final", "-", "-countdown"}},
		{behaviorContiguous, false, []string{"the", "-", "final", "--", "countdown"}},
		{behaviorRemoved, true, []string{"-", "-", "-"}},
	}
	pat := &pattern{literal: "-"}
	for _, tc := range tests {
		ms, _ := pat.findAll(s)
		spans := splitSpans(s, ms, tc.invert, tc.behavior)
		var got []string
		for _, sp := range spans {
			got = append(got, s[sp.start:sp.end])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("behavior %d invert %v: got %q, want %q", tc.behavior, tc.invert, got, tc.want)
		}
	}
}

// preTok parses one pre_tokenizer JSON and returns the pieces of s.
func preTok(t *testing.T, js, s string) []string {
	t.Helper()
	p, err := parsePreTokenizer(json.RawMessage(js), "pre_tokenizer", 0)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := p.preTokenize([]piece{{text: s, atStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, q := range ps {
		out = append(out, q.text)
	}
	return out
}

func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		name, json, in string
		want           []string
	}{
		{"bytelevel", `{"type":"ByteLevel","add_prefix_space":false}`, "Hello  world!", []string{"Hello", "Ġ", "Ġworld", "!"}},
		{"bytelevel prefix", `{"type":"ByteLevel","add_prefix_space":true}`, "Hello", []string{"ĠHello"}},
		{"bytelevel no regex", `{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}`, "a b\n", []string{"aĠbĊ"}},
		{"metaspace always", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, "Hey  you", []string{"▁Hey", "▁", "▁you"}},
		{"metaspace never", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":true}`, "Hey you", []string{"Hey", "▁you"}},
		{"metaspace nosplit", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`, "Hey you", []string{"▁Hey▁you"}},
		{"metaspace legacy", `{"type":"Metaspace","replacement":"▁","add_prefix_space":false}`, "a b", []string{"a", "▁b"}},
		{"digits", `{"type":"Digits","individual_digits":true}`, "a123b", []string{"a", "1", "2", "3", "b"}},
		{"digits grouped", `{"type":"Digits","individual_digits":false}`, "a123b45", []string{"a", "123", "b", "45"}},
		{"split regex", `{"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false}`, "x1234567", []string{"x", "123", "456", "7"}},
		{"split invert", `{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Removed","invert":true}`, "a b", []string{" "}},
		{"whitespace", `{"type":"Whitespace"}`, "Hey man!! 12", []string{"Hey", "man", "!!", "12"}},
		{"whitespacesplit", `{"type":"WhitespaceSplit"}`, " Hey  man!!\t", []string{"Hey", "man!!"}},
		{"punctuation", `{"type":"Punctuation","behavior":"Isolated"}`, "Hey, you!", []string{"Hey", ",", " you", "!"}},
		{"sequence", `{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true}]}`, "ab 12", []string{"ab", "1", "2"}},
		// Qwen2's pattern: case-insensitive contractions, single digits,
		// newlines kept with punctuation, whitespace runs before a word
		// leave one space to the word.
		{"qwen2", `{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false}`,
			"Hello  world'S 12 café!!\n\n  end   ", []string{"Hello", " ", " world", "'S", " ", "1", "2", " café", "!!\n\n", " ", " end", "   "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := preTok(t, tc.json, tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// tinyJSON builds a tokenizer.json with a character vocabulary plus merges.
func tinyJSON(t testing.TB, model map[string]any, extra map[string]any) []byte {
	t.Helper()
	f := map[string]any{"version": "1.0", "model": model}
	for k, v := range extra {
		f[k] = v
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func vocabOf(tokens ...string) map[string]int {
	v := map[string]int{}
	for i, s := range tokens {
		v[s] = i
	}
	return v
}

func TestBPEModel(t *testing.T) {
	base := []string{"<unk>", "a", "b", "c", "ab", "bc", "abc", "aa", "<0x41>", "<0x42>", "<0xC3>", "<0xA9>", "aaa"}
	tests := []struct {
		name  string
		model map[string]any
		extra map[string]any
		in    string
		want  []int
	}{
		{"merge order", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{"b c", "a bc"}}, nil, "abc", []int{6}},
		{"pair merges", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": [][]string{{"a", "b"}, {"b", "c"}}}, nil, "abc", []int{4, 3}},
		{"leftmost on ties", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{"a a"}}, nil, "aaa", []int{7, 1}},
		{"unk", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{}, "unk_token": "<unk>"}, nil, "axxb", []int{1, 0, 0, 2}},
		{"fuse unk", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{}, "unk_token": "<unk>", "fuse_unk": true}, nil, "axxb", []int{1, 0, 2}},
		{"byte fallback", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{}, "unk_token": "<unk>", "byte_fallback": true}, nil, "aéz", []int{1, 10, 11, 0}},
		{"ignore merges", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{"a a"}, "ignore_merges": true}, nil, "aaa", []int{12}},
		{"no ignore merges", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{"a a"}}, nil, "aaa", []int{7, 1}},
		{"lowercase nfkc", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{"a b"}},
			map[string]any{"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}, map[string]any{"type": "Lowercase"}}}}, "ＡB", []int{4}},
		{"strip replace", map[string]any{"type": "BPE", "vocab": vocabOf(base...), "merges": []string{}},
			map[string]any{"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
				map[string]any{"type": "Strip", "strip_left": true, "strip_right": true},
				map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "x+"}, "content": "c"}}}}, "  axxb ", []int{1, 3, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Parse(tinyJSON(t, tc.model, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.Encode(tc.in, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestAddedTokens(t *testing.T) {
	added := func(content string, id int, opts ...string) map[string]any {
		m := map[string]any{"id": id, "content": content, "special": true}
		for _, o := range opts {
			m[o] = true
		}
		return m
	}
	tests := []struct {
		name  string
		added map[string]any
		in    string
		want  []int
	}{
		{"plain", added("<x>", 3), "a<x>b", []int{0, 3, 1}},
		{"single word ok", added("[m]", 4, "single_word"), "a [m] b", []int{0, 2, 4, 2, 1}},
		{"single word inside", added("[m]", 4, "single_word"), "a[m]b", []int{0, 9, 9, 9, 1}},
		{"lstrip", added("[m]", 4, "lstrip"), "a  [m] b", []int{0, 4, 2, 1}},
		{"rstrip", added("[m]", 4, "rstrip"), "a  [m]  b", []int{0, 2, 2, 4, 1}},
		{"both", added("[m]", 4, "lstrip", "rstrip"), "a  [m]  b", []int{0, 4, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{"type": "BPE", "merges": []string{},
				"vocab": map[string]int{"a": 0, "b": 1, " ": 2, "<x>": 3, "[m]": 4, "[": 5, "m": 6, "]": 7}}
			tok, err := Parse(tinyJSON(t, m, map[string]any{"added_tokens": []any{tc.added}}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.Encode(tc.in, false)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tc.want)
			for i, id := range want { // 9 marks the characters of an unmatched "[m]"
				if id == 9 {
					want[i] = []int{5, 6, 7}[i-1]
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// An added token marked normalized is matched in the normalized text (here
// lowercased); one that is not is matched in the raw text only.
func TestAddedTokensNormalized(t *testing.T) {
	vocab := map[string]int{"a": 0, "[": 1, "m": 2, "]": 3, "x": 4, " ": 5}
	f := tinyJSON(t, map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
		map[string]any{
			"normalizer": map[string]any{"type": "Lowercase"},
			"added_tokens": []any{
				map[string]any{"id": 6, "content": "[M]", "normalized": true},
				map[string]any{"id": 7, "content": "[X]", "normalized": false},
			},
		})
	tok, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"a[M]a", []int{0, 6, 0}},
		{"a[m]a", []int{0, 6, 0}}, // the lowercased content matches too
		{"[X]a", []int{7, 0}},
		{"[x]", []int{1, 4, 3}}, // not normalized: "[x]" is not "[X]"
	} {
		got, err := tok.Encode(tc.in, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	all, err := tok.EncodeAll([]string{"a[M]a", "[X]a", "x"}, false)
	if err != nil || len(all) != 3 || !slices.Equal(all[1], []int{7, 0}) || !slices.Equal(all[2], []int{4}) {
		t.Errorf("EncodeAll = %v, %v", all, err)
	}
	if _, err := tok.EncodeAll([]string{"a", "b"}, false); err == nil || !strings.Contains(err.Error(), "text 1:") {
		t.Errorf("EncodeAll error = %v, want one naming text 1", err)
	}
}

func TestPostProcessorsAndDecoders(t *testing.T) {
	vocab := map[string]int{"<s>": 0, "</s>": 1, "▁": 2, "a": 3, "b": 4, "▁a": 5, "<0xC3>": 6, "<0xA9>": 7, "<0xFF>": 8}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"▁ a"}, "byte_fallback": true}
	added := []any{
		map[string]any{"id": 0, "content": "<s>", "special": true},
		map[string]any{"id": 1, "content": "</s>", "special": true},
	}
	llamaDecoder := map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
		map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
	}}
	tests := []struct {
		name    string
		extra   map[string]any
		in      string
		want    []int
		decoded string // Decode(want, skipSpecial=true)
	}{
		{"template", map[string]any{
			"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
			"post_processor": map[string]any{"type": "TemplateProcessing",
				"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}, map[string]any{"SpecialToken": map[string]any{"id": "</s>"}}},
				"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{0}}, "</s>": map[string]any{"id": "</s>", "ids": []int{1}}}},
			"decoder": llamaDecoder,
		}, "a é", []int{0, 5, 2, 6, 7, 1}, "a é"},
		{"roberta", map[string]any{
			"post_processor": map[string]any{"type": "RobertaProcessing", "cls": []any{"<s>", 0}, "sep": []any{"</s>", 1}},
			"decoder":        map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
		}, "ab", []int{0, 3, 4, 1}, "ab"},
		{"first scheme after special", map[string]any{
			"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
		}, "a<s>a", []int{5, 0, 3}, "▁a a"}, // no decoder: tokens joined by spaces
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"added_tokens": added}
			for k, v := range tc.extra {
				extra[k] = v
			}
			tok, err := Parse(tinyJSON(t, model, extra))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.Encode(tc.in, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.in, got, tc.want)
			}
			dec, err := tok.Decode(tc.want, true)
			if err != nil {
				t.Fatal(err)
			}
			if dec != tc.decoded {
				t.Errorf("Decode(%v) = %q, want %q", tc.want, dec, tc.decoded)
			}
		})
	}
	// Invalid UTF-8 from byte fallback decodes to one U+FFFD per byte.
	tok, err := Parse(tinyJSON(t, model, map[string]any{"decoder": llamaDecoder}))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tok.Decode([]int{3, 8, 6, 4}, false); got != "a\uFFFD\uFFFDb" {
		t.Errorf("Decode of invalid bytes = %q", got)
	}
}

func TestBadInput(t *testing.T) {
	model := func(kv ...any) map[string]any {
		m := map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1, "ab": 2}, "merges": []string{"a b"}}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name string
		data []byte
		want string // substring of the error
		as   any
	}{
		{"wordpiece", tinyJSON(t, map[string]any{"type": "WordPiece", "vocab": map[string]int{"a": 0}}, nil), `unsupported model type "WordPiece" (supported: BPE)`, new(*UnsupportedError)},
		{"unigram", tinyJSON(t, map[string]any{"type": "Unigram", "vocab": [][]any{{"a", -1.0}}}, nil), `"Unigram"`, new(*UnsupportedError)},
		{"wordlevel", tinyJSON(t, map[string]any{"type": "WordLevel", "vocab": map[string]int{"a": 0}}, nil), `"WordLevel"`, new(*UnsupportedError)},
		{"pretokenizer", tinyJSON(t, model(), map[string]any{"pre_tokenizer": map[string]any{"type": "UnicodeScripts"}}), `unsupported pre_tokenizer type "UnicodeScripts" (supported: ByteLevel, Split, Metaspace`, new(*UnsupportedError)},
		{"nested", tinyJSON(t, model(), map[string]any{"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Bogus"}}}}), `pre_tokenizer.pretokenizers[0] type "Bogus"`, new(*UnsupportedError)},
		{"normalizer", tinyJSON(t, model(), map[string]any{"normalizer": map[string]any{"type": "Precompiled"}}), `unsupported normalizer type "Precompiled"`, new(*UnsupportedError)},
		{"decoder", tinyJSON(t, model(), map[string]any{"decoder": map[string]any{"type": "WordPiece"}}), `unsupported decoder type "WordPiece"`, new(*UnsupportedError)},
		{"prefix", tinyJSON(t, model("continuing_subword_prefix", "##"), nil), `continuing_subword_prefix "##"`, new(*UnsupportedError)},
		{"dropout", tinyJSON(t, model("dropout", 0.1), nil), `unsupported model.dropout "0.1"`, new(*UnsupportedError)},
		{"suffix", tinyJSON(t, model("end_of_word_suffix", "</w>"), nil), `end_of_word_suffix "</w>"`, new(*UnsupportedError)},
		{"behavior", tinyJSON(t, model(), map[string]any{"pre_tokenizer": map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"}}), `behavior "Sideways"`, new(*UnsupportedError)},
		{"invalid json", []byte(`{"model": {"type": "BPE", "vocab": {"a": 0,}}}`), "byte 44", new(*FormatError)},
		{"not json", []byte(`hello`), "invalid JSON", new(*FormatError)},
		{"no model", []byte(`{}`), "model: missing", new(*FormatError)},
		{"merge unknown", tinyJSON(t, model("merges", []string{"a b", "a c"}), nil), `model.merges[1]: merge "a" "c": token "c" is not in the vocabulary`, new(*FormatError)},
		{"merge result unknown", tinyJSON(t, model("merges", []string{"b a"}), nil), `merged token "ba" is not in the vocabulary`, new(*FormatError)},
		{"merge shape", tinyJSON(t, model("merges", []string{"a b c"}), nil), `model.merges[0]: merge "a b c" must be two tokens`, new(*FormatError)},
		{"merge pair shape", tinyJSON(t, model("merges", [][]string{{"a", "b"}, {"a", "b", "c"}}), nil), `model.merges[1]: merge ["a" "b" "c"] must be two tokens`, new(*FormatError)},
		{"merge mixed", []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", 7]}}`), `model.merges[1]: merge must be "a b" or ["a", "b"]`, new(*FormatError)},
		{"unk unknown", tinyJSON(t, model("unk_token", "<unk>"), nil), `unk_token "<unk>" is not in the vocabulary`, new(*FormatError)},
		{"bad regex", tinyJSON(t, model(), map[string]any{"pre_tokenizer": map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(unclosed"}}}), `compiling regex "(unclosed"`, new(*FormatError)},
		{"vocab type", []byte(`{"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}}`), "model.vocab", new(*FormatError)},
		{"negative id", tinyJSON(t, model("vocab", map[string]int{"a": -1}), nil), "id -1 outside", new(*FormatError)},
		{"dup id", tinyJSON(t, model("vocab", map[string]int{"a": 0, "b": 0}), nil), "id 0 is used by both", new(*FormatError)},
		{"template", tinyJSON(t, model(), map[string]any{"post_processor": map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}}}}), `special token "<s>" is not in special_tokens`, new(*FormatError)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			switch target := tc.as.(type) {
			case **UnsupportedError:
				if !errors.As(err, target) {
					t.Errorf("error %T is not *UnsupportedError", err)
				}
			case **FormatError:
				if !errors.As(err, target) {
					t.Errorf("error %T is not *FormatError", err)
				}
			}
		})
	}
}

func TestEncodeDecodeErrors(t *testing.T) {
	tok, err := Parse(tinyJSON(t, map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1}, "merges": []string{}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tok.Encode("ab\xffa", false)
	var ue *InvalidUTF8Error
	if !errors.As(err, &ue) || ue.Offset != 2 || ue.Byte != 0xff {
		t.Errorf("Encode(invalid UTF-8) error = %v, want offset 2", err)
	}
	if !strings.Contains(fmt.Sprint(err), "byte offset 2") {
		t.Errorf("error %q does not name the byte offset", err)
	}
	_, err = tok.Encode("abc", false)
	var ce *UnknownCharError
	if !errors.As(err, &ce) || ce.Char != 'c' {
		t.Errorf("Encode(unknown char) error = %v", err)
	}
	_, err = tok.Decode([]int{0, 7}, false)
	var ie *UnknownIDError
	if !errors.As(err, &ie) || ie.ID != 7 || ie.Index != 1 {
		t.Errorf("Decode(bad id) error = %v", err)
	}
	if got, err := tok.Decode([]int{0, 1}, false); err != nil || got != "a b" {
		t.Errorf("Decode without decoder = %q, %v; want tokens joined by spaces", got, err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json does not exist") {
		t.Errorf("Load(empty dir) error = %v", err)
	}
}

// Long Metaspace lines are cut before "▁" only when no token has "▁" after
// another rune, and the cut gives the same ids as the whole-line merge.
func TestMetaspaceChunking(t *testing.T) {
	for _, name := range []string{"mistral", "llama2"} {
		t.Run(name, func(t *testing.T) {
			if tok := refTokenizer(t, name); tok.model.chunkBefore != '▁' {
				t.Errorf("%s: chunking not enabled", name)
			}
		})
	}
	vocab := map[string]int{"▁": 0, "a": 1, "▁a": 2, "a▁": 3, "a▁a": 4}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"▁ a", "a ▁", "a▁ a"}}
	tok, err := Parse(tinyJSON(t, model, nil))
	if err != nil {
		t.Fatal(err)
	}
	if tok.model.chunkBefore != 0 {
		t.Fatal("chunking enabled although a token has ▁ after another rune")
	}
	// Whole-word BPE: "▁ a" (rank 0) merges first, which leaves "a" + "▁a"
	// with no merge between them: [1 2].
	if got, _ := tok.Encode("a▁a", false); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("Encode = %v, want [1 2]", got)
	}
	delete(vocab, "a▁")
	delete(vocab, "a▁a")
	model["merges"] = []string{"▁ a"}
	tok, err = Parse(tinyJSON(t, model, nil))
	if err != nil {
		t.Fatal(err)
	}
	if tok.model.chunkBefore != '▁' {
		t.Fatal("chunking not enabled")
	}
	long := strings.Repeat("a▁▁a▁", 1000)
	got, err := tok.Encode(long, false)
	if err != nil {
		t.Fatal(err)
	}
	tok.model.chunkBefore = 0
	tok.model.mu.Lock()
	clear(tok.model.cache)
	tok.model.mu.Unlock()
	want, _ := tok.Encode(long, false)
	if !slices.Equal(got, want) {
		t.Errorf("chunked encoding differs from whole-line encoding")
	}
}
