package job

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// The nanoGPT / modded-nanogpt shard header (CONTRACT.md), as AutoModel's
// nemo_automodel/components/datasets/llm/nanogpt_dataset.py load_bin_shard
// reads it: 256 little-endian int32, [0] magic, [1] version 1, [2] tokens,
// [3] bytes per token (new magic only; the legacy magic is uint16).
const (
	ShardMagic       = 278895051
	ShardLegacyMagic = 20240520
	shardHeaderInts  = 256
	shardHeaderBytes = shardHeaderInts * 4
)

// ShardDType returns the narrowest shard dtype holding ids below vocab.
func ShardDType(vocab int) string {
	if vocab <= 1<<16 {
		return "uint16"
	}
	return "uint32"
}

func dtypeBytes(dtype string) (int, error) {
	switch dtype {
	case "uint16":
		return 2, nil
	case "uint32", "int32":
		return 4, nil
	}
	return 0, fmt.Errorf("job: shard dtype %q: want uint16 or uint32", dtype)
}

// WriteShard writes rows, concatenated, as a nanoGPT .bin shard of dtype
// (uint16 or uint32) at path, inside a job directory being assembled
// (Emit's output.Dir). Ids that do not fit the dtype are an error.
func WriteShard(path string, rows [][]int32, dtype string) error {
	size, err := dtypeBytes(dtype)
	if err != nil || dtype == "int32" {
		return fmt.Errorf("job: nanoGPT shard dtype %q: want uint16 or uint32", dtype)
	}
	var n int64
	for _, r := range rows {
		n += int64(len(r))
	}
	if n > 1<<31-1 {
		return fmt.Errorf("job: %d tokens do not fit one shard's int32 count", n)
	}
	f, err := os.Create(path) //output:inside
	if err != nil {
		return fmt.Errorf("job: %w", err)
	}
	w := bufio.NewWriter(f)
	hdr := make([]int32, shardHeaderInts)
	hdr[0], hdr[1], hdr[2], hdr[3] = ShardMagic, 1, int32(n), int32(size)
	_ = binary.Write(w, binary.LittleEndian, hdr)
	if err := writeTokens(w, rows, size); err != nil {
		f.Close()
		return fmt.Errorf("job: %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("job: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

func writeTokens(w io.Writer, rows [][]int32, size int) error {
	buf := make([]byte, 4)
	for _, r := range rows {
		for _, id := range r {
			if id < 0 || size == 2 && id >= 1<<16 {
				return fmt.Errorf("token id %d does not fit a %d-byte shard", id, size)
			}
			if size == 2 {
				binary.LittleEndian.PutUint16(buf, uint16(id))
			} else {
				binary.LittleEndian.PutUint32(buf, uint32(id))
			}
			if _, err := w.Write(buf[:size]); err != nil {
				return err
			}
		}
	}
	return nil
}

// ShardError is a shard that is not in the layout CONTRACT.md describes.
type ShardError struct{ Msg string }

func (e *ShardError) Error() string { return "job: token shard: " + e.Msg }

// ReadShard reads a nanoGPT .bin shard (the new magic with its bytes per
// token, or the legacy magic with uint16) and returns its tokens. A
// truncated or malformed shard is a *ShardError; maxTokens bounds what is
// allocated (0: no bound).
func ReadShard(r io.Reader, maxTokens int) ([]uint32, error) {
	hdr := make([]int32, shardHeaderInts)
	if err := binary.Read(r, binary.LittleEndian, hdr); err != nil {
		return nil, &ShardError{"the 1024-byte header is incomplete"}
	}
	var size int
	switch {
	case hdr[0] == ShardMagic && hdr[3] == 2, hdr[0] == ShardLegacyMagic:
		size = 2
	case hdr[0] == ShardMagic && hdr[3] == 4:
		size = 4
	case hdr[0] == ShardMagic:
		return nil, &ShardError{fmt.Sprintf("%d bytes per token: want 2 or 4", hdr[3])}
	default:
		return nil, &ShardError{fmt.Sprintf("magic %d: want %d (or the legacy %d)", hdr[0], ShardMagic, ShardLegacyMagic)}
	}
	if hdr[1] != 1 {
		return nil, &ShardError{fmt.Sprintf("version %d: want 1", hdr[1])}
	}
	n := int(hdr[2])
	if n < 0 || maxTokens > 0 && n > maxTokens {
		return nil, &ShardError{fmt.Sprintf("%d tokens: want 0 to %d", n, maxTokens)}
	}
	out := make([]uint32, 0, min(n, 1<<20))
	buf := make([]byte, size*4096)
	for len(out) < n {
		k := min(n-len(out), 4096)
		if _, err := io.ReadFull(r, buf[:k*size]); err != nil {
			return nil, &ShardError{fmt.Sprintf("the header says %d tokens but the file ends after %d", n, len(out))}
		}
		for i := range k {
			if size == 2 {
				out = append(out, uint32(binary.LittleEndian.Uint16(buf[i*2:])))
			} else {
				out = append(out, binary.LittleEndian.Uint32(buf[i*4:]))
			}
		}
	}
	if k, _ := r.Read(buf[:1]); k > 0 {
		return nil, &ShardError{fmt.Sprintf("data after the %d tokens the header gives", n)}
	}
	return out, nil
}

// ReadShardFile reads the shard at path (ReadShard).
func ReadShardFile(path string) ([]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	defer f.Close()
	t, err := ReadShard(bufio.NewReader(f), 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// megatronHeader starts a Megatron IndexedDataset .idx file
// (megatron/core/datasets/indexed_dataset.py, _INDEX_HEADER).
var megatronHeader = []byte("MMIDIDX\x00\x00")

// Megatron dtype codes (indexed_dataset.py's DType enum).
var megatronCodes = map[string]uint8{"uint16": 8, "int32": 4}

// WriteIndexed writes rows, inside a job directory being assembled, as a
// Megatron IndexedDataset: prefix.bin (the
// tokens, raw) and prefix.idx (header, version 1, dtype code, one
// sequence and one document per row), as _IndexWriter writes them.
func WriteIndexed(prefix string, rows [][]int32, dtype string) error {
	code, ok := megatronCodes[dtype]
	if !ok {
		return fmt.Errorf("job: Megatron shard dtype %q: want uint16 or int32", dtype)
	}
	size, _ := dtypeBytes(dtype)
	var bin bytes.Buffer
	if err := writeTokens(&bin, rows, size); err != nil {
		return fmt.Errorf("job: %s.bin: %w", prefix, err)
	}
	var idx bytes.Buffer
	idx.Write(megatronHeader)
	le := binary.LittleEndian
	_ = binary.Write(&idx, le, uint64(1))
	idx.WriteByte(code)
	_ = binary.Write(&idx, le, uint64(len(rows)))
	_ = binary.Write(&idx, le, uint64(len(rows)+1))
	for _, r := range rows {
		_ = binary.Write(&idx, le, int32(len(r)))
	}
	var ptr int64
	for _, r := range rows {
		_ = binary.Write(&idx, le, ptr)
		ptr += int64(len(r) * size)
	}
	for i := 0; i <= len(rows); i++ {
		_ = binary.Write(&idx, le, int64(i))
	}
	if err := os.WriteFile(prefix+".bin", bin.Bytes(), 0o644); err != nil { //output:inside
		return fmt.Errorf("job: %w", err)
	}
	if err := os.WriteFile(prefix+".idx", idx.Bytes(), 0o644); err != nil { //output:inside
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

// ReadIndexed reads a Megatron IndexedDataset written as WriteIndexed
// writes it and returns its sequences. A malformed pair is a *ShardError.
func ReadIndexed(idx, bin []byte) ([][]uint32, error) {
	if !bytes.HasPrefix(idx, megatronHeader) {
		return nil, &ShardError{"the .idx does not start with MMIDIDX"}
	}
	r := bytes.NewReader(idx[len(megatronHeader):])
	le := binary.LittleEndian
	var version, nseq, ndoc uint64
	var code uint8
	if binary.Read(r, le, &version) != nil || binary.Read(r, le, &code) != nil || binary.Read(r, le, &nseq) != nil || binary.Read(r, le, &ndoc) != nil {
		return nil, &ShardError{"the .idx header is incomplete"}
	}
	if version != 1 {
		return nil, &ShardError{fmt.Sprintf(".idx version %d: want 1", version)}
	}
	size := 0
	for d, c := range megatronCodes {
		if c == code {
			size, _ = dtypeBytes(d)
		}
	}
	if size == 0 {
		return nil, &ShardError{fmt.Sprintf(".idx dtype code %d: want 8 (uint16) or 4 (int32)", code)}
	}
	if nseq > uint64(r.Len())/12 || ndoc > uint64(r.Len())/8 {
		return nil, &ShardError{fmt.Sprintf(".idx says %d sequences and %d documents but holds %d bytes", nseq, ndoc, r.Len())}
	}
	lens := make([]int32, nseq)
	ptrs := make([]int64, nseq)
	docs := make([]int64, ndoc)
	if binary.Read(r, le, lens) != nil || binary.Read(r, le, ptrs) != nil || binary.Read(r, le, docs) != nil {
		return nil, &ShardError{"the .idx arrays are incomplete"}
	}
	if r.Len() != 0 {
		return nil, &ShardError{"data after the .idx arrays"}
	}
	out := make([][]uint32, nseq)
	for i := range lens {
		n, p := int64(lens[i]), ptrs[i]
		if n < 0 || p < 0 || p > int64(len(bin)) || n*int64(size) > int64(len(bin))-p {
			return nil, &ShardError{fmt.Sprintf("sequence %d (%d tokens at byte %d) lies outside the %d-byte .bin", i, n, p, len(bin))}
		}
		seq := make([]uint32, n)
		for j := range seq {
			o := p + int64(j*size)
			if size == 2 {
				seq[j] = uint32(le.Uint16(bin[o:]))
			} else {
				seq[j] = le.Uint32(bin[o:])
			}
		}
		out[i] = seq
	}
	if len(docs) > 0 && (docs[0] != 0 || docs[len(docs)-1] != int64(nseq)) {
		return nil, &ShardError{"document indices do not span the sequences"}
	}
	return out, nil
}
