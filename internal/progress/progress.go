// Package progress is how long work tells how far it has got, and the one
// place that draws it for a person.
//
// # Reporting
//
// Every long-running library function takes a Func (with its
// context.Context) and reports Events through it: the work's stage, units
// done of a total, and how many of those were done before this process
// started (a resumed run). Libraries never draw: a nil Func discards
// everything, and Task is the producer's helper that counts and stamps the
// elapsed time.
//
// # Drawing
//
// Terminal draws Events for a person: on a terminal one line redrawn in place
// at most a few times per second, on any other writer (a pipe, a log file)
// plain lines, one every few seconds, with no control codes. Stage changes
// and notes are lines of their own. The rate and ETA count only the units
// done in this process (Event.Rate), so right after a resume they are not
// inflated by the resumed steps.
package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/autocompress/autocompress/internal/human"
)

// State says what an Event reports.
type State string

// States of an Event.
const (
	Running  State = ""         // work under way: Done of Total units
	Started  State = "started"  // a stage begins; Msg says why it runs
	Reused   State = "reused"   // a stage's earlier result is reused; Msg says why
	Finished State = "finished" // a stage ended; Elapsed says how long it took
	Failed   State = "failed"   // a stage failed; Msg is the error
	// Interrupted is a stage stopped by its cancelled context (Ctrl-C,
	// SIGTERM): not a failure of the stage.
	Interrupted State = "interrupted"
	Note        State = "note" // a message worth keeping (Msg)
)

// Event is one report of long work.
type Event struct {
	// Stage names the work ("importance", "train"); Phase, when set, the
	// part of it under way ("searching global shapes", "parent lambada").
	Stage string
	Phase string
	// Index and Count say which stage of a multi-stage run this is (1-based);
	// 0 outside one.
	Index, Count int
	State        State
	// Done of Total units (Total 0: unknown). Resumed of the Done units were
	// done before this process started (by the run it resumes); the rate and
	// the ETA count only Done-Resumed.
	Done, Total, Resumed int64
	Unit                 string
	Msg                  string        // what it is doing, why a stage runs, the error
	Elapsed              time.Duration // since this process began the work
}

// Rate returns the units per second done in this process: the resumed units
// are not counted. 0 when unknown.
func (e Event) Rate() float64 {
	n := e.Done - e.Resumed
	if s := e.Elapsed.Seconds(); s > 0 && n > 0 {
		return float64(n) / s
	}
	return 0
}

// ETA returns the time left at this process's rate; ok is false when it is
// unknown (no total, nothing done yet in this process).
func (e Event) ETA() (eta time.Duration, ok bool) {
	r := e.Rate()
	if e.Total <= 0 || r <= 0 {
		return 0, false
	}
	left := max(e.Total-e.Done, 0)
	return time.Duration(float64(left) / r * float64(time.Second)), true
}

// Func receives the Events of long work. It is the one progress type of
// every long-running library function; a nil Func discards them.
type Func func(Event)

// Report passes e to f; it does nothing when f is nil.
func (f Func) Report(e Event) {
	if f != nil {
		f(e)
	}
}

// Phase returns a Func that reports f's events as phase of the work (when
// they name none), e.g. which model and task an evaluation scores. A nil f
// returns nil.
func (f Func) Phase(phase string) Func {
	if f == nil {
		return nil
	}
	return func(e Event) {
		if e.Phase == "" {
			e.Phase = phase
		}
		f(e)
	}
}

// Notef reports a Note of stage.
func (f Func) Notef(stage, format string, a ...any) {
	if f != nil {
		f(Event{Stage: stage, State: Note, Msg: fmt.Sprintf(format, a...)})
	}
}

// Task counts one piece of work and reports it through a Func, stamping
// the elapsed time. A nil *Task (from Start with a nil Func) does nothing.
// Its methods are safe for concurrent use and report in order (the Func is
// called with the Task's lock held, so it must not call back into it).
type Task struct {
	mu    sync.Mutex
	f     Func
	ev    Event
	start time.Time
	now   func() time.Time
}

// Start begins reporting the work e describes (its Stage, Phase, Total and
// Unit; Done starts at e.Done) through f. It reports nothing until the first
// Add or Set. A nil f returns nil.
func Start(f Func, e Event) *Task {
	if f == nil {
		return nil
	}
	e.State = Running
	return &Task{f: f, ev: e, start: time.Now(), now: time.Now}
}

// Resume records that n units were done before this process started (by
// the run this one resumes) and reports them: they count in Done, not in the
// rate or the ETA. Resume(0) does nothing.
func (t *Task) Resume(n int64) {
	if t == nil || n == 0 {
		return
	}
	t.mu.Lock()
	t.ev.Resumed = n
	t.mu.Unlock()
	t.Set(n, "")
}

// Add advances the work by n units and reports it.
func (t *Task) Add(n int64) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ev.Done += n
	t.f(t.stamp())
}

// Set sets the units done, with a message (a loss, what is measured), and
// reports it.
func (t *Task) Set(done int64, msg string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ev.Done, t.ev.Msg = done, msg
	t.f(t.stamp())
}

// Notef reports a Note of the task's stage.
func (t *Task) Notef(format string, a ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.f(Event{Stage: t.ev.Stage, Phase: t.ev.Phase, State: Note, Msg: fmt.Sprintf(format, a...)})
}

func (t *Task) stamp() Event {
	e := t.ev
	e.Elapsed = t.now().Sub(t.start)
	return e
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

// Terminal draws Events for a person on w. Its Report method is a Func.
// A nil *Terminal draws nothing.
type Terminal struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool          // redraw in place; else plain lines
	every   time.Duration // at most one running line per interval
	now     func() time.Time
	last    time.Time
	label   string // of the running line last drawn or held back
	open    bool   // tty: a running line is on screen without its newline
	full    bool   // the line on screen shows finished work
	pending *Event // off a tty: the last running event not drawn
}

// NewTerminal returns a renderer writing to w: in place on a terminal,
// plain lines elsewhere. A nil w returns nil.
func NewTerminal(w io.Writer) *Terminal {
	if w == nil {
		return nil
	}
	return newTerminal(w, IsTerminal(w))
}

func newTerminal(w io.Writer, tty bool) *Terminal {
	t := &Terminal{w: w, tty: tty, every: 5 * time.Second, now: time.Now}
	if tty {
		t.every = 200 * time.Millisecond
	}
	return t
}

// Report draws e: a running line (throttled; a new stage or finished work is
// drawn at once), or a line of its own for a stage's start, reuse, end,
// failure or a note.
func (t *Terminal) Report(e Event) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.State != Running {
		t.closeLine(false)
		fmt.Fprintln(t.w, stateLine(e))
		return
	}
	label := labelOf(e)
	now := t.now()
	final := e.Total > 0 && e.Done >= e.Total
	if label != t.label {
		t.closeLine(true)
	} else if !final && now.Sub(t.last) < t.every {
		t.pending = &e
		return
	}
	t.label, t.last, t.pending = label, now, nil
	t.draw(e, final)
}

// End ends an open running line, keeping its last state (drawn if it was
// held back). Call it when the work is over.
func (t *Terminal) End() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closeLine(true)
}

// closeLine ends the running line: keep leaves it (with its last state) on
// screen, otherwise an unfinished line on a terminal is erased.
func (t *Terminal) closeLine(keep bool) {
	if t.pending != nil {
		if keep || !t.tty {
			t.draw(*t.pending, false)
		}
		t.pending = nil
	}
	if t.open {
		if keep || t.full {
			fmt.Fprintln(t.w)
		} else {
			fmt.Fprint(t.w, "\r\x1b[K")
		}
		t.open = false
	}
	t.label, t.full = "", false
}

func (t *Terminal) draw(e Event, final bool) {
	line := Line(e)
	if t.tty {
		fmt.Fprintf(t.w, "\r%s\x1b[K", line)
		t.open, t.full = true, final
		return
	}
	fmt.Fprintln(t.w, line)
}

// labelOf returns "[i/n stage] phase", or "stage phase" outside a run.
func labelOf(e Event) string {
	l := e.Stage
	if e.Count > 0 {
		l = fmt.Sprintf("[%d/%d %s]", e.Index, e.Count, e.Stage)
	}
	if e.Phase != "" {
		l += " " + e.Phase
	}
	return l
}

func stateLine(e Event) string {
	l := labelOf(e)
	switch e.State {
	case Started:
		return fmt.Sprintf("%s running (%s)", l, e.Msg)
	case Reused:
		return fmt.Sprintf("%s reused: %s", l, e.Msg)
	case Finished:
		if e.Msg != "" {
			return fmt.Sprintf("%s done in %s; %s", l, human.Duration(e.Elapsed), e.Msg)
		}
		return fmt.Sprintf("%s done in %s", l, human.Duration(e.Elapsed))
	case Failed:
		return fmt.Sprintf("%s failed after %s: %s", l, human.Duration(e.Elapsed), e.Msg)
	case Interrupted:
		return fmt.Sprintf("%s interrupted after %s", l, human.Duration(e.Elapsed))
	}
	return l + " " + e.Msg
}

// Bytes is the Unit of an Event that counts bytes: its line writes sizes
// in binary units ("1.12 GiB/14.96 GiB", "104.5 MiB/s") rather than as a
// count followed by "B" (which would read as billions).
const Bytes = "B"

// amount writes v units: sizes for Bytes, else a count and the unit.
func amount(v float64, unit string) string {
	if unit == Bytes {
		return human.Bytes(int64(math.Round(v)))
	}
	return strings.TrimSpace(human.Count(v) + " " + unit)
}

// Line returns the text of a running Event: its label, a bar and the
// fraction when the total is known, the count, this process's rate, the ETA
// and the message.
func Line(e Event) string {
	const width = 24
	var parts []string
	if e.Total > 0 {
		frac := math.Min(1, math.Max(0, float64(e.Done)/float64(e.Total)))
		fill := int(frac * width)
		// "30/100 step", but "1.04 GiB/14.96 GiB": a size carries its unit.
		done := human.Count(float64(e.Done))
		if e.Unit == Bytes {
			done = amount(float64(e.Done), e.Unit)
		}
		parts = append(parts, fmt.Sprintf("%s [%s%s] %5.1f%% %s/%s", labelOf(e), strings.Repeat("#", fill), strings.Repeat(".", width-fill),
			100*frac, done, amount(float64(e.Total), e.Unit)))
	} else if e.Done > 0 {
		parts = append(parts, labelOf(e), amount(float64(e.Done), e.Unit))
	} else {
		parts = append(parts, labelOf(e))
	}
	if r := e.Rate(); r > 0 && e.Unit != "" {
		parts = append(parts, amount(r, e.Unit)+"/s")
	}
	if e.Total > 0 && e.Done < e.Total {
		if eta, ok := e.ETA(); ok {
			parts = append(parts, "ETA "+human.Duration(eta))
		} else {
			parts = append(parts, "ETA ?")
		}
	}
	if e.Msg != "" {
		parts = append(parts, e.Msg)
	}
	return strings.TrimSpace(strings.Join(parts, "  "))
}
