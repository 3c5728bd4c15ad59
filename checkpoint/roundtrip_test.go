package checkpoint

import (
	"bytes"
	"path/filepath"
	"testing"
)

// fill returns n deterministic bytes.
func fill(n int64, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestRoundTripEveryDType writes one tensor of every dtype, reads the file
// back and compares shapes, dtypes and bytes.
func TestRoundTripEveryDType(t *testing.T) {
	var specs []TensorSpec
	for i, dt := range DTypes {
		specs = append(specs, TensorSpec{Name: "t." + string(dt), DType: dt, Shape: []int64{int64(i%3 + 1), 5}})
	}
	specs = append(specs, TensorSpec{Name: "scalar", DType: F32, Shape: []int64{}},
		TensorSpec{Name: "empty", DType: BF16, Shape: []int64{0, 7}})
	path := filepath.Join(t.TempDir(), "x.safetensors")
	w, err := Create(path, specs, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i, s := range specs {
		data := fill(s.Size(), byte(i))
		want[s.Name] = data
		if err := w.WriteTensor(s.Name, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Metadata()["format"]; got != "pt" {
		t.Errorf("metadata format = %q, want pt", got)
	}
	ts := r.Tensors()
	if len(ts) != len(specs) {
		t.Fatalf("got %d tensors, want %d", len(ts), len(specs))
	}
	for i, s := range specs {
		ti := ts[i]
		if ti.Name != s.Name || ti.DType != s.DType || len(ti.Shape) != len(s.Shape) || ti.Size != s.Size() {
			t.Errorf("tensor %d = %+v, want %+v", i, ti, s)
		}
		got, err := r.Bytes(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[s.Name]) {
			t.Errorf("%s: bytes differ after round trip", s.Name)
		}
	}
}
