package distill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
)

// Config describes one distillation run.
type Config struct {
	Teacher string // teacher checkpoint directory
	Student string // student checkpoint directory (the starting weights)
	Out     string // output checkpoint directory

	Data     []string // training data: text or token-id files, ParentSplitPrefix names (dataset.Read)
	EvalData []string // held-out data for the before/after summary, the same forms (optional)
	Assets   string   // module root holding testdata/ext, for parent: names

	Tokens int64 // training tokens; steps = ceil(Tokens / (Batch·SeqLen))

	// Train holds the optimiser, schedule, batch, sequence length, seed and
	// intervals (Steps is set from Tokens; Loss, Tag, OnStep and Progress
	// are set by Run). EvalRows bounds the held-out rows of every evaluation;
	// CheckpointEvery is the interval of resumable checkpoints.
	Train train.Options

	Temperature float64  // softmax temperature of the KL term (default 1)
	KDWeight    *float64 // weight of the KL term (default 1)
	CEWeight    *float64 // weight of cross-entropy on the data (default 0)

	// TopK > 0 distils from the teacher's K largest logits per position,
	// cached in CacheDir (default: the user cache directory) so that later
	// runs on the same data and teacher skip the teacher. 0 uses the full
	// teacher distribution, computed every step.
	TopK     int
	CacheDir string

	Checkpoint string // resumable checkpoint file (default Out + ".ckpt")
	LogPath    string // loss/LR log, JSON lines (default Out + ".log.jsonl")
	Resume     bool   // continue from Checkpoint
	Force      bool   // replace an existing Out, restart over an existing Checkpoint

	// Progress receives the training steps (stage "distill", unit "step",
	// the steps of a resumed checkpoint as Resumed), the evaluations and
	// notes worth telling the user (what was loaded, the vocabulary padding,
	// cache use); nil drops them.
	Progress progress.Func `json:"-"`
}

// Eval is a held-out measurement.
type Eval struct {
	Loss       float64 `json:"loss"` // mean cross-entropy, nats per token
	Perplexity float64 `json:"perplexity"`
	Tokens     int     `json:"tokens"`
}

// Summary describes a finished run.
type Summary struct {
	Out           string  `json:"out"`
	Teacher       string  `json:"teacher"`
	Student       string  `json:"student"`
	StudentParams int     `json:"student_params"`
	TeacherParams int     `json:"teacher_params"`
	Steps         int     `json:"steps"`
	Tokens        int64   `json:"tokens"` // training tokens of the whole run
	Temperature   float64 `json:"temperature"`
	KDWeight      float64 `json:"kd_weight"`
	CEWeight      float64 `json:"ce_weight"`
	TopK          int     `json:"top_k,omitempty"`
	SharedVocab   int     `json:"shared_vocab"`
	VocabNote     string  `json:"vocab_note,omitempty"`
	ResumedAt     int     `json:"resumed_at,omitempty"` // step the run resumed from
	StoppedAt     int     `json:"stopped_at,omitempty"` // step Train.StopAt ended the run at (no output written)
	TrainLoss     float64 `json:"train_loss"`           // loss of the last step

	// Held-out cross-entropy on EvalData (absent without it): the student
	// before and after, and the teacher.
	Before      *Eval `json:"before,omitempty"`
	After       *Eval `json:"after,omitempty"`
	TeacherEval *Eval `json:"teacher_eval,omitempty"`

	Elapsed         float64 `json:"elapsed_s"` // this invocation's training time
	TokensPerSecond float64 `json:"tokens_per_s"`
	// Engine, WorldSize and Device say what ran the training when it was not this
	// binary (a PyTorch job, package job): empty for a native run.
	Engine      string `json:"engine,omitempty"`
	WorldSize   int    `json:"world_size,omitempty"`
	Device      string `json:"device,omitempty"` // what the job's ranks ran on: cpu, cuda
	CacheFile   string `json:"cache_file,omitempty"`
	CacheHits   int64  `json:"cache_hit_rows,omitempty"`
	CacheMisses int64  `json:"cache_miss_rows,omitempty"`
	Log         string `json:"log"`
}

// EnsureDefaults fills unset fields and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.Temperature == 0 {
		c.Temperature = 1
	}
	if c.KDWeight == nil {
		c.KDWeight = train.Ptr(1.0)
	}
	if c.CEWeight == nil {
		c.CEWeight = train.Ptr(0.0)
	}
	if c.Train.Batch == 0 {
		c.Train.Batch = 8
	}
	if c.Train.SeqLen == 0 {
		c.Train.SeqLen = 128
	}
	if c.Out != "" && c.Checkpoint == "" {
		c.Checkpoint = filepath.Clean(c.Out) + ".ckpt"
	}
	if c.Out != "" && c.LogPath == "" {
		c.LogPath = filepath.Clean(c.Out) + ".log.jsonl"
	}
	if c.TopK > 0 && c.CacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			c.CacheDir = filepath.Join(d, "autocompress", "teacher-logits")
		}
	}
	return c
}

// Validate reports the first invalid field (after EnsureDefaults).
func (c *Config) Validate() error {
	switch {
	case c.Teacher == "" || c.Student == "" || c.Out == "":
		return errors.New("distill: teacher, student and output directories are required")
	case len(c.Data) == 0:
		return errors.New("distill: no training data")
	case c.Tokens < 1:
		return fmt.Errorf("distill: tokens %d: want at least one batch", c.Tokens)
	case c.Temperature <= 0 || math.IsInf(c.Temperature, 0) || math.IsNaN(c.Temperature):
		return fmt.Errorf("distill: temperature %g: want > 0", c.Temperature)
	case *c.KDWeight < 0 || *c.CEWeight < 0 || *c.KDWeight+*c.CEWeight == 0:
		return fmt.Errorf("distill: kd weight %g, ce weight %g: want >= 0, not both 0", *c.KDWeight, *c.CEWeight)
	case c.TopK < 0:
		return fmt.Errorf("distill: top-k %d: want >= 0", c.TopK)
	case c.TopK > 0 && c.CacheDir == "":
		return errors.New("distill: top-k needs a cache directory (no user cache directory is known: give one)")
	}
	return nil
}

// Steps returns the optimiser steps that cover c.Tokens.
func (c *Config) Steps() int {
	per := int64(c.Train.Batch * c.Train.SeqLen)
	return int((c.Tokens + per - 1) / per)
}

// Run distils the teacher into the student and writes the result to
// c.Out: a checkpoint of the student's architecture, format and dtype,
// with the student's tokenizer and other files, built in a temporary
// directory, validated and renamed into place. Checkpoints every
// c.Train.CheckpointEvery steps (and on cancellation) make it resumable
// bit-identically with c.Resume. Cancelling ctx returns ctx.Err() after the
// checkpoint.
func Run(ctx context.Context, c Config) (*Summary, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	note := func(f string, a ...any) { c.Progress.Notef("distill", f, a...) }
	if err := c.checkOutputs(); err != nil {
		return nil, err
	}

	// Models and vocabularies, before any work on the data.
	ttok, err := tokenizer.Load(c.Teacher)
	if err != nil {
		return nil, fmt.Errorf("distill: teacher: %w", err)
	}
	stok, err := tokenizer.Load(c.Student)
	if err != nil {
		return nil, fmt.Errorf("distill: student: %w", err)
	}
	// The teacher runs forward only: its weights are read in place, in the
	// checkpoint's dtype (a bf16 teacher holds its file size, not twice it).
	teacher, err := engine.LoadWith(c.Teacher, engine.LoadOptions{Mapped: true})
	if err != nil {
		return nil, fmt.Errorf("distill: teacher: %w", err)
	}
	defer teacher.Close()
	student, err := engine.Load(c.Student)
	if err != nil {
		return nil, fmt.Errorf("distill: student: %w", err)
	}
	tv, sv := teacher.Arch().Vocab, student.Arch().Vocab
	shared, vnote, err := SharedVocab(ttok, stok, tv, sv)
	if err != nil {
		return nil, err
	}
	if vnote != "" {
		note("%s", vnote)
	}
	dtype, err := weightDType(c.Student)
	if err != nil {
		return nil, err
	}
	for _, m := range []*engine.Model{teacher, student} {
		if mp := m.Arch().MaxPositions; mp > 0 && c.Train.SeqLen > mp {
			return nil, fmt.Errorf("distill: sequence length %d exceeds a model's max_position_embeddings %d", c.Train.SeqLen, mp)
		}
	}
	// Data.
	rows, evalRows, err := packData(ctx, &c, stok, shared)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dataHash := dataset.HashRows(rows)
	note("data: %d training rows of %d tokens (%d tokens); %d held-out rows; %d steps of %d×%d tokens",
		len(rows), c.Train.SeqLen, len(rows)*c.Train.SeqLen, len(evalRows), c.Steps(), c.Train.Batch, c.Train.SeqLen)

	// The loss.
	teacherHash := teacher.Hash()
	dense := NewModelTeacher(teacher)
	var src Teacher = dense
	var cache *TopKCache
	if c.TopK > 0 && *c.KDWeight > 0 {
		key := CacheKey{Teacher: teacherHash, Data: dataHash, Rows: len(rows), SeqLen: c.Train.SeqLen, K: c.TopK, Shared: shared}
		if cache, err = OpenTopKCache(c.CacheDir, key, dense); err != nil {
			return nil, err
		}
		defer cache.Close()
		src = cache
		note("teacher top-%d logits cache: %s", c.TopK, cache.Path)
	}
	kd := &KD{Teacher: src, Temperature: c.Temperature, KDWeight: *c.KDWeight, CEWeight: *c.CEWeight, Shared: shared}

	o := c.Train
	o.Steps = c.Steps()
	o.Loss = train.FromLogits(kd)
	o.CheckpointPath = c.Checkpoint
	o.Tag = c.tag(teacherHash, dataHash, o)
	o.LogEvery = 0
	o.Log = nil
	o.Progress = nil
	if c.Progress != nil {
		o.Progress = func(e progress.Event) {
			e.Stage = "distill"
			c.Progress(e)
		}
	}

	sum := &Summary{Out: c.Out, Teacher: c.Teacher, Student: c.Student, StudentParams: student.NumParams(),
		TeacherParams: teacher.NumParams(), Steps: o.Steps, Tokens: int64(o.Steps * o.Batch * o.SeqLen),
		Temperature: c.Temperature, KDWeight: *c.KDWeight, CEWeight: *c.CEWeight, TopK: c.TopK,
		SharedVocab: shared, VocabNote: vnote, Log: c.LogPath}
	if len(evalRows) > 0 {
		if sum.Before, err = evaluate(student, evalRows, o.Batch); err != nil {
			return nil, err
		}
		if sum.TeacherEval, err = evaluate(teacher, evalRows, o.Batch); err != nil {
			return nil, err
		}
		note("held-out before: student loss %.4f (perplexity %.2f), teacher %.4f (%.2f)",
			sum.Before.Loss, sum.Before.Perplexity, sum.TeacherEval.Loss, sum.TeacherEval.Perplexity)
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var log *train.StepLog // opened once the resumed step is known
	o.OnStep = func(s train.StepInfo) { log.Write(s) }
	tr, err := train.New(student, rows, evalRows, o)
	if err != nil {
		return nil, err
	}
	resumeStep := -1
	if c.Resume {
		if err := tr.Resume(c.Checkpoint); err != nil {
			return nil, err
		}
		sum.ResumedAt, resumeStep = tr.State.Step, tr.State.Step
		note("resumed %s at step %d of %d", c.Checkpoint, tr.State.Step, o.Steps)
	}
	if log, err = train.OpenStepLog(c.LogPath, resumeStep, int64(o.Batch*o.SeqLen), c.Force); err != nil {
		return nil, err
	}
	defer log.Close() // best effort: the log never stops a run
	res, err := tr.Run(ctx)
	if cache != nil {
		sum.CacheFile, sum.CacheHits, sum.CacheMisses = cache.Path, cache.Hits.Load(), cache.Misses.Load()
	}
	if err != nil {
		return nil, err
	}
	if tr.State.Step < o.Steps { // stopped by o.StopAt
		sum.StoppedAt = tr.State.Step
		return sum, nil
	}
	sum.TrainLoss = tr.State.LastLoss
	sum.Elapsed = res.Elapsed.Seconds()
	if res.Elapsed > 0 {
		sum.TokensPerSecond = float64(res.Tokens) / res.Elapsed.Seconds()
	}
	if len(evalRows) > 0 { // the trainer evaluates after the last step
		sum.After = &Eval{Loss: res.ValLoss, Perplexity: math.Exp(res.ValLoss), Tokens: sum.Before.Tokens}
	}
	if err := save(ctx, student, c.Student, c.Out, dtype, c.Force); err != nil {
		return nil, err
	}
	return sum, nil
}

// checkOutputs refuses to overwrite an existing output or checkpoint
// without Force (or, for the checkpoint, Resume).
func (c *Config) checkOutputs() error {
	if _, err := os.Lstat(c.Out); err == nil && !c.Force {
		return &checkpoint.ExistsError{Path: c.Out}
	}
	if !c.Force {
		if err := train.CheckStepLog(c.LogPath); err != nil { // a file of the user's at the log's path
			return err
		}
	}
	// The student is saved after the training: its place must be writable now.
	if err := output.Check(c.Out, true); err != nil {
		return fmt.Errorf("distill: %w", err)
	}
	_, err := os.Stat(c.Checkpoint)
	switch {
	case c.Resume && err != nil:
		return fmt.Errorf("distill: resume: %w", err)
	case !c.Resume && err == nil && !c.Force:
		return fmt.Errorf("distill: the checkpoint of an earlier run (resume to continue from it): %w", &checkpoint.ExistsError{Path: c.Checkpoint})
	case !c.Resume && err == nil:
		if err := os.Remove(c.Checkpoint); err != nil {
			return fmt.Errorf("distill: %w", err)
		}
	}
	return nil
}

// tag hashes everything besides the student, the rows and the seed that
// the steps depend on, so that a checkpoint resumes only the same run.
func (c *Config) tag(teacher, data string, o train.Options) string {
	o.EnsureDefaults()
	s := fmt.Sprintf("teacher %s data %s T %g kd %g ce %g topk %d steps %d lr %g min %g warmup %d wd %g clip %g b %g %g eps %g",
		teacher, data, c.Temperature, *c.KDWeight, *c.CEWeight, c.TopK, o.Steps, o.LR, *o.MinLR, *o.Warmup, *o.WeightDecay, *o.Clip, *o.Beta1, *o.Beta2, o.Eps)
	h := sha256.Sum256([]byte(s))
	return "distill:" + hex.EncodeToString(h[:8])
}

func evaluate(m *engine.Model, rows [][]int32, batch int) (*Eval, error) {
	l, err := train.MeanLoss(m, rows, batch)
	if err != nil {
		return nil, err
	}
	return &Eval{Loss: l, Perplexity: math.Exp(l), Tokens: len(rows) * (len(rows[0]) - 1)}, nil
}

// separator is the id that separates packed documents: the tokenizer's EOS,
// else its <|endoftext|>.
func separator(t *tokenizer.Tokenizer) (int32, error) {
	if id, ok := t.EOS(); ok {
		return int32(id), nil
	}
	if id, ok := t.TokenID(train.EndOfText); ok {
		return int32(id), nil
	}
	return 0, errors.New("distill: the student's tokenizer has no end-of-text token (no eos_token in tokenizer_config.json, no <|endoftext|>) to separate documents with")
}

// packData tokenizes and packs the training and held-out data as Run
// trains on them: rows of SeqLen+1 ids of the student's tokenizer,
// documents separated by its end-of-text id, ids below shared.
func packData(ctx context.Context, c *Config, stok *tokenizer.Tokenizer, shared int) (rows, evalRows [][]int32, err error) {
	sep, err := separator(stok)
	if err != nil {
		return nil, nil, err
	}
	do := dataset.Options{Assets: c.Assets, Tokenizer: stok}
	do.SeqLen, do.Sep, do.Vocab = c.Train.SeqLen, sep, shared
	packed, err := dataset.Rows(ctx, c.Data, do)
	if err != nil {
		return nil, nil, fmt.Errorf("distill: data: %w", err)
	}
	if len(c.EvalData) > 0 {
		do.MaxRows = c.Train.EvalRows
		ep, err := dataset.Rows(ctx, c.EvalData, do)
		if err != nil {
			return nil, nil, fmt.Errorf("distill: held-out data: %w", err)
		}
		evalRows = ep.Rows
	}
	return packed.Rows, evalRows, nil
}

// Data returns the training and held-out rows Run would train and
// evaluate on for c (after EnsureDefaults), without loading the weights:
// what a PyTorch job of the same distillation is given (package job).
func Data(ctx context.Context, c Config) (rows, evalRows [][]int32, err error) {
	c.EnsureDefaults()
	ttok, err := tokenizer.Load(c.Teacher)
	if err != nil {
		return nil, nil, fmt.Errorf("distill: teacher: %w", err)
	}
	stok, err := tokenizer.Load(c.Student)
	if err != nil {
		return nil, nil, fmt.Errorf("distill: student: %w", err)
	}
	ta, err := architecture.Load(c.Teacher)
	if err != nil {
		return nil, nil, fmt.Errorf("distill: teacher: %w", err)
	}
	sa, err := architecture.Load(c.Student)
	if err != nil {
		return nil, nil, fmt.Errorf("distill: student: %w", err)
	}
	shared, _, err := SharedVocab(ttok, stok, ta.Vocab, sa.Vocab)
	if err != nil {
		return nil, nil, err
	}
	return packData(ctx, &c, stok, shared)
}

// weightDType is the dtype of a checkpoint's weights (the first tensor's);
// the output keeps it when the engine can write it, else F32.
func weightDType(dir string) (checkpoint.DType, error) {
	r, err := checkpoint.Open(dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	ts := r.Tensors()
	if len(ts) == 0 {
		return "", fmt.Errorf("distill: %s holds no tensors", dir)
	}
	switch dt := ts[0].DType; dt {
	case checkpoint.F32, checkpoint.BF16, checkpoint.F16:
		return dt, nil
	}
	return checkpoint.F32, nil
}

// save writes m to dest atomically: the weights and config.json, the
// other files of the student directory (tokenizer, generation config),
// validated against config.json before the rename.
func save(ctx context.Context, m *engine.Model, studentDir, dest string, dt checkpoint.DType, force bool) error {
	out, err := checkpoint.NewOutputDir(dest, force)
	if err != nil {
		return err
	}
	defer out.Abort()
	out.Watch(ctx)
	if err := m.Save(out.Path(), dt); err != nil {
		return err
	}
	aux, err := checkpoint.AuxFiles(studentDir)
	if err != nil {
		return err
	}
	var names []string
	for _, n := range aux {
		if n != "config.json" {
			names = append(names, n)
		}
	}
	if err := checkpoint.CopyFiles(out.Path(), studentDir, names); err != nil {
		return err
	}
	if err := export.CheckDir(out.Path(), ""); err != nil {
		return fmt.Errorf("distill: the output does not validate: %w", err)
	}
	return out.Commit()
}
