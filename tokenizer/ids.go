package tokenizer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
)

// BinaryIDsMagic starts a binary token-id file.
const BinaryIDsMagic = "ACTKIDS\x00"

const idsMagic = BinaryIDsMagic

const (
	idsVersion = 1
	// maxSeqLen bounds one binary record, so a corrupt length cannot make
	// the reader allocate without bound.
	maxSeqLen = 1 << 28
)

// ReadIDs reads token-id sequences in the text or binary form described in
// the package documentation, telling them apart by the binary magic.
func ReadIDs(r io.Reader) ([][]int, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(len(idsMagic))
	if err == nil && string(head) == idsMagic {
		return readIDsBinary(br)
	}
	return readIDsText(br)
}

// ReadIDsFile reads a token-id file (text or binary).
func ReadIDsFile(path string) ([][]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	seqs, err := ReadIDs(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return seqs, nil
}

func readIDsText(br *bufio.Reader) ([][]int, error) {
	var seqs [][]int
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: gather it whole.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("tokenizer: reading token ids at line %d: %w", lineNo, err)
		}
		if len(line) == 0 && err == io.EOF {
			return seqs, nil
		}
		seq, perr := parseIDLine(line, lineNo)
		if perr != nil {
			return nil, perr
		}
		seqs = append(seqs, seq)
		if err == io.EOF {
			return seqs, nil
		}
	}
}

// ParseIDs parses one line of the text form: ids separated by spaces, tabs
// or commas.
func ParseIDs(line string) ([]int, error) { return parseIDLine([]byte(line), 1) }

func isIDSep(c byte) bool { return c == ' ' || c == '\t' || c == ',' || c == '\r' || c == '\n' }

func parseIDLine(line []byte, lineNo int) ([]int, error) {
	seq := []int{}
	for i := 0; i < len(line); {
		if isIDSep(line[i]) {
			i++
			continue
		}
		j := i
		for j < len(line) && !isIDSep(line[j]) {
			j++
		}
		v, err := strconv.ParseUint(string(line[i:j]), 10, 31)
		if err != nil {
			return nil, &FormatError{
				Where: fmt.Sprintf("line %d, column %d", lineNo, i+1),
				Msg:   fmt.Sprintf("%q is not a token id (want non-negative integers below 2^31 separated by spaces or commas, one sequence per line)", clipBytes(line[i:j])),
			}
		}
		seq = append(seq, int(v))
		i = j
	}
	return seq, nil
}

func clipBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func readIDsBinary(br *bufio.Reader) ([][]int, error) {
	var head [16]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, &FormatError{Where: "byte 0", Msg: "binary token-id file: truncated header"}
	}
	if v := binary.LittleEndian.Uint32(head[8:]); v != idsVersion {
		return nil, &FormatError{Where: "byte 8", Msg: fmt.Sprintf("binary token-id file: version %d, this reader knows version %d", v, idsVersion)}
	}
	off := int64(16)
	var seqs [][]int
	var buf [4]byte
	for {
		if _, err := io.ReadFull(br, buf[:]); err != nil {
			if err == io.EOF {
				return seqs, nil
			}
			return nil, &FormatError{Where: fmt.Sprintf("byte %d", off), Msg: "binary token-id file: truncated sequence length"}
		}
		n := binary.LittleEndian.Uint32(buf[:])
		if n > maxSeqLen {
			return nil, &FormatError{Where: fmt.Sprintf("byte %d", off), Msg: fmt.Sprintf("binary token-id file: sequence %d claims %d ids (more than %d)", len(seqs), n, maxSeqLen)}
		}
		off += 4
		seq := make([]int, 0, min(int(n), 1<<16))
		chunk := make([]byte, 4*min(int(n), 1<<14))
		for left := int(n); left > 0; {
			k := min(left, len(chunk)/4)
			if got, err := io.ReadFull(br, chunk[:4*k]); err != nil {
				return nil, &FormatError{Where: fmt.Sprintf("byte %d", off+int64(got)), Msg: fmt.Sprintf("binary token-id file: sequence %d truncated (%d of %d ids present)", len(seqs), len(seq)+got/4, n)}
			}
			for i := 0; i < k; i++ {
				id := binary.LittleEndian.Uint32(chunk[4*i:])
				if id > math.MaxInt32 {
					return nil, &FormatError{Where: fmt.Sprintf("byte %d", off+int64(4*i)), Msg: fmt.Sprintf("binary token-id file: id %d too large", id)}
				}
				seq = append(seq, int(id))
			}
			off += int64(4 * k)
			left -= k
		}
		seqs = append(seqs, seq)
	}
}

// WriteIDs writes sequences in the text form: one line of space-separated ids
// per sequence.
func WriteIDs(w io.Writer, seqs [][]int) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for _, seq := range seqs {
		b = appendIDLine(b[:0], seq)
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendIDLine(b []byte, seq []int) []byte {
	for i, id := range seq {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, '\n')
}

// WriteIDsBinary writes sequences in the binary form. Ids must lie in
// [0, 2^31).
func WriteIDsBinary(w io.Writer, seqs [][]int) error {
	bw := bufio.NewWriter(w)
	var head [16]byte
	copy(head[:], idsMagic)
	binary.LittleEndian.PutUint32(head[8:], idsVersion)
	if _, err := bw.Write(head[:]); err != nil {
		return err
	}
	var b []byte
	for s, seq := range seqs {
		var err error
		if b, err = appendBinaryRecord(b[:0], seq); err != nil {
			return fmt.Errorf("tokenizer: sequence %d: %w", s, err)
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendBinaryRecord appends one sequence of the binary form: its length,
// then its ids, little-endian uint32s. Ids must lie in [0, 2^31).
func appendBinaryRecord(b []byte, seq []int) ([]byte, error) {
	if len(seq) > maxSeqLen {
		return b, fmt.Errorf("%d ids, more than the binary form allows (%d)", len(seq), maxSeqLen)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(seq)))
	for i, id := range seq {
		if id < 0 || id > math.MaxInt32 {
			return b, fmt.Errorf("position %d: id %d outside [0, 2^31)", i, id)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return b, nil
}

// IDRangeError reports a token id that does not fit a vocabulary.
type IDRangeError struct {
	Seq, Pos, ID, VocabSize int
}

func (e *IDRangeError) Error() string {
	return fmt.Sprintf("tokenizer: sequence %d position %d: token id %d is outside the vocabulary of %d tokens (were the ids made with another tokenizer?)", e.Seq, e.Pos, e.ID, e.VocabSize)
}

// CheckIDs returns an *IDRangeError for the first id outside [0, vocabSize).
func CheckIDs(seqs [][]int, vocabSize int) error {
	for s, seq := range seqs {
		for i, id := range seq {
			if id < 0 || id >= vocabSize {
				return &IDRangeError{Seq: s, Pos: i, ID: id, VocabSize: vocabSize}
			}
		}
	}
	return nil
}
