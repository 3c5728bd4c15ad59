package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadHeader feeds arbitrary bytes to ReadHeader and NewReader. Errors
// must be *FormatError (the source cannot fail), nothing may panic, and any
// accepted file must describe in-range, non-overlapping tensors whose sizes
// match their shapes and that tile the data buffer, all readable.
func FuzzReadHeader(f *testing.F) {
	// Valid files of every dtype, with and without metadata.
	var specs []TensorSpec
	var data []byte
	for i, dt := range DTypes {
		s := TensorSpec{Name: "t" + string(dt), DType: dt, Shape: []int64{int64(i%3 + 1), 2}}
		specs = append(specs, s)
		data = append(data, fill(s.Size(), byte(i))...)
	}
	for _, md := range []map[string]string{nil, {"format": "pt", "k": "v"}} {
		hdr, err := HeaderBytes(specs, md)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(hdr, data...))
		hdr, _ = HeaderBytes(specs[:1], md)
		f.Add(append(hdr, data[:specs[0].Size()]...))
	}
	empty, _ := HeaderBytes(nil, nil)
	f.Add(empty)
	for _, c := range rejectCases {
		f.Add(c.file)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := ReadHeader(bytes.NewReader(file), int64(len(file)), "fuzz")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("non-format error %T: %v", err, err)
			}
			_ = err.Error()
			return
		}
		pos := h.DataStart
		if pos < 8 || pos > int64(len(file)) {
			t.Fatalf("data start %d outside file of %d bytes", pos, len(file))
		}
		for _, ti := range h.Tensors {
			if ti.Offset != pos {
				t.Fatalf("%s at %d, want contiguous at %d", ti.Name, ti.Offset, pos)
			}
			if ti.Size < 0 || ti.Offset+ti.Size > int64(len(file)) {
				t.Fatalf("%s: range [%d,%d) outside file", ti.Name, ti.Offset, ti.Offset+ti.Size)
			}
			if ti.NumElements()*int64(ti.DType.Size()) != ti.Size {
				t.Fatalf("%s: size %d for %s %v", ti.Name, ti.Size, ti.DType, ti.Shape)
			}
			pos += ti.Size
		}
		if pos != int64(len(file)) {
			t.Fatalf("tensors end at %d, file is %d bytes", pos, len(file))
		}
		r, err := NewReader(bytes.NewReader(file), int64(len(file)), "fuzz")
		if err != nil {
			t.Fatalf("ReadHeader accepted but NewReader failed: %v", err)
		}
		_ = r.Metadata()
		for _, ti := range r.Tensors() {
			b, err := r.Bytes(ti.Name)
			if err != nil || int64(len(b)) != ti.Size || !bytes.Equal(b, file[ti.Offset:ti.Offset+ti.Size]) {
				t.Fatalf("%s: Bytes = %d bytes, %v", ti.Name, len(b), err)
			}
			if ti.DType.IsFloat() {
				v, err := r.Float32(ti.Name)
				if err != nil || int64(len(v)) != ti.NumElements() {
					t.Fatalf("%s: Float32: %d values, %v", ti.Name, len(v), err)
				}
			}
		}
	})
}

// FuzzIndex opens a directory holding two valid shards and a fuzzed
// model.safetensors.index.json. Nothing may panic; an accepted index must
// give readable tensors, each in the shard the index names.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x","b":"/etc/passwd"}}`))
	f.Add([]byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"."}}`))
	f.Add([]byte(`{"metadata":{"x":[1,{"y":null}]},"weight_map":{}}`))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	specs := []TensorSpec{{Name: "a", DType: F32, Shape: []int64{2}}, {Name: "b", DType: BF16, Shape: []int64{6}}}
	for i, s := range specs {
		w, err := Create(filepath.Join(dir, ShardName(i, 2)), specs[i:i+1], nil)
		if err != nil {
			f.Fatal(err)
		}
		if err := w.WriteTensor(s.Name, fill(s.Size(), byte(i))); err != nil {
			f.Fatal(err)
		}
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
	}
	idx := filepath.Join(dir, IndexFileName)
	f.Fuzz(func(t *testing.T, index []byte) {
		if err := os.WriteFile(idx, index, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(idx)
		if err != nil {
			_ = err.Error()
			return
		}
		defer r.Close()
		var m struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(index, &m); err != nil {
			t.Fatalf("accepted an index that does not parse: %v", err)
		}
		for name, file := range m.WeightMap {
			if got := r.Shard(name); filepath.Base(got) != filepath.Base(file) {
				t.Fatalf("%s: stored in %s, index says %s", name, got, file)
			}
			if _, err := r.Bytes(name); err != nil {
				t.Fatal(err)
			}
		}
		_ = r.Metadata()
	})
}
