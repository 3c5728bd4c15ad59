package checkpoint

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// TestReadAtFallback opens a file without memory mapping, as on platforms
// where mmap fails, and checks every accessor against the mapped reader.
func TestReadAtFallback(t *testing.T) {
	specs := []TensorSpec{{Name: "a", DType: BF16, Shape: []int64{3, 5}}, {Name: "b", DType: F32, Shape: []int64{4}}, {Name: "z", DType: F16, Shape: []int64{0}}}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	w, err := Create(path, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range specs {
		w.WriteTensor(s.Name, fill(s.Size(), byte(i)))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mapped, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer mapped.Close()
	if mapped.shards[0].data == nil {
		t.Skip("mmap unavailable here; the fallback is what Open already used")
	}
	useMmap = false
	plain, err := Open(path)
	useMmap = true
	if err != nil {
		t.Fatal(err)
	}
	if plain.shards[0].data != nil {
		t.Fatal("fallback reader is mapped")
	}
	for _, s := range specs {
		a, err1 := mapped.Bytes(s.Name)
		b, err2 := plain.Bytes(s.Name)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) || int64(len(b)) != s.Size() {
			t.Errorf("%s: Bytes differ (%v, %v)", s.Name, err1, err2)
		}
		sec, err := plain.Section(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := io.ReadAll(sec)
		if err != nil || !bytes.Equal(a, c) {
			t.Errorf("%s: Section differs (%v)", s.Name, err)
		}
		f1, _ := mapped.Float32(s.Name)
		f2, _ := plain.Float32(s.Name)
		if len(f1) != len(f2) {
			t.Errorf("%s: Float32 lengths differ", s.Name)
		}
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Bytes("a"); err == nil {
		t.Error("Bytes after Close succeeded")
	}
}
