package cli

import (
	"context"
	"flag"

	"github.com/autocompress/autocompress/tokenizer"
)

func init() {
	Register(&Command{
		Name:  "tokenize",
		Usage: "--tokenizer FILE|DIR [--decode] [--add-special] [--skip-special] [--json|--binary] < input",
		Short: "turn text into token ids (one line of ids per input line) or, with --decode, back",
		Long: `Reads standard input and writes standard output.

Without --decode every input line (without its line end, LF or CRLF) is
encoded to one line of space-separated token ids. With --decode every input
line of ids (separated by spaces or commas) is decoded to text; a binary
token-id file (see the tokenizer package) is accepted too.

--json writes one JSON object per line, {"text": ..., "ids": [...]} (and,
when encoding, "tokens": the vocabulary strings of the ids), which keeps line
boundaries even when decoded text contains newlines. --binary writes the
encoded ids in the binary token-id form (little-endian uint32, see the
tokenizer package) that every command reading ids accepts.

The tokenizer is a HuggingFace tokenizer.json (BPE models: GPT-2, Llama-3,
Qwen2/3, Llama-2, Mistral, SmolLM...) or a model directory holding one.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			tokPath := fs.String("tokenizer", "", "tokenizer.json, or a model `directory` containing one (required)")
			decode := fs.Bool("decode", false, "decode lines of token ids to text instead of encoding text")
			addSpecial := fs.Bool("add-special", false, "add the tokenizer's special tokens (e.g. BOS) when encoding")
			skipSpecial := fs.Bool("skip-special", false, "leave special tokens out when decoding")
			asJSON := fs.Bool("json", false, `write one JSON object {"text", "ids", "tokens"} per line`)
			binary := fs.Bool("binary", false, "write the encoded ids as a binary token-id file (to redirect to a .bin file)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("tokenize reads standard input and takes no arguments, got %q", args)
				}
				if *tokPath == "" {
					return Usagef("--tokenizer is required (a tokenizer.json or a model directory holding one)")
				}
				if *decode && *addSpecial {
					return Usagef("--add-special applies to encoding; it cannot be used with --decode")
				}
				if !*decode && *skipSpecial {
					return Usagef("--skip-special applies to decoding; use it with --decode")
				}
				if *binary && (*decode || *asJSON) {
					return Usagef("--binary writes encoded ids; it cannot be combined with --decode or --json")
				}
				tok, err := tokenizer.Load(*tokPath)
				if err != nil {
					return err
				}
				in := newCtxReader(ctx, env.Stdin)
				if *decode {
					return tok.DecodeLines(ctx, in, env.Stdout, *skipSpecial, *asJSON)
				}
				form := tokenizer.FormText
				switch {
				case *binary:
					form = tokenizer.FormBinary
				case *asJSON:
					form = tokenizer.FormJSON
				}
				return tok.EncodeLines(ctx, in, env.Stdout, *addSpecial, form)
			}
		},
	})
}
