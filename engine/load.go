package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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
}

func (e *MissingTensorError) Error() string {
	return fmt.Sprintf("%s: missing tensor %q (shape %v implied by config.json)", e.File, e.Tensor, e.Want)
}

// Load reads a HuggingFace checkpoint directory (config.json plus
// model.safetensors or a sharded set) into a float32 model. BF16, F16 and
// other float weights are converted. Every tensor the config implies must be
// present with exactly the implied shape, or Load fails with a
// *MissingTensorError or *ShapeError naming it; tensors the engine does not
// use (e.g. rotary inv_freq buffers) are ignored.
func Load(dir string) (*Model, error) {
	arch, err := architecture.Load(dir)
	if err != nil {
		return nil, err
	}
	r, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m, err := newEmpty(arch)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	for _, s := range m.specs {
		info, ok := r.Tensor(s.Name)
		if !ok {
			return nil, &MissingTensorError{File: r.Path(), Tensor: s.Name, Want: s.Shape}
		}
		if !sameShape(s.Shape, info.Shape) {
			return nil, &ShapeError{File: info.File, Tensor: s.Name, Want: s.Shape, Got: info.Shape}
		}
		if err := r.Float32Into(m.Tensor(s.Name), s.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", info.File, err)
		}
	}
	return m, nil
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
	switch dtype {
	case checkpoint.F32, checkpoint.BF16, checkpoint.F16:
	default:
		return fmt.Errorf("engine: save %s: dtype %q not supported (use F32, BF16 or F16)", dir, dtype)
	}
	out, err := checkpoint.NewOutputDir(dir, true)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Abort()
		}
	}()
	cfg, err := m.configJSON(dtype)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out.Path(), "config.json"), cfg, 0o644); err != nil {
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
	w, err := checkpoint.Create(filepath.Join(out.Path(), checkpoint.SingleFileName), specs, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	for _, s := range m.specs {
		if err := w.WriteFloat32(s.Name, m.Tensor(s.Name)); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Commit()
}

var torchDType = map[checkpoint.DType]string{checkpoint.F32: "float32", checkpoint.BF16: "bfloat16", checkpoint.F16: "float16"}

// configJSON writes config.json for the model. PRIVATE ADAPTER until
// architecture provides a config writer: it handles models whose layers all
// have the same shape (Llama / Qwen2 / Qwen3 / Mistral style), starting from
// the config the model was read from so unknown keys survive.
func (m *Model) configJSON(dtype checkpoint.DType) ([]byte, error) {
	a := m.arch
	if len(a.Layers) == 0 {
		return nil, errors.New("engine: save: model has no layers")
	}
	l0 := a.Layers[0]
	for i, l := range a.Layers {
		if l.Attention == nil || l.MLP == nil || *l.Attention != *l0.Attention || *l.MLP != *l0.MLP {
			return nil, &UnsupportedError{Layer: i, Feature: "saving a model whose layers differ in shape needs a per-layer config writer (not available yet)"}
		}
	}
	cfg := map[string]any{}
	for k, v := range a.Raw {
		cfg[k] = v
	}
	arch := a.Arch
	if arch == "" {
		arch = "LlamaForCausalLM"
	}
	mt := a.ModelType
	if mt == "" {
		mt = "llama"
	}
	at, ml := l0.Attention, l0.MLP
	act := ml.Activation
	if act == "" {
		act = "silu"
	}
	set := map[string]any{
		"architectures": []string{arch}, "model_type": mt,
		"vocab_size": a.Vocab, "hidden_size": a.Hidden, "intermediate_size": ml.Width,
		"num_hidden_layers": len(a.Layers), "num_attention_heads": at.Heads,
		"num_key_value_heads": at.KVHeads, "head_dim": at.HeadDim,
		"rms_norm_eps": a.NormEps, "rope_theta": a.Rope.Theta,
		"max_position_embeddings": a.MaxPositions, "tie_word_embeddings": a.TiedEmbeddings,
		"hidden_act": act, "attention_bias": at.QKVBias, "mlp_bias": ml.Bias,
		"torch_dtype": torchDType[dtype],
	}
	if a.BOS >= 0 {
		set["bos_token_id"] = a.BOS
	}
	if len(a.EOS) == 1 {
		set["eos_token_id"] = a.EOS[0]
	} else if len(a.EOS) > 1 {
		set["eos_token_id"] = slices.Clone(a.EOS)
	}
	if s := a.Rope.Scaling; s != nil {
		rs := map[string]any{"rope_type": s.Type, "factor": s.Factor}
		if s.Type == "llama3" {
			rs["low_freq_factor"], rs["high_freq_factor"] = s.LowFreqFactor, s.HighFreqFactor
			rs["original_max_position_embeddings"] = s.OriginalMaxPositions
		}
		set["rope_scaling"] = rs
	}
	if a.Rope.PartialFactor > 0 && a.Rope.PartialFactor < 1 {
		set["partial_rotary_factor"] = a.Rope.PartialFactor
	}
	for k, v := range set {
		cfg[k] = v
	}
	return json.MarshalIndent(cfg, "", "  ")
}
