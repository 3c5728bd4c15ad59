package importance

import (
	"context"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/output"
)

// Cached returns the scores of m, loaded from the checkpoint directory
// dir, on rows. When path already holds scores of the same model
// (HashModelDir(dir)) and data (HashRows(rows)) they are returned as they
// are, with reused set, unless force; otherwise they are computed
// (Compute with o), keyed by the model's hash and saved to path
// (atomically). Without force, only an importance file (stale scores) is
// replaced: anything else at path is an *output.ExistsError before any work.
func Cached(ctx context.Context, m *engine.Model, dir string, rows [][]int32, path string, o Options, force bool) (s *Scores, reused bool, err error) {
	modelHash, err := HashModelDir(dir)
	if err != nil {
		return nil, false, err
	}
	if !force {
		old, err := Load(path)
		if err == nil && old.Matches(modelHash, HashRows(rows)) {
			return old, true, nil
		}
		if err != nil {
			if ferr := output.Free(path, false); ferr != nil {
				return nil, false, ferr // not scores: the user's file
			}
		}
	}
	// The scores are saved after the computing: their place must be writable now.
	if err := output.Check(path, true); err != nil {
		return nil, false, err
	}
	if s, err = Compute(ctx, m, rows, o); err != nil {
		return nil, false, err
	}
	s.ModelHash = modelHash
	if err := s.Save(path); err != nil {
		return nil, false, err
	}
	return s, false, nil
}
