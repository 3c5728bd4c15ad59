package tokenizer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Form is how EncodeLines writes the ids of a line.
type Form int

const (
	// FormText writes one line of space-separated ids per input line.
	FormText Form = iota
	// FormJSON writes one LineRecord per input line (JSON Lines).
	FormJSON
	// FormBinary writes the binary token-id form: the header, then one
	// record per input line.
	FormBinary
)

// LineRecord is one line of the JSON form: a line's text and its ids and,
// when encoding, the vocabulary strings of the ids.
type LineRecord struct {
	Text   string   `json:"text"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens,omitempty"`
}

// EncodeLines encodes every line of r (without its line end, LF or CRLF)
// and writes its ids to w in form, one record per line, as it goes. It
// stops with ctx's error when ctx is done; errors name the line.
func (t *Tokenizer) EncodeLines(ctx context.Context, r io.Reader, w io.Writer, addSpecial bool, form Form) (err error) {
	in := bufio.NewReaderSize(r, 1<<16)
	out := bufio.NewWriterSize(w, 1<<16)
	defer func() {
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
	}()
	if form == FormBinary {
		// A header followed by independent records: written a line at a time.
		if err := WriteIDsBinary(out, nil); err != nil {
			return err
		}
	}
	var b []byte
	return eachLine(ctx, in, out, func(lineNo int, line string) error {
		ids, err := t.EncodeContext(ctx, line, addSpecial)
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		switch form {
		case FormBinary:
			if b, err = appendBinaryRecord(b[:0], ids); err != nil {
				return fmt.Errorf("line %d: %w", lineNo, err)
			}
			_, err = out.Write(b)
			return err
		case FormJSON:
			toks := make([]string, len(ids))
			for i, id := range ids {
				toks[i], _ = t.Token(id)
			}
			return writeRecord(out, LineRecord{Text: line, IDs: ids, Tokens: toks})
		}
		b = appendIDLine(b[:0], ids)
		_, err = out.Write(b)
		return err
	})
}

// DecodeLines decodes token ids read from r, in the text form (one
// sequence per line, ids separated by spaces or commas) or the binary form
// (recognised by its magic), and writes each sequence's text to w as one
// line, or with asJSON one LineRecord. It stops with ctx's error when ctx
// is done; errors name the line or sequence.
func (t *Tokenizer) DecodeLines(ctx context.Context, r io.Reader, w io.Writer, skipSpecial, asJSON bool) (err error) {
	in := bufio.NewReaderSize(r, 1<<16)
	out := bufio.NewWriterSize(w, 1<<16)
	defer func() {
		if ferr := out.Flush(); err == nil {
			err = ferr
		}
	}()
	emit := func(where string, ids []int) error {
		text, err := t.Decode(ids, skipSpecial)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if asJSON {
			return writeRecord(out, LineRecord{Text: text, IDs: ids})
		}
		out.WriteString(text)
		return out.WriteByte('\n')
	}
	if head, err := in.Peek(len(BinaryIDsMagic)); err == nil && string(head) == BinaryIDsMagic {
		seqs, err := ReadIDs(in)
		if err != nil {
			return fmt.Errorf("reading binary token ids: %w", err)
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
	return eachLine(ctx, in, out, func(lineNo int, line string) error {
		ids, err := ParseIDs(line)
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return fmt.Errorf("line %d: %s", lineNo, fe.Msg)
			}
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		return emit(fmt.Sprintf("line %d", lineNo), ids)
	})
}

// eachLine calls f with every line of in (numbered from 1, without its
// line end) until the input ends, f fails or ctx is done.
//
// What f wrote to out is flushed whenever the input holds no more buffered
// bytes, that is before a read that may wait: a file streams through in
// large writes, and a line typed or piped in interactively is answered at
// once.
func eachLine(ctx context.Context, in *bufio.Reader, out *bufio.Writer, f func(lineNo int, line string) error) error {
	for lineNo := 1; ; lineNo++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, ok, err := readLine(in)
		if err != nil {
			return fmt.Errorf("reading input at line %d: %w", lineNo, err)
		}
		if !ok {
			return nil
		}
		if err := f(lineNo, line); err != nil {
			return err
		}
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
		}
	}
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

// writeRecord writes rec as one compact JSON line (ids always a list).
func writeRecord(w io.Writer, rec LineRecord) error {
	if rec.IDs == nil {
		rec.IDs = []int{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(rec)
}
