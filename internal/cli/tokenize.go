package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

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
				out := bufio.NewWriterSize(env.Stdout, 1<<16)
				in := bufio.NewReaderSize(newCtxReader(ctx, env.Stdin), 1<<16)
				if *decode {
					err = decodeStream(ctx, tok, in, out, *skipSpecial, *asJSON)
				} else {
					err = encodeStream(ctx, tok, in, out, *addSpecial, *asJSON, *binary)
				}
				if ferr := out.Flush(); err == nil {
					err = ferr
				}
				return err
			}
		},
	})
}

type tokenizeRecord struct {
	Text   string   `json:"text"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens,omitempty"`
}

// readLine returns the next line without its line end; ok is false at the
// end of input.
func readLine(in *bufio.Reader) (line string, ok bool, err error) {
	s, err := in.ReadString('\n')
	if err == io.EOF {
		if s == "" {
			return "", false, nil
		}
		err = nil
	}
	if err != nil {
		return "", false, err
	}
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
		if n := len(s); n > 0 && s[n-1] == '\r' {
			s = s[:n-1]
		}
	}
	return s, true, nil
}

func writeIDs(out *bufio.Writer, ids []int) {
	b := make([]byte, 0, 8*len(ids)+1)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	out.Write(append(b, '\n'))
}

// binaryRecord writes one sequence of the binary token-id form.
func binaryRecord(out *bufio.Writer, buf []byte, ids []int) {
	le := func(v int) {
		buf[0], buf[1], buf[2], buf[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		out.Write(buf[:4])
	}
	le(len(ids))
	for _, id := range ids {
		le(id)
	}
}

func writeRecord(out *bufio.Writer, rec tokenizeRecord) error {
	if rec.IDs == nil {
		rec.IDs = []int{}
	}
	return writeJSONLine(out, rec)
}

func encodeStream(ctx context.Context, tok *tokenizer.Tokenizer, in *bufio.Reader, out *bufio.Writer, addSpecial, asJSON, binary bool) error {
	if binary {
		// The binary form is a header followed by independent records, so
		// it can be written one line at a time.
		if err := tokenizer.WriteIDsBinary(out, nil); err != nil {
			return err
		}
	}
	var rec [4]byte
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, ok, err := readLine(in)
		if err != nil {
			return fmt.Errorf("reading standard input at line %d: %w", lineNo, err)
		}
		if !ok {
			return nil
		}
		ids, err := tok.EncodeContext(ctx, line, addSpecial)
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		switch {
		case binary:
			binaryRecord(out, rec[:], ids)
		case asJSON:
			toks := make([]string, len(ids))
			for i, id := range ids {
				toks[i], _ = tok.Token(id)
			}
			if err := writeRecord(out, tokenizeRecord{Text: line, IDs: ids, Tokens: toks}); err != nil {
				return err
			}
		default:
			writeIDs(out, ids)
		}
	}
}

func decodeStream(ctx context.Context, tok *tokenizer.Tokenizer, in *bufio.Reader, out *bufio.Writer, skipSpecial, asJSON bool) error {
	emit := func(where string, ids []int) error {
		text, err := tok.Decode(ids, skipSpecial)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if asJSON {
			return writeRecord(out, tokenizeRecord{Text: text, IDs: ids})
		}
		out.WriteString(text)
		out.WriteByte('\n')
		return nil
	}
	if head, err := in.Peek(8); err == nil && string(head) == tokenizer.BinaryIDsMagic {
		seqs, err := tokenizer.ReadIDs(in)
		if err != nil {
			return fmt.Errorf("reading binary token ids from standard input: %w", err)
		}
		for i, ids := range seqs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := emit(fmt.Sprintf("sequence %d", i), ids); err != nil {
				return err
			}
		}
		return nil
	}
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, ok, err := readLine(in)
		if err != nil {
			return fmt.Errorf("reading standard input at line %d: %w", lineNo, err)
		}
		if !ok {
			return nil
		}
		ids, err := tokenizer.ParseIDs(line)
		if err != nil {
			var fe *tokenizer.FormatError
			if errors.As(err, &fe) {
				return fmt.Errorf("line %d: %s", lineNo, fe.Msg)
			}
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		if err := emit(fmt.Sprintf("line %d", lineNo), ids); err != nil {
			return err
		}
	}
}
