package cli

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/eval"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/workload"
)

func init() {
	Register(&Command{
		Name:  "eval",
		Usage: "--model DIR --data FILE... [--seq-len N] [--stride N] [--json]",
		Short: "perplexity and bits per byte of a model on text or token ids",
		Long: `Scores a HuggingFace checkpoint directory on held-out text with the native
engine. Text is tokenized with the model's tokenizer.json (or --tokenizer),
prefixed with the model's BOS (or end-of-text) token so that the first word is
predicted too, and scored in packed windows of --seq-len tokens: consecutive
windows, every token predicted once, with 1..seq-len tokens of context. With
--stride S (< seq-len) the windows slide by S tokens instead and every token
gets at least seq-len−S tokens of context, at seq-len/S times the cost.

Reports perplexity (exp of the mean negative log-likelihood per token) and bits
per byte (total negative log-likelihood in bits over the text's UTF-8 bytes,
comparable across tokenizers). Pre-tokenized id files (tokenizer.ReadIDs text
or binary form; chosen by --ids, a .ids extension or the binary magic) give
perplexity only; each line is scored as its own sequence. Several --data files
(repeated, comma-separated or positional) are each scored on their own and
pooled: perplexity over all their tokens, bits per byte over all their bytes.

--model parent scores the embedded parent model (package parent).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` (HF checkpoint), or \"parent\" for the embedded parent")
			dataFiles := dataFlag(fs, "text or token-id")
			tokPath := fs.String("tokenizer", "", "tokenizer.json (default: the model's)")
			ids := fs.Bool("ids", false, "the data file holds token ids")
			var o eval.Options
			intVar(fs, &o.SeqLen, "seq-len", 128, 1, noMax, "window length in tokens")
			intVar(fs, &o.Stride, "stride", 0, 0, noMax, "sliding-window stride (0: packed windows)")
			intVar(fs, &o.Batch, "batch", 8, 1, noMax, "windows per forward pass")
			jsonOut := fs.Bool("json", false, "print the result as JSON")
			allowLong := fs.Bool("allow-long-context", false, "allow --seq-len past the model's max_position_embeddings")
			return func(ctx context.Context, env *Env, args []string) error {
				data := append(*dataFiles, args...)
				if *model == "" || len(data) == 0 {
					return Usagef("--model and --data are required")
				}
				if o.Stride > o.SeqLen {
					return Usagef("--stride %d is larger than --seq-len %d: windows would skip tokens; want 0 (packed windows) to %d", o.Stride, o.SeqLen, o.SeqLen)
				}
				dir, err := checkpointDir(*model)
				if err != nil {
					return err
				}
				m, err := engine.Load(dir)
				if err != nil {
					return err
				}
				w := workload.FixedClosed(o.SeqLen, 0, 1)
				if _, err := w.FitContext(workload.ContextRule{MaxPositions: m.Arch().MaxPositions, AllowLong: *allowLong, What: fmt.Sprintf("--seq-len %d", o.SeqLen)}); err != nil {
					return Usagef("%v", err)
				}
				o.Progress = env.Stderr
				var tok *tokenizer.Tokenizer
				parts := make([]*eval.Result, len(data))
				for i, p := range data {
					if evalIsIDs(p, *ids) {
						seqs, err := tokenizer.ReadIDsFile(p)
						if err != nil {
							return err
						}
						if parts[i], err = eval.IDs(ctx, m, seqs, o); err != nil {
							return fmt.Errorf("%s: %w", p, err)
						}
						continue
					}
					if tok == nil {
						if tok, err = evalTokenizer(dir, *tokPath); err != nil {
							return err
						}
					}
					text, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					if parts[i], err = eval.Text(ctx, m, tok, p, text, o); err != nil {
						return err
					}
				}
				res := eval.Pool(parts...)
				if *jsonOut {
					out := evalReport{Model: *model, Data: data, Tokens: res.Tokens, NLL: res.NLL,
						Perplexity: res.Perplexity, SeqLen: res.SeqLen, Stride: res.Stride, Windows: res.Windows}
					if res.Bytes > 0 {
						out.Bytes, out.BitsPerByte = res.Bytes, &res.BitsPerByte
					}
					return writeJSON(env.Stdout, out)
				}
				mode := "packed windows"
				if res.Stride > 0 && res.Stride < res.SeqLen {
					mode = fmt.Sprintf("sliding windows, stride %d", res.Stride)
				}
				fmt.Fprintf(env.Stdout, "%s on %s: %d tokens (%s of %d)\nperplexity    %.3f\n", *model, strings.Join(data, ", "), res.Tokens, mode, res.SeqLen, res.Perplexity)
				if !math.IsNaN(res.BitsPerByte) {
					fmt.Fprintf(env.Stdout, "bits per byte %.4f (%d bytes)\n", res.BitsPerByte, res.Bytes)
				}
				return nil
			}
		},
	})
}

// evalTokenizer loads path, or dir/tokenizer.json.
func evalTokenizer(dir, path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		path = filepath.Join(dir, "tokenizer.json")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("the model directory %s has no tokenizer.json: pass --tokenizer, or token ids with --ids", dir)
		}
	}
	return tokenizer.Load(path)
}

// evalIsIDs tells whether a data file holds token ids.
func evalIsIDs(path string, flagged bool) bool {
	if flagged || strings.HasSuffix(path, ".ids") {
		return true
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(tokenizer.BinaryIDsMagic))
	n, _ := f.Read(b)
	return string(b[:n]) == tokenizer.BinaryIDsMagic
}

// evalReport is the --json output of eval.
type evalReport struct {
	Model       string   `json:"model"`
	Data        []string `json:"data"`
	Tokens      int      `json:"tokens"`
	NLL         float64  `json:"nll"`
	Perplexity  float64  `json:"perplexity"`
	SeqLen      int      `json:"seq_len"`
	Stride      int      `json:"stride"`
	Windows     int      `json:"windows"`
	Bytes       int      `json:"bytes,omitempty"`
	BitsPerByte *float64 `json:"bits_per_byte,omitempty"`
}
