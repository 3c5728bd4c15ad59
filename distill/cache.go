package distill

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"

	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/parallel"
	"github.com/autocompress/autocompress/train"
)

// CacheKey identifies the teacher logits a cache holds: which teacher, on
// which rows, how many logits per position.
type CacheKey struct {
	Version int    `json:"version"`
	Teacher string `json:"teacher"` // engine.Model.Hash of the teacher
	Data    string `json:"data"`    // dataset.HashRows of the training rows
	Rows    int    `json:"rows"`
	SeqLen  int    `json:"seq_len"` // positions per row
	K       int    `json:"k"`
	Shared  int    `json:"shared"` // top-k taken over ids [0, Shared)
}

// Name is the cache file name for the key: a hash of all its fields.
func (k CacheKey) Name() string {
	b, _ := json.Marshal(k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12]) + ".topk"
}

const cacheMagic = "ACTOPK01"

// TopKCache is a file of the K largest teacher logits at every position of
// every training row, filled as rows are first seen and read back on
// later epochs and by later runs with the same key (several students
// distilled from one teacher on the same data pay for the teacher once).
//
// # Format
//
// The magic "ACTOPK01", a little-endian uint32 length and the CacheKey as
// JSON, zero padding to a multiple of 8 bytes, then one fixed-size record
// per row at offset start + row·size: a CRC-32 (IEEE) of the rest of the
// record, then SeqLen·K int32 ids and SeqLen·K float32 logits, positions
// in order, within a position by decreasing logit (ties: lower id first).
// A record whose CRC does not match (never written, or torn by a crash) is
// a miss and is recomputed, so a run killed at any moment leaves a usable
// cache.
type TopKCache struct {
	Key   CacheKey
	Path  string
	f     *os.File
	start int64
	size  int64

	teacher *ModelTeacher
	// Hits and Misses count rows read from the cache and rows computed.
	Hits, Misses atomic.Int64
	buf          []byte
}

// OpenTopKCache opens (creating if needed) the cache for key in dir,
// filled from teacher on misses.
func OpenTopKCache(dir string, key CacheKey, teacher *ModelTeacher) (*TopKCache, error) {
	if key.K < 1 || key.SeqLen < 1 || key.Rows < 1 || key.Shared < key.K {
		return nil, fmt.Errorf("distill: top-k cache: k %d, %d rows of %d, %d ids: want 1 <= k <= ids", key.K, key.Rows, key.SeqLen, key.Shared)
	}
	key.Version = 1
	hdr, _ := json.Marshal(key)
	start := int64(len(cacheMagic) + 4 + len(hdr))
	start = (start + 7) &^ 7
	c := &TopKCache{Key: key, Path: filepath.Join(dir, key.Name()), start: start,
		size: 4 + int64(key.SeqLen*key.K*8), teacher: teacher}
	total := start + int64(key.Rows)*c.size
	if _, err := os.Stat(c.Path); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("distill: top-k cache: %w", err)
		}
		// Create under a temporary name and rename, so that the file a
		// reader finds always has its header.
		tmp, err := output.CreateFile(c.Path, false)
		if err != nil {
			return nil, fmt.Errorf("distill: top-k cache: %w", err)
		}
		head := make([]byte, start)
		copy(head, cacheMagic)
		binary.LittleEndian.PutUint32(head[len(cacheMagic):], uint32(len(hdr)))
		copy(head[len(cacheMagic)+4:], hdr)
		_, err = tmp.Write(head)
		if err == nil {
			err = tmp.Truncate(total) // sparse: records are holes until written
		}
		if err == nil {
			err = tmp.Commit()
		}
		var exists *output.ExistsError
		if errors.As(err, &exists) {
			err = nil // another run created it meanwhile: use theirs
		}
		if err != nil {
			tmp.Abort()
			return nil, fmt.Errorf("distill: top-k cache %s: %w", c.Path, err)
		}
	}
	f, err := os.OpenFile(c.Path, os.O_RDWR, 0) //output:not-an-output: a cache whose CRC-checked records are filled in place
	if err != nil {
		return nil, fmt.Errorf("distill: top-k cache: %w", err)
	}
	head := make([]byte, start)
	if _, err := f.ReadAt(head, 0); err != nil || !bytes.Equal(head[:len(cacheMagic)], []byte(cacheMagic)) ||
		binary.LittleEndian.Uint32(head[len(cacheMagic):]) != uint32(len(hdr)) || !bytes.Equal(head[len(cacheMagic)+4:len(cacheMagic)+4+len(hdr)], hdr) {
		f.Close()
		return nil, fmt.Errorf("distill: top-k cache %s: header does not match %s (delete the file to rebuild it)", c.Path, hdr)
	}
	if st, err := f.Stat(); err != nil || st.Size() != total {
		f.Close()
		return nil, fmt.Errorf("distill: top-k cache %s: size differs from the %d bytes its header implies (delete the file to rebuild it)", c.Path, total)
	}
	c.f = f
	return c, nil
}

// Close closes the file.
func (c *TopKCache) Close() error { return c.f.Close() }

// read fills ids and vals (SeqLen·K each) from row r's record and reports
// whether the record is valid.
func (c *TopKCache) read(r int, ids []int32, vals []float32) (bool, error) {
	if cap(c.buf) < int(c.size) {
		c.buf = make([]byte, c.size)
	}
	b := c.buf[:c.size]
	if _, err := c.f.ReadAt(b, c.start+int64(r)*c.size); err != nil {
		return false, fmt.Errorf("distill: top-k cache %s: row %d: %w", c.Path, r, err)
	}
	if crc32.ChecksumIEEE(b[4:]) != binary.LittleEndian.Uint32(b) {
		return false, nil
	}
	n := len(ids)
	for j := range n {
		ids[j] = int32(binary.LittleEndian.Uint32(b[4+4*j:]))
		vals[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4+4*n+4*j:]))
	}
	for _, id := range ids {
		if id < 0 || int(id) >= c.Key.Shared {
			return false, fmt.Errorf("distill: top-k cache %s: row %d holds id %d outside [0, %d): the file is corrupt (delete it to rebuild)", c.Path, r, id, c.Key.Shared)
		}
	}
	return true, nil
}

func (c *TopKCache) write(r int, ids []int32, vals []float32) error {
	n := len(ids)
	b := make([]byte, c.size)
	for j := range n {
		binary.LittleEndian.PutUint32(b[4+4*j:], uint32(ids[j]))
		binary.LittleEndian.PutUint32(b[4+4*n+4*j:], math.Float32bits(vals[j]))
	}
	binary.LittleEndian.PutUint32(b, crc32.ChecksumIEEE(b[4:]))
	if _, err := c.f.WriteAt(b, c.start+int64(r)*c.size); err != nil {
		return fmt.Errorf("distill: top-k cache %s: row %d: %w", c.Path, r, err)
	}
	return nil
}

// Logits implements Teacher: the batch's rows from the cache, the teacher
// run on the whole batch when any row is missing (and the missing rows
// stored).
func (c *TopKCache) Logits(ctx context.Context, b *train.Batch) (*TeacherLogits, error) {
	K, T := c.Key.K, c.Key.SeqLen
	if b.T != T {
		return nil, fmt.Errorf("distill: top-k cache made for rows of %d positions, batch has %d", T, b.T)
	}
	out := &TeacherLogits{K: K, IDs: make([]int32, b.B*T*K), Vals: make([]float32, b.B*T*K)}
	var missing []int
	for i, r := range b.Rows {
		if r < 0 || r >= c.Key.Rows {
			return nil, fmt.Errorf("distill: top-k cache has %d rows, batch asks for row %d", c.Key.Rows, r)
		}
		ok, err := c.read(r, out.IDs[i*T*K:(i+1)*T*K], out.Vals[i*T*K:(i+1)*T*K])
		if err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, i)
		}
	}
	c.Hits.Add(int64(len(b.Rows) - len(missing)))
	if len(missing) == 0 {
		return out, nil
	}
	c.Misses.Add(int64(len(missing)))
	dense, err := c.teacher.Logits(ctx, b)
	if err != nil {
		return nil, err
	}
	V := dense.Vocab
	for _, i := range missing {
		ids, vals := out.IDs[i*T*K:(i+1)*T*K], out.Vals[i*T*K:(i+1)*T*K]
		parallel.For(T, 1, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				pos := i*T + t
				TopK(ids[t*K:(t+1)*K], vals[t*K:(t+1)*K], dense.Dense[pos*V:pos*V+c.Key.Shared])
			}
		})
		if err := c.write(b.Rows[i], ids, vals); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TopK writes the len(ids) largest values of z, with their indices, to ids
// and vals, by decreasing value (ties: lower index first).
func TopK(ids []int32, vals []float32, z []float32) {
	k := len(ids)
	type e struct {
		v  float32
		id int32
	}
	less := func(a, b e) bool { return a.v < b.v || a.v == b.v && a.id > b.id } // a ranks below b
	h := make([]e, 0, k)                                                        // min-heap by rank
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			if r := l + 1; r < len(h) && less(h[r], h[l]) {
				l = r
			}
			if !less(h[l], h[i]) {
				return
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	for j, v := range z {
		x := e{v, int32(j)}
		if len(h) < k {
			h = append(h, x)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !less(h[i], h[p]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if less(h[0], x) {
			h[0] = x
			down(0)
		}
	}
	sort.Slice(h, func(a, b int) bool { return less(h[b], h[a]) })
	for i, x := range h {
		ids[i], vals[i] = x.id, x.v
	}
}
