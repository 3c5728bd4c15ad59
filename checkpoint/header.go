package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"unicode/utf8"
)

// MaxHeaderSize is the largest JSON header accepted, as in the reference
// implementation (100 MB). A larger length prefix is treated as corruption.
const MaxHeaderSize = 100_000_000

// metadataKey is the reserved header key holding free-form string metadata.
const metadataKey = "__metadata__"

// TensorInfo describes one stored tensor.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int64
	File   string // file path, as opened
	Offset int64  // absolute byte offset of the data in File
	Size   int64  // bytes
}

// NumElements returns the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Header is one safetensors file's parsed header.
type Header struct {
	File       string
	HeaderSize int64             // N, the JSON length (padding included)
	DataStart  int64             // 8 + N: where the data buffer starts
	Tensors    []TensorInfo      // in storage order (by offset)
	Metadata   map[string]string // __metadata__, nil when absent
}

type rawTensor struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ReadHeader parses and validates the header of one safetensors file of the
// given size read through r; file is used in error messages and stored in
// each TensorInfo. Every violation is reported as a *FormatError; I/O errors
// are returned wrapped.
func ReadHeader(r io.ReaderAt, size int64, file string) (*Header, error) {
	ferr := func(tensor string, off int64, format string, args ...any) error {
		return &FormatError{File: file, Tensor: tensor, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, ferr("", 0, "file is %d bytes, too short for the 8-byte header length (truncated file?)", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: reading header length: %w", file, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, ferr("", 0, "header length %d exceeds the %d-byte limit (corrupt file or not safetensors)", n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, ferr("", 0, "header length %d runs past the end of the %d-byte file (truncated file?)", n, size)
	}
	if n < 2 {
		return nil, ferr("", 8, "header length %d is too short for a JSON object", n)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: reading %d-byte header: %w", file, n, err)
	}
	if !utf8.Valid(hdr) {
		return nil, ferr("", 8, "header is not valid UTF-8")
	}
	h := &Header{File: file, HeaderSize: int64(n), DataStart: 8 + int64(n)}
	dataLen := size - h.DataStart

	dec := json.NewDecoder(bytes.NewReader(hdr))
	jsonErr := func(err error) error {
		off := 8 + dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = 8 + se.Offset
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return ferr("", off, "invalid JSON header: %v", err)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ferr("", 8, "header is not a JSON object (starts with %v)", tok)
	}
	seen := map[string]int64{}
	entryOff := map[string]int64{}
	for dec.More() {
		keyOff := dec.InputOffset()
		for keyOff < int64(len(hdr)) && (hdr[keyOff] == ',' || hdr[keyOff] == ' ' || hdr[keyOff] == '\t' || hdr[keyOff] == '\n' || hdr[keyOff] == '\r') {
			keyOff++
		}
		keyOff += 8
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, ferr("", keyOff, "expected a tensor name, got %v", tok)
		}
		if prev, dup := seen[name]; dup {
			return nil, ferr(name, keyOff, "duplicate name in header (first at byte offset %d)", prev)
		}
		seen[name] = keyOff
		if name == metadataKey {
			var m map[string]string
			if err := dec.Decode(&m); err != nil {
				return nil, ferr(name, keyOff, "__metadata__ must map strings to strings: %v", err)
			}
			h.Metadata = m
			continue
		}
		var rt rawTensor
		if err := dec.Decode(&rt); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, jsonErr(err)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, ferr(name, keyOff, "invalid JSON header: it ends inside this entry")
			}
			return nil, ferr(name, keyOff, "bad tensor entry: %v", err)
		}
		t, err := checkEntry(name, rt, dataLen)
		if err != nil {
			return nil, ferr(name, keyOff, "%s", err)
		}
		t.File = file
		t.Offset += h.DataStart
		h.Tensors = append(h.Tensors, t)
		entryOff[name] = keyOff
	}
	if _, err := dec.Token(); err != nil { // closing brace
		return nil, jsonErr(err)
	}
	end := dec.InputOffset()
	for i, c := range hdr[end:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, ferr("", 8+end+int64(i), "unexpected byte %q after the JSON header (header padding must be spaces)", c)
		}
	}

	// The data ranges must tile [0, dataLen) exactly.
	sort.SliceStable(h.Tensors, func(i, j int) bool {
		a, b := h.Tensors[i], h.Tensors[j]
		if a.Offset != b.Offset {
			return a.Offset < b.Offset
		}
		return a.Size < b.Size
	})
	pos := h.DataStart
	prev := ""
	for _, t := range h.Tensors {
		switch {
		case t.Offset < pos:
			return nil, ferr(t.Name, entryOff[t.Name], "data_offsets [%d,%d] overlap tensor %q, which ends at %d",
				t.Offset-h.DataStart, t.Offset+t.Size-h.DataStart, prev, pos-h.DataStart)
		case t.Offset > pos:
			what := "the start of the data buffer"
			if prev != "" {
				what = fmt.Sprintf("tensor %q", prev)
			}
			return nil, ferr(t.Name, entryOff[t.Name], "gap of %d bytes after %s: data_offsets start at %d, expected %d (safetensors requires contiguous data)",
				t.Offset-pos, what, t.Offset-h.DataStart, pos-h.DataStart)
		}
		pos = t.Offset + t.Size
		prev = t.Name
	}
	if pos != size {
		return nil, ferr("", pos, "%d bytes of data after the last tensor: the file is %d bytes but the header accounts for %d (corrupt or appended file)",
			size-pos, size, pos)
	}
	return h, nil
}

// checkEntry validates one header entry against the data length; offsets in
// the result are relative to the data buffer.
func checkEntry(name string, rt rawTensor, dataLen int64) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	if rt.DType == nil {
		return t, errors.New(`missing "dtype"`)
	}
	t.DType = DType(*rt.DType)
	if !t.DType.Valid() {
		return t, fmt.Errorf("unknown dtype %q", *rt.DType)
	}
	if rt.Shape == nil {
		return t, errors.New(`missing "shape"`)
	}
	if rt.DataOffsets == nil {
		return t, errors.New(`missing "data_offsets"`)
	}
	t.Shape = *rt.Shape
	if t.Shape == nil {
		t.Shape = []int64{}
	}
	nbytes := int64(t.DType.Size())
	for i, d := range t.Shape {
		if d < 0 {
			return t, fmt.Errorf("negative dimension %d at shape[%d]", d, i)
		}
		if d != 0 && nbytes > math.MaxInt64/d {
			return t, fmt.Errorf("shape %v × %s overflows", t.Shape, t.DType)
		}
		nbytes *= d
	}
	offs := *rt.DataOffsets
	if len(offs) != 2 {
		return t, fmt.Errorf("data_offsets must be [begin, end], got %d numbers", len(offs))
	}
	b, e := offs[0], offs[1]
	if b < 0 || e < b {
		return t, fmt.Errorf("invalid data_offsets [%d,%d]", b, e)
	}
	if e > dataLen {
		return t, fmt.Errorf("data_offsets [%d,%d] run past the end of the %d-byte data buffer (truncated file?)", b, e, dataLen)
	}
	if e-b != nbytes {
		return t, fmt.Errorf("shape %v of %s needs %d bytes but data_offsets [%d,%d] hold %d", t.Shape, t.DType, nbytes, b, e, e-b)
	}
	t.Offset, t.Size = b, e-b
	return t, nil
}
