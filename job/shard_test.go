package job

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func flat(rows [][]int32) []uint32 {
	var out []uint32
	for _, r := range rows {
		for _, x := range r {
			out = append(out, uint32(x))
		}
	}
	return out
}

// TestShardRoundTrip: rows written as a nanoGPT shard read back, in both
// dtypes, with the header AutoModel's load_bin_shard checks.
func TestShardRoundTrip(t *testing.T) {
	rows := [][]int32{{0, 1, 2, 65535}, {7, 8, 9, 10}}
	for _, dt := range []string{"uint16", "uint32"} {
		p := filepath.Join(t.TempDir(), "s.bin")
		if err := WriteShard(p, rows, dt); err != nil {
			t.Fatal(err)
		}
		b := readFile(t, p)
		size := map[string]int{"uint16": 2, "uint32": 4}[dt]
		if len(b) != 1024+8*size {
			t.Fatalf("%s: %d bytes, want %d", dt, len(b), 1024+8*size)
		}
		hdr := make([]int32, 4)
		_ = binary.Read(bytes.NewReader(b), binary.LittleEndian, hdr)
		if want := []int32{ShardMagic, 1, 8, int32(size)}; !slices.Equal(hdr, want) {
			t.Errorf("%s: header %v, want %v", dt, hdr, want)
		}
		got, err := ReadShardFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, flat(rows)) {
			t.Errorf("%s: read %v", dt, got)
		}
	}
	if err := WriteShard(filepath.Join(t.TempDir(), "x.bin"), [][]int32{{70000}}, "uint16"); err == nil {
		t.Error("an id past 65535 was written as uint16")
	}
}

// TestShardLegacy: the legacy fineweb.py magic (uint16, header[3] unused)
// reads; a wrong version, a truncated body and trailing bytes do not.
func TestShardLegacy(t *testing.T) {
	shard := func(magic, version, n, size int32, tokens int) []byte {
		hdr := make([]int32, 256)
		hdr[0], hdr[1], hdr[2], hdr[3] = magic, version, n, size
		var b bytes.Buffer
		_ = binary.Write(&b, binary.LittleEndian, hdr)
		for i := range tokens {
			_ = binary.Write(&b, binary.LittleEndian, uint16(i+1))
		}
		return b.Bytes()
	}
	got, err := ReadShard(bytes.NewReader(shard(ShardLegacyMagic, 1, 3, 0, 3)), 0)
	if err != nil || !slices.Equal(got, []uint32{1, 2, 3}) {
		t.Fatalf("legacy shard: %v, %v", got, err)
	}
	for name, b := range map[string][]byte{
		"version 2":  shard(ShardMagic, 2, 3, 2, 3),
		"truncated":  shard(ShardMagic, 1, 4, 2, 3),
		"trailing":   shard(ShardMagic, 1, 2, 2, 3),
		"bad magic":  shard(12345, 1, 3, 2, 3),
		"bad size":   shard(ShardMagic, 1, 3, 3, 3),
		"short":      shard(ShardMagic, 1, 3, 2, 3)[:100],
		"negative n": shard(ShardMagic, 1, -1, 2, 0),
	} {
		if _, err := ReadShard(bytes.NewReader(b), 0); !errors.As(err, new(*ShardError)) {
			t.Errorf("%s: %v, want a *ShardError", name, err)
		}
	}
}

// TestIndexedRoundTrip: a Megatron .bin/.idx pair reads back row by row.
func TestIndexedRoundTrip(t *testing.T) {
	rows := [][]int32{{1, 2, 3}, {4, 5, 6}, {65535, 0, 9}}
	for _, dt := range []string{"uint16", "int32"} {
		p := filepath.Join(t.TempDir(), "train_000")
		if err := WriteIndexed(p, rows, dt); err != nil {
			t.Fatal(err)
		}
		idx := readFile(t, p+".idx")
		if !bytes.HasPrefix(idx, []byte("MMIDIDX\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00")) {
			t.Errorf("%s: .idx starts %q", dt, idx[:17])
		}
		seqs, err := ReadIndexed(idx, readFile(t, p+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if !slices.Equal(seqs[i], flat(rows[i:i+1])) {
				t.Errorf("%s: row %d read %v", dt, i, seqs[i])
			}
		}
	}
}

// FuzzReadShard: any bytes give tokens or a *ShardError, never a panic,
// and never more tokens than the bytes hold.
func FuzzReadShard(f *testing.F) {
	p := filepath.Join(f.TempDir(), "s.bin")
	if err := WriteShard(p, [][]int32{{1, 2, 3}}, "uint16"); err != nil {
		f.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	f.Add(b)
	f.Add(b[:1030])
	f.Fuzz(func(t *testing.T, b []byte) {
		toks, err := ReadShard(bytes.NewReader(b), 1<<16)
		if err != nil {
			if !errors.As(err, new(*ShardError)) {
				t.Fatalf("error %v is not a *ShardError", err)
			}
			return
		}
		if len(toks) > (len(b)-1024)/2 {
			t.Fatalf("%d tokens from %d bytes", len(toks), len(b))
		}
	})
}

// FuzzReadIndexed: any .idx/.bin pair gives sequences or an error, never
// a panic or an allocation past the input's size.
func FuzzReadIndexed(f *testing.F) {
	p := filepath.Join(f.TempDir(), "d")
	if err := WriteIndexed(p, [][]int32{{1, 2}, {3, 4}}, "uint16"); err != nil {
		f.Fatal(err)
	}
	idx, _ := os.ReadFile(p + ".idx")
	bin, _ := os.ReadFile(p + ".bin")
	f.Add(idx, bin)
	f.Fuzz(func(t *testing.T, idx, bin []byte) {
		seqs, err := ReadIndexed(idx, bin)
		if err != nil {
			return
		}
		n := 0
		for _, s := range seqs {
			n += len(s)
		}
		if n > len(bin) {
			t.Fatalf("%d tokens from a %d-byte .bin", n, len(bin))
		}
	})
}
