package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
)

func init() {
	Register(&Command{
		Name:  "train",
		Usage: "(--config arch.json | --preset parent) (--corpus builtin|extended | --data FILE...) --out DIR [flags]",
		Short: "train a model from scratch on the native engine (resumable)",
		Long: `Trains a Llama-style model with AdamW (decoupled weight decay, none on norms
and biases), linear warm-up and cosine decay, global gradient-norm clipping and
periodic evaluation on held-out rows, then saves a HuggingFace checkpoint
directory (config.json, model.safetensors, tokenizer.json,
generation_config.json).

Data: --corpus builtin reads the State of the Union addresses and Jane
Austen's novels unpacked by scripts/fetch-assets.sh (under --assets) and uses
their deterministic train/validation split (package corpus); --corpus
extended adds Moby Dick and the King James Bible to both (corpus.Extended,
whose test split is the builtin one, unchanged; its validation documents are
interleaved by source, so that the first --eval-rows rows sample all four);
--data FILE...
trains on UTF-8 text files (with --val FILE... for evaluation). Documents are
separated by <|endoftext|> and packed into rows of --seq-len+1 tokens.
Pre-tokenized token-id files (tokenizer.ReadIDs text or binary form; chosen
by --ids, a .ids extension or the binary magic) are accepted for --data and
--val too: each id sequence is one document. They need --tokenizer, the
tokenizer.json the ids were made with (it sizes the vocabulary and is saved
with the model).

Tokenizer: --tokenizer PATH reuses a tokenizer.json written by this command;
otherwise a byte-level BPE with --bpe-merges merges is trained on the training
text and saved with the model.

A checkpoint (parameters, AdamW moments, step, data position) is written
atomically to --checkpoint (default DIR.ckpt) every --checkpoint-every steps,
at the end, and on Ctrl-C; --resume continues from it bit-identically.
--log FILE writes every logged step and evaluation as JSON lines (step,
tokens, loss, lr, grad_norm, tokens_per_s; val_loss, val_ppl): the training
and held-out curves. With --resume the log is continued, less the lines of
the steps the resumed run redoes.

The embedded parent model (package parent) is reproduced by:
  autocompress train --preset parent --corpus builtin --out parent/model \
    --checkpoint /tmp/parent.ckpt --steps 1500 --warmup 50 --batch 16 \
    --seq-len 128 --lr 3e-3 --eval-every 250 --eval-rows 64 --log-every 25 \
    --checkpoint-every 25 --json`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			var (
				configPath = fs.String("config", "", "architecture `config.json` (HF format); vocab_size is set from the tokenizer")
				preset     = fs.String("preset", "", "architecture preset: parent")
				corpusName = fs.String("corpus", "", "built-in corpus: builtin (SOTU + Jane Austen) or extended (builtin + Moby Dick + King James Bible)")
				assets     = fs.String("assets", ".", "module root holding testdata/ext (for --corpus)")
				logPath    = fs.String("log", "", "JSON-lines `file` of the training steps and evaluations (the loss curves)")
				valFiles   = fs.String("val", "", "comma-separated validation text files (with --data)")
				tokPath    = fs.String("tokenizer", "", "tokenizer.json to reuse (default: train one)")
				merges     = intArg(fs, "bpe-merges", 3839, 1, maxVocab-257, "BPE merges when training the tokenizer (vocab = 256 + merges + 1)")
				out        = fs.String("out", "", "output model `directory`")
				ckpt       = fs.String("checkpoint", "", "checkpoint file (default DIR.ckpt)")
				resume     = fs.Bool("resume", false, "continue from --checkpoint")
				dtype      = fs.String("dtype", "BF16", "saved weight dtype: F32, BF16 or F16")
				jsonOut    = fs.Bool("json", false, "print the summary as JSON")
				seed       = fs.Uint64("seed", 1, "seed for the initial weights and the data order")
				partial    = fs.Bool("save-partial", false, "with --stop-at: also save the model as it is when stopping")
				force      = fs.Bool("force", false, "replace an existing --out directory, and without --resume an existing --checkpoint (also needed to finish a run saved with --save-partial)")
				o          train.Options
				idsFlag    = fs.Bool("ids", false, "the --data and --val files hold token ids (needs --tokenizer)")
			)
			dataFiles := dataFlag(fs, "training text or token-id")
			intVar(fs, &o.Steps, "steps", 1000, 1, maxSteps, "optimiser steps")
			intVar(fs, &o.Batch, "batch", 16, 1, maxBatch, "sequences per step")
			intVar(fs, &o.SeqLen, "seq-len", 128, 1, maxTokens, "tokens per sequence")
			floatVar(fs, &o.LR, "lr", 3e-3, positive, "peak learning rate")
			minLR := floatArg(fs, "min-lr", 0, nonNegative, "final learning rate (default lr/10)")
			warmup := intArg(fs, "warmup", 0, 0, maxSteps, "warm-up steps (default steps/20)")
			weightDecay := floatArg(fs, "weight-decay", 0.1, nonNegative, "decoupled weight decay")
			clip := floatArg(fs, "clip", 1, anyFinite, "global gradient-norm clip (0 or negative: off)")
			intVar(fs, &o.EvalEvery, "eval-every", 200, 0, maxSteps, "evaluate every N steps (0: at the end)")
			intVar(fs, &o.EvalRows, "eval-rows", 64, 1, maxCount, "validation rows per evaluation")
			intVar(fs, &o.LogEvery, "log-every", 50, 1, maxSteps, "log every N steps")
			intVar(fs, &o.CheckpointEvery, "checkpoint-every", 100, 1, maxSteps, "checkpoint every N steps")
			intVar(fs, &o.StopAt, "stop-at", 0, 0, maxSteps, "stop after this step with a checkpoint (resume later)")
			return func(ctx context.Context, env *Env, args []string) error {
				data := append(*dataFiles, args...)
				switch {
				case *out == "":
					return Usagef("--out is required")
				case (*configPath == "") == (*preset == ""):
					return Usagef("give exactly one of --config and --preset")
				case *preset != "" && *preset != "parent":
					return Usagef("unknown --preset %q (known: parent)", *preset)
				case (*corpusName == "") == (len(data) == 0):
					return Usagef("give --corpus builtin|extended or text files to train on (not both)")
				case *corpusName != "" && *corpusName != "builtin" && *corpusName != "extended":
					return Usagef("unknown --corpus %q (known: builtin, extended)", *corpusName)
				}
				dt := checkpoint.DType(strings.ToUpper(*dtype))
				if dt != checkpoint.F32 && dt != checkpoint.BF16 && dt != checkpoint.F16 {
					return Usagef("--dtype %q: want F32, BF16 or F16", *dtype)
				}
				if *ckpt == "" {
					*ckpt = filepath.Clean(*out) + ".ckpt"
				}
				o.Seed = *seed
				o.WeightDecay, o.Clip = weightDecay, clip
				if flagGiven(fs, "min-lr") {
					o.MinLR = minLR // an explicit 0 means 0
				}
				if flagGiven(fs, "warmup") {
					o.Warmup = warmup
				}
				o.CheckpointPath = *ckpt
				// The log's lines (every --log-every steps) are the steps'
				// display; the renderer draws the rest (the tokenizer's
				// merges, the notes).
				o.Log = env.Stderr
				term := progress.NewTerminal(env.Stderr)
				o.Progress = func(e progress.Event) {
					if e.State != progress.Running || e.Stage != "train" {
						term.Report(e)
					}
				}
				o.EnsureDefaults()
				if err := o.Validate(); err != nil {
					return &UsageError{Msg: err.Error()}
				}

				// The architecture first: the native engine must run it.
				var arch *architecture.Model
				if *preset == "" {
					a, err := architecture.Load(*configPath)
					if err != nil {
						return err
					}
					if err := engineTrains("--config", *configPath, a); err != nil {
						return err
					}
					arch = a
				}

				// Pre-tokenized data: every file must be token ids, or none.
				var valPaths []string
				if *valFiles != "" {
					valPaths = strings.Split(*valFiles, ",")
				}
				useIDs := false
				if *corpusName == "" {
					var err error
					if useIDs, err = trainDataIsIDs(append(append([]string{}, data...), valPaths...), *idsFlag); err != nil {
						return err
					}
				}
				if useIDs && *tokPath == "" {
					return Usagef("token-id data needs --tokenizer: the tokenizer.json the ids were made with (it sizes the vocabulary and is saved with the model)")
				}
				if *idsFlag && *corpusName != "" {
					return Usagef("--ids applies to --data files, not to --corpus")
				}

				job := train.Scratch{Merges: *merges, Seed: *seed, Out: *out, DType: dt, Force: *force, Resume: *resume,
					SavePartial: *partial, LogPath: *logPath, Options: o}
				if *corpusName != "" {
					tr, val, err := corpus.Splits(*corpusName, *assets)
					if err != nil {
						return err
					}
					job.Train, job.Val = dataset.FromCorpus(tr), dataset.FromCorpus(val)
				} else {
					var err error
					if job.Train, err = dataset.Read(data, *assets, useIDs); err != nil {
						return err
					}
					if job.Val, err = dataset.Read(valPaths, *assets, useIDs); err != nil {
						return err
					}
				}
				if *tokPath != "" {
					var err error
					if job.Tokenizer, err = tokenizer.ReadTrainedBPE(*tokPath); err != nil {
						return err
					}
				}
				if *preset == "" {
					job.Arch = arch
				}
				res, err := train.FromScratch(ctx, job)
				term.End()
				if err != nil {
					return err
				}
				if res.Stopped {
					fmt.Fprintf(env.Stderr, "stopped at step %d of %d; continue with --resume\n", res.Steps, o.Steps)
					if res.Saved {
						fmt.Fprintf(env.Stderr, "saved the partly trained model to %s\n", *out)
					}
					return nil
				}
				if *jsonOut {
					return writeJSON(env.Stdout, res)
				}
				fmt.Fprintf(env.Stdout, "saved %s: %d parameters, %d steps, train loss %.4f", *out, res.Params, res.Steps, res.TrainLoss)
				if res.ValPPL != nil {
					fmt.Fprintf(env.Stdout, ", validation perplexity %.2f", *res.ValPPL)
				}
				fmt.Fprintln(env.Stdout)
				return nil
			}
		},
	})
}

// trainDataIsIDs tells whether the data files hold token ids (--ids, a .ids
// extension or the binary magic); a mix of id and text files is refused
// (text trains the tokenizer that ids would need already).
func trainDataIsIDs(paths []string, flagged bool) (bool, error) {
	if flagged || len(paths) == 0 {
		return flagged, nil
	}
	first := dataset.IsIDs(paths[0], false)
	for _, p := range paths[1:] {
		if dataset.IsIDs(p, false) != first {
			return false, Usagef("%s and %s: give either text files or token-id files, not both (or --ids to read all as ids)", paths[0], p)
		}
	}
	return first, nil
}
