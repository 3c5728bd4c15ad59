package importance

import (
	"context"
	"math"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/output"
)

// sameSkipRows reports whether old's skip losses were scored on the rows
// o would score them on (scores with none measured match any).
func sameSkipRows(old *Scores, m *engine.Model, rows [][]int32, o Options) bool {
	if o.NoSkipLoss || len(rows) == 0 {
		return true
	}
	measured := false
	for _, v := range old.LayerSkipLoss {
		measured = measured || !math.IsNaN(v)
	}
	k, t := o.SkipScope(m, len(rows), len(rows[0])-1)
	return !measured || old.SkipSequences == k && old.SkipTokens == t && old.Budget == o.Passes
}

// Cached returns the scores of m, loaded from the checkpoint directory
// dir, on rows. When path already holds scores of the same model
// (HashModelDir(dir)) and data (dataset.HashRows(rows)) they are returned as they
// are, with reused set, unless force; otherwise they are computed
// (Compute with o), keyed by the model's hash and saved to path
// (atomically). Scores whose skip losses were measured on other rows than
// o asks for (another pass budget) are recomputed too. Without force, only
// an importance file (stale scores) is replaced: anything else at path is
// an *output.ExistsError before any work.
func Cached(ctx context.Context, m *engine.Model, dir string, rows [][]int32, path string, o Options, force bool) (s *Scores, reused bool, err error) {
	modelHash, err := HashModelDir(dir)
	if err != nil {
		return nil, false, err
	}
	if !force {
		old, err := Load(path)
		if err == nil && old.Matches(modelHash, dataset.HashRows(rows)) && sameSkipRows(old, m, rows, o) {
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
