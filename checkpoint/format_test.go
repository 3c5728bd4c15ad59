package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func f32le(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// writeBytes writes a file with Create and returns its bytes.
func writeBytes(t *testing.T, specs []TensorSpec, md map[string]string, data [][]byte) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.safetensors")
	w, err := Create(path, specs, md)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range specs {
		if err := w.WriteTensor(s.Name, data[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMatchesReferenceSerializer compares our files byte for byte with the
// outputs pinned by the reference Rust implementation's own unit tests
// (huggingface/safetensors, safetensors/src/tensor.rs: test_serialization,
// test_empty, test_serialization_forced_alignement).
func TestMatchesReferenceSerializer(t *testing.T) {
	data := f32le(0, 1, 2, 3, 4, 5)
	tests := []struct {
		name  string
		specs []TensorSpec
		md    map[string]string
		data  [][]byte
		want  []byte
	}{
		{
			name:  "test_serialization (64-byte header, no padding)",
			specs: []TensorSpec{{Name: "attn.0", DType: F32, Shape: []int64{1, 2, 3}}},
			data:  [][]byte{data},
			want: append([]byte{64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
				116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
				58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
				101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125}, data...),
		},
		{
			name: "test_empty",
			want: []byte{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32},
		},
		{
			name: "test_empty with metadata",
			md:   map[string]string{"framework": "pt"},
			want: []byte{40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
				95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
				116, 34, 125, 125, 32, 32, 32, 32, 32},
		},
		{
			name:  "test_serialization_forced_alignement (7 spaces of padding)",
			specs: []TensorSpec{{Name: "attn0", DType: F32, Shape: []int64{1, 1, 2, 3}}},
			data:  [][]byte{data},
			want: append([]byte{72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
				121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
				91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
				115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
				32, 32}, data...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := writeBytes(t, tc.specs, tc.md, tc.data)
			if !bytes.Equal(got, tc.want) {
				t.Errorf("file differs from the reference serializer\ngot:\n%s\nwant:\n%s", hex.Dump(got), hex.Dump(tc.want))
			}
			if _, err := ReadHeader(bytes.NewReader(tc.want), int64(len(tc.want)), tc.name); err != nil {
				t.Errorf("reference file rejected: %v", err)
			}
		})
	}
}

// TestGoldenTinyFile pins the exact bytes of a small mixed-dtype file with
// metadata (run with -update to rewrite testdata/tiny.safetensors.hex).
func TestGoldenTinyFile(t *testing.T) {
	specs := []TensorSpec{
		{Name: "w", DType: BF16, Shape: []int64{2, 2}},
		{Name: "b", DType: F32, Shape: []int64{2}},
		{Name: "ids", DType: I64, Shape: []int64{1}},
		{Name: "mask", DType: Bool, Shape: []int64{3}},
	}
	w, _ := FromFloat32(BF16, []float32{1, -2, 0.5, 3.140625})
	ids := make([]byte, 8)
	binary.LittleEndian.PutUint64(ids, 50256)
	got := writeBytes(t, specs, map[string]string{"format": "pt", "note": "<tiny & \"golden\">"},
		[][]byte{w, f32le(0.25, -1), ids, {1, 0, 1}})
	if binary.LittleEndian.Uint64(got)%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", binary.LittleEndian.Uint64(got))
	}
	golden := filepath.Join("testdata", "tiny.safetensors.hex")
	dump := []byte(hex.Dump(got))
	if *update {
		if err := os.WriteFile(golden, dump, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenTinyFile -update to create it)", err)
	}
	if !bytes.Equal(dump, want) {
		t.Errorf("file bytes changed (-update to accept):\ngot:\n%s\nwant:\n%s", dump, want)
	}
	r, err := NewReader(bytes.NewReader(got), int64(len(got)), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	if md := r.Metadata(); md["note"] != "<tiny & \"golden\">" {
		t.Errorf("metadata note = %q", md["note"])
	}
	v, err := r.Float32("w")
	if err != nil || v[3] != 3.140625 || v[1] != -2 {
		t.Errorf("w = %v, %v", v, err)
	}
}
