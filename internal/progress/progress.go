// Package progress draws a one-line progress bar with rate and ETA for long
// work. On a terminal it redraws one line in place at most a few times per
// second; on any other writer (a pipe, a log file) it writes plain lines, one
// every few seconds, with no control codes. It prints a final line when done. A nil *Bar is valid and draws nothing, so
// library code can accept an optional bar.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar tracks progress of Total units of work.
type Bar struct {
	mu     sync.Mutex
	w      io.Writer
	label  string
	unit   string
	total  int64
	done   int64
	start  time.Time
	last   time.Time
	every  time.Duration
	now    func() time.Time
	drawn  bool
	closed bool
	term   bool  // redraw in place (a terminal); else plain lines
	shown  int64 // done at the last draw
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// New returns a bar writing to w. unit names what is counted ("tok", "B", ...).
// A nil w returns a nil bar.
func New(w io.Writer, label string, total int64, unit string) *Bar {
	if w == nil {
		return nil
	}
	b := &Bar{w: w, label: label, unit: unit, total: total, every: 5 * time.Second, now: time.Now, term: IsTerminal(w)}
	if b.term {
		b.every = 200 * time.Millisecond
	}
	b.start = b.now()
	return b
}

// Add advances the bar by n units.
func (b *Bar) Add(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	t := b.now()
	if t.Sub(b.last) >= b.every || b.done >= b.total {
		b.last = t
		b.draw(t)
	}
}

// Set sets the absolute progress.
func (b *Bar) Set(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	d := n - b.done
	b.mu.Unlock()
	b.Add(d)
}

// Done draws the final state and ends the line.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	if b.term {
		b.draw(b.now())
		fmt.Fprintln(b.w)
		return
	}
	if !b.drawn || b.shown != b.done {
		b.draw(b.now())
	}
}

// Line returns the text of the bar for the given state (exported for tests).
func Line(label string, done, total int64, unit string, elapsed time.Duration) string {
	const width = 24
	frac := 0.0
	if total > 0 {
		frac = float64(done) / float64(total)
		if frac > 1 {
			frac = 1
		}
	}
	fill := int(frac * width)
	bar := strings.Repeat("#", fill) + strings.Repeat(".", width-fill)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	eta := "?"
	if rate > 0 && total > 0 {
		eta = (time.Duration(float64(total-done) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("%s [%s] %5.1f%% %s/%s %s %s/s ETA %s", label, bar, 100*frac,
		human(float64(done)), human(float64(total)), unit, human(rate), eta)
}

func (b *Bar) draw(t time.Time) {
	b.drawn, b.shown = true, b.done
	line := Line(b.label, b.done, b.total, b.unit, t.Sub(b.start))
	if b.term {
		fmt.Fprintf(b.w, "\r%s\x1b[K", line)
		return
	}
	fmt.Fprintln(b.w, line)
}

func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}
