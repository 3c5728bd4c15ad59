package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"
)

// Standard file names of a HuggingFace checkpoint directory.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// useMmap is turned off by tests to exercise the ReadAt fallback.
var useMmap = true

// shard is one open safetensors file.
type shard struct {
	path   string
	f      *os.File    // nil for readers made by NewReader
	ra     io.ReaderAt // used when data is nil
	data   []byte      // the whole file, memory-mapped; nil when not mapped
	size   int64
	header *Header
}

// Reader reads a checkpoint: a single .safetensors file, or a directory
// holding model.safetensors or a sharded set with an index. Its methods are
// safe for concurrent use until Close.
type Reader struct {
	path     string
	index    string // index file path, "" for a single file
	shards   []*shard
	tensors  []TensorInfo
	byName   map[string]int // index into tensors
	shardOf  []int          // per tensor: index into shards
	metadata map[string]string
}

// Open opens a checkpoint. path may be a .safetensors file, an index file
// (*.safetensors.index.json), or a directory holding model.safetensors.index.json,
// model.safetensors, or exactly one other *.safetensors file or index.
//
// Data is memory-mapped read-only so that memory stays bounded whatever the
// model size; where mapping fails the reader falls back to ReadAt.
func Open(path string) (*Reader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if st.IsDir() {
		file, err := findWeights(path)
		if err != nil {
			return nil, err
		}
		path = file
	}
	if strings.HasSuffix(path, ".index.json") {
		return openIndex(path)
	}
	r := &Reader{path: path}
	if err := r.addFile(path); err != nil {
		return nil, err
	}
	r.finish()
	r.metadata = map[string]string{}
	for k, v := range r.shards[0].header.Metadata {
		r.metadata[k] = v
	}
	return r, nil
}

// findWeights picks the weights of a checkpoint directory.
func findWeights(dir string) (string, error) {
	for _, name := range []string{IndexFileName, SingleFileName} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	idx, _ := filepath.Glob(filepath.Join(dir, "*.safetensors.index.json"))
	if len(idx) == 1 {
		return idx[0], nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(idx) == 0 && len(files) == 1 {
		return files[0], nil
	}
	if len(idx)+len(files) == 0 {
		return "", fmt.Errorf("checkpoint: %s holds no safetensors weights (expected %s or %s; convert .bin/.pth weights to safetensors first)", dir, SingleFileName, IndexFileName)
	}
	return "", fmt.Errorf("checkpoint: %s holds several safetensors files but no %s; open one file or add the index", dir, IndexFileName)
}

// NewReader reads a single safetensors file of the given size from r; name
// is used in errors and in TensorInfo.File. Bytes copies from r (there is no
// mapping); Close does not close r.
func NewReader(r io.ReaderAt, size int64, name string) (*Reader, error) {
	h, err := ReadHeader(r, size, name)
	if err != nil {
		return nil, err
	}
	rd := &Reader{path: name, shards: []*shard{{path: name, ra: r, size: size, header: h}}}
	rd.finish()
	rd.metadata = map[string]string{}
	for k, v := range h.Metadata {
		rd.metadata[k] = v
	}
	return rd, nil
}

// addFile opens, validates and maps one shard.
func (r *Reader) addFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: %w", err)
	}
	if st.IsDir() {
		f.Close()
		return fmt.Errorf("checkpoint: %s is a directory, not a safetensors file", path)
	}
	h, err := ReadHeader(f, st.Size(), path)
	if err != nil {
		f.Close()
		return err
	}
	s := &shard{path: path, f: f, ra: f, size: st.Size(), header: h}
	if useMmap {
		if data, err := mmapFile(f, st.Size()); err == nil {
			s.data = data
		}
	}
	r.shards = append(r.shards, s)
	return nil
}

// finish builds the tensor list from the shards' headers.
func (r *Reader) finish() {
	r.tensors = r.tensors[:0]
	r.shardOf = r.shardOf[:0]
	r.byName = map[string]int{}
	for i, s := range r.shards {
		for _, t := range s.header.Tensors {
			r.byName[t.Name] = len(r.tensors)
			r.tensors = append(r.tensors, t)
			r.shardOf = append(r.shardOf, i)
		}
	}
}

// indexFile is the JSON of model.safetensors.index.json.
type indexFile struct {
	Metadata  map[string]json.RawMessage `json:"metadata"`
	WeightMap map[string]string          `json:"weight_map"`
}

func openIndex(path string) (_ *Reader, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var idx indexFile
	if err := json.Unmarshal(raw, &idx); err != nil {
		off := int64(0)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
		}
		return nil, &FormatError{File: path, Offset: off, Msg: fmt.Sprintf("invalid index JSON: %v", err)}
	}
	if len(idx.WeightMap) == 0 {
		return nil, &FormatError{File: path, Msg: `index has no "weight_map" (or it is empty)`}
	}
	r := &Reader{path: path, index: path, metadata: map[string]string{}}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	// Shards in a stable order: by file name (HF names sort in shard order).
	byFile := map[string][]string{}
	for name, file := range idx.WeightMap {
		if file == "" || filepath.IsAbs(file) || strings.Contains(filepath.ToSlash(file), "../") || file == ".." {
			return nil, &FormatError{File: path, Tensor: name, Msg: fmt.Sprintf("weight_map names an unsafe shard path %q (must be a file beside the index)", file)}
		}
		byFile[file] = append(byFile[file], name)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	dir := filepath.Dir(path)
	for _, file := range files {
		p := filepath.Join(dir, filepath.FromSlash(file))
		if _, err := os.Stat(p); err != nil {
			names := byFile[file]
			sort.Strings(names)
			return nil, &FormatError{File: path, Tensor: names[0], Msg: fmt.Sprintf("weight_map names shard %q, which is missing (%d tensors map to it)", file, len(names))}
		}
		if err := r.addFile(p); err != nil {
			return nil, err
		}
	}
	r.finish()
	// Each weight_map entry must be in the shard it names; a tensor may
	// appear in only one shard.
	seen := map[string]string{}
	for i, s := range r.shards {
		for _, t := range s.header.Tensors {
			if other, dup := seen[t.Name]; dup {
				return nil, &FormatError{File: s.path, Tensor: t.Name, Offset: t.Offset, Msg: fmt.Sprintf("tensor is stored in two shards (also in %s)", other)}
			}
			seen[t.Name] = s.path
			if want, ok := idx.WeightMap[t.Name]; ok && want != files[i] {
				return nil, &FormatError{File: path, Tensor: t.Name, Msg: fmt.Sprintf("weight_map says shard %q but the tensor is in %q", want, files[i])}
			}
		}
	}
	for name, file := range idx.WeightMap {
		if _, ok := r.byName[name]; !ok {
			return nil, &FormatError{File: path, Tensor: name, Msg: fmt.Sprintf("weight_map names shard %q, but the tensor is absent from that shard", file)}
		}
	}
	for _, s := range r.shards {
		for k, v := range s.header.Metadata {
			r.metadata[k] = v
		}
	}
	for k, v := range idx.Metadata {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v) // numbers and other JSON values verbatim
		}
		r.metadata[k] = s
	}
	return r, nil
}

// Close unmaps and closes every file. Slices returned by Bytes must not be
// used afterwards.
func (r *Reader) Close() error {
	var errs []error
	for _, s := range r.shards {
		if s.data != nil {
			if err := munmap(s.data); err != nil {
				errs = append(errs, fmt.Errorf("checkpoint: unmapping %s: %w", s.path, err))
			}
			s.data = nil
		}
		if s.f != nil {
			if err := s.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("checkpoint: %w", err))
			}
			s.f = nil
		}
	}
	return errors.Join(errs...)
}

// Path returns the path Open resolved: the .safetensors file or the index.
func (r *Reader) Path() string { return r.path }

// Sharded reports whether the checkpoint was read through an index.
func (r *Reader) Sharded() bool { return r.index != "" }

// Tensors returns every tensor in storage order (by file, then offset).
// The slice is a copy.
func (r *Reader) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(r.tensors))
	copy(out, r.tensors)
	return out
}

// Tensor returns the named tensor's description.
func (r *Reader) Tensor(name string) (TensorInfo, bool) {
	i, ok := r.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return r.tensors[i], true
}

// Metadata returns the __metadata__ of every file merged, then the index's
// "metadata" (values that are not strings, such as total_size, are given as
// their JSON text). The map is a copy.
func (r *Reader) Metadata() map[string]string {
	out := make(map[string]string, len(r.metadata))
	for k, v := range r.metadata {
		out[k] = v
	}
	return out
}

// Files returns the safetensors files in order.
func (r *Reader) Files() []string {
	out := make([]string, len(r.shards))
	for i, s := range r.shards {
		out[i] = s.path
	}
	return out
}

// Shard returns the file that holds the named tensor, or "" if there is none.
func (r *Reader) Shard(name string) string {
	i, ok := r.byName[name]
	if !ok {
		return ""
	}
	return r.shards[r.shardOf[i]].path
}

// TotalSize returns the sum of all tensors' data sizes in bytes (what an
// index calls metadata.total_size).
func (r *Reader) TotalSize() int64 {
	var n int64
	for _, t := range r.tensors {
		n += t.Size
	}
	return n
}

func (r *Reader) lookup(name string) (TensorInfo, *shard, error) {
	i, ok := r.byName[name]
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("checkpoint: %s: %q: %w", r.path, name, ErrNotFound)
	}
	return r.tensors[i], r.shards[r.shardOf[i]], nil
}

// Bytes returns the raw little-endian data of the named tensor. When the file
// is memory-mapped the slice is a zero-copy, read-only view valid until Close
// (writing to it crashes the program); otherwise it is a fresh copy.
func (r *Reader) Bytes(name string) ([]byte, error) {
	t, s, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if s.data != nil {
		return s.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
	}
	if s.ra == nil {
		return nil, fmt.Errorf("checkpoint: %s: reader is closed", s.path)
	}
	buf := make([]byte, t.Size)
	if _, err := s.ra.ReadAt(buf, t.Offset); err != nil && !(errors.Is(err, io.EOF) && t.Size == 0) {
		return nil, fmt.Errorf("checkpoint: %s: reading tensor %q at byte offset %d: %w", s.path, name, t.Offset, err)
	}
	return buf, nil
}

// Section returns a reader over the named tensor's raw data, for streaming
// copies that never hold the tensor in memory. Like Bytes, it reads the
// mapping and must not be used after Close.
func (r *Reader) Section(name string) (*io.SectionReader, error) {
	t, s, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if s.data != nil {
		return io.NewSectionReader(bytes.NewReader(s.data), t.Offset, t.Size), nil
	}
	if s.ra == nil {
		return nil, fmt.Errorf("checkpoint: %s: reader is closed", s.path)
	}
	return io.NewSectionReader(s.ra, t.Offset, t.Size), nil
}

// Float32 returns the named tensor converted to float32 (from F32, F16,
// BF16, F64, F8_E4M3 or F8_E5M2) in a new slice.
func (r *Reader) Float32(name string) ([]float32, error) {
	t, _, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("checkpoint: tensor %q is %s: %w (Float32 converts floating-point tensors only; use Bytes)", name, t.DType, ErrUnsupported)
	}
	dst := make([]float32, t.NumElements())
	return dst, r.Float32Into(dst, name)
}

// Float32Into converts the named tensor into dst, which must have exactly
// NumElements elements; it lets callers reuse one buffer across tensors.
func (r *Reader) Float32Into(dst []float32, name string) error {
	b, err := r.Bytes(name)
	if err != nil {
		return err
	}
	t, _ := r.Tensor(name)
	if err := DecodeFloat32(dst, t.DType, b); err != nil {
		return fmt.Errorf("checkpoint: tensor %q: %w", name, err)
	}
	return nil
}

// Uint16s returns the data of a 16-bit tensor (BF16, F16, I16, U16) as
// little-endian words. When the file is memory-mapped, the machine is
// little-endian and the data is 2-byte aligned, the slice is a zero-copy,
// read-only view valid until Close (writing to it crashes the program);
// otherwise it is a fresh copy.
func (r *Reader) Uint16s(name string) ([]uint16, error) {
	t, _, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if t.DType.Size() != 2 {
		return nil, fmt.Errorf("checkpoint: tensor %q is %s, not a 16-bit type: %w", name, t.DType, ErrUnsupported)
	}
	b, err := r.Bytes(name)
	if err != nil {
		return nil, err
	}
	if u, ok := u16View(b); ok {
		return u, nil
	}
	out := make([]uint16, len(b)/2)
	for i := range out {
		out[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return out, nil
}

// Float32View returns the data of an F32 tensor as a zero-copy, read-only
// view into the mapping (valid until Close; writing to it crashes the
// program), and false when there is none: the tensor is not F32, the file
// is not mapped, the machine is big-endian or the data is not 4-byte
// aligned. Use Float32 then.
func (r *Reader) Float32View(name string) ([]float32, bool) {
	t, s, err := r.lookup(name)
	if err != nil || t.DType != F32 || s.data == nil || t.Size < 4 || !littleEndian {
		return nil, false
	}
	b := s.data[t.Offset : t.Offset+t.Size]
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4), true
}

// Release tells the operating system that the named tensor's mapped pages
// are not needed for now (madvise MADV_DONTNEED on the page range, rounded
// out to whole pages): they leave the process's resident set and are read
// again from the file (usually from the page cache) on the next use. It
// changes no data: the mapping is read-only. Without a mapping it does
// nothing.
func (r *Reader) Release(name string) error {
	t, s, err := r.lookup(name)
	if err != nil {
		return err
	}
	if s.data == nil || t.Size == 0 {
		return nil
	}
	page := int64(os.Getpagesize())
	lo := t.Offset &^ (page - 1)
	hi := min((t.Offset+t.Size+page-1)&^(page-1), int64(len(s.data)))
	if err := dontNeed(s.data[lo:hi]); err != nil {
		return fmt.Errorf("checkpoint: %s: releasing tensor %q: %w", s.path, name, err)
	}
	return nil
}

// Mapped reports whether every file of the checkpoint is memory-mapped (so
// that Uint16s and Float32View are zero-copy and Release frees pages).
func (r *Reader) Mapped() bool {
	for _, s := range r.shards {
		if s.data == nil {
			return false
		}
	}
	return len(r.shards) > 0
}
