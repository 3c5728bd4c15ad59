package train

import (
	"fmt"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
)

// EndOfText is the special token that separates documents.
const EndOfText = "<|endoftext|>"

// ParentArch is the architecture of the embedded parent model (package
// parent): a Llama-style decoder with 8 layers, hidden 192, 8 query heads
// sharing 2 KV heads (head_dim 24), SwiGLU FFN 512, RoPE, tied embeddings.
func ParentArch(vocab, eos int) *architecture.Model {
	layers := make([]architecture.Layer, 8)
	for i := range layers {
		layers[i] = architecture.Layer{
			Attention: &architecture.Attention{Heads: 8, KVHeads: 2, HeadDim: 24},
			MLP:       &architecture.MLP{Width: 512, Gated: true, Activation: "silu"},
		}
	}
	return &architecture.Model{
		Arch: "LlamaForCausalLM", ModelType: "llama", Name: "autocompress-parent",
		Vocab: vocab, Hidden: 192, TiedEmbeddings: true,
		Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 512,
		Rope:  architecture.Rope{Theta: 10000, PartialFactor: 1},
		DType: "bfloat16", BOS: -1, EOS: []int{eos}, Layers: layers,
	}
}

// Encoder turns text into token ids.
type Encoder interface {
	Encode(text string) []int32
}

// Rows tokenizes docs, appends sep after each, and packs them into rows of
// seqLen+1 tokens (corpus.Pack). It reports how many bytes of text the rows
// came from.
func Rows(enc Encoder, docs []corpus.Document, sep int32, seqLen int) (rows [][]int32, bytes int, err error) {
	seqs := make([][]int32, len(docs))
	for i, d := range docs {
		seqs[i] = enc.Encode(d.Text)
		bytes += len(d.Text)
	}
	rows = corpus.Pack(seqs, sep, seqLen)
	if len(rows) == 0 && len(docs) > 0 {
		return nil, bytes, fmt.Errorf("train: %d documents give fewer than %d tokens, not one row of --seq-len+1: give more data or a smaller --seq-len", len(docs), seqLen+1)
	}
	return rows, bytes, nil
}
