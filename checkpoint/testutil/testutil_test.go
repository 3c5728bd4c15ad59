package testutil_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

func TestWriteShardedReadsBack(t *testing.T) {
	shape := testutil.Llama{Vocab: 32, Hidden: 16, Intermediate: 24, Heads: 4, KVHeads: 2, Layers: 3}
	for _, shards := range []int{1, 3} {
		for _, dt := range []checkpoint.DType{checkpoint.F32, checkpoint.BF16, checkpoint.F16} {
			t.Run(fmt.Sprintf("%s/%d", dt, shards), func(t *testing.T) {
				specs := testutil.LlamaSpecs(shape, dt)
				dir := testutil.WriteTB(t, specs, testutil.Options{Seed: 7, Shards: shards,
					Files: map[string][]byte{"config.json": testutil.LlamaConfig(shape, dt)}})
				r, err := checkpoint.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if got := len(r.Files()); got != shards {
					t.Errorf("%d files, want %d", got, shards)
				}
				if len(r.Tensors()) != len(specs) {
					t.Fatalf("%d tensors, want %d", len(r.Tensors()), len(specs))
				}
				for _, s := range specs {
					got, err := r.Float32(s.Name)
					if err != nil {
						t.Fatal(err)
					}
					want, err := testutil.Values(s, 7)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: values differ", s.Name)
					}
					b, _ := r.Bytes(s.Name)
					if !bytes.Equal(b, testutil.Data(s, 7)) {
						t.Fatalf("%s: bytes differ", s.Name)
					}
				}
				aux, err := checkpoint.AuxFiles(dir)
				if err != nil || !slices.Equal(aux, []string{"config.json"}) {
					t.Errorf("AuxFiles = %v, %v; want [config.json]", aux, err)
				}
			})
		}
	}
}

func TestValuesDependOnSeedAndName(t *testing.T) {
	a := checkpoint.TensorSpec{Name: "a", DType: checkpoint.F32, Shape: []int64{64}}
	b := checkpoint.TensorSpec{Name: "b", DType: checkpoint.F32, Shape: []int64{64}}
	if slices.Equal(testutil.Float32s(a, 1), testutil.Float32s(a, 2)) {
		t.Error("seed does not change values")
	}
	if slices.Equal(testutil.Float32s(a, 1), testutil.Float32s(b, 1)) {
		t.Error("name does not change values")
	}
	if !slices.Equal(testutil.Float32s(a, 1), testutil.Float32s(a, 1)) {
		t.Error("values are not deterministic")
	}
	for _, v := range testutil.Float32s(a, 3) {
		if v < -1 || v >= 1 {
			t.Fatalf("value %v outside [-1, 1)", v)
		}
	}
}

func TestTooManyShards(t *testing.T) {
	specs := []checkpoint.TensorSpec{{Name: "x", DType: checkpoint.F32, Shape: []int64{2}}}
	if err := testutil.Write(t.TempDir(), specs, testutil.Options{Shards: 2}); err == nil {
		t.Fatal("2 shards for 1 tensor accepted")
	}
}

func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	specs := testutil.LlamaSpecs(testutil.Llama{Vocab: 16, Hidden: 8, Intermediate: 12, Heads: 2, KVHeads: 1, Layers: 2, Tied: true}, checkpoint.BF16)
	if err := testutil.Write(dir, specs, testutil.Options{Seed: 1, Shards: 2}); err != nil {
		fmt.Println(err)
		return
	}
	r, _ := checkpoint.Open(dir)
	defer r.Close()
	for _, f := range r.Files() {
		fmt.Println(filepath.Base(f))
	}
	fmt.Println(len(r.Tensors()), "tensors,", r.TotalSize(), "bytes")
	// Output:
	// model-00001-of-00002.safetensors
	// model-00002-of-00002.safetensors
	// 20 tensors, 2256 bytes
}
