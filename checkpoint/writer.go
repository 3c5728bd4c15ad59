package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/autocompress/autocompress/internal/output"
)

// TensorSpec describes a tensor to write.
type TensorSpec struct {
	Name  string
	DType DType
	Shape []int64
}

// NumElements returns the product of the shape (1 for a scalar).
func (s TensorSpec) NumElements() int64 {
	n := int64(1)
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// Size returns the tensor's data size in bytes.
func (s TensorSpec) Size() int64 { return s.NumElements() * int64(s.DType.Size()) }

// Spec returns the TensorSpec of a stored tensor.
func (t TensorInfo) Spec() TensorSpec {
	return TensorSpec{Name: t.Name, DType: t.DType, Shape: append([]int64(nil), t.Shape...)}
}

// validateSpecs checks names, dtypes and shapes before anything is written.
func validateSpecs(specs []TensorSpec) error {
	seen := make(map[string]bool, len(specs))
	for i, s := range specs {
		switch {
		case s.Name == "":
			return fmt.Errorf("checkpoint: tensor %d has an empty name", i)
		case s.Name == metadataKey:
			return fmt.Errorf("checkpoint: tensor name %q is reserved for metadata", s.Name)
		case seen[s.Name]:
			return fmt.Errorf("checkpoint: tensor %q is listed twice", s.Name)
		case !s.DType.Valid():
			return fmt.Errorf("checkpoint: tensor %q: unknown dtype %q", s.Name, s.DType)
		}
		seen[s.Name] = true
		n := int64(s.DType.Size())
		for j, d := range s.Shape {
			if d < 0 {
				return fmt.Errorf("checkpoint: tensor %q: negative dimension %d at shape[%d]", s.Name, d, j)
			}
			if d != 0 && n > math.MaxInt64/d {
				return fmt.Errorf("checkpoint: tensor %q: shape %v overflows", s.Name, s.Shape)
			}
			n *= d
		}
	}
	return nil
}

// HeaderBytes returns the complete header of a safetensors file holding
// tensors in the given order: the 8-byte little-endian length, then the JSON
// (metadata first, tensors in order, no whitespace) padded with spaces to a
// multiple of 8 bytes, as the reference implementation writes it.
func HeaderBytes(tensors []TensorSpec, metadata map[string]string) ([]byte, error) {
	if err := validateSpecs(tensors); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(make([]byte, 8))
	b.WriteByte('{')
	first := true
	str := func(s string) {
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(s) // cannot fail for a string
		b.Truncate(b.Len() - 1)
	}
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			str(k)
			b.WriteByte(':')
			str(metadata[k])
		}
		b.WriteByte('}')
		first = false
	}
	var off int64
	for _, s := range tensors {
		if !first {
			b.WriteByte(',')
		}
		first = false
		str(s.Name)
		b.WriteString(`:{"dtype":`)
		str(string(s.DType))
		b.WriteString(`,"shape":[`)
		for i, d := range s.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(d, 10))
		}
		end := off + s.Size()
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for (b.Len()-8)%8 != 0 {
		b.WriteByte(' ')
	}
	out := b.Bytes()
	if len(out)-8 > MaxHeaderSize {
		return nil, fmt.Errorf("checkpoint: header of %d tensors is %d bytes, over the %d-byte limit readers accept; shard the checkpoint", len(tensors), len(out)-8, MaxHeaderSize)
	}
	binary.LittleEndian.PutUint64(out, uint64(len(out)-8))
	return out, nil
}

// Writer writes one safetensors file whose tensor list is known up front.
// The header is written by Create; each tensor's data is then written in
// order with WriteTensor or WriteTensorFrom, so at most one tensor (or, with
// WriteTensorFrom, one buffer) is in memory at a time. The file appears
// under its final name only when Close succeeds.
type Writer struct {
	path  string
	f     *output.File
	bw    *bufio.Writer
	specs []TensorSpec
	next  int
	err   error // first error; the writer is dead once set
	done  bool
}

// Create starts writing the safetensors file path with the given tensors in
// the given order and metadata (may be nil). Data goes to a temporary file
// beside path, renamed over path by Close. An existing file at path is
// replaced only when Close succeeds.
func Create(path string, tensors []TensorSpec, metadata map[string]string) (*Writer, error) {
	hdr, err := HeaderBytes(tensors, metadata)
	if err != nil {
		return nil, fmt.Errorf("%w (writing %s)", err, path)
	}
	f, err := output.CreateFile(path, true)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: creating %s: %w", path, err)
	}
	w := &Writer{path: path, f: f, bw: bufio.NewWriterSize(f, 1<<20), specs: append([]TensorSpec(nil), tensors...)}
	if _, err := w.bw.Write(hdr); err != nil {
		w.Abort()
		return nil, fmt.Errorf("checkpoint: writing header of %s: %w", path, err)
	}
	return w, nil
}

// Path returns the final path of the file.
func (w *Writer) Path() string { return w.path }

// Next returns the spec of the tensor expected next, or false when all have
// been written.
func (w *Writer) Next() (TensorSpec, bool) {
	if w.next >= len(w.specs) {
		return TensorSpec{}, false
	}
	return w.specs[w.next], true
}

func (w *Writer) expect(name string) (TensorSpec, error) {
	if w.err != nil {
		return TensorSpec{}, w.err
	}
	if w.done {
		return TensorSpec{}, fmt.Errorf("checkpoint: %s: write of tensor %q after Close", w.path, name)
	}
	if w.next >= len(w.specs) {
		return TensorSpec{}, fmt.Errorf("checkpoint: %s: tensor %q written but all %d tensors are already written", w.path, name, len(w.specs))
	}
	s := w.specs[w.next]
	if s.Name != name {
		return TensorSpec{}, fmt.Errorf("checkpoint: %s: tensor %q written out of order: expected %q (tensor %d of %d)", w.path, name, s.Name, w.next+1, len(w.specs))
	}
	return s, nil
}

// WriteTensor writes the next tensor's raw little-endian data, which must be
// exactly the spec's size.
func (w *Writer) WriteTensor(name string, data []byte) error {
	s, err := w.expect(name)
	if err != nil {
		return err
	}
	if int64(len(data)) != s.Size() {
		return fmt.Errorf("checkpoint: %s: tensor %q (%s %v) needs %d bytes, got %d", w.path, name, s.DType, s.Shape, s.Size(), len(data))
	}
	if _, err := w.bw.Write(data); err != nil {
		w.err = fmt.Errorf("checkpoint: writing tensor %q to %s: %w", name, w.path, err)
		return w.err
	}
	w.next++
	return nil
}

// WriteTensorFrom streams the next tensor's data from r, which must supply
// at least the spec's size in bytes (only that many are read).
func (w *Writer) WriteTensorFrom(name string, r io.Reader) error {
	s, err := w.expect(name)
	if err != nil {
		return err
	}
	n, err := io.CopyN(w.bw, r, s.Size())
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("source ended after %d of %d bytes", n, s.Size())
		}
		w.err = fmt.Errorf("checkpoint: writing tensor %q to %s: %w", name, w.path, err)
		return w.err
	}
	w.next++
	return nil
}

// WriteFloat32 encodes src as the next tensor's dtype (F32, F16, BF16 or
// F64, rounding to nearest even) and writes it.
func (w *Writer) WriteFloat32(name string, src []float32) error {
	s, err := w.expect(name)
	if err != nil {
		return err
	}
	if int64(len(src)) != s.NumElements() {
		return fmt.Errorf("checkpoint: %s: tensor %q %v has %d elements, got %d", w.path, name, s.Shape, s.NumElements(), len(src))
	}
	b, err := FromFloat32(s.DType, src)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: tensor %q: %w", w.path, name, err)
	}
	return w.WriteTensor(name, b)
}

// Close finishes the file and renames it into place. It fails, leaving
// nothing behind, if a tensor was not written or any write failed.
func (w *Writer) Close() error {
	if w.done {
		return w.err
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.next < len(w.specs) {
		err := fmt.Errorf("checkpoint: %s: closed after %d of %d tensors; tensor %q was never written", w.path, w.next, len(w.specs), w.specs[w.next].Name)
		w.Abort()
		w.err = err
		return err
	}
	w.done = true
	if err := w.bw.Flush(); err != nil {
		w.f.Abort()
		w.err = fmt.Errorf("checkpoint: finishing %s: %w", w.path, err)
		return w.err
	}
	if err := w.f.Commit(); err != nil {
		w.err = fmt.Errorf("checkpoint: finishing %s: %w", w.path, err)
		return w.err
	}
	return nil
}

// Abort discards the file. It is safe to call after Close (it does nothing
// then) and more than once.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	if w.err == nil {
		w.err = fmt.Errorf("checkpoint: %s: writer aborted", w.path)
	}
	w.f.Abort()
}
