package pipeline

import (
	"strings"
	"testing"
	"time"
)

func TestDisplayPlainLines(t *testing.T) {
	var b strings.Builder
	d := NewDisplay(&b, false)
	now := time.Unix(0, 0)
	d.now = func() time.Time { return now }
	d.Handle(Progress{Stage: "importance", Index: 1, Count: 8, State: StateReused, Msg: "unchanged inputs"})
	d.Handle(Progress{Stage: "distill", Index: 4, Count: 8, State: StateStart, Msg: "no earlier result"})
	d.Handle(Progress{Stage: "distill", Index: 4, Count: 8, State: StateRunning, Done: 1000, Total: 4000, Unit: "tok", Elapsed: time.Second, ETA: 3 * time.Second})
	now = now.Add(time.Second) // within the interval: not printed
	d.Handle(Progress{Stage: "distill", Index: 4, Count: 8, State: StateRunning, Done: 2000, Total: 4000, Unit: "tok", Elapsed: 2 * time.Second, ETA: 2 * time.Second})
	now = now.Add(5 * time.Second)
	d.Handle(Progress{Stage: "distill", Index: 4, Count: 8, State: StateRunning, Done: 3000, Total: 4000, Unit: "tok", Elapsed: 6 * time.Second, ETA: 2 * time.Second})
	d.Handle(Progress{Stage: "distill", Index: 4, Count: 8, State: StateDone, Elapsed: 8 * time.Second})
	want := `[1/8 importance] reused: unchanged inputs
[4/8 distill] running (no earlier result)
[4/8 distill]  25.0% 1000/4000 tok  1000 tok/s  ETA 3s
[4/8 distill]  75.0% 3000/4000 tok  500 tok/s  ETA 2s
[4/8 distill] done in 8s
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "\x1b") || strings.Contains(b.String(), "\r") {
		t.Fatal("control codes in plain output")
	}
}

func TestDisplayTerminalRedraws(t *testing.T) {
	var b strings.Builder
	d := NewDisplay(&b, true)
	d.Handle(Progress{Stage: "eval", Index: 5, Count: 8, State: StateRunning, Done: 1, Total: 2, Unit: "task", ETA: -1})
	d.Handle(Progress{Stage: "eval", Index: 5, Count: 8, State: StateDone, Elapsed: time.Second})
	if !strings.HasPrefix(b.String(), "\r[5/8 eval]") || !strings.Contains(b.String(), "\r\x1b[K[5/8 eval] done") {
		t.Fatalf("%q", b.String())
	}
}
