package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/internal/progress"
)

// chain builds three stages a → b → c. a writes its parameter, b copies a's
// output reduced modulo 2 (so different a outputs can give one b output), c
// counts how often it ran.
type chain struct {
	aParam, cParam int
	runs           map[string]int
	failAt         string
	cancel         context.CancelFunc
}

func (c *chain) stages() []Stage {
	run := func(name string, f func(env *Env) error) func(context.Context, *Env) error {
		return func(ctx context.Context, env *Env) error {
			c.runs[name]++
			if c.failAt == name {
				// Write part of an output, then fail or be interrupted.
				os.WriteFile(filepath.Join(env.Dir, "partial"), []byte("x"), 0o644)
				if c.cancel != nil {
					c.cancel()
					<-ctx.Done()
					return ctx.Err()
				}
				return errors.New("boom")
			}
			return f(env)
		}
	}
	return []Stage{
		{Name: "a", Params: c.aParam, Run: run("a", func(env *Env) error {
			return os.WriteFile(filepath.Join(env.Dir, "a.txt"), []byte(fmt.Sprint(c.aParam)), 0o644)
		})},
		{Name: "b", Deps: []string{"a"}, Run: run("b", func(env *Env) error {
			b, err := os.ReadFile(filepath.Join(env.Input("a"), "a.txt"))
			if err != nil {
				return err
			}
			var v int
			fmt.Sscan(string(b), &v)
			return os.WriteFile(filepath.Join(env.Dir, "b.txt"), []byte(fmt.Sprint(v%2)), 0o644)
		})},
		{Name: "c", Deps: []string{"b"}, Params: c.cParam, Run: run("c", func(env *Env) error {
			b, err := os.ReadFile(filepath.Join(env.Input("b"), "b.txt"))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.Dir, "sub", "c.txt"), b, 0o644)
		})},
	}
}

func newChain() *chain { return &chain{runs: map[string]int{}} }

func mustRun(t *testing.T, dir string, c *chain) *Result {
	t.Helper()
	res, err := Run(context.Background(), dir, c.stagesWithSub(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// stagesWithSub makes c's output directory before writing into it.
func (c *chain) stagesWithSub() []Stage {
	st := c.stages()
	inner := st[2].Run
	st[2].Run = func(ctx context.Context, env *Env) error {
		if err := os.MkdirAll(filepath.Join(env.Dir, "sub"), 0o755); err != nil {
			return err
		}
		return inner(ctx, env)
	}
	return st
}

func TestRunReusesUnchangedStages(t *testing.T) {
	dir := t.TempDir()
	c := newChain()
	c.aParam = 3
	res := mustRun(t, dir, c)
	if got := res.Reused(); len(got) != 0 {
		t.Fatalf("first run reused %v", got)
	}
	first := res
	res = mustRun(t, dir, c)
	if got := res.Reused(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("second run reused %v, want all", got)
	}
	if runtime.GOOS == "linux" {
		// Each stage's peak resident set and CPU time are recorded, and kept on reuse.
		for i, s := range res.Stages {
			if s.PeakRSSBytes <= 0 || s.PeakRSSBytes != first.Stages[i].PeakRSSBytes || s.CPUSeconds != first.Stages[i].CPUSeconds {
				t.Errorf("stage %s: peak RSS %d and %g CPU-s, computed with %d and %g", s.Name, s.PeakRSSBytes, s.CPUSeconds, first.Stages[i].PeakRSSBytes, first.Stages[i].CPUSeconds)
			}
		}
	}
	if !reflect.DeepEqual(c.runs, map[string]int{"a": 1, "b": 1, "c": 1}) {
		t.Fatalf("runs %v", c.runs)
	}
	// A changed parameter of a reruns a and b; b's output is unchanged
	// (5 % 2 == 3 % 2), so c is reused.
	c.aParam = 5
	res = mustRun(t, dir, c)
	if got := res.Reused(); !reflect.DeepEqual(got, []string{"c"}) {
		t.Fatalf("after changing a: reused %v, want [c]", got)
	}
	if res.Stages[0].Why != "its inputs changed" {
		t.Errorf("why = %q", res.Stages[0].Why)
	}
	// Now b's output changes, so c reruns too.
	c.aParam = 4
	res = mustRun(t, dir, c)
	if got := res.Reused(); len(got) != 0 {
		t.Fatalf("after changing b's output: reused %v, want none", got)
	}
	// A changed parameter of c reruns c alone.
	c.cParam = 1
	res = mustRun(t, dir, c)
	if got := res.Reused(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("after changing c: reused %v", got)
	}
	b, err := os.ReadFile(filepath.Join(StageDir(dir, 2, "c"), "sub", "c.txt"))
	if err != nil || string(b) != "0" {
		t.Fatalf("c output %q, %v", b, err)
	}
}

func TestRunDetectsStaleOutputs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(sdir string) error
		why   string
	}{
		{"edited", func(d string) error { return os.WriteFile(filepath.Join(d, "b.txt"), []byte("9"), 0o644) }, "was changed"},
		{"removed", func(d string) error { return os.Remove(filepath.Join(d, "b.txt")) }, "is missing"},
		{"extra", func(d string) error { return os.WriteFile(filepath.Join(d, "junk"), nil, 0o644) }, "did not write"},
		{"no manifest", func(d string) error { return os.Remove(filepath.Join(d, ManifestName)) }, "no manifest"},
		{"bad manifest", func(d string) error { return os.WriteFile(filepath.Join(d, ManifestName), []byte("{"), 0o644) }, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newChain()
			mustRun(t, dir, c)
			if err := tc.spoil(StageDir(dir, 1, "b")); err != nil {
				t.Fatal(err)
			}
			var msgs []string
			res, err := Run(context.Background(), dir, c.stagesWithSub(), Options{Progress: func(p progress.Event) {
				if p.State == progress.Started {
					msgs = append(msgs, p.Stage+": "+p.Msg)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Reused(); !reflect.DeepEqual(got, []string{"a", "c"}) {
				t.Fatalf("reused %v, want [a c] (b rewritten with the same output)", got)
			}
			if len(msgs) != 1 || !strings.Contains(msgs[0], tc.why) {
				t.Fatalf("start messages %q, want b's naming %q", msgs, tc.why)
			}
		})
	}
}

func TestRunInterruptedLeavesNothingAndResumes(t *testing.T) {
	dir := t.TempDir()
	c := newChain()
	ctx, cancel := context.WithCancel(context.Background())
	c.failAt, c.cancel = "b", cancel
	var ends []progress.State
	res, err := Run(ctx, dir, c.stagesWithSub(), Options{Progress: func(e progress.Event) {
		if e.Stage == "b" && e.State != progress.Running && e.State != progress.Started {
			ends = append(ends, e.State)
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// An interrupted stage is shown so, not failed with "context canceled"
	// (issue 17, class 11).
	if !reflect.DeepEqual(ends, []progress.State{progress.Interrupted}) {
		t.Errorf("stage b ended with %q, want only %q", ends, progress.Interrupted)
	}
	if len(res.Stages) != 1 || res.Stages[0].Name != "a" {
		t.Fatalf("finished stages %+v, want [a]", res.Stages)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !reflect.DeepEqual(names, []string{".lock", "01-a"}) {
		t.Fatalf("run directory holds %v after the interrupt, want only the lock and stage a", names)
	}
	c.failAt, c.cancel = "", nil
	res = mustRun(t, dir, c)
	if got := res.Reused(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("resumed run reused %v, want [a]", got)
	}
	if c.runs["a"] != 1 || c.runs["b"] != 2 || c.runs["c"] != 1 {
		t.Fatalf("runs %v", c.runs)
	}
}

func TestRunFailureNamesStage(t *testing.T) {
	dir := t.TempDir()
	c := newChain()
	c.failAt = "c"
	_, err := Run(context.Background(), dir, c.stagesWithSub(), Options{})
	var se *StageError
	if !errors.As(err, &se) || se.Stage != "c" || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want a StageError for c", err)
	}
	if _, err := os.Stat(StageDir(dir, 2, "c")); !os.IsNotExist(err) {
		t.Fatalf("failed stage left its directory: %v", err)
	}
}

// A temporary directory that a killed run left behind is removed.
func TestRunCleansKilledTemp(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, ".02-b.tmp-12345")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, dir, newChain())
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("left-over %s still there", left)
	}
}

func TestRunBusy(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = Run(context.Background(), dir, newChain().stagesWithSub(), Options{})
	var be *BusyError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want BusyError", err)
	}
}

func TestRunFilesAreInputs(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(t.TempDir(), "data.txt")
	os.WriteFile(data, []byte("one"), 0o644)
	n := 0
	st := []Stage{{Name: "x", Files: []string{data}, Run: func(ctx context.Context, env *Env) error {
		n++
		return nil
	}}}
	for i, content := range []string{"one", "one", "two"} {
		os.WriteFile(data, []byte(content), 0o644)
		if _, err := Run(context.Background(), dir, st, Options{}); err != nil {
			t.Fatal(err)
		}
		if want := []int{1, 1, 2}[i]; n != want {
			t.Fatalf("after run %d with %q: ran %d times, want %d", i+1, content, n, want)
		}
	}
}

func TestCheckStages(t *testing.T) {
	nop := func(context.Context, *Env) error { return nil }
	for _, tc := range []struct {
		st   []Stage
		want string
	}{
		{[]Stage{{Name: "a", Run: nop}, {Name: "a", Run: nop}}, "twice"},
		{[]Stage{{Name: "b", Deps: []string{"a"}, Run: nop}, {Name: "a", Run: nop}}, "does not come before"},
		{[]Stage{{Name: "a/b", Run: nop}}, "bad stage name"},
		{[]Stage{{Name: "a"}}, "no Run"},
	} {
		if err := checkStages(tc.st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkStages: %v, want %q", err, tc.want)
		}
	}
}

// TestEnvProgress: a stage's events carry its name and place in the run,
// a library's own stage name becomes the phase, and counts, resumed units
// and elapsed time pass unchanged.
func TestEnvProgress(t *testing.T) {
	var got []progress.Event
	env := &Env{report: func(p progress.Event) { got = append(got, p) }, name: "s", Index: 2, Count: 5}
	env.Progress().Report(progress.Event{Stage: "train", Done: 7, Total: 10, Resumed: 5, Unit: "step", Elapsed: time.Second})
	env.Progress().Report(progress.Event{Stage: "s", Done: 1})
	env.Note("hello %d", 1)
	want := []progress.Event{
		{Stage: "s", Phase: "train", Index: 2, Count: 5, Done: 7, Total: 10, Resumed: 5, Unit: "step", Elapsed: time.Second},
		{Stage: "s", Index: 2, Count: 5, Done: 1},
		{Stage: "s", Index: 2, Count: 5, State: progress.Note, Msg: "hello 1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if (&Env{name: "x"}).Progress() != nil {
		t.Error("a run without a display should give a nil Func")
	}
}
