package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
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
// for the logit cache).
func (m *Model) Hash() string {
	h := sha256.New()
	m.specsTo(h)
	b := make([]byte, 4*4096)
	p := m.Params()
	for len(p) > 0 {
		n := min(len(p), 4096)
		for i, v := range p[:n] {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		h.Write(b[:4*n])
		p = p[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}
