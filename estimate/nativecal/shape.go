// Package nativecal calibrates the native engine's cost model (package
// estimate, native_coefficients.json) on this machine: it builds
// random-weight models of a designed sweep of shapes from the embedded
// parent (widths, depths, removed attention and MLP sub-blocks, per-layer
// FFN widths), measures each with bench-serve (package servebench) over
// lengths and concurrencies, fits the step-time coefficients by
// non-negative least squares on relative errors and the memory rule on the
// measured peak RSS, and scores the fit on rows held out from it (other
// shapes, other lengths and concurrency).
//
// The measured rows of the last calibration are committed (sweep.csv,
// embedded), so the held-out report and the fit can be reproduced without
// measuring: "autocompress validate-native" and this package's tests do.
//
// Every other host gets its own calibration without asking (Resolve): a
// quick probe (QuickProbe: the sgemm rate, a GEMV working-set sweep for
// the cache cliff, a few short bench-serve points) scales the committed
// fit to the host (FitTransfer), cached per host fingerprint under the
// user's configuration directory.
package nativecal

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
)

// Shape is a model shape of the sweep: the global widths and, per layer,
// whether it keeps attention and its FFN width (0 = no MLP). Every other
// property (vocabulary, RoPE, tied embeddings, context) is the parent's.
type Shape struct {
	Hidden, Heads, KVHeads, HeadDim int
	Layers                          []LayerShape
}

// LayerShape is one layer of a Shape.
type LayerShape struct {
	Attn bool
	FFN  int
}

// String writes the shape as "hidden/heads/kv_heads/head_dim:L L ...",
// each layer "A<ffn>" with attention or "_<ffn>" without, e.g.
// "192/8/2/24:A512 _512 A0". ParseShape reads it back.
func (s Shape) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%d/%d:", s.Hidden, s.Heads, s.KVHeads, s.HeadDim)
	for i, l := range s.Layers {
		if i > 0 {
			b.WriteByte(' ')
		}
		if l.Attn {
			b.WriteByte('A')
		} else {
			b.WriteByte('_')
		}
		b.WriteString(strconv.Itoa(l.FFN))
	}
	return b.String()
}

// maxWidth bounds every width ParseShape accepts (the sweep's models are
// small; this keeps a malformed file from asking for a huge model).
const maxWidth = 1 << 16

// ParseShape reads a shape written by Shape.String.
func ParseShape(spec string) (Shape, error) {
	var s Shape
	head, layers, ok := strings.Cut(spec, ":")
	if !ok {
		return s, fmt.Errorf("shape %q: want hidden/heads/kv_heads/head_dim:layers", spec)
	}
	dims := strings.Split(head, "/")
	if len(dims) != 4 {
		return s, fmt.Errorf("shape %q: want four widths hidden/heads/kv_heads/head_dim before the colon", spec)
	}
	var v [4]int
	for i, d := range dims {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > maxWidth {
			return s, fmt.Errorf("shape %q: width %q must be an integer in [1, %d]", spec, d, maxWidth)
		}
		v[i] = n
	}
	s.Hidden, s.Heads, s.KVHeads, s.HeadDim = v[0], v[1], v[2], v[3]
	if s.Heads%s.KVHeads != 0 {
		return s, fmt.Errorf("shape %q: %d heads are not a multiple of %d kv heads", spec, s.Heads, s.KVHeads)
	}
	for _, f := range strings.Fields(layers) {
		if len(f) < 2 || (f[0] != 'A' && f[0] != '_') {
			return s, fmt.Errorf("shape %q: layer %q must be A<ffn> or _<ffn>", spec, f)
		}
		n, err := strconv.Atoi(f[1:])
		if err != nil || n < 0 || n > maxWidth || strings.HasPrefix(f[1:], "+") {
			return s, fmt.Errorf("shape %q: layer %q: FFN width must be an integer in [0, %d]", spec, f, maxWidth)
		}
		s.Layers = append(s.Layers, LayerShape{Attn: f[0] == 'A', FFN: n})
	}
	if len(s.Layers) == 0 || len(s.Layers) > 256 {
		return s, fmt.Errorf("shape %q: want 1 to 256 layers, got %d", spec, len(s.Layers))
	}
	return s, nil
}

// Arch returns the architecture of s on the parent's global properties
// (vocabulary, RoPE, norms, tied embeddings, context).
func (s Shape) Arch(parent *architecture.Model) *architecture.Model {
	a := parent.Clone()
	a.Hidden = s.Hidden
	a.Layers = make([]architecture.Layer, len(s.Layers))
	var mlp *architecture.MLP
	var attn *architecture.Attention
	for _, l := range parent.Layers {
		if l.MLP != nil && mlp == nil {
			mlp = l.MLP
		}
		if l.Attention != nil && attn == nil {
			attn = l.Attention
		}
	}
	for i, l := range s.Layers {
		if l.Attn {
			at := architecture.Attention{}
			if attn != nil {
				at = *attn
			}
			at.Heads, at.KVHeads, at.HeadDim = s.Heads, s.KVHeads, s.HeadDim
			a.Layers[i].Attention = &at
		}
		if l.FFN > 0 {
			m := architecture.MLP{Width: l.FFN, Gated: true, Activation: "silu"}
			if mlp != nil {
				m = *mlp
				m.Width = l.FFN
			}
			a.Layers[i].MLP = &m
		}
	}
	return a
}

// parentShape is the embedded parent's shape (parent/model/config.json).
func parentShape() Shape {
	s := Shape{Hidden: 192, Heads: 8, KVHeads: 2, HeadDim: 24}
	for range 8 {
		s.Layers = append(s.Layers, LayerShape{Attn: true, FFN: 512})
	}
	return s
}

// derive returns a copy of the parent shape changed by edit.
func derive(edit func(s *Shape)) Shape {
	s := parentShape()
	edit(&s)
	return s
}
