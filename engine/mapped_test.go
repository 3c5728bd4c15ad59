package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine/blas"
)

// saved writes a randomized model of arch as a checkpoint in dtype and
// returns its directory.
func saved(t *testing.T, arch *architecture.Model, dtype checkpoint.DType, seed uint64) string {
	t.Helper()
	m, err := New(arch, seed)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, seed, 0.3)
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, dtype); err != nil {
		t.Fatal(err)
	}
	return dir
}

func bitEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %v, the float32-converted checkpoint gives %v", what, i, got[i], want[i])
		}
	}
}

// TestMappedBitExact: a model reading its bf16 (f16, f32) matrices in place
// from the mapped checkpoint gives, bit for bit, the logits of the same
// checkpoint converted to float32 by Load: in full forward passes (training
// and inference buffers, streamed or not) and in KV-cache decoding of one
// and several sequences (the few-row product path), on one and two threads
// and with the blas team. The products accumulate in float32 either way and
// the pure-Go kernel computes every element of C the same way whatever the
// tile; with -tags openblas the same holds on the machines we tried (the
// OpenBLAS kernel, too, sums each element in one fixed order).
func TestMappedBitExact(t *testing.T) {
	archs := map[string]*architecture.Model{
		"uniform": uniformArch(), "qwen3": qwenArch("Qwen3ForCausalLM", "qwen3"), "qwen2": qwenArch("Qwen2ForCausalLM", "qwen2"),
		"parent-shaped": parentShapedArch(func(int) bool { return true }),
		// Stacked [E, in, out] expert matrices read in place.
		"gpt-oss": gptOssModel(t, 1).arch,
	}
	for name, arch := range archs {
		for _, dt := range []checkpoint.DType{checkpoint.BF16, checkpoint.F16, checkpoint.F32} {
			t.Run(fmt.Sprintf("%s/%s", name, dt), func(t *testing.T) {
				dir := saved(t, arch, dt, 3)
				ref, err := Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				for _, stream := range []bool{false, true} {
					mm, err := LoadWith(dir, LoadOptions{Mapped: true, Stream: stream})
					if err != nil {
						t.Fatal(err)
					}
					if dt != checkpoint.F32 && mm.MappedBytes() == 0 {
						t.Fatal("no matrix was read in place")
					}
					if mm.NumParams() != ref.NumParams() {
						t.Fatalf("NumParams %d, Load's model %d", mm.NumParams(), ref.NumParams())
					}
					if mm.Hash() != ref.Hash() {
						t.Fatal("Hash differs from the float32-loaded model's")
					}
					compareForward(t, fmt.Sprintf("stream=%v", stream), mm, ref, arch.Vocab)
					if err := mm.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

func compareForward(t *testing.T, what string, mm, ref *Model, V int) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	const B, T = 2, 37
	toks := randTokens(r, B*T, V)
	for _, inference := range []bool{false, true} {
		mm.SetInference(inference)
		ref.SetInference(inference)
		want, err := ref.Forward(toks, B, T)
		if err != nil {
			t.Fatal(err)
		}
		want = append([]float32(nil), want...)
		got, err := mm.Forward(toks, B, T)
		if err != nil {
			t.Fatal(err)
		}
		bitEqual(t, fmt.Sprintf("%s inference=%v forward", what, inference), got, want)
	}
	defer blas.SetTeam(blas.SetTeam(true))
	for _, conc := range []int{1, 3} {
		prompts := make([][]int32, conc)
		for i := range prompts {
			prompts[i] = randTokens(r, 5+i, V)
		}
		next := make([][][]int32, 4)
		next[0] = prompts
		for s := 1; s < 4; s++ {
			next[s] = make([][]int32, conc)
			for i := range next[s] {
				next[s][i] = []int32{int32(r.IntN(V))}
			}
		}
		decode := func(m *Model) [][]float32 {
			caches := make([]*Cache, conc)
			for i := range caches {
				caches[i] = m.NewCache(32)
			}
			var out [][]float32
			for _, toks := range next {
				logits, err := m.Step(caches, toks, false)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range logits {
					out = append(out, append([]float32(nil), l...))
				}
			}
			return out
		}
		want := decode(ref)
		got := decode(mm)
		for i := range want {
			bitEqual(t, fmt.Sprintf("%s decode conc %d step-row %d", what, conc, i), got[i], want[i])
		}
	}
}

// TestMappedIsForwardOnly: the backward passes of a mapped model say so,
// its matrices are not in the slab, and Save writes them back unchanged.
func TestMappedIsForwardOnly(t *testing.T) {
	dir := saved(t, uniformArch(), checkpoint.BF16, 4)
	mm, err := LoadWith(dir, LoadOptions{Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mm.Close()
	toks := []int32{1, 2, 3, 4}
	if _, err := mm.ForwardLoss(toks, toks, 1, 4); err != nil {
		t.Fatal(err)
	}
	if err := mm.Backward(); !errors.Is(err, ErrMapped) {
		t.Fatalf("Backward = %v, want ErrMapped", err)
	}
	if mm.Tensor("model.layers.0.self_attn.q_proj.weight") != nil {
		t.Error("Tensor gave a view of a matrix read in place")
	}
	// TensorFloat32 gives a converted copy of it, equal to Load's.
	whole, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.input_layernorm.weight"} {
		got, err := mm.TensorFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		bitEqual(t, name, got, whole.Tensor(name))
	}
	if _, err := mm.TensorFloat32("no.such.weight"); err == nil {
		t.Error("TensorFloat32 of an unknown name gave no error")
	}
	// A model built without gradients refuses the backward passes.
	fw, err := NewZeroForward(uniformArch())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.ForwardLoss(toks, toks, 1, 4); err != nil {
		t.Fatal(err)
	}
	if err := fw.Backward(); !errors.Is(err, ErrNoGradients) || fw.Grads() != nil {
		t.Fatalf("Backward of a forward-only model = %v (gradients %d), want ErrNoGradients", err, len(fw.Grads()))
	}
	if mm.Tensor("model.layers.0.input_layernorm.weight") == nil {
		t.Error("a norm weight is not in the slab")
	}
	out := filepath.Join(t.TempDir(), "again")
	if err := mm.Save(out, checkpoint.BF16); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(dir, checkpoint.SingleFileName))
	b, _ := os.ReadFile(filepath.Join(out, checkpoint.SingleFileName))
	if string(a) != string(b) {
		t.Error("saving a mapped bf16 model as bf16 changed its weights")
	}
}

// TestLoadUnreadableDType: a weight stored as integers is refused with the
// tensor and its dtype named, before anything is allocated.
func TestLoadUnreadableDType(t *testing.T) {
	arch := uniformArch()
	m, _ := New(arch, 1)
	dir := t.TempDir()
	if err := m.WriteFiles(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	// Rewrite the weights with one tensor as I32.
	var specs []checkpoint.TensorSpec
	bad := "model.layers.1.mlp.up_proj.weight"
	for _, s := range m.Specs() {
		dt := checkpoint.F32
		if s.Name == bad {
			dt = checkpoint.I32
		}
		shape := make([]int64, len(s.Shape))
		for i, d := range s.Shape {
			shape[i] = int64(d)
		}
		specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: dt, Shape: shape})
	}
	w, err := checkpoint.Create(filepath.Join(dir, checkpoint.SingleFileName), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := w.WriteTensor(s.Name, make([]byte, 4*s.NumElements())); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []LoadOptions{{}, {Mapped: true}} {
		_, err := LoadWith(dir, o)
		var de *DTypeError
		if !errors.As(err, &de) || de.Tensor != bad || de.DType != checkpoint.I32 {
			t.Fatalf("LoadWith(%+v) = %v, want a *DTypeError for %s (I32)", o, err, bad)
		}
	}
}

// qwenArch is uniformArch as a Qwen3 (qk-norm, tied) or Qwen2 (q/k/v
// biases) model.
func qwenArch(class, typ string) *architecture.Model {
	a := uniformArch()
	a.Arch, a.ModelType = class, typ
	for _, l := range a.Layers {
		if typ == "qwen3" {
			l.Attention.QKNorm = true
		} else {
			l.Attention.QKVBias = true
		}
	}
	a.TiedEmbeddings = typ == "qwen3"
	return a
}

// TestLoadTooLarge: weights that do not fit the memory available are
// refused before anything is allocated, saying how much they need: as
// float32, and streamed (the least a forward pass holds: the slab, the
// embedding and head, and the largest layer).
func TestLoadTooLarge(t *testing.T) {
	dir := saved(t, uniformArch(), checkpoint.BF16, 2)
	ref, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func() (int64, bool)) { availableMemory = f }(availableMemory)
	availableMemory = func() (int64, bool) { return 1000, true }
	_, err = Load(dir)
	var me *MemoryError
	if !errors.As(err, &me) || me.Need != int64(8*ref.NumParams()) || me.Available != 1000 {
		t.Fatalf("Load on a small machine: %v", err)
	}
	// uniformArch: vocab 32, hidden 16, two layers of q, k, v, o (16×16,
	// 8×16, 8×16, 16×16) and MLP 3×24×16, bf16; norms in the slab.
	layer := int64(2 * (16*16 + 8*16 + 8*16 + 16*16 + 3*24*16))
	global := int64(2 * 2 * 32 * 16) // embedding and untied head
	slab := int64(4 * (2*2*16 + 16)) // four layer norms and the final one
	_, err = LoadWith(dir, LoadOptions{Mapped: true, Stream: true})
	if !errors.As(err, &me) || me.Need != layer+global+slab || !strings.Contains(err.Error(), "does not fit even streamed") {
		t.Fatalf("streamed on a small machine: %v (want a need of %d bytes)", err, layer+global+slab)
	}
	m, err := LoadWith(dir, LoadOptions{Mapped: true})
	if err != nil {
		t.Fatalf("mapped, not streamed: %v", err)
	}
	m.Close()
}
