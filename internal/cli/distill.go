package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/job"
	"github.com/autocompress/autocompress/parent"
)

func init() {
	Register(&Command{
		Name:  "distill",
		Usage: "--teacher DIR|parent --student DIR --data FILE... --tokens N --out DIR [flags]",
		Short: "recover a pruned model by distillation from its parent (resumable)",
		Long: `Trains the student checkpoint on the data with the teacher's logits as
targets: forward KL(teacher ‖ student) at --temperature (scaled by T²),
weighted by --kd-weight, plus cross-entropy on the data weighted by
--ce-weight (--kd-weight 0 --ce-weight 1 is plain fine-tuning of an existing
checkpoint). AdamW (no decay on norms and biases), linear warm-up and cosine
decay to --min-lr, global gradient-norm clipping, packed sequences of
--seq-len tokens, a data order fixed by --seed.

Teacher and student must share their tokenizer (tokenizer.json in both
directories); vocabularies that differ only by padding rows are distilled over
the shared ids. The student may be any checkpoint the engine loads, including
DeciLM and padded children from 'autocompress prune'. The output is a
checkpoint of the student's architecture, format and dtype with its tokenizer
files, built beside --out, validated and renamed into place; an existing --out
is replaced only with --force.

--data and --eval-data take text files, token-id files (a .ids name or the
binary magic; ids of the student's tokenizer) or parent:train-sample,
parent:validation and parent:test, parts of the embedded parent's text built
into the binary, or parent:train, the whole training part, cut from the
corpora under --assets (scripts/fetch-assets.sh).

A checkpoint (weights, AdamW moments, step, data position) is written
atomically to --checkpoint (default OUT.ckpt) every --save-every steps and on
Ctrl-C; after any interruption, kill -9 included, --resume continues from it
and ends with weights bit-identical to an uninterrupted run's. Every step and
evaluation is logged to --log (JSON lines, default OUT.log.jsonl).

--top-k K distils from the teacher's K largest logits per position instead of
the full distribution, cached on disk (--cache-dir, default the user cache
directory) under a hash of the teacher, the data and the settings: a second
student distilled on the same data reads the teacher from the cache.

--engine torch|automodel|megatron-bridge hands the run to PyTorch instead
(job/CONTRACT.md): a self-contained job directory (--emit, default OUT.job)
with the models, the data as token shards in native distill's step order,
the engine's recipe, requirements.txt, launch.sh and launch.sbatch. --launch
print says how to run it, local runs it here (Ctrl-C checkpoints it; the
same command again resumes it) and copies the checked result to --out, and
slurm submits it (autocompress job wait DIR follows it). automodel and
megatron-bridge jobs are only written and checked here, never run.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var (
				c        distill.Config
				data     fileList
				evalData fileList
				teacher  = fs.String("teacher", "", "teacher checkpoint `directory`, or \"parent\" for the embedded parent")
				student  = fs.String("student", "", "student checkpoint `directory` (the starting weights)")
				lr       = floatArg(fs, "lr", 1e-3, positive, "peak learning rate")
				minLR    = floatArg(fs, "min-lr", 0, nonNegative, "final learning rate (default lr/10)")
				warmup   = intArg(fs, "warmup", 0, 0, maxSteps, "warm-up steps (default steps/20)")
				wd       = floatArg(fs, "weight-decay", 0.1, nonNegative, "decoupled weight decay")
				clip     = floatArg(fs, "clip", 1, nonNegative, "global gradient-norm clip (0: off)")
				kdW      = floatArg(fs, "kd-weight", 1, nonNegative, "weight of the distillation KL")
				ceW      = floatArg(fs, "ce-weight", 0, nonNegative, "weight of cross-entropy on the data")
				jsonOut  = fs.Bool("json", false, "print the summary as JSON")
			)
			fs.Var(&data, "data", "training text `files` or parent:SPLIT (repeatable or comma-separated)")
			fs.Var(&evalData, "eval-data", "held-out text `files` or parent:SPLIT for the before/after perplexity")
			tokens := intArg(fs, "tokens", 0, 1, maxTrainTokens, "training tokens (steps = tokens / (batch × seq-len), rounded up)")
			fs.StringVar(&c.Out, "out", "", "output checkpoint `directory`")
			fs.StringVar(&c.Assets, "assets", ".", "module root holding testdata/ext (for parent:train data)")
			intVar(fs, &c.Train.SeqLen, "seq-len", 128, 2, maxTokens, "tokens per packed sequence")
			intVar(fs, &c.Train.Batch, "batch", 8, 1, maxBatch, "sequences per step")
			fs.Uint64Var(&c.Train.Seed, "seed", 1, "seed of the data order")
			floatVar(fs, &c.Temperature, "temperature", 1, positive, "softmax temperature of the KL term")
			intVar(fs, &c.Train.EvalEvery, "eval-every", 0, 0, maxSteps, "evaluate on --eval-data every N steps (0: before and after only)")
			intVar(fs, &c.Train.EvalRows, "eval-rows", 64, 1, maxCount, "held-out rows of --seq-len+1 tokens per evaluation")
			intVar(fs, &c.Train.CheckpointEvery, "save-every", 50, 1, maxSteps, "write a resumable checkpoint every N steps")
			fs.BoolVar(&c.Resume, "resume", false, "continue from --checkpoint")
			fs.BoolVar(&c.Force, "force", false, "replace an existing --out and start over an existing --checkpoint")
			fs.StringVar(&c.Checkpoint, "checkpoint", "", "resumable checkpoint `file` (default OUT.ckpt)")
			fs.StringVar(&c.LogPath, "log", "", "loss and learning-rate log `file`, JSON lines (default OUT.log.jsonl)")
			intVar(fs, &c.TopK, "top-k", 0, 0, maxVocab, "distil from the teacher's K largest logits per position, cached on disk (0: full distribution)")
			fs.StringVar(&c.CacheDir, "cache-dir", "", "`directory` of the teacher top-k cache (default: the user cache directory)")
			intVar(fs, &c.Train.StopAt, "stop-at", 0, 0, maxSteps, "stop after this step with a checkpoint (resume later)")
			jf := addJobFlags(fs)
			return func(ctx context.Context, env *Env, args []string) error {
				data = append(data, args...)
				c.Tokens = int64(*tokens)
				switch {
				case *teacher == "" || *student == "":
					return Usagef("--teacher and --student are required (checkpoint directories; --teacher parent for the embedded parent)")
				case c.Out == "":
					return Usagef("--out is required")
				case len(data) == 0:
					return Usagef("--data is required (text files or parent:train-sample)")
				case c.Tokens < 1:
					return Usagef("--tokens %d: want a positive number of training tokens", c.Tokens)
				case c.Train.SeqLen < 1 || c.Train.Batch < 1:
					return Usagef("--seq-len %d, --batch %d: want positive", c.Train.SeqLen, c.Train.Batch)
				case *lr <= 0 || *minLR < 0 || *minLR > *lr:
					return Usagef("--lr %g, --min-lr %g: want 0 <= min-lr <= lr and lr > 0", *lr, *minLR)
				case *warmup < 0 || *wd < 0:
					return Usagef("--warmup %d, --weight-decay %g: want >= 0", *warmup, *wd)
				case c.Temperature <= 0:
					return Usagef("--temperature %g: want > 0", c.Temperature)
				case *kdW < 0 || *ceW < 0 || *kdW+*ceW == 0:
					return Usagef("--kd-weight %g, --ce-weight %g: want >= 0 and not both 0", *kdW, *ceW)
				case c.TopK < 0 || c.Train.EvalEvery < 0 || c.Train.EvalRows < 1 || c.Train.CheckpointEvery < 0:
					return Usagef("--top-k, --eval-every and --save-every must be >= 0 and --eval-rows positive")
				}
				if err := jf.check(filepath.Clean(c.Out) + ".job"); err != nil {
					return err
				}
				if !jf.native() {
					return distillJob(ctx, env, jf, &c, *teacher, *student, data, evalData, *lr, *minLR, *warmup, *wd, *clip, *kdW, *ceW, *jsonOut)
				}
				var err error
				if c.Teacher, err = engineCheckpoint("--teacher", *teacher); err != nil {
					return err
				}
				if c.Student, err = engineCheckpoint("--student", *student); err != nil {
					return err
				}
				c.Data, c.EvalData = data, evalData
				c.Train.LR = *lr
				c.Train.WeightDecay, c.Train.Clip = wd, clip
				if flagGiven(fs, "min-lr") {
					c.Train.MinLR = minLR
				}
				if flagGiven(fs, "warmup") {
					c.Train.Warmup = warmup
				}
				c.KDWeight, c.CEWeight = kdW, ceW
				term := progress.NewTerminal(env.Stderr)
				c.Progress = term.Report
				sum, err := distill.Run(ctx, c)
				term.End()
				var exists *output.ExistsError
				if errors.As(err, &exists) && exists.Path == c.EnsureDefaults().Checkpoint {
					return fmt.Errorf("%w (continue it with --resume)", err)
				}
				if err != nil {
					if errors.As(err, new(*parent.UnknownSplitError)) {
						return Usagef("--data/--eval-data: %v", err)
					}
					if ctx.Err() != nil {
						fmt.Fprintf(env.Stderr, "checkpoint written to %s; continue with --resume\n", c.EnsureDefaults().Checkpoint)
					}
					return err
				}
				if sum.StoppedAt > 0 {
					fmt.Fprintf(env.Stderr, "stopped at step %d of %d; continue with --resume\n", sum.StoppedAt, sum.Steps)
					return nil
				}
				if *jsonOut {
					return writeJSON(env.Stdout, sum)
				}
				distillPrint(env.Stdout, sum)
				return nil
			}
		},
	})
}

// distillJob hands the distillation to a PyTorch engine (--engine).
func distillJob(ctx context.Context, env *Env, jf *jobFlags, c *distill.Config, teacher, student string, data, evalData []string, lr, minLR float64, warmup int, wd, clip, kdW, ceW float64, asJSON bool) error {
	td, err := checkpointDir(teacher)
	if err != nil {
		return err
	}
	sd, err := checkpointDir(student)
	if err != nil {
		return err
	}
	r := job.Recipe{Tokens: c.Tokens, SeqLen: c.Train.SeqLen, Batch: c.Train.Batch, LR: lr, MinLR: minLR, Warmup: warmup,
		WeightDecay: wd, Clip: clip, Temperature: c.Temperature, KDWeight: kdW, CEWeight: ceW, TopK: c.TopK,
		Seed: c.Train.Seed, EvalRows: c.Train.EvalRows}
	ec := job.EmitConfig{Kind: job.Distill, Teacher: td, Student: sd, Data: data, EvalData: evalData, Assets: c.Assets,
		Recipe: r, CheckpointEvery: c.Train.CheckpointEvery, Force: c.Force}
	res, err := jf.run(ctx, env, ec, c.Out, c.Force, asJSON)
	if err != nil || res == nil || res.Ingested == nil || asJSON {
		return err
	}
	jr := res.Ingested.Result
	fmt.Fprintf(env.Stdout, "saved %s: %d steps, %d tokens on %d rank(s) of %s, %.0f tok/s, last training loss %s\n",
		res.Out, jr.Steps, jr.Tokens, jr.WorldSize, jf.engine, jr.TokensPerS, lastLoss(jr.Losses))
	if jr.Perplexity != nil {
		fmt.Fprintf(env.Stdout, "held-out perplexity %.2f\n", *jr.Perplexity)
	}
	fmt.Fprintf(env.Stdout, "job: %s\n", jf.emit)
	return nil
}

func lastLoss(v []float64) string {
	if len(v) == 0 {
		return "(none logged)"
	}
	return fmt.Sprintf("%.4f", v[len(v)-1])
}

func distillPrint(w io.Writer, s *distill.Summary) {
	fmt.Fprintf(w, "saved %s: %d parameters (teacher %d), %d steps, %d tokens, %.0f tok/s, last training loss %.4f\n",
		s.Out, s.StudentParams, s.TeacherParams, s.Steps, s.Tokens, s.TokensPerSecond, s.TrainLoss)
	if s.Before != nil && s.After != nil {
		fmt.Fprintf(w, "held-out (%d tokens): perplexity %.2f -> %.2f (loss %.4f -> %.4f); teacher %.2f\n",
			s.After.Tokens, s.Before.Perplexity, s.After.Perplexity, s.Before.Loss, s.After.Loss, s.TeacherEval.Perplexity)
	}
	if s.CacheFile != "" {
		fmt.Fprintf(w, "teacher cache %s: %d rows read, %d computed\n", s.CacheFile, s.CacheHits, s.CacheMisses)
	}
	fmt.Fprintf(w, "log: %s\n", s.Log)
}
