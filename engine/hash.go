package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"

	"github.com/autocompress/autocompress/checkpoint"
)

// specsTo writes the model's tensor names and shapes to h.
func (m *Model) specsTo(h hash.Hash) {
	for _, s := range m.Specs() {
		fmt.Fprintf(h, "%s%v;", s.Name, s.Shape)
	}
}

// ArchHash returns a short hash (16 hex digits) of the model's tensor
// names and shapes: the identity of its architecture (a training
// checkpoint's, which must be resumed on the same shapes).
func (m *Model) ArchHash() string {
	h := sha256.New()
	m.specsTo(h)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Hash returns the SHA-256 (hex) of the model's tensor names, shapes and
// float32 parameters: the identity of its weights as loaded (a teacher's,
// for the logit cache). A model whose matrices are read in place
// (LoadOptions.Mapped) hashes them converted to float32, so it has the
// Hash of the same checkpoint loaded by Load.
func (m *Model) Hash() string {
	h := sha256.New()
	m.specsTo(h)
	b := make([]byte, 4*4096)
	write := func(p []float32) {
		for len(p) > 0 {
			n := min(len(p), 4096)
			for i, v := range p[:n] {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			h.Write(b[:4*n])
			p = p[n:]
		}
	}
	if m.mapped == nil {
		write(m.Params())
		return hex.EncodeToString(h.Sum(nil))
	}
	buf := make([]float32, 4096)
	for i, s := range m.specs {
		if m.offsets[i] >= 0 {
			t, _ := m.tensorF32(i)
			write(t)
			continue
		}
		info, _ := m.mapped.r.Tensor(s.Name)
		raw, err := m.mapped.r.Bytes(s.Name)
		if err != nil {
			return "" // unreadable weights have no identity; Load had read them
		}
		sz := info.DType.Size()
		for off := 0; off < len(raw); off += len(buf) * sz {
			n := min(len(buf), (len(raw)-off)/sz)
			if checkpoint.DecodeFloat32(buf[:n], info.DType, raw[off:off+n*sz]) != nil {
				return ""
			}
			write(buf[:n])
		}
		if m.mapped.stream {
			m.mapped.r.Release(s.Name)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
