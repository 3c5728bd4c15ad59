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
	b.term = true // as on a terminal: one line redrawn in place
	b.every = 200 * time.Millisecond
	b.now = func() time.Time { return now }
	b.start = now
	for i := 0; i < 4; i++ {
		now = now.Add(time.Second)
		b.Add(1)
	}
	b.Done()
	b.Done() // idempotent
	out := buf.String()
	if !strings.Contains(out, "100.0%") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || strings.Count(out, "\r") != 5 {
		t.Errorf("output %q", out)
	}
	var nilBar *Bar
	nilBar.Add(1)
	nilBar.Done()
	if New(nil, "x", 1, "") != nil {
		t.Error("New(nil) should return nil")
	}
}

// Off a terminal (a pipe, a log file) the bar writes plain lines: no
// carriage returns or escape codes, at most one line per interval, and the
// final state exactly once.
func TestBarPlainOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	b := New(&buf, "work", 10, "it")
	if b.term {
		t.Fatal("a bytes.Buffer is not a terminal")
	}
	b.now = func() time.Time { return now }
	b.start = now
	for i := 0; i < 10; i++ {
		now = now.Add(time.Second)
		b.Add(1)
	}
	b.Done()
	b.Done()
	out := buf.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("control codes off a terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// Drawn at 1 s (first), 6 s (5 s later) and 10 s (done); Done adds nothing.
	if len(lines) != 3 || !strings.Contains(lines[2], "100.0%") || !strings.Contains(lines[0], " 10.0%") {
		t.Errorf("lines %q", lines)
	}
}
