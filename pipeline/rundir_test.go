package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/progress"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestRunDirRefusesForeignFolder (issue 17, class 9): a run writes only
// into a new folder, an empty one or one an earlier run wrote; a folder of
// the user's (here a checkpoint directory) is refused before any work and
// left as it was, with Force too, and so is a file.
func TestRunDirRefusesForeignFolder(t *testing.T) {
	ckpt := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.WriteFile(filepath.Join(ckpt, f), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		for _, dir := range []string{ckpt, file} {
			c := newChain()
			_, err := Run(context.Background(), dir, c.stagesWithSub(), Options{Force: force})
			var fe *ForeignDirError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("Run in %s (force %v): %v, want a ForeignDirError naming it", dir, force, err)
			}
			if len(c.runs) > 0 {
				t.Errorf("Run in %s ran %v before refusing", dir, c.runs)
			}
		}
	}
	if got := entries(t, ckpt); !reflect.DeepEqual(got, []string{"config.json", "model.safetensors"}) {
		t.Errorf("the refused folder now holds %v", got)
	}
	if err := (&ForeignDirError{Dir: ckpt, Holds: []string{"config.json"}}).Error(); strings.Contains(err, "--") {
		t.Errorf("a library error names a flag: %s", err)
	}

	// A new folder, an empty one and a run's own are accepted; a run
	// directory whose lock is its only sign of a run (an older run's) too.
	empty := t.TempDir()
	mustRun(t, empty, newChain())
	mustRun(t, empty, newChain()) // now a run directory
	fresh := filepath.Join(t.TempDir(), "new", "run")
	mustRun(t, fresh, newChain())
	if !IsRunDir(fresh) || IsRunDir(ckpt) {
		t.Errorf("IsRunDir: run %v, checkpoint %v", IsRunDir(fresh), IsRunDir(ckpt))
	}
	old := t.TempDir()
	os.WriteFile(filepath.Join(old, lockName), nil, 0o644)
	os.MkdirAll(filepath.Join(old, stateDirName, "distill"), 0o755)
	mustRun(t, old, newChain())
}

// TestRunLeavesNoLockOnlyFolder (class 9): a run that fails or is
// interrupted before it finishes a stage leaves its folder as it found it:
// absent when the run made it, empty when it was empty (it used to leave a
// folder holding only the lock file).
func TestRunLeavesNoLockOnlyFolder(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		fresh := filepath.Join(t.TempDir(), "run")
		empty := t.TempDir()
		for _, dir := range []string{fresh, empty} {
			c := newChain()
			c.failAt = "a"
			ctx, stop := context.WithCancel(context.Background())
			if cancel {
				c.cancel = stop
			}
			_, err := Run(ctx, dir, c.stagesWithSub(), Options{})
			stop()
			if err == nil {
				t.Fatal("the failing run succeeded")
			}
			if c.runs["a"] != 1 {
				t.Fatalf("runs %v", c.runs)
			}
		}
		if _, err := os.Stat(fresh); !os.IsNotExist(err) {
			t.Errorf("cancel %v: the run's own new folder is still there (%v): %v", cancel, err, entries(t, fresh))
		}
		if got := entries(t, empty); len(got) != 0 {
			t.Errorf("cancel %v: the empty folder now holds %v", cancel, got)
		}
	}
	// Once a stage is finished, a later failure keeps the run directory.
	dir := filepath.Join(t.TempDir(), "run")
	c := newChain()
	c.failAt = "b"
	if _, err := Run(context.Background(), dir, c.stagesWithSub(), Options{}); err == nil {
		t.Fatal("the failing run succeeded")
	}
	if got := entries(t, dir); !reflect.DeepEqual(got, []string{lockName, "01-a"}) {
		t.Errorf("after a failure in stage b the run directory holds %v", got)
	}
}

// TestRunChecksBeforeWork (class 9): a stage's Check runs before the first
// stage that runs, so a run that must fail at stage c fails before a and b
// do their work; a run whose stages are all reused calls no Check.
func TestRunChecksBeforeWork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	c := newChain()
	st := c.stagesWithSub()
	checks := 0
	st[2].Check = func(context.Context) error { checks++; return errors.New("budget out of reach") }
	_, err := Run(context.Background(), dir, st, Options{})
	var se *StageError
	if !errors.As(err, &se) || se.Stage != "c" || !strings.Contains(err.Error(), "budget out of reach") {
		t.Fatalf("err = %v, want stage c's check", err)
	}
	if len(c.runs) > 0 || checks != 1 {
		t.Fatalf("ran %v and %d checks before refusing, want no stage and one check", c.runs, checks)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused run left %s", dir)
	}
	// Until a stage before c: c's check is not asked.
	if _, err := Run(context.Background(), dir, st, Options{Until: "b"}); err != nil {
		t.Fatalf("--until b: %v", err)
	}
	st[2].Check = func(context.Context) error { checks++; return nil }
	mustRunStages(t, dir, st)
	checks = 0
	mustRunStages(t, dir, st)
	if checks != 0 {
		t.Errorf("a run that reuses every stage called %d checks", checks)
	}
}

func mustRunStages(t *testing.T, dir string, st []Stage) {
	t.Helper()
	if _, err := Run(context.Background(), dir, st, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledStageIsInterrupted (class 11): a stage stopped by Ctrl-C is
// reported interrupted, not "failed … context canceled".
func TestCancelledStageIsInterrupted(t *testing.T) {
	c := newChain()
	ctx, cancel := context.WithCancel(context.Background())
	c.failAt, c.cancel = "b", cancel
	var b strings.Builder
	d := progress.NewTerminal(&b)
	_, err := Run(ctx, t.TempDir(), c.stagesWithSub(), Options{Progress: d.Report})
	d.End()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	out := b.String()
	if !strings.Contains(out, "[2/3 b] interrupted after") || strings.Contains(out, "failed") || strings.Contains(out, "canceled") {
		t.Errorf("display after a cancel:\n%s", out)
	}
}
