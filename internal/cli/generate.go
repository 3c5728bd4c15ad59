package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/workload"
)

func init() {
	Register(&Command{
		Name:  "generate",
		Usage: "--model DIR [--prompt TEXT | --ids 1,2,3] [--max-tokens N] [--temperature T] [--top-p P] [--seed S] [--greedy] [--json]",
		Short: "generate text with the native engine (KV cache, greedy or seeded sampling)",
		Long: `Loads a HuggingFace checkpoint directory (config.json + safetensors) into
the native float32 engine and continues a prompt.

The prompt is either text (--prompt, encoded with the tokenizer.json in the
model directory) or token ids (--ids, comma or space separated) for models
without a tokenizer. With neither, generation starts from the BOS token of
config.json. Text is streamed to standard output as it is generated when a
tokenizer is present; otherwise the generated ids are printed.

Sampling is greedy with --greedy or --temperature 0; otherwise tokens are
drawn from softmax(logits / temperature), restricted to the top-p nucleus,
with a PCG generator seeded by --seed (same seed, same output). Generation
stops at an EOS token from config.json (unless --ignore-eos: then always
--max-tokens, as serving benchmarks generate) or after --max-tokens. The prompt plus
--max-tokens must fit the model's max_position_embeddings unless
--allow-long-context is given.

A summary (tokens, time, tokens/s, the sgemm backend) goes to standard error;
--json instead writes one JSON object with the ids, text and timings.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` with config.json and *.safetensors, or \"parent\" for the embedded parent (required)")
			prompt := fs.String("prompt", "", "prompt `text` (needs tokenizer.json in the model directory)")
			ids := fs.String("ids", "", "prompt as token `ids`, e.g. 1,2,3")
			maxTokens := intArg(fs, "max-tokens", 64, 1, maxTokens, "most tokens to generate")
			temperature := floatArg(fs, "temperature", 0.8, nonNegative, "sampling temperature (0 = greedy)")
			topP := floatArg(fs, "top-p", 0.95, fraction, "nucleus sampling threshold in (0, 1]; 1 disables it")
			seed := fs.Uint64("seed", 1, "seed of the sampler")
			greedy := fs.Bool("greedy", false, "always pick the most likely token")
			asJSON := fs.Bool("json", false, "write the result as one JSON object")
			allowLong := fs.Bool("allow-long-context", false, "allow the prompt + --max-tokens past the model's max_position_embeddings")
			ignoreEOS := fs.Bool("ignore-eos", false, "generate --max-tokens tokens whatever they are: an EOS token does not stop generation")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q (quote a multi-word --prompt)", args)
				}
				dir, err := engineCheckpoint("--model", *model)
				if err != nil {
					return err
				}
				if *prompt != "" && *ids != "" {
					return Usagef("give either --prompt or --ids, not both")
				}
				if *maxTokens <= 0 {
					return Usagef("--max-tokens must be ≥ 1, got %d", *maxTokens)
				}
				if *temperature < 0 || math.IsNaN(*temperature) || math.IsInf(*temperature, 0) {
					return Usagef("--temperature must be a finite number ≥ 0, got %v", *temperature)
				}
				if !(*topP > 0 && *topP <= 1) {
					return Usagef("--top-p must be in (0, 1], got %v", *topP)
				}
				var promptIDs []int32
				if *ids != "" {
					parsed, err := tokenizer.ParseIDs(*ids)
					if err != nil {
						return Usagef("--ids: %v", err)
					}
					if len(parsed) == 0 {
						return Usagef("--ids has no token ids")
					}
					for _, id := range parsed {
						promptIDs = append(promptIDs, int32(id))
					}
				}
				tok, err := genLoadTokenizer(dir)
				if err != nil {
					return err
				}
				if *prompt != "" && tok == nil {
					return fmt.Errorf("%s has no tokenizer.json, so --prompt cannot be encoded; pass token ids with --ids instead", *model)
				}
				m, err := engine.LoadWith(dir, engine.LoadOptions{Mapped: true})
				if err != nil {
					return err
				}
				defer m.Close()
				arch := m.Arch()
				switch {
				case *prompt != "":
					enc, err := tok.Encode(*prompt, true)
					if err != nil {
						return fmt.Errorf("encoding --prompt: %w", err)
					}
					for _, id := range enc {
						promptIDs = append(promptIDs, int32(id))
					}
					if len(promptIDs) == 0 {
						return Usagef("--prompt encodes to no tokens")
					}
				case len(promptIDs) == 0:
					if arch.BOS < 0 {
						return Usagef("config.json has no bos_token_id: give a prompt with --prompt or --ids")
					}
					promptIDs = []int32{int32(arch.BOS)}
				}
				for i, id := range promptIDs {
					if id < 0 || int(id) >= arch.Vocab {
						return Usagef("prompt token %d is %d, outside the model's vocabulary [0, %d)", i, id, arch.Vocab)
					}
				}
				w := workload.FixedClosed(len(promptIDs), *maxTokens, 1)
				if _, err := w.FitContext(workload.ContextRule{MaxPositions: arch.MaxPositions, AllowLong: *allowLong, AllowFlag: allowLongFlag,
					What: fmt.Sprintf("the %d-token prompt + --max-tokens %d", len(promptIDs), *maxTokens)}); err != nil {
					return Usagef("%v", err)
				}
				var ts *tokenizer.TextStream
				if tok != nil {
					ts = tok.NewTextStream(true)
				}
				stream := func(id int32) bool {
					if ts != nil {
						if piece := ts.Add(int(id)); !*asJSON {
							fmt.Fprint(env.Stdout, piece)
						}
					}
					return true
				}
				var eos []int // nil: the model's EOS ids
				if *ignoreEOS {
					eos = []int{}
				}
				t0 := time.Now()
				gen, err := m.Generate(ctx, promptIDs, engine.GenerateOptions{
					MaxTokens: *maxTokens, Greedy: *greedy, Temperature: *temperature, TopP: *topP, Seed: *seed, EOS: eos, OnToken: stream})
				elapsed := time.Since(t0).Seconds()
				if err != nil {
					return err
				}
				text := ""
				if ts != nil {
					text = ts.Text()
				}
				if *asJSON {
					return writeJSON(env.Stdout, generateResult{
						Prompt: promptIDs, IDs: gen, Text: text, Seconds: elapsed,
						TokensPerSecond: float64(len(gen)) / elapsed, Backend: blas.Backend()})
				}
				if ts != nil {
					fmt.Fprintln(env.Stdout, ts.Rest())
				} else {
					parts := make([]string, len(gen))
					for i, id := range gen {
						parts[i] = fmt.Sprint(id)
					}
					fmt.Fprintln(env.Stdout, strings.Join(parts, " "))
				}
				fmt.Fprintf(env.Stderr, "generated %d tokens from a %d-token prompt in %.2fs (%.1f tokens/s, %s sgemm)\n",
					len(gen), len(promptIDs), elapsed, float64(len(gen))/elapsed, blas.Backend())
				return nil
			}
		},
	})
}

type generateResult struct {
	Prompt          []int32 `json:"prompt_ids"`
	IDs             []int32 `json:"ids"`
	Text            string  `json:"text,omitempty"`
	Seconds         float64 `json:"seconds"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Backend         string  `json:"backend"`
}

// genLoadTokenizer loads dir/tokenizer.json, or returns nil when the
// directory has none.
func genLoadTokenizer(dir string) (*tokenizer.Tokenizer, error) {
	p := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	tok, err := tokenizer.Load(p)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", p, err)
	}
	return tok, nil
}
