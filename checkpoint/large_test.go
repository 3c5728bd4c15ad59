package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLargeSparseFile checks 64-bit offsets: a 5 GiB tensor (a sparse file,
// so little disk is used) followed by a small one whose values are read
// through the memory mapping past the 4 GiB mark.
func TestLargeSparseFile(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a 5 GiB sparse file; skipped with -short")
	}
	specs := []TensorSpec{{Name: "big", DType: U8, Shape: []int64{5 << 30}}, {Name: "tail", DType: F32, Shape: []int64{3}}}
	hdr, err := HeaderBytes(specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big.safetensors")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(hdr)) + specs[0].Size() + specs[1].Size()
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("cannot make a %d-byte sparse file here: %v", size, err)
	}
	if _, err := f.WriteAt(f32le(1.5, -2, 7), size-12); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ti, _ := r.Tensor("tail")
	if ti.Offset != size-12 || ti.Offset < 1<<32 {
		t.Fatalf("tail at %d", ti.Offset)
	}
	v, err := r.Float32("tail")
	if err != nil || v[0] != 1.5 || v[1] != -2 || v[2] != 7 {
		t.Fatalf("tail = %v, %v", v, err)
	}
	b, err := r.Bytes("big")
	if err != nil || int64(len(b)) != 5<<30 || b[len(b)-1] != 0 {
		t.Fatalf("big: %d bytes, %v", len(b), err)
	}
}
