package job

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/autocompress/autocompress/checkpoint"
)

// HashFile returns the contract hash of one file: checkpoint.HashFiles over
// that file alone (name, length and contents), name being its path
// relative to root with /.
func HashFile(root, name string) (string, error) {
	return checkpoint.HashFiles(os.DirFS(root), []string{name})
}

// HashTree returns the contract hash of every regular file under
// root/dir, keyed (and hashed) by its path relative to root (the job
// directory), or relative to dir when rel is true (a model's own files).
func HashTree(root, dir string, rel bool) (map[string]string, error) {
	out := map[string]string{}
	base := filepath.Join(root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("job: %s is not a regular file", p)
		}
		r, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		key, hroot := filepath.ToSlash(r), base
		if !rel {
			key, hroot = path.Join(dir, key), root
		}
		h, err := HashFile(hroot, key)
		if err != nil {
			return err
		}
		out[key] = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job: hashing %s: %w", base, err)
	}
	return out, nil
}

// HashError is a file of a job whose contents differ from the contract's
// hash, or that is missing.
type HashError struct {
	Path string // relative to the job directory
	Msg  string
}

func (e *HashError) Error() string {
	return fmt.Sprintf("job: %s %s: the job directory no longer matches its contract; emit the job again (or restore the file)", e.Path, e.Msg)
}

// Verify checks every file the contract lists against its hash: the
// models, the tokenizer and the data shards. The first difference is a
// *HashError.
func Verify(dir string, c *Contract) error {
	type set struct {
		root   string
		hashes map[string]string
	}
	sets := []set{{c.Tokenizer.Path, c.Tokenizer.SHA256}, {".", c.Data.SHA256}}
	for _, r := range c.Models() {
		sets = append(sets, set{r.Model.Path, r.Model.SHA256})
	}
	for _, s := range sets {
		names := make([]string, 0, len(s.hashes))
		for n := range s.hashes {
			names = append(names, n)
		}
		sort.Strings(names)
		root := filepath.Join(dir, filepath.FromSlash(s.root))
		for _, n := range names {
			rel := path.Join(s.root, n)
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(n))); err != nil {
				return &HashError{Path: rel, Msg: "is missing"}
			}
			h, err := HashFile(root, n)
			if err != nil {
				return fmt.Errorf("job: %w", err)
			}
			if h != s.hashes[n] {
				return &HashError{Path: rel, Msg: fmt.Sprintf("has hash %.12s…, the contract says %.12s…", h, s.hashes[n])}
			}
		}
	}
	return nil
}
