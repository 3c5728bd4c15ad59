package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/internal/progress"
)

// mambaDTBiasInit is softplus⁻¹(0.01) = log(e^0.01 − 1).
var mambaDTBiasInit = float32(math.Log(math.Expm1(0.01)))

// initStd is the standard deviation of New's and Init's random matrices.
const initStd = 0.02

// initRand is the generator of New and Init for a seed.
func initRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// fillInit writes the next len(t) values of tensor s's initial weights,
// drawn from r: matrices and embeddings N(0, initStd²), norm weights 1,
// biases 0. Filling a tensor in several pieces draws the same values as
// filling it at once.
func fillInit(r *rand.Rand, s TensorSpec, t []float32) {
	switch {
	case s.kind == "mamba_conv":
		// torch's Conv1d default (kaiming uniform, a = √5): std 1/√(3·kernel).
		std := 1 / math.Sqrt(3*float64(s.Shape[len(s.Shape)-1]))
		for j := range t {
			t[j] = float32(r.NormFloat64() * std)
		}
	case s.kind == "mamba_d":
		for j := range t {
			t[j] = 1 // NemotronHMamba2Mixer: D = ones
		}
	case s.kind == "mamba_dt_bias":
		// softplus⁻¹(0.01): dt at the geometric middle of NemotronHConfig's
		// time_step_min..max (0.001..0.1); A_log stays 0 (A = −1).
		for j := range t {
			t[j] = mambaDTBiasInit
		}
	case len(s.Shape) == 2 || s.isStacked():
		for j := range t {
			t[j] = float32(r.NormFloat64() * initStd)
		}
	case s.isNorm():
		for j := range t {
			t[j] = 1
		}
	default:
		clear(t)
	}
}

// InitOptions configures Init.
type InitOptions struct {
	// Seed draws the weights: Init with a seed writes what New with that
	// seed holds (saved in DType).
	Seed uint64
	// DType of every tensor: checkpoint.BF16, F16 or F32 ("" = BF16).
	DType checkpoint.DType
	// Force replaces an existing directory (only once the new one is
	// complete); without it an existing directory is an
	// *output.ExistsError before anything is written.
	Force bool
	// Progress receives the bytes written (stage "init", unit "B"); nil =
	// none.
	Progress progress.Func
}

// EnsureDefaults fills the unset fields (DType BF16) and returns o.
func (o *InitOptions) EnsureDefaults() *InitOptions {
	if o.DType == "" {
		o.DType = checkpoint.BF16
	}
	return o
}

// Validate reports an invalid option (after EnsureDefaults).
func (o *InitOptions) Validate() error {
	switch o.DType {
	case checkpoint.BF16, checkpoint.F16, checkpoint.F32:
		return nil
	}
	return fmt.Errorf("engine: init: dtype %q not supported (use BF16, F16 or F32)", o.DType)
}

// Init writes a random-weight checkpoint of arch into dir (config.json and
// model.safetensors): the weights New(arch, o.Seed) would hold, in
// o.DType, for tests and benchmarks at real shapes. It never holds the
// model: each tensor is drawn and encoded a block at a time while it is
// written, so memory stays bounded whatever the size (an 8B parent needs
// a few megabytes). The directory is built under a temporary name and
// renamed into place when complete; an architecture the engine cannot run
// is an *UnsupportedError, and a cancelled ctx an error, with nothing
// written either way. Random weights are never a stand-in for a trained
// model in a quality claim.
func Init(ctx context.Context, arch *architecture.Model, dir string, o InitOptions) error {
	if _, err := checkArch(arch); err != nil {
		return err
	}
	if err := o.EnsureDefaults().Validate(); err != nil {
		return err
	}
	dt := o.DType
	a := arch.Clone()
	if a.Arch == "" {
		a.Arch, a.ModelType = architecture.Llama, "llama"
	}
	cfg, err := a.Config(architecture.ConfigOptions{DType: torchDType[dt]})
	if err != nil {
		return fmt.Errorf("engine: init: %w", err)
	}
	specs := tensorSpecs(arch)
	cs := make([]checkpoint.TensorSpec, len(specs))
	var total int64
	for i, s := range specs {
		shape := make([]int64, len(s.Shape))
		for j, d := range s.Shape {
			shape[j] = int64(d)
		}
		cs[i] = checkpoint.TensorSpec{Name: s.Name, DType: dt, Shape: shape}
		total += cs[i].Size()
	}
	out, err := checkpoint.NewOutputDir(dir, o.Force)
	if err != nil {
		return err
	}
	defer out.Abort()                                                                          // does nothing after Commit
	if err := os.WriteFile(filepath.Join(out.Path(), "config.json"), cfg, 0o666); err != nil { //output:inside
		return fmt.Errorf("engine: init: %w", err)
	}
	w, err := checkpoint.Create(filepath.Join(out.Path(), checkpoint.SingleFileName), cs, map[string]string{"format": "pt"})
	if err != nil {
		return err
	}
	pr := progress.Start(o.Progress, progress.Event{Stage: "init", Total: total, Unit: progress.Bytes})
	src := &initReader{ctx: ctx, r: initRand(o.Seed), dt: dt, pr: pr,
		f: make([]float32, initBlock), raw: make([]byte, initBlock*dt.Size())}
	for _, s := range specs {
		src.spec, src.left, src.buf = s, s.Size(), nil
		if err := w.WriteTensorFrom(s.Name, src); err != nil {
			w.Abort()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Commit()
}

// initReader is the encoded data of one tensor's initial weights, drawn a
// block at a time (its buffers serve every tensor in turn).
type initReader struct {
	ctx  context.Context
	r    *rand.Rand
	spec TensorSpec
	dt   checkpoint.DType
	left int // elements not drawn yet
	f    []float32
	buf  []byte // encoded, not yet read
	raw  []byte
	pr   *progress.Task
}

const initBlock = 1 << 16 // elements drawn at a time

func (ir *initReader) Read(p []byte) (int, error) {
	if len(ir.buf) == 0 {
		if ir.left == 0 {
			return 0, fmt.Errorf("engine: init: tensor %q: read past its end", ir.spec.Name)
		}
		if err := ir.ctx.Err(); err != nil {
			return 0, err
		}
		n := min(initBlock, ir.left)
		fillInit(ir.r, ir.spec, ir.f[:n])
		ir.buf = ir.raw[:n*ir.dt.Size()]
		if err := checkpoint.EncodeFloat32(ir.buf, ir.dt, ir.f[:n]); err != nil {
			return 0, err
		}
		ir.left -= n
		ir.pr.Add(int64(len(ir.buf)))
	}
	n := copy(p, ir.buf)
	ir.buf = ir.buf[n:]
	return n, nil
}
