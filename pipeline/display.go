package pipeline

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"
)

// Display renders Progress events for a person: on a terminal one line per
// stage redrawn in place, elsewhere plain lines (a start line, a line every
// few seconds while a stage runs, and an end line), so logs stay readable.
type Display struct {
	w        io.Writer
	terminal bool
	every    time.Duration
	mu       sync.Mutex
	last     time.Time
	lastMsg  string
	open     bool // a redrawn line is on screen (terminal)
	now      func() time.Time
}

// NewDisplay returns a display writing to w; terminal selects in-place
// redraws.
func NewDisplay(w io.Writer, terminal bool) *Display {
	d := &Display{w: w, terminal: terminal, every: 5 * time.Second, now: time.Now}
	if terminal {
		d.every = 200 * time.Millisecond
	}
	return d
}

// Handle is a Progress callback.
func (d *Display) Handle(p Progress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	head := fmt.Sprintf("[%d/%d %s]", p.Index, p.Count, p.Stage)
	switch p.State {
	case StateRunning:
		t := d.now()
		line := head + " " + progressText(p)
		if t.Sub(d.last) < d.every && p.Msg == d.lastMsg {
			return
		}
		d.last, d.lastMsg = t, p.Msg
		if d.terminal {
			fmt.Fprintf(d.w, "\r%s\x1b[K", line)
			d.open = true
			return
		}
		fmt.Fprintln(d.w, line)
	default:
		if d.open {
			fmt.Fprint(d.w, "\r\x1b[K")
			d.open = false
		}
		d.last, d.lastMsg = time.Time{}, ""
		switch p.State {
		case StateStart:
			fmt.Fprintf(d.w, "%s running (%s)\n", head, p.Msg)
		case StateReused:
			fmt.Fprintf(d.w, "%s reused: %s\n", head, p.Msg)
		case StateDone:
			fmt.Fprintf(d.w, "%s done in %s\n", head, roundDur(p.Elapsed))
		case StateFailed:
			fmt.Fprintf(d.w, "%s failed after %s: %s\n", head, roundDur(p.Elapsed), p.Msg)
		case StateInterrupted:
			fmt.Fprintf(d.w, "%s interrupted after %s\n", head, roundDur(p.Elapsed))
		}
	}
}

func progressText(p Progress) string {
	var parts []string
	if p.Total > 0 {
		parts = append(parts, fmt.Sprintf("%5.1f%% %s/%s %s", 100*math.Min(1, p.Done/p.Total), human(p.Done), human(p.Total), p.Unit))
	} else if p.Done > 0 {
		parts = append(parts, fmt.Sprintf("%s %s", human(p.Done), p.Unit))
	}
	if p.Elapsed > 0 && p.Done > 0 && p.Unit != "" {
		parts = append(parts, human(p.Done/p.Elapsed.Seconds())+" "+p.Unit+"/s")
	}
	if p.ETA >= 0 {
		parts = append(parts, "ETA "+roundDur(p.ETA))
	}
	if p.Msg != "" {
		parts = append(parts, p.Msg)
	}
	return strings.Join(parts, "  ")
}

func roundDur(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func human(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
