package tokenizer

import (
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// slowMatches runs the regex with regexp2 (the reference for the
// hand-written matchers).
func slowMatches(tb testing.TB, src, s string) [][2]int {
	tb.Helper()
	p := &pattern{re: regexp2.MustCompile(src, regexp2.None), source: src}
	ms, err := p.findAll(s)
	if err != nil {
		tb.Fatal(err)
	}
	return ms
}

var fastPatterns = []string{gpt2SplitPattern, qwen2Pattern, llama3Pattern}

func checkFast(t *testing.T, s string) {
	t.Helper()
	for _, src := range fastPatterns {
		want := slowMatches(t, src, s)
		got := fastMatcher(src)(s)
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %.20q… on %q:\n got %v\nwant %v", src, s, pieces(s, got), pieces(s, want))
		}
	}
}

func pieces(s string, ms [][2]int) []string {
	var out []string
	for _, m := range ms {
		out = append(out, s[m[0]:m[1]])
	}
	return out
}

func TestFastSplitMatchesRegexp2(t *testing.T) {
	cases := []string{
		"", " ", "  ", "a", "Hello  world's 12345 café!!\n\n  end   ", "I'M DON'T it'S we'Re 'll 'LL",
		"x\r\n\r\n  \n\t y", "  \n", "\n  ", " \t!", "!!\n\r\n", " !?\n", "'", "''s", " 's", "a'sb",
		"٣٤٥ ١٢ ⅷ ½", "日本語 テキスト", "😀😀 a😀b", "\u00a0\u2009x\u3000 y", "a\u0301b", "\t\tx", "x \t",
		"1234567", "a1b22c333", " 1", "\u2028\u2029", "\u0085x",
	}
	for _, c := range cases {
		checkFast(t, c)
	}
	// Every golden text, when the fixtures are present.
	for _, name := range []string{"gpt2", "qwen3"} {
		for _, it := range readGolden(t, name) {
			checkFast(t, it.Text)
		}
	}
}

func FuzzFastSplit(f *testing.F) {
	for _, s := range []string{"Hello  world's 12345 café!!\n\n  end   ", "'Re\r\n \t x", "😀 a", "\u00a0\u0085 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		checkFast(t, s)
	})
}

// BenchmarkSplit measures the hand-written GPT-2 and Qwen2 split matchers on
// real prose and reports their speed-up over regexp2 (the peer, timed on the
// same text in the same run) as "x-regexp2".
func BenchmarkSplit(b *testing.B) {
	text := sotuText(b)
	for _, tc := range []struct{ name, src string }{{"gpt2", gpt2SplitPattern}, {"qwen2", qwen2Pattern}} {
		b.Run(tc.name, func(b *testing.B) {
			fast := fastMatcher(tc.src)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				fast(text)
			}
			perFast := b.Elapsed().Seconds() / float64(b.N)
			slow := &pattern{re: regexp2.MustCompile(tc.src, regexp2.None), source: tc.src}
			start := time.Now()
			if _, err := slow.findAll(text); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(time.Since(start).Seconds()/perFast, "x-regexp2")
		})
	}
}
