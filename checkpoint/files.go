package checkpoint

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/internal/output"
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
	out, err := os.Create(to) //output:inside
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

// OutputDir is an output directory built atomically (see package
// internal/output): everything is written into a temporary directory beside
// the destination (Path), which Commit syncs and renames into place. Abort,
// or a cancelled context given to Watch, removes the temporary directory.
type OutputDir = output.Dir

// NewOutputDir prepares to write the directory dest. An existing dest is an
// *ExistsError unless force is set, in which case Commit replaces it.
func NewOutputDir(dest string, force bool) (*OutputDir, error) { return output.NewDir(dest, force) }
