package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/job"
)

// native reports whether a stage's engine setting means this binary.
func native(engine string) bool { return job.IsNative(engine) }

// pipelineEngine reports whether a stage can run on engine: native, or a
// job engine the pipeline launches here (job.EngineInfo.Local: torch;
// automodel and megatron-bridge need GPUs and their own installs: the
// distill command writes their jobs).
func pipelineEngine(engine string) bool {
	if native(engine) {
		return true
	}
	e, ok := job.LookupEngine(engine)
	return ok && e.Local
}

// runJob emits the stage's job into its state directory (so that an
// interrupted stage resumes it) and runs it here, then ingests it.
func runJob(ctx context.Context, env *Env, ec job.EmitConfig) (*job.RunResult, error) {
	ec.Dir = filepath.Join(env.StateDir(), "job")
	ec.Progress = env.Progress()
	if _, err := os.Stat(filepath.Join(ec.Dir, job.ContractFile)); err == nil {
		env.Note("resuming the %s job in %s", ec.Kind, ec.Dir)
	}
	res, err := job.Run(ctx, job.RunConfig{Emit: ec, Launch: job.LaunchConfig{Mode: job.LaunchLocal}})
	if res != nil && res.Launched != nil {
		env.AddJobUsage(res.Launched.CPUSeconds, res.Launched.PeakRSSBytes)
	}
	return res, err
}

// distillJob is the distill stage on a PyTorch engine: the same recipe as
// native distill's (its defaults: weight decay 0.1, clip 1, warm-up
// steps/20, min LR lr/10), the checked result copied into the stage, its
// progress lines as the stage's log and a summary in distill's form.
func distillJob(ctx context.Context, env *Env, t *target, c *Config) error {
	d := c.Distill
	ec := job.EmitConfig{Kind: job.Distill, Engine: d.Engine, Teacher: t.parent, Student: filepath.Join(env.Input(StagePrune), ChildDir),
		Data: c.Data, EvalData: c.EvalData, Assets: c.Assets, WorldSize: max(d.WorldSize, 1), CheckpointEvery: DistillCheckpointEvery,
		Recipe: job.Recipe{Tokens: d.Tokens, SeqLen: d.SeqLen, Batch: d.Batch, LR: d.LR, WeightDecay: 0.1, Clip: 1,
			Temperature: d.Temperature, KDWeight: d.KDWeight, CEWeight: d.CEWeight, Seed: uint64(d.Seed), EvalRows: DistillEvalRows}}
	res, err := runJob(ctx, env, ec)
	if err != nil {
		return err
	}
	in := res.Ingested
	r := in.Result
	if err := copyDir(in.Checkpoint, filepath.Join(env.Dir, ChildDir)); err != nil {
		return err
	}
	lines, err := os.ReadFile(filepath.Join(res.Emitted.Dir, in.Contract.Outputs.StepLog))
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if err := os.WriteFile(filepath.Join(env.Dir, DistillLog), jsonLines(lines), 0o644); err != nil { //output:inside
		return err
	}
	sum := distill.Summary{Out: filepath.Join(env.Dir, ChildDir), Teacher: t.parent, Student: ec.Student, Steps: r.Steps, Tokens: r.Tokens,
		Temperature: d.Temperature, KDWeight: d.KDWeight, CEWeight: d.CEWeight, Elapsed: r.Elapsed, TokensPerSecond: r.TokensPerS,
		Engine: d.Engine, WorldSize: r.WorldSize, Device: r.Device, Log: filepath.Join(env.Dir, DistillLog)}
	if len(r.Losses) > 0 {
		sum.TrainLoss = r.Losses[len(r.Losses)-1]
	}
	if r.Loss != nil && r.Perplexity != nil {
		sum.After = &distill.Eval{Loss: *r.Loss, Perplexity: *r.Perplexity, Tokens: in.Contract.Data.ValidRows * in.Contract.Data.SeqLen}
	}
	if err := writeJSONFile(filepath.Join(env.Dir, DistillSummary), sum); err != nil {
		return err
	}
	env.Note("recovered on %s: %d steps, %d tokens on %d rank(s), %.0f tok/s; the job is kept in %s until the stage ends", d.Engine, r.Steps, r.Tokens, r.WorldSize, r.TokensPerS, res.Emitted.Dir)
	os.RemoveAll(env.StateDir()) // finished: nothing left to resume
	return nil
}

// importanceJob is the importance stage on a PyTorch engine.
func importanceJob(ctx context.Context, env *Env, t *target, c *Config) error {
	ec := job.EmitConfig{Kind: job.Importance, Engine: c.Importance.Engine, Model: t.parent, Data: c.Data, Assets: c.Assets,
		Rows: c.Importance.Seqs, Recipe: job.Recipe{SeqLen: c.Importance.SeqLen, Batch: ImportanceBatch, SkipPasses: c.Importance.Passes}}
	res, err := runJob(ctx, env, ec)
	if err != nil {
		return err
	}
	if err := res.Ingested.Scores.Save(filepath.Join(env.Dir, ScoresFile)); err != nil {
		return err
	}
	os.RemoveAll(env.StateDir())
	return nil
}

// jsonLines keeps the lines of b that are JSON objects (a torn last line
// of a job's progress file is dropped).
func jsonLines(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if json.Valid(line) && bytes.HasPrefix(line, []byte("{")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(src, dst string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil { //output:inside
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil { //output:inside
			return err
		}
	}
	return nil
}
