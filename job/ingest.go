package job

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/importance"
)

// Ingested is a done job's result, checked.
type Ingested struct {
	Contract *Contract
	Result   *Result
	// Checkpoint is the distilled student's directory (distill); its files'
	// hashes (keys relative to the job directory) are SHA256.
	Checkpoint string
	SHA256     map[string]string
	// Scores are an importance job's scores, in native importance's form.
	Scores *importance.Scores
}

// IngestError is a result that cannot be taken: Msg says why.
type IngestError struct{ Dir, Msg string }

func (e *IngestError) Error() string { return "job: " + e.Dir + ": " + e.Msg }

// validRows reads the contract's valid shards back as rows of seq_len+1
// ids (nanoGPT shards: the formats of the engines that run importance).
func validRows(dir string, c *Contract) ([][]int32, error) {
	var rows [][]int32
	n := c.Data.SeqLen + 1
	for _, s := range c.Data.Valid {
		toks, err := ReadShardFile(filepath.Join(dir, filepath.FromSlash(s)))
		if err != nil {
			return nil, err
		}
		if len(toks)%n != 0 {
			return nil, &IngestError{dir, fmt.Sprintf("%s holds %d tokens, not whole rows of %d", s, len(toks), n)}
		}
		for i := 0; i < len(toks); i += n {
			r := make([]int32, n)
			for j := range r {
				r[j] = int32(toks[i+j])
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// checkTensors checks that the checkpoint in dir holds exactly the
// tensors a lists, with their shapes, in a dense float dtype (F32, BF16 or
// F16: what a trainer writes).
func checkTensors(dir string, a *architecture.Model) error {
	r, err := checkpoint.Open(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	have := map[string][]int64{}
	for _, t := range r.Tensors() {
		if t.DType != checkpoint.F32 && t.DType != checkpoint.BF16 && t.DType != checkpoint.F16 {
			return fmt.Errorf("tensor %s is %s: want F32, BF16 or F16", t.Name, t.DType)
		}
		have[t.Name] = t.Shape
	}
	return a.CheckShapes(have, nil)
}

// Ingest reads the result of the done job at dir and checks it before
// anything goes on from it: the status is done; for distill the output
// checkpoint's config.json has exactly the contract's student shape, its
// tensors load in the native engine (for a family the native engine does
// not run: they are exactly the ones architecture lists, shapes and dense
// dtypes checked), and its files hash as result.json says (when
// it says). The hashes are recorded in Ingested.
func Ingest(dir string) (*Ingested, error) {
	s, err := ReadStatus(dir)
	if err != nil {
		return nil, err
	}
	c, err := Load(dir)
	if err != nil {
		return nil, err
	}
	r := s.Result
	switch {
	case r == nil:
		return nil, &IngestError{dir, fmt.Sprintf("no %s yet (the job is %s): wait for it (autocompress job wait)", c.Outputs.Result, s.State)}
	case r.Status != StatusDone:
		return nil, &IngestError{dir, fmt.Sprintf("the job is %s, not done: %s", r.Status, r.Error)}
	case r.Kind != c.Kind:
		return nil, &IngestError{dir, fmt.Sprintf("result.json is of a %s job, the contract's is %s", r.Kind, c.Kind)}
	}
	in := &Ingested{Contract: c, Result: r}
	switch c.Kind {
	case Distill:
		if r.Checkpoint != c.Outputs.Checkpoint {
			return nil, &IngestError{dir, fmt.Sprintf("result.json names checkpoint %q, the contract %q", r.Checkpoint, c.Outputs.Checkpoint)}
		}
		out := filepath.Join(dir, filepath.FromSlash(c.Outputs.Checkpoint))
		a, err := architecture.Load(out)
		if err != nil {
			return nil, &IngestError{dir, fmt.Sprintf("the output checkpoint's config: %v", err)}
		}
		sh, err := ShapeOf(a)
		if err != nil {
			return nil, &IngestError{dir, err.Error()}
		}
		if ok, diff := sh.Equal(c.Student.Shape); !ok {
			return nil, &IngestError{dir, "the output checkpoint's shape differs from the student's: " + diff}
		}
		if f := a.Family(); !f.Engine.Runs {
			// A family the native engine does not run: its
			// tensors are checked against the architecture instead.
			if err := checkTensors(out, a); err != nil {
				return nil, &IngestError{dir, fmt.Sprintf("the output checkpoint's tensors (the native engine does not run %s: %s): %v", a.Arch, f.Engine.Reason, err)}
			}
		} else if _, err := engine.Load(out); err != nil {
			return nil, &IngestError{dir, fmt.Sprintf("the output checkpoint does not load in the native engine: %v", err)}
		}
		h, err := HashTree(dir, c.Outputs.Checkpoint, false)
		if err != nil {
			return nil, err
		}
		for k, v := range r.SHA256 {
			if h[k] != v {
				return nil, &IngestError{dir, fmt.Sprintf("%s does not hash as result.json says (it changed after the job, or the trainer hashed it wrongly)", k)}
			}
		}
		in.Checkpoint, in.SHA256 = out, h
	case Eval:
		if r.Perplexity == nil || r.Loss == nil {
			return nil, &IngestError{dir, "an eval result needs perplexity and loss"}
		}
	case Proxy:
		if r.KL == nil {
			return nil, &IngestError{dir, "a proxy result needs kl"}
		}
	case Importance:
		if r.Importance == "" || relPath("importance", r.Importance) != nil {
			return nil, &IngestError{dir, "an importance result needs the scores file's name"}
		}
		sc, err := importance.Load(filepath.Join(dir, filepath.FromSlash(path.Clean(r.Importance))))
		if err != nil {
			return nil, &IngestError{dir, fmt.Sprintf("the importance scores: %v", err)}
		}
		// The Go side is the authority on what was scored: the model's
		// identity (importance.HashModelDir) and the rows' (dataset.HashRows
		// over the valid shards), whatever the trainer wrote there.
		if sc.ModelHash, err = importance.HashModelDir(filepath.Join(dir, filepath.FromSlash(c.Model.Path))); err != nil {
			return nil, err
		}
		rows, err := validRows(dir, c)
		if err != nil {
			return nil, err
		}
		sc.DataHash = dataset.HashRows(rows)
		in.Scores = sc
	}
	return in, nil
}
