package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
)

// HashFiles returns the SHA-256 (hex) over the named files of fsys, in the
// order given: each file's name, its length and its contents, so that no two
// different sets of files hash alike (a byte moved from one file to the next
// changes the hash). It is the one identity of a model's files: the embedded
// parent's (parent.Hash) and a checkpoint directory's (importance's score
// cache key). Files are streamed, not read whole.
func HashFiles(fsys fs.FS, names []string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		f, err := fsys.Open(n)
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", n, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return "", fmt.Errorf("hashing %s: %w", n, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, st.Size())
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hashing %s: %w", n, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
