package output

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Check is Free and more, for a file or a directory output: it also
// reports, before any work, an output that could not be written when the
// work is done: a parent path that is not a
// directory, or a directory (dest's parent, or the nearest one that exists
// when the parent is still to be created) where no file can be created.
// It creates nothing that stays: the probe file is removed.
func Check(dest string, force bool) error {
	if err := Free(dest, force); err != nil {
		return err
	}
	dir := filepath.Dir(filepath.Clean(dest))
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("output: cannot write %s: %s is not a directory", filepath.Clean(dest), dir)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("output: %w", err)
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	f, err := os.CreateTemp(dir, ".autocompress-probe-*")
	if err != nil {
		return fmt.Errorf("output: cannot write %s: %w", filepath.Clean(dest), err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
