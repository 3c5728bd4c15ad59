// Package output writes files and directories atomically: every writer of
// autocompress output goes through it, so every output is either complete or
// absent, durable once reported written, and readable like any other file the
// user creates.
//
// # The rules
//
//   - Build beside the destination under a unique temporary name (never a
//     fixed ".tmp"), so two writers of the same path cannot collide and a
//     crashed run leaves only a hidden ".NAME.tmp-*" entry behind.
//   - fsync the data (every regular file of a directory, then the directories
//     themselves) before the rename, and the parent directory after it.
//   - Modes honour the umask: a new file is created 0666 and a new directory
//     0777 before the umask, i.e. 0644 and 0755 under the usual 022. A file
//     that replaces an existing one keeps the existing file's permissions.
//   - An existing destination is an *ExistsError unless force is set; with
//     force it is replaced only when the new output is complete.
//
// # Use
//
//	out, err := output.NewDir(dest, force)
//	if err != nil { ... }
//	defer out.Abort()
//	// write files under out.Path()
//	return out.Commit()
//
// CreateFile and WriteFile do the same for a single file.
package output

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// ExistsError is returned when the destination already exists and replacing
// it was not asked for. It is the one such error of autocompress: every
// package that refuses to replace an output returns it (wrapped or not), so
// that a command maps it to one exit status and one hint (how to ask for
// the replacement is the caller's to say: the message names no flag).
type ExistsError struct{ Path string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s already exists", e.Path)
}

// tempName returns a fresh hidden name beside dest.
func tempName(dest string) string {
	return filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
}

// Free reports an *ExistsError when dest exists and force is not set. Call
// it before long work whose result goes to dest, so that a refusal comes
// first rather than after the work; the writer checks again when it starts.
func Free(dest string, force bool) error {
	if force {
		return nil
	}
	if _, err := os.Lstat(dest); err == nil {
		return &ExistsError{Path: filepath.Clean(dest)}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output: %w", err)
	}
	return nil
}

// checkDest reports an *ExistsError for an existing dest unless force is set,
// and creates dest's parent directory.
func checkDest(dest string, force bool) error {
	if _, err := os.Lstat(dest); err == nil {
		if !force {
			return &ExistsError{Path: dest}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("output: %w", err)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o777); err != nil {
		return fmt.Errorf("output: creating %s: %w", parent, err)
	}
	return nil
}

// syncDir fsyncs a directory so that entries created or renamed in it are
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}

// File is a single file written atomically. It is an io.Writer; Commit
// makes it appear at its destination, Abort discards it.
type File struct {
	*os.File
	dest  string
	force bool
	done  bool
}

// CreateFile starts writing the file dest. An existing dest is an
// *ExistsError unless force is set; the replacement keeps its permissions.
func CreateFile(dest string, force bool) (*File, error) {
	dest = filepath.Clean(dest)
	if err := checkDest(dest, force); err != nil {
		return nil, err
	}
	var mode fs.FileMode = 0o666
	keep := false
	if st, err := os.Stat(dest); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("output: %s is a directory, not a file", dest)
		}
		mode, keep = st.Mode().Perm(), true
	}
	for range 100 {
		f, err := os.OpenFile(tempName(dest), os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output: creating %s: %w", dest, err)
		}
		if keep { // the umask must not narrow an existing file's mode
			if err := f.Chmod(mode); err != nil {
				f.Close()
				os.Remove(f.Name())
				return nil, fmt.Errorf("output: %w", err)
			}
		}
		return &File{File: f, dest: dest, force: force}, nil
	}
	return nil, fmt.Errorf("output: no free temporary name beside %s", dest)
}

// Dest returns the final path of the file.
func (f *File) Dest() string { return f.dest }

// Commit flushes the file to disk and renames it into place.
func (f *File) Commit() error {
	if f.done {
		return errors.New("output: " + f.dest + ": Commit after Commit or Abort")
	}
	f.done = true
	tmp := f.Name()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !f.force {
		if _, serr := os.Lstat(f.dest); serr == nil {
			err = &ExistsError{Path: f.dest}
		}
	}
	if err == nil {
		err = os.Rename(tmp, f.dest)
	}
	if err != nil {
		os.Remove(tmp)
		var ee *ExistsError
		if errors.As(err, &ee) {
			return err
		}
		return fmt.Errorf("output: writing %s: %w", f.dest, err)
	}
	if err := syncDir(filepath.Dir(f.dest)); err != nil {
		return fmt.Errorf("output: %s written but syncing its directory failed: %w", f.dest, err)
	}
	return nil
}

// Abort discards the file. It does nothing after Commit and may be called
// more than once (defer it right after CreateFile).
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// WriteFile writes data to dest atomically (see CreateFile).
func WriteFile(dest string, data []byte, force bool) error {
	f, err := CreateFile(dest, force)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return fmt.Errorf("output: writing %s: %w", dest, err)
	}
	return f.Commit()
}

// Dir is an output directory built atomically: everything is written into a
// temporary directory beside the destination (Path), which Commit syncs and
// renames into place. Abort, or a cancelled context given to Watch, removes
// the temporary directory.
type Dir struct {
	dest  string
	tmp   string
	force bool
	mu    sync.Mutex
	state int // 0 open, 1 committed, 2 aborted
	stop  func() bool
}

// NewDir prepares to write the directory dest. An existing dest is an
// *ExistsError unless force is set, in which case Commit replaces it.
func NewDir(dest string, force bool) (*Dir, error) {
	dest = filepath.Clean(dest)
	if err := checkDest(dest, force); err != nil {
		return nil, err
	}
	for range 100 {
		tmp := tempName(dest)
		err := os.Mkdir(tmp, 0o777)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output: creating a directory beside %s: %w", dest, err)
		}
		return &Dir{dest: dest, tmp: tmp, force: force}, nil
	}
	return nil, fmt.Errorf("output: no free temporary name beside %s", dest)
}

// Path returns the temporary directory to write into.
func (o *Dir) Path() string { return o.tmp }

// Dest returns the final destination.
func (o *Dir) Dest() string { return o.dest }

// Watch aborts the output when ctx is cancelled before Commit.
func (o *Dir) Watch(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { o.Abort() })
	o.mu.Lock()
	o.stop = stop
	o.mu.Unlock()
}

// syncTree fsyncs every regular file and directory under root, directories
// after their contents.
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Commit syncs the temporary directory and renames it to the destination,
// replacing an existing one when force was given.
func (o *Dir) Commit() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.state {
	case 1:
		return nil
	case 2:
		return fmt.Errorf("output: %s was aborted (interrupted?) and cannot be committed", o.dest)
	}
	if o.stop != nil {
		o.stop()
	}
	if err := syncTree(o.tmp); err != nil {
		return fmt.Errorf("output: syncing %s: %w", o.tmp, err)
	}
	var old string
	if _, err := os.Lstat(o.dest); err == nil {
		if !o.force {
			return &ExistsError{Path: o.dest}
		}
		old = o.tmp + ".old"
		if err := os.Rename(o.dest, old); err != nil {
			return fmt.Errorf("output: moving existing %s aside: %w", o.dest, err)
		}
	}
	if err := os.Rename(o.tmp, o.dest); err != nil {
		if old != "" {
			os.Rename(old, o.dest)
		}
		return fmt.Errorf("output: renaming output into %s: %w", o.dest, err)
	}
	o.state = 1
	if err := syncDir(filepath.Dir(o.dest)); err != nil {
		return fmt.Errorf("output: %s written but syncing its directory failed: %w", o.dest, err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("output: %s committed but removing the old copy %s failed: %w", o.dest, old, err)
		}
	}
	return nil
}

// Abort removes the temporary directory. It does nothing after Commit and
// may be called more than once (defer it right after NewDir).
func (o *Dir) Abort() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != 0 {
		return nil
	}
	o.state = 2
	if o.stop != nil {
		o.stop()
	}
	if err := os.RemoveAll(o.tmp); err != nil {
		return fmt.Errorf("output: removing %s: %w", o.tmp, err)
	}
	return nil
}
