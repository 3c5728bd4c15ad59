package proxy

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/prune"
)

// Child builds in memory the child that plan cuts out of parent: the plan is
// resolved with prune.Resolve and every child tensor is gathered from its
// parent tensor with the selection prune.Layout.Map gives, so the child is
// exactly the one "autocompress prune" writes for the same plan and the
// engine loads (same rows and columns, same zero padding of the decilm and
// padded formats, same layer renumbering). The parent is not modified; it
// may be read in place (engine.LoadOptions.Mapped), so that a bf16 parent
// is never held as float32 whole.
func Child(parent *engine.Model, plan *prune.Plan) (*engine.Model, error) {
	return child(parent, plan, true)
}

// ForwardChild is Child without gradients (engine.NewZeroForward): the
// same weights in half the memory, for a candidate that is only scored.
func ForwardChild(parent *engine.Model, plan *prune.Plan) (*engine.Model, error) {
	return child(parent, plan, false)
}

func child(parent *engine.Model, plan *prune.Plan, grads bool) (*engine.Model, error) {
	if parent == nil || plan == nil {
		return nil, errors.New("proxy: child needs a parent model and a plan")
	}
	lay, err := prune.Resolve(parent.Arch(), plan)
	if err != nil {
		return nil, err
	}
	newZero := engine.NewZeroForward
	if grads {
		newZero = engine.NewZero
	}
	child, err := newZero(lay.Child)
	if err != nil {
		return nil, fmt.Errorf("proxy: the child of this plan: %w", err)
	}
	specs := parent.Specs()
	names := make([]string, len(specs))
	shapes := make(map[string][]int, len(specs))
	for i, s := range specs {
		names[i] = s.Name
		shapes[s.Name] = s.Shape
	}
	maps, err := lay.Map(names, shapes)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	filled := make(map[string]bool, len(maps))
	for _, m := range maps {
		dst := child.Tensor(m.Dst)
		if dst == nil {
			return nil, fmt.Errorf("proxy: internal error: the plan maps %s to %s, which the child lacks", m.Src, m.Dst)
		}
		if n := shapeSize(m.Shape); n != len(dst) {
			return nil, fmt.Errorf("proxy: internal error: %s has %d values in the child, its selection of %s gives %d", m.Dst, len(dst), m.Src, n)
		}
		filled[m.Dst] = true
		if m.Zero {
			continue // NewZero already holds the zeros of a padded sub-block
		}
		// A parent read in place gives a float32 copy of this one tensor.
		src, err := parent.TensorFloat32(m.Src)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		out, err := prune.Gather(f32Bytes(dst)[:0], f32Bytes(src), shapes[m.Src], 4, m.Sel)
		if err != nil {
			return nil, fmt.Errorf("proxy: gathering %s: %w", m.Src, err)
		}
		if len(out) != 4*len(dst) || unsafe.SliceData(out) != unsafe.SliceData(f32Bytes(dst)) {
			return nil, fmt.Errorf("proxy: internal error: gathering %s did not fill %s in place", m.Src, m.Dst)
		}
	}
	for _, s := range child.Specs() {
		if !filled[s.Name] {
			return nil, fmt.Errorf("proxy: internal error: no parent tensor maps to the child's %s", s.Name)
		}
	}
	return child, nil
}

func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// f32Bytes views a float32 slice as its bytes (little-endian on every
// platform Go's engine runs on; the views never outlive the slices).
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}
