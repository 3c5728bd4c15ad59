package dataset

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// HashRows returns the SHA-256 (hex) of rows of token ids: each row's
// length and ids, little-endian uint32s, in order. It is the one identity
// of training and calibration rows (the importance score cache's data key,
// the teacher cache's and distillation's).
func HashRows(rows [][]int32) string {
	h := sha256.New()
	var b [4]byte
	for _, r := range rows {
		binary.LittleEndian.PutUint32(b[:], uint32(len(r)))
		h.Write(b[:])
		for _, v := range r {
			binary.LittleEndian.PutUint32(b[:], uint32(v))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
