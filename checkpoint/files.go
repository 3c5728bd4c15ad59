package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// weightSuffixes are the file endings of weights, which a pruned checkpoint
// replaces rather than copies.
var weightSuffixes = []string{
	".safetensors", ".safetensors.index.json",
	".bin", ".bin.index.json", ".pt", ".pth", ".ckpt",
	".gguf", ".h5", ".msgpack", ".msgpack.index.json", ".onnx", ".onnx_data",
}

// IsWeightFile reports whether name (a base name) holds or indexes weights.
func IsWeightFile(name string) bool {
	lower := strings.ToLower(name)
	for _, s := range weightSuffixes {
		if strings.HasSuffix(lower, s) {
			return true
		}
	}
	return false
}

// AuxFiles returns the files of a checkpoint directory to copy through
// unchanged (config.json, generation_config.json, tokenizer files, remote
// code, README, ...): every regular file, in subdirectories too, that is not
// a weight file or an index, nor hidden (.git, .cache, temporary files).
// Paths are relative to dir, slash-separated, sorted.
func AuxFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if IsWeightFile(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint: listing %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

// CopyFiles copies the named files (relative, slash-separated, as AuxFiles
// returns them) from src to dst, creating subdirectories as needed.
func CopyFiles(dst, src string, names []string) error {
	for _, n := range names {
		if filepath.IsAbs(n) || strings.HasPrefix(filepath.Clean(filepath.FromSlash(n)), "..") {
			return fmt.Errorf("checkpoint: refusing to copy %q: not a path inside %s", n, src)
		}
		from := filepath.Join(src, filepath.FromSlash(n))
		to := filepath.Join(dst, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if err := copyFile(to, from); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(to, from string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("checkpoint: copying %s to %s: %w", from, to, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// OutputDir is an output directory built atomically: everything is written
// into a temporary directory beside the destination (Path), which Commit
// renames into place. Abort, or a cancelled context given to Watch, removes
// the temporary directory.
type OutputDir struct {
	dest  string
	tmp   string
	force bool
	mu    sync.Mutex
	state int // 0 open, 1 committed, 2 aborted
	stop  func() bool
}

// NewOutputDir prepares to write the directory dest. An existing dest is an
// *ExistsError unless force is set, in which case Commit replaces it.
func NewOutputDir(dest string, force bool) (*OutputDir, error) {
	dest = filepath.Clean(dest)
	if _, err := os.Lstat(dest); err == nil {
		if !force {
			return nil, &ExistsError{Path: dest}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: creating %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &OutputDir{dest: dest, tmp: tmp, force: force}, nil
}

// Path returns the temporary directory to write into.
func (o *OutputDir) Path() string { return o.tmp }

// Dest returns the final destination.
func (o *OutputDir) Dest() string { return o.dest }

// Watch aborts the output when ctx is cancelled before Commit.
func (o *OutputDir) Watch(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { o.Abort() })
	o.mu.Lock()
	o.stop = stop
	o.mu.Unlock()
}

// Commit renames the temporary directory to the destination, replacing an
// existing one when force was given.
func (o *OutputDir) Commit() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.state {
	case 1:
		return nil
	case 2:
		return fmt.Errorf("checkpoint: output %s was aborted (interrupted?) and cannot be committed", o.dest)
	}
	if o.stop != nil {
		o.stop()
	}
	var old string
	if _, err := os.Lstat(o.dest); err == nil {
		if !o.force {
			return &ExistsError{Path: o.dest}
		}
		old = o.tmp + ".old"
		if err := os.Rename(o.dest, old); err != nil {
			return fmt.Errorf("checkpoint: moving existing %s aside: %w", o.dest, err)
		}
	}
	if err := os.Rename(o.tmp, o.dest); err != nil {
		if old != "" {
			os.Rename(old, o.dest)
		}
		return fmt.Errorf("checkpoint: renaming output into %s: %w", o.dest, err)
	}
	o.state = 1
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("checkpoint: output committed to %s but removing the old copy %s failed: %w", o.dest, old, err)
		}
	}
	return nil
}

// Abort removes the temporary directory. It does nothing after Commit and
// may be called more than once (defer it right after NewOutputDir).
func (o *OutputDir) Abort() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != 0 {
		return nil
	}
	o.state = 2
	if err := os.RemoveAll(o.tmp); err != nil {
		return fmt.Errorf("checkpoint: removing %s: %w", o.tmp, err)
	}
	return nil
}
