// Package parent embeds autocompress's own parent model: a small
// Llama-style decoder trained with this project's engine on public-domain
// English (the State of the Union addresses, Jane Austen's novels, Moby
// Dick and the King James Bible: corpus.Extended), so
// that every command — importance, search, prune, distil, eval — can be
// demonstrated and tested end to end on a real trained model without
// downloading anything.
//
// The model is a complete HuggingFace checkpoint directory (config.json,
// model.safetensors in bfloat16, tokenizer.json, tokenizer_config.json,
// generation_config.json) compiled into the binary with go:embed. Dir
// materialises it once per process in the temporary directory; Extract
// writes it anywhere. README.md in this directory gives the command that
// reproduces it, the data split, the training time and its held-out
// perplexity.
//
// The parent's held-out text (the test and validation parts of its data
// split) and a sample of its training text are embedded as well
// (text/*.jsonl.gz, written by go generate): SplitDocs and SplitText
// resolve the "parent:NAME" data names for every command, so that
// evaluation and distillation need no downloaded assets; only the full
// training part ("train") is read from the corpora that
// scripts/fetch-assets.sh unpacks.
package parent

import (
	"embed"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/internal/output"
)

//go:embed model/*
var files embed.FS

// Files lists the files of the checkpoint directory.
var Files = []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}

// FS returns the checkpoint directory as a file system (rooted at the
// directory, e.g. FS().Open("config.json")).
func FS() fs.FS {
	sub, err := fs.Sub(files, "model")
	if err != nil {
		panic(err) // cannot happen: "model" is a valid embedded directory
	}
	return sub
}

// Hash returns the SHA-256 (hex) over the embedded files' names, lengths
// and contents, in name order (checkpoint.HashFiles): a stable identity of
// the parent.
func Hash() string {
	hashOnce.Do(func() {
		names, _ := fs.Glob(FS(), "*")
		sort.Strings(names)
		var err error
		if hash, err = checkpoint.HashFiles(FS(), names); err != nil {
			panic(err) // cannot happen: the files are embedded
		}
	})
	return hash
}

var (
	hashOnce sync.Once
	hash     string
)

// Extract writes the checkpoint directory to dir (created if needed; files
// already there with the same names are replaced). Each file is written to
// a temporary name and renamed, so a reader never sees a partial file.
func Extract(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("parent: %w", err)
	}
	names, err := fs.Glob(FS(), "*")
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := copyFile(filepath.Join(dir, n), n); err != nil {
			return fmt.Errorf("parent: extracting %s: %w", n, err)
		}
	}
	return nil
}

func copyFile(dst, name string) error {
	src, err := FS().Open(name)
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := output.CreateFile(dst, true)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, src); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

var (
	dirOnce sync.Once
	dirPath string
	dirErr  error
)

// Dir returns a directory holding the parent checkpoint, extracting it on
// first use to $TMPDIR/autocompress-parent-<hash prefix>; a complete
// directory from an earlier process is reused. Treat it as read-only.
func Dir() (string, error) {
	dirOnce.Do(func() {
		d := filepath.Join(os.TempDir(), "autocompress-parent-"+Hash()[:16])
		if complete(d) {
			dirPath = d
			return
		}
		out, err := output.NewDir(d, true)
		if err != nil {
			dirErr = fmt.Errorf("parent: %w", err)
			return
		}
		if err := Extract(out.Path()); err != nil {
			out.Abort()
			dirErr = err
			return
		}
		if err := out.Commit(); err != nil {
			out.Abort()
			if !complete(d) { // another process may have won the race
				dirErr = fmt.Errorf("parent: %w", err)
				return
			}
		}
		dirPath = d
	})
	return dirPath, dirErr
}

// complete reports whether d holds every embedded file with the right size.
func complete(d string) bool {
	names, _ := fs.Glob(FS(), "*")
	for _, n := range names {
		info, err := fs.Stat(FS(), n)
		if err != nil {
			return false
		}
		st, err := os.Stat(filepath.Join(d, n))
		if err != nil || st.Size() != info.Size() {
			return false
		}
	}
	return len(names) > 0
}
