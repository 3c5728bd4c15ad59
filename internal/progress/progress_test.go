package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	got := Line("prune", 500, 1000, "B", 10*time.Second)
	for _, want := range []string{"prune", " 50.0%", "500/1.0k B", "50/s", "ETA 10s", "############............"} {
		if !strings.Contains(got, want) {
			t.Errorf("Line = %q, lacks %q", got, want)
		}
	}
	if got := Line("x", 0, 0, "tok", 0); !strings.Contains(got, "ETA ?") {
		t.Errorf("unknown total: %q", got)
	}
}

func TestBarDrawsAndEnds(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	b := New(&buf, "work", 4, "it")
	b.now = func() time.Time { return now }
	b.start = now
	for i := 0; i < 4; i++ {
		now = now.Add(time.Second)
		b.Add(1)
	}
	b.Done()
	b.Done() // idempotent
	out := buf.String()
	if !strings.Contains(out, "100.0%") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("output %q", out)
	}
	var nilBar *Bar
	nilBar.Add(1)
	nilBar.Done()
	if New(nil, "x", 1, "") != nil {
		t.Error("New(nil) should return nil")
	}
}
