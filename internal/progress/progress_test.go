package progress

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	got := Line(Event{Stage: "prune", Done: 500, Total: 1000, Unit: "B", Elapsed: 10 * time.Second})
	for _, want := range []string{"prune", " 50.0%", "500 B/1000 B", "50 B/s", "ETA 10s", "############............"} {
		if !strings.Contains(got, want) {
			t.Errorf("Line = %q, lacks %q", got, want)
		}
	}
	// Bytes in binary units, never a count with "B" after it (billions).
	got = Line(Event{Stage: "init", Done: 1_120_000_000, Total: 16_060_000_000, Unit: Bytes, Elapsed: 10 * time.Second})
	for _, want := range []string{"1.04 GiB/14.96 GiB", "106.81 MiB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("Line = %q, lacks %q", got, want)
		}
	}
	if strings.Contains(got, "B B") {
		t.Errorf("Line = %q writes a count of bytes as billions", got)
	}
	if got := Line(Event{Stage: "train", Done: 30, Total: 100, Unit: "step", Elapsed: 10 * time.Second}); !strings.Contains(got, "30/100 step") || !strings.Contains(got, "3 step/s") {
		t.Errorf("Line = %q", got)
	}
	if got := Line(Event{Stage: "x", Total: 10, Unit: "tok"}); !strings.Contains(got, "ETA ?") {
		t.Errorf("nothing done yet: %q", got)
	}
	if got := Line(Event{Stage: "x", Done: 10, Total: 10, Unit: "tok", Elapsed: time.Second}); strings.Contains(got, "ETA") || !strings.Contains(got, "100.0%") {
		t.Errorf("finished: %q", got)
	}
	if got := Line(Event{Stage: "search", Index: 2, Count: 8, Phase: "Minitron grid", Done: 3, Msg: "loss 1.5"}); got != "[2/8 search] Minitron grid  3  loss 1.5" {
		t.Errorf("no total: %q", got)
	}
}

// TestRateAfterResumeCountsOnlyNewSteps is issue 17's class 11: right after
// a resume at step 500 of 1000, one step done in this process in 2 s is a
// rate of 0.5 step/s and an ETA of 998 s, not 501 steps in 2 s.
func TestRateAfterResumeCountsOnlyNewSteps(t *testing.T) {
	e := Event{Stage: "train", Done: 501, Total: 1000, Resumed: 500, Unit: "step", Elapsed: 2 * time.Second}
	if r := e.Rate(); r != 0.5 {
		t.Errorf("rate %g step/s, want 0.5", r)
	}
	if eta, ok := e.ETA(); !ok || eta != 998*time.Second {
		t.Errorf("ETA %v (%v), want 998s", eta, ok)
	}
	if l := Line(e); !strings.Contains(l, "0.5 step/s") || !strings.Contains(l, "ETA 16m38s") {
		t.Errorf("line %q", l)
	}
	if r := (Event{Done: 500, Resumed: 500, Elapsed: time.Second}).Rate(); r != 0 {
		t.Errorf("nothing done in this process: rate %g, want 0 (unknown)", r)
	}

	// Through a Task: Resume, then one step.
	var got []Event
	now := time.Unix(0, 0)
	task := Start(func(e Event) { got = append(got, e) }, Event{Stage: "train", Total: 1000, Unit: "step"})
	task.now = func() time.Time { return now }
	task.start = now
	task.Resume(500)
	now = now.Add(2 * time.Second)
	task.Add(1)
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	if last := got[1]; last.Done != 501 || last.Resumed != 500 || last.Rate() != 0.5 {
		t.Errorf("after resume + 1 step: %+v (rate %g)", last, last.Rate())
	}
}

func TestTerminalRedrawsInPlace(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	r := newTerminal(&b, true)
	r.now = func() time.Time { return now }
	for i := int64(1); i <= 4; i++ {
		now = now.Add(time.Second)
		r.Report(Event{Stage: "work", Done: i, Total: 4, Unit: "it", Elapsed: time.Duration(i) * time.Second})
	}
	r.End()
	r.End() // idempotent
	out := b.String()
	if !strings.Contains(out, "100.0%") || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 || strings.Count(out, "\r") != 4 {
		t.Errorf("output %q", out)
	}
	var nilT *Terminal
	nilT.Report(Event{})
	nilT.End()
	if NewTerminal(nil) != nil {
		t.Error("NewTerminal(nil) should return nil")
	}
	var nilF Func
	nilF.Report(Event{})
	nilF.Notef("x", "y")
	Start(nil, Event{}).Add(1) // a nil Task
}

// Off a terminal (a pipe, a log file) the renderer writes plain lines: no
// carriage returns or escape codes, at most one line per interval, and the
// final state exactly once.
func TestTerminalPlainOffTerminal(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	r := newTerminal(&b, false)
	r.now = func() time.Time { return now }
	for i := int64(1); i <= 10; i++ {
		now = now.Add(time.Second)
		r.Report(Event{Stage: "work", Done: i, Total: 10, Unit: "it", Elapsed: time.Duration(i) * time.Second})
	}
	r.End()
	r.End()
	out := b.String()
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("control codes off a terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// Drawn at 1 s (first), 6 s (5 s later) and 10 s (done); End adds nothing.
	if len(lines) != 3 || !strings.Contains(lines[2], "100.0%") || !strings.Contains(lines[0], " 10.0%") {
		t.Errorf("lines %q", lines)
	}
	// An interrupted task: End draws the last state held back.
	b.Reset()
	r.Report(Event{Stage: "other", Done: 1, Total: 10, Unit: "it", Elapsed: time.Second})
	r.Report(Event{Stage: "other", Done: 2, Total: 10, Unit: "it", Elapsed: 2 * time.Second})
	r.End()
	if lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "2/10") {
		t.Errorf("interrupted: %q", lines)
	}
}

// The stages of a run: their start, reuse, end and notes are lines of their
// own; the running lines between are throttled.
func TestTerminalStageLines(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	r := newTerminal(&b, false)
	r.now = func() time.Time { return now }
	ev := func(e Event) Event { e.Stage, e.Index, e.Count = "distill", 4, 8; return e }
	r.Report(Event{Stage: "importance", Index: 1, Count: 8, State: Reused, Msg: "unchanged inputs"})
	r.Report(ev(Event{State: Started, Msg: "no earlier result"}))
	r.Report(ev(Event{Done: 1000, Total: 4000, Unit: "tok", Elapsed: time.Second}))
	now = now.Add(time.Second) // within the interval: not printed
	r.Report(ev(Event{Done: 2000, Total: 4000, Unit: "tok", Elapsed: 2 * time.Second}))
	now = now.Add(5 * time.Second)
	r.Report(ev(Event{Done: 3000, Total: 4000, Unit: "tok", Elapsed: 6 * time.Second}))
	r.Report(ev(Event{State: Note, Msg: "held-out loss 2.5"}))
	r.Report(ev(Event{State: Finished, Elapsed: 8 * time.Second}))
	r.Report(Event{Stage: "eval", Index: 5, Count: 8, State: Interrupted, Elapsed: 1500 * time.Millisecond})
	want := `[1/8 importance] reused: unchanged inputs
[4/8 distill] running (no earlier result)
[4/8 distill] [######..................]  25.0% 1000/4000 tok  1000 tok/s  ETA 3s
[4/8 distill] [##################......]  75.0% 3000/4000 tok  500 tok/s  ETA 2s
[4/8 distill] held-out loss 2.5
[4/8 distill] done in 8s
[5/8 eval] interrupted after 1.5s
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}

	// On a terminal a note erases an unfinished running line and keeps a
	// finished one.
	b.Reset()
	r = newTerminal(&b, true)
	r.Report(Event{Stage: "eval", Done: 1, Total: 2, Unit: "task"})
	r.Report(Event{Stage: "eval", State: Finished, Elapsed: time.Second})
	if got, want := b.String(), "\r"+Line(Event{Stage: "eval", Done: 1, Total: 2, Unit: "task"})+"\x1b[K\r\x1b[Keval done in 1s\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	b.Reset()
	r.Report(Event{Stage: "eval", Done: 2, Total: 2, Unit: "task"})
	r.Report(Event{Stage: "eval", State: Note, Msg: "all done"})
	if got := b.String(); !strings.Contains(got, "100.0%") || !strings.HasSuffix(got, "\x1b[K\neval all done\n") {
		t.Fatalf("%q", got)
	}
}

// TestTaskConcurrentAddsInOrder: Adds from many goroutines reach the Func
// one at a time and in order, ending at the total.
func TestTaskConcurrentAddsInOrder(t *testing.T) {
	var last int64
	var calls int
	task := Start(func(e Event) {
		calls++
		if e.Done != last+1 {
			t.Errorf("event %d after %d", e.Done, last)
		}
		last = e.Done
	}, Event{Stage: "work", Total: 800, Unit: "it"})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				task.Add(1)
			}
		}()
	}
	wg.Wait()
	if last != 800 || calls != 800 {
		t.Errorf("ended at %d after %d calls, want 800", last, calls)
	}
}
