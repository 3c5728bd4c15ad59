// Package checkpoint reads and writes model checkpoints in the safetensors
// format: a single file, a directory holding model.safetensors, or a sharded
// set described by model.safetensors.index.json.
//
// # The format
//
// A safetensors file is an 8-byte little-endian unsigned header length N, N
// bytes of UTF-8 JSON, then the data buffer. The JSON object maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets relative
// to the start of the data buffer; the optional key "__metadata__" maps
// strings to strings. Writers pad the JSON with spaces so that the data
// buffer starts on an 8-byte boundary, as the reference implementation does.
//
// The reader follows the reference implementation's rules: the header may
// not exceed 100,000,000 bytes, the tensors' byte ranges must tile the data
// buffer exactly (sorted by offset they start at 0, each begins where the
// previous one ends, the last ends at the end of the file: no gaps, no
// overlaps, no trailing bytes), and each range's length must equal the
// product of the shape times the dtype size. Any violation is reported as a
// *FormatError naming the file, the tensor and the byte offset.
//
// # Reading
//
// Open maps every file into memory read-only (falling back to ReadAt where
// mmap is unavailable), so that reading a tensor costs no copy and memory
// stays bounded whatever the model size. Bytes returns a zero-copy view;
// Float32 converts F32, F16, BF16, F64, F8_E4M3 and F8_E5M2 to float32.
// Uint16s and Float32View give 16-bit and F32 tensors as typed zero-copy
// views (the engine reads bf16 weights in place through them), and Release
// gives a tensor's mapped pages back to the operating system
// (madvise DONTNEED), so that a reader streaming through a model larger
// than memory keeps a bounded resident set. NewReader reads one file from any io.ReaderAt (tests, fuzzing, archives).
//
// # Writing
//
// Create writes one file whose tensor list is known up front: the header is
// written first, then each tensor's data in order, one at a time, so that a
// writer never needs more than one tensor in memory. CreateSharded does the
// same over several files planned by PlanShards or PlanLike and writes the
// index. Every output goes to a temporary name first and is renamed into
// place only when complete; OutputDir does the same for a whole directory.
package checkpoint
