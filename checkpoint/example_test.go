package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/checkpoint"
)

// Write a file one tensor at a time, then read it back.
func Example() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	specs := []checkpoint.TensorSpec{
		{Name: "embed.weight", DType: checkpoint.BF16, Shape: []int64{2, 3}},
		{Name: "norm.weight", DType: checkpoint.F32, Shape: []int64{3}},
	}
	w, err := checkpoint.Create(path, specs, map[string]string{"format": "pt"})
	if err != nil {
		fmt.Println(err)
		return
	}
	w.WriteFloat32("embed.weight", []float32{1, 2, 3, 4, 5, 6.01})
	w.WriteFloat32("norm.weight", []float32{1, 1, 1})
	if err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	r, err := checkpoint.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for _, t := range r.Tensors() {
		v, _ := r.Float32(t.Name)
		fmt.Println(t.Name, t.DType, t.Shape, v)
	}
	fmt.Println(r.Metadata())
	// Output:
	// embed.weight BF16 [2 3] [1 2 3 4 5 6]
	// norm.weight F32 [3] [1 1 1]
	// map[format:pt]
}

func ExampleHeaderBytes() {
	h, _ := checkpoint.HeaderBytes([]checkpoint.TensorSpec{{Name: "w", DType: checkpoint.F16, Shape: []int64{2}}}, nil)
	fmt.Printf("length %d: %q\n", h[0], h[8:])
	// Output:
	// length 56: "{\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}  "
}

func ExamplePlanShards() {
	specs := []checkpoint.TensorSpec{
		{Name: "a", DType: checkpoint.BF16, Shape: []int64{1024, 1024}},
		{Name: "b", DType: checkpoint.BF16, Shape: []int64{1024, 1024}},
		{Name: "c", DType: checkpoint.BF16, Shape: []int64{512}},
	}
	plan := checkpoint.PlanShards(specs, 3<<20) // at most 3 MiB per file
	for i, f := range plan.Files {
		fmt.Println(f, len(plan.Tensors[i]))
	}
	fmt.Println(plan.TotalSize())
	// Output:
	// model-00001-of-00002.safetensors 1
	// model-00002-of-00002.safetensors 2
	// 4195328
}

func ExampleNewOutputDir() {
	parent, _ := os.MkdirTemp("", "out")
	defer os.RemoveAll(parent)
	out, err := checkpoint.NewOutputDir(filepath.Join(parent, "pruned"), false)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer out.Abort() // removes the temporary directory unless committed
	os.WriteFile(filepath.Join(out.Path(), "config.json"), []byte("{}"), 0o644)
	if err := out.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	_, err = checkpoint.NewOutputDir(out.Dest(), false)
	fmt.Println(err != nil)
	// Output:
	// true
}
