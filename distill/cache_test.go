package distill

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/train"
)

func tinyTeacher(t testing.TB) *ModelTeacher {
	t.Helper()
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: 24, Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 64,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{0},
		Layers: []architecture.Layer{{Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 8},
			MLP: &architecture.MLP{Width: 32, Gated: true, Activation: "silu"}}}}
	m, err := engine.New(a, 9)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Params() { // larger weights: distinct logits
		m.Params()[i] *= 20
	}
	return NewModelTeacher(m)
}

func tinyBatch(rows []int, T int) *train.Batch {
	r := rand.New(rand.NewPCG(uint64(rows[0]), 1))
	b := &train.Batch{B: len(rows), T: T, Rows: rows}
	for range rows {
		for range T {
			b.Inputs = append(b.Inputs, int32(r.IntN(24)))
			b.Targets = append(b.Targets, int32(r.IntN(24)))
		}
	}
	return b
}

// TestTopKCache: misses are computed from the teacher and stored; hits
// return the same bytes; a torn record is detected by its CRC and
// recomputed; a file with another header is refused.
func TestTopKCache(t *testing.T) {
	dir := t.TempDir()
	teacher := tinyTeacher(t)
	key := CacheKey{Teacher: "t", Data: "d", Rows: 4, SeqLen: 8, K: 5, Shared: 20}
	c, err := OpenTopKCache(dir, key, teacher)
	if err != nil {
		t.Fatal(err)
	}
	b := tinyBatch([]int{2, 0}, 8)
	first, err := c.Logits(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Misses.Load() != 2 || c.Hits.Load() != 0 {
		t.Fatalf("first read: %d hits, %d misses", c.Hits.Load(), c.Misses.Load())
	}
	// The entries are the teacher's top 5 over the shared ids.
	dense, _ := teacher.Logits(context.Background(), b)
	for pos := range 16 {
		row := dense.Dense[pos*24 : pos*24+20]
		ids, vals := make([]int32, 5), make([]float32, 5)
		TopK(ids, vals, row)
		if !slices.Equal(ids, first.IDs[pos*5:(pos+1)*5]) || !slices.Equal(vals, first.Vals[pos*5:(pos+1)*5]) {
			t.Fatalf("position %d: cached %v, teacher's top 5 %v", pos, first.IDs[pos*5:(pos+1)*5], ids)
		}
	}
	c.Close()

	// Reopen: hits, identical.
	c, err = OpenTopKCache(dir, key, teacher)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Logits(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hits.Load() != 2 || c.Misses.Load() != 0 || !slices.Equal(first.Vals, again.Vals) || !slices.Equal(first.IDs, again.IDs) {
		t.Fatalf("reopened: %d hits %d misses, equal %v", c.Hits.Load(), c.Misses.Load(), slices.Equal(first.Vals, again.Vals))
	}
	// Tear row 0's record (as a crash mid-write would): recomputed.
	f, _ := os.OpenFile(c.Path, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff, 0xff}, c.start+0*c.size+40)
	f.Close()
	torn, err := c.Logits(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Misses.Load() != 1 || !slices.Equal(first.Vals, torn.Vals) {
		t.Errorf("torn record: %d misses (want 1), values equal %v", c.Misses.Load(), slices.Equal(first.Vals, torn.Vals))
	}
	if _, err := c.Logits(context.Background(), tinyBatch([]int{4}, 8)); err == nil {
		t.Error("row 4 of a 4-row cache accepted")
	}
	c.Close()

	// A file under the key's name with another header.
	os.WriteFile(c.Path, []byte("ACTOPK01\x02\x00\x00\x00{}"), 0o644)
	if _, err := OpenTopKCache(dir, key, teacher); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Errorf("bad header: %v", err)
	}
}

// FuzzTopKCache overwrites part of a filled cache file with fuzz bytes:
// reading it back may recompute rows or fail, never panic, and whatever
// it returns for a row is either the stored top-k or a fresh one.
func FuzzTopKCache(f *testing.F) {
	f.Add(int64(0), []byte{1, 2, 3})
	f.Add(int64(200), []byte{0xff})
	teacher := tinyTeacher(f)
	f.Fuzz(func(t *testing.T, off int64, junk []byte) {
		dir := t.TempDir()
		key := CacheKey{Teacher: "t", Data: "d", Rows: 2, SeqLen: 4, K: 3, Shared: 24}
		c, err := OpenTopKCache(dir, key, teacher)
		if err != nil {
			t.Fatal(err)
		}
		b := tinyBatch([]int{0, 1}, 4)
		want, err := c.Logits(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		fh, _ := os.OpenFile(c.Path, os.O_RDWR, 0)
		st, _ := fh.Stat()
		if st.Size() > 0 {
			fh.WriteAt(junk, (off%st.Size()+st.Size())%st.Size())
		}
		fh.Close()
		c, err = OpenTopKCache(dir, key, teacher)
		if err != nil {
			return // header damaged: refused
		}
		defer c.Close()
		got, err := c.Logits(context.Background(), b)
		if err != nil {
			return
		}
		if !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Vals, want.Vals) {
			t.Fatalf("damaged cache returned other logits than the teacher's")
		}
	})
}
