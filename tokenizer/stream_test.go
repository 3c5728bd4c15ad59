package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLinesRoundTrip: every form of EncodeLines decodes back to the input
// lines (LF and CRLF ends), the binary form is a token-id file ReadIDs
// reads, and the JSON form keeps the text and the tokens.
func TestLinesRoundTrip(t *testing.T) {
	tok, err := Load(filepath.Join("..", "parent", "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	in := "The President spoke.\r\n\nof the Union, 1823\nlast line without an end"
	lines := []string{"The President spoke.", "", "of the Union, 1823", "last line without an end"}
	ctx := context.Background()
	var text, js, bin bytes.Buffer
	for _, c := range []struct {
		form Form
		out  *bytes.Buffer
	}{{FormText, &text}, {FormJSON, &js}, {FormBinary, &bin}} {
		if err := tok.EncodeLines(ctx, strings.NewReader(in), c.out, false, c.form); err != nil {
			t.Fatalf("form %d: %v", c.form, err)
		}
	}
	seqs, err := ReadIDs(bytes.NewReader(bin.Bytes()))
	if err != nil || len(seqs) != len(lines) {
		t.Fatalf("binary form: %d sequences, %v", len(seqs), err)
	}
	want, _ := ReadIDs(bytes.NewReader(text.Bytes()))
	if !reflect.DeepEqual(seqs, want) {
		t.Errorf("binary %v, text %v", seqs, want)
	}
	for i, l := range strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n") {
		var r LineRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Text != lines[i] || !reflect.DeepEqual(r.IDs, want[i]) && len(r.IDs)+len(want[i]) > 0 || len(r.Tokens) != len(r.IDs) {
			t.Errorf("JSON line %d: %q (%v)", i, l, err)
		}
	}
	for _, src := range []*bytes.Buffer{&text, &bin} {
		var back bytes.Buffer
		if err := tok.DecodeLines(ctx, bytes.NewReader(src.Bytes()), &back, false, false); err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(strings.TrimSuffix(back.String(), "\n"), "\n"); !reflect.DeepEqual(got, lines) {
			t.Errorf("decoded %q, want %q", got, lines)
		}
	}
	var back bytes.Buffer
	if err := tok.DecodeLines(ctx, strings.NewReader("1, 2 3\n"), &back, false, true); err != nil {
		t.Fatal(err)
	}
	var r LineRecord
	if err := json.Unmarshal(back.Bytes(), &r); err != nil || !reflect.DeepEqual(r.IDs, []int{1, 2, 3}) {
		t.Errorf("decode --json: %q, %v", back.String(), err)
	}
}

// TestLinesErrors: a bad line is named; a done context stops the stream.
func TestLinesErrors(t *testing.T) {
	tok, err := Load(filepath.Join("..", "parent", "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tok.DecodeLines(context.Background(), strings.NewReader("1 2\n3 x\n"), &out, false, false); err == nil || !strings.HasPrefix(err.Error(), "line 2") {
		t.Errorf("bad id: %v, want an error naming line 2", err)
	}
	if err := tok.DecodeLines(context.Background(), strings.NewReader("99999999\n"), &out, false, false); err == nil || !strings.HasPrefix(err.Error(), "line 1") {
		t.Errorf("id outside the vocabulary: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tok.EncodeLines(ctx, strings.NewReader("a\nb\n"), &out, false, FormText); !errors.Is(err, context.Canceled) {
		t.Errorf("encode, cancelled: %v", err)
	}
	if err := tok.DecodeLines(ctx, strings.NewReader("1\n"), &out, false, false); !errors.Is(err, context.Canceled) {
		t.Errorf("decode, cancelled: %v", err)
	}
}

// TestLinesAnswerEachLineAtOnce: a line written to an input that stays open
// (a person typing, a co-process) is answered before more input comes, by
// both EncodeLines and DecodeLines; the output is not held back until the
// buffer fills or the input ends.
func TestLinesAnswerEachLineAtOnce(t *testing.T) {
	tok, err := Load(filepath.Join("..", "parent", "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		line string
		run  func(ctx context.Context, r io.Reader, w io.Writer) error
	}{
		{"encode", "The President spoke.\n", func(ctx context.Context, r io.Reader, w io.Writer) error {
			return tok.EncodeLines(ctx, r, w, false, FormText)
		}},
		// (At least the binary form's 8-byte magic: decoding looks at that
		// many bytes to tell the forms apart.)
		{"decode", "10 20 30 40\n", func(ctx context.Context, r io.Reader, w io.Writer) error {
			return tok.DecodeLines(ctx, r, w, false, false)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- c.run(context.Background(), inR, outW); outW.Close() }()
			go inW.Write([]byte(c.line))
			// The answer arrives while the input is still open: a read of
			// the output returns the first line's record (it would block
			// forever if the writer held it back).
			answer := make(chan string, 1)
			go func() {
				got, err := bufio.NewReader(outR).ReadString('\n')
				if err != nil {
					got = "error: " + err.Error()
				}
				answer <- got
			}()
			select {
			case got := <-answer:
				if strings.HasPrefix(got, "error") {
					t.Fatalf("answer %q", got)
				}
			case <-time.After(time.Minute): // a backstop: the answer needs no time
				t.Fatal("no answer to a line while the input stays open")
			}
			inW.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
