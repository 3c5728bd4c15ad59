package engine

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
)

// mappedRSS returns the resident bytes of this process's mappings of file
// (/proc/self/smaps).
func mappedRSS(t *testing.T, file string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var rss int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[len(fields)-1] == file
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			rss += kb << 10
		}
	}
	return rss
}

// TestStreamBoundsResidentSet: a streamed forward pass gives each layer's
// pages back, so afterwards little of the mapped checkpoint is resident
// (the last pages touched: where file pages are mapped as 2 MiB huge pages,
// a layer's neighbours share them); without streaming all of it is. Eight
// layers of 6.8 MB each, a 4 MB embedding.
func TestStreamBoundsResidentSet(t *testing.T) {
	a := parentShapedArch(func(int) bool { return true })
	a.Hidden = 512
	for _, l := range a.Layers {
		l.Attention.Heads, l.Attention.KVHeads, l.Attention.HeadDim = 8, 8, 64
		l.MLP.Width = 1536
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := Init(context.Background(), a, dir, InitOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.EvalSymlinks(filepath.Join(dir, checkpoint.SingleFileName))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(file)
	toks := make([]int32, 64)
	for i := range toks {
		toks[i] = int32(i * 61 % 4096)
	}
	for _, stream := range []bool{false, true} {
		m, err := LoadWith(dir, LoadOptions{Mapped: true, Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		m.SetInference(true)
		if _, err := m.Forward(toks, 1, 64); err != nil {
			t.Fatal(err)
		}
		rss := mappedRSS(t, file)
		m.Close()
		switch {
		case stream && rss > st.Size()/3:
			t.Errorf("streamed: %d of the checkpoint's %d bytes resident after a forward pass", rss, st.Size())
		case !stream && rss < st.Size()*3/4:
			t.Errorf("not streamed: only %d of %d bytes resident after a forward pass: the measurement is off", rss, st.Size())
		}
		t.Logf("stream=%v: %d of %d bytes of the mapped checkpoint resident", stream, rss, st.Size())
	}
}
