package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// lockName is the lock file that keeps two runs out of one directory.
const lockName = ".lock"

// lockDir takes an exclusive, non-blocking lock on the run directory. The
// kernel drops the lock when the process dies, so a killed run never leaves
// the directory locked.
func lockDir(dir string) (func(), error) {
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644) //output:not-an-output: the run directory's lock file
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &BusyError{Dir: dir}
		}
		return nil, fmt.Errorf("pipeline: locking %s: %w", p, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// BusyError is a run directory another run is using.
type BusyError struct{ Dir string }

func (e *BusyError) Error() string {
	return "pipeline: another run is using " + e.Dir + " (wait for it to finish, or choose another run directory)"
}

// ForeignDirError is a run directory that exists, is not empty and was not
// written by a run: a run never writes into a folder of the user's.
type ForeignDirError struct {
	Dir   string
	Holds []string // a few of its entries
	More  int      // how many more it holds
}

func (e *ForeignDirError) Error() string {
	holds := strings.Join(e.Holds, ", ")
	if e.More > 0 {
		holds += fmt.Sprintf(" and %d more", e.More)
	}
	if e.Holds == nil {
		return fmt.Sprintf("pipeline: %s is not a directory; a run needs a new or empty directory, or one an earlier run wrote", e.Dir)
	}
	return fmt.Sprintf("pipeline: %s is not a run directory (it holds %s, and no stage of a run); a run needs a new or empty directory, or one an earlier run wrote", e.Dir, holds)
}

// stageDirPattern matches a stage's directory name (StageDir).
var stageDirPattern = regexp.MustCompile(`^[0-9]{2}-[^/\\ ]+$`)

// IsRunDir reports whether dir was written by a run: it holds the run's
// lock file, a stage directory with its manifest, or a stage's temporary
// directory that a killed run left.
func IsRunDir(dir string) bool {
	if st, err := os.Lstat(filepath.Join(dir, lockName)); err == nil && st.Mode().IsRegular() {
		return true
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if name, ok := strings.CutPrefix(e.Name(), "."); ok && e.IsDir() {
			if stage, _, ok := strings.Cut(name, ".tmp-"); ok && stageDirPattern.MatchString(stage) {
				return true
			}
		}
		if e.IsDir() && stageDirPattern.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), ManifestName)); err == nil {
				return true
			}
		}
	}
	return false
}

// checkRunDir returns whether dir exists, and a *ForeignDirError when it
// exists but is neither empty nor a run directory.
func checkRunDir(dir string) (existed bool, err error) {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pipeline: %w", err)
	}
	if !st.IsDir() {
		return true, &ForeignDirError{Dir: dir}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true, fmt.Errorf("pipeline: reading %s: %w", dir, err)
	}
	if len(ents) == 0 || IsRunDir(dir) {
		return true, nil
	}
	e := &ForeignDirError{Dir: dir}
	for i, ent := range ents {
		if i == 3 {
			e.More = len(ents) - i
			break
		}
		e.Holds = append(e.Holds, ent.Name())
	}
	return true, e
}

// tidyUnused removes what a run that finished no stage left in dir: the
// lock file and empty directories, and dir itself when the run created it.
// A directory holding anything else is left as it is.
func tidyUnused(dir string, existed bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Name() == lockName && e.Type().IsRegular() {
			continue
		}
		if !e.IsDir() {
			return
		}
		if sub, err := os.ReadDir(p); err != nil || len(sub) > 0 {
			return
		}
	}
	for _, e := range ents {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	if !existed {
		os.Remove(dir)
	}
}
