package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/human"
	"github.com/autocompress/autocompress/internal/progress"
)

func init() {
	Register(&Command{
		Name:  "init",
		Usage: "--config CONFIG --out DIR [--seed N] [--dtype bf16|f16|f32] [--force]",
		Short: "write a random-weight checkpoint of a model shape (for tests and benchmarks)",
		Long: `Writes a HuggingFace checkpoint directory (config.json, model.safetensors)
of the architecture --config names (a config.json file, a checkpoint directory,
or a preset such as meta-llama/Llama-3.1-8B) with random weights: matrices and
embeddings from N(0, 0.02²), norm weights 1, biases 0, drawn from --seed (the
weights a model built with that seed holds). The tensors are drawn and written
a block at a time, so memory stays a few megabytes whatever the size (an
8B-parameter bf16 checkpoint is 16 GB on disk), and the directory appears only
when complete. The native engine must be able to run the architecture.

Random weights make real-shape inputs for tests and benchmarks (speed,
memory); they are never a stand-in for a trained model in a quality claim.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			config := fs.String("config", "", "architecture: `config.json`, checkpoint directory or preset name")
			out := fs.String("out", "", "output checkpoint `directory`")
			seed := fs.Uint64("seed", 1, "seed of the random weights")
			dtype := fs.String("dtype", "bf16", "weight dtype: bf16, f16 or f32")
			force := fs.Bool("force", false, "replace an existing --out directory")
			jsonOut := fs.Bool("json", false, "print a summary as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				switch {
				case len(args) > 0:
					return Usagef("unexpected arguments %q", args)
				case *config == "" || *out == "":
					return Usagef("--config and --out are required")
				}
				dt, err := checkpoint.ParseDType(*dtype)
				if err != nil || (dt != checkpoint.BF16 && dt != checkpoint.F16 && dt != checkpoint.F32) {
					return Usagef("--dtype %q: want bf16, f16 or f32", *dtype)
				}
				a, err := architecture.Load(*config)
				if err != nil {
					return err
				}
				if err := engineRunsFor("--config", *config, a, "init writes a checkpoint to run", "estimate and inspect take every supported family"); err != nil {
					return err
				}
				term := progress.NewTerminal(env.Stderr)
				err = engine.Init(ctx, a, *out, engine.InitOptions{Seed: *seed, DType: dt, Force: *force, Progress: term.Report})
				term.End()
				if err != nil {
					return err
				}
				params := a.Params().Total
				res := struct {
					Out    string `json:"out"`
					Params int64  `json:"params"`
					DType  string `json:"dtype"`
					Seed   uint64 `json:"seed"`
				}{*out, params, strings.ToLower(string(dt)), *seed}
				if *jsonOut {
					return writeJSON(env.Stdout, res)
				}
				fmt.Fprintf(env.Stdout, "wrote %s: %s parameters in %s, random weights (seed %d)\n", *out, human.Count(float64(params)), res.DType, *seed)
				return nil
			}
		},
	})
}
