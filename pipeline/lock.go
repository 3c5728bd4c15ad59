package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

func (e *BusyError) Error() string { return e.Spell(nil) }

// Spell returns the message with the run directory ("dir") spelled by spell
// (a command's flags); nil gives the library's words (Error).
func (e *BusyError) Spell(spell func(name string) string) string {
	dir := "run directory"
	if spell != nil {
		dir = spell("dir")
	}
	return "pipeline: another run is using " + e.Dir + " (wait for it to finish, or choose another " + dir + ")"
}
