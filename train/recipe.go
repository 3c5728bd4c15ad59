package train

import (
	"context"
	"fmt"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/dataset"
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
// seqLen+1 tokens (dataset.Pack). It reports how many bytes of text the rows
// came from. No documents give no rows.
func Rows(enc Encoder, docs []corpus.Document, sep int32, seqLen int) (rows [][]int32, bytes int, err error) {
	if len(docs) == 0 {
		return nil, 0, nil
	}
	p, err := dataset.Pack(context.Background(), dataset.FromCorpus(docs), encoder{enc}, dataset.PackOptions{SeqLen: seqLen, Sep: sep})
	if err != nil {
		return nil, 0, fmt.Errorf("train: %w", err)
	}
	return p.Rows, p.Bytes, nil
}

// encoder adapts an Encoder to dataset.Encoder.
type encoder struct{ Encoder }

func (e encoder) Encode(_ context.Context, text string) ([]int32, error) {
	return e.Encoder.Encode(text), nil
}
