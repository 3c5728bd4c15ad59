package engine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// ShapeError reports a checkpoint tensor whose shape disagrees with the
// shape config.json implies.
type ShapeError struct {
	File   string
	Tensor string
	Want   []int
	Got    []int64
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("%s: tensor %q has shape %v but config.json implies %v: the checkpoint and its config.json disagree (was config.json edited or the checkpoint pruned without rewriting it?)", e.File, e.Tensor, e.Got, e.Want)
}

// MissingTensorError reports a tensor that config.json implies but the
// checkpoint lacks.
type MissingTensorError struct {
	File   string
	Tensor string
	Want   []int
	// MXFP4 is set when the checkpoint holds the tensor as MXFP4 blocks
	// and scales (Tensor+"_blocks", Tensor+"_scales": gpt-oss's released
	// experts), which the engine does not read.
	MXFP4 bool
}

func (e *MissingTensorError) Error() string {
	if e.MXFP4 {
		return fmt.Sprintf("%s: tensor %q is stored MXFP4-quantized (%s_blocks, %s_scales), which the engine does not read: dequantize first (e.g. load with transformers' Mxfp4Config(dequantize=True) and save_pretrained in bf16)", e.File, e.Tensor, e.Tensor, e.Tensor)
	}
	return fmt.Sprintf("%s: missing tensor %q (shape %v implied by config.json)", e.File, e.Tensor, e.Want)
}

// Load reads a HuggingFace checkpoint directory (config.json plus
// model.safetensors or a sharded set) into a float32 model. BF16, F16 and
// other float weights are converted. Every tensor the config implies must be
// present with exactly the implied shape, or Load fails with a
// *MissingTensorError or *ShapeError naming it, and in a dtype the engine
// reads, or it fails with a *DTypeError; weights that cannot fit in the
// memory available (float32 with gradients, or for LoadOptions.Stream one
// layer at a time) are a *MemoryError saying what they need, before
// anything is allocated. Tensors the engine does not use (e.g. rotary
// inv_freq buffers) are ignored.
func Load(dir string) (*Model, error) { return LoadWith(dir, LoadOptions{}) }

// LoadWith is Load with options: LoadOptions.Mapped reads the weight
// matrices in place, in the checkpoint's dtype, for forward-only work.
// Close the model when done with it.
func LoadWith(dir string, o LoadOptions) (_ *Model, err error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	arch, err := architecture.Load(dir)
	if err != nil {
		return nil, err
	}
	r, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			r.Close()
		}
	}()
	specs, err := TensorSpecs(arch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// Check every tensor before allocating anything, so that a config.json
	// claiming a huge model fails on its first tensor, not on memory.
	for _, s := range specs {
		info, ok := r.Tensor(s.Name)
		if !ok {
			_, blocks := r.Tensor(s.Name + "_blocks")
			return nil, &MissingTensorError{File: r.Path(), Tensor: s.Name, Want: s.Shape, MXFP4: blocks}
		}
		if !sameShape(s.Shape, info.Shape) {
			return nil, &ShapeError{File: info.File, Tensor: s.Name, Want: s.Shape, Got: info.Shape}
		}
		if !readable(info.DType) {
			return nil, &DTypeError{File: info.File, Tensor: s.Name, DType: info.DType}
		}
	}
	if err := checkLoadFits(dir, specs, r, o); err != nil {
		return nil, err
	}
	if o.Mapped {
		m, err := newMapped(arch, r, o.Stream)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		keep = true
		return m, nil
	}
	m, err := newEmpty(arch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, s := range m.specs {
		info, _ := r.Tensor(s.Name)
		if err := r.Float32Into(m.Tensor(s.Name), s.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", info.File, err)
		}
	}
	return m, nil
}

// checkLoadFits refuses, before anything is allocated, weights that do not
// fit in the memory available: as float32 with gradients (Load), or
// streamed one layer at a time (the least a forward pass can hold). Weights
// mapped in place but not streamed are not checked: pages the kernel can
// drop and read again are not a hard limit.
func checkLoadFits(dir string, specs []TensorSpec, r *checkpoint.Reader, o LoadOptions) error {
	if !o.Mapped {
		var n int64
		for _, s := range specs {
			n += int64(s.Size())
		}
		return checkFits(dir, "the model as float32 with gradients", 8*n,
			"forward-only work can read the weights in place in their checkpoint dtype (mapped), or stream them one layer at a time")
	}
	if !o.Stream {
		return nil
	}
	var slab, global int64
	layer := map[int]int64{}
	for _, s := range specs {
		info, _ := r.Tensor(s.Name)
		_, half := halfKind(info.DType)
		switch {
		case !s.isMatrix() || !(half || info.DType == checkpoint.F32):
			slab += 4 * int64(s.Size())
		case s.layer < 0:
			global += info.Size
		default:
			layer[s.layer] += info.Size
		}
	}
	var most int64
	for _, b := range layer {
		most = max(most, b)
	}
	return checkFits(dir, "the model streamed one layer at a time", slab+global+most,
		"it does not fit even streamed: use a machine with more memory")
}

func sameShape(want []int, got []int64) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if int64(want[i]) != got[i] {
			return false
		}
	}
	return true
}

// Save writes the model as a HuggingFace checkpoint directory: config.json
// and model.safetensors with every tensor in dtype (F32, BF16 or F16). The
// directory is built under a temporary name and renamed into place when
// complete; an existing dir is replaced.
func (m *Model) Save(dir string, dtype checkpoint.DType) (err error) {
	if err := checkSaveDType(dir, dtype); err != nil {
		return err
	}
	out, err := checkpoint.NewOutputDir(dir, true)
	if err != nil {
		return err
	}
	defer out.Abort() // does nothing after Commit
	if err := m.WriteFiles(out.Path(), dtype); err != nil {
		return err
	}
	return out.Commit()
}

func checkSaveDType(dir string, dtype checkpoint.DType) error {
	switch dtype {
	case checkpoint.F32, checkpoint.BF16, checkpoint.F16:
		return nil
	}
	return fmt.Errorf("engine: save %s: dtype %q not supported (use F32, BF16 or F16)", dir, dtype)
}

// WriteFiles writes config.json and model.safetensors (every tensor in
// dtype: F32, BF16 or F16) into the existing directory dir, typically the
// Path of a checkpoint.OutputDir that also receives other files (a
// tokenizer) before it is committed.
func (m *Model) WriteFiles(dir string, dtype checkpoint.DType) error {
	if err := checkSaveDType(dir, dtype); err != nil {
		return err
	}
	cfg, err := m.configJSON(dtype)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o666); err != nil { //output:inside
		return fmt.Errorf("engine: save: %w", err)
	}
	specs := make([]checkpoint.TensorSpec, len(m.specs))
	for i, s := range m.specs {
		shape := make([]int64, len(s.Shape))
		for j, d := range s.Shape {
			shape[j] = int64(d)
		}
		specs[i] = checkpoint.TensorSpec{Name: s.Name, DType: dtype, Shape: shape}
	}
	w, err := checkpoint.Create(filepath.Join(dir, checkpoint.SingleFileName), specs, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	for i, s := range m.specs {
		t, err := m.tensorF32(i)
		if err != nil {
			w.Abort()
			return err
		}
		if err := w.WriteFloat32(s.Name, t); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

var torchDType = map[checkpoint.DType]string{checkpoint.F32: "float32", checkpoint.BF16: "bfloat16", checkpoint.F16: "float16"}

// configJSON writes config.json through architecture's writer: the native
// format of the model's class when its layers are uniform, DeciLM's
// per-layer block_configs otherwise. A model built by New without an
// architecture class is written as LlamaForCausalLM.
func (m *Model) configJSON(dtype checkpoint.DType) ([]byte, error) {
	a := m.arch.Clone()
	if a.Arch == "" {
		a.Arch, a.ModelType = architecture.Llama, "llama"
	}
	cfg, err := a.Config(architecture.ConfigOptions{DType: torchDType[dtype]})
	if err != nil {
		return nil, fmt.Errorf("engine: save: %w", err)
	}
	return cfg, nil
}
