package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// TestStories260K reads the real stories260K HF checkpoint: every tensor's
// name and shape, and values checked against the independent llama2.c
// legacy file of the same model (stories260K.bin: a 7-int32 header, then
// float32 weights in llama2.c order), including the RoPE row permutation of
// q_proj/k_proj described in the data's README.
func TestStories260K(t *testing.T) {
	path := sdtest.Require(t, "models/stories260K/model.safetensors")
	binPath := sdtest.Require(t, "models/stories260K/stories260K.bin")
	const (
		dim, hidden, layers, heads, kvHeads, vocab = 64, 172, 5, 8, 4, 512
		headDim                                    = dim / heads
		kvDim                                      = kvHeads * headDim
	)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	want := map[string][]int64{
		"model.embed_tokens.weight": {vocab, dim},
		"model.norm.weight":         {dim},
	}
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		want[p+"input_layernorm.weight"] = []int64{dim}
		want[p+"post_attention_layernorm.weight"] = []int64{dim}
		want[p+"self_attn.q_proj.weight"] = []int64{dim, dim}
		want[p+"self_attn.k_proj.weight"] = []int64{kvDim, dim}
		want[p+"self_attn.v_proj.weight"] = []int64{kvDim, dim}
		want[p+"self_attn.o_proj.weight"] = []int64{dim, dim}
		want[p+"mlp.gate_proj.weight"] = []int64{hidden, dim}
		want[p+"mlp.up_proj.weight"] = []int64{hidden, dim}
		want[p+"mlp.down_proj.weight"] = []int64{dim, hidden}
	}
	ts := r.Tensors()
	if len(ts) != 47 || len(want) != 47 {
		t.Fatalf("%d tensors (want 47)", len(ts))
	}
	var prevEnd int64
	for _, ti := range ts {
		shape, ok := want[ti.Name]
		if !ok {
			t.Errorf("unexpected tensor %q", ti.Name)
			continue
		}
		if fmt.Sprint(ti.Shape) != fmt.Sprint(shape) || ti.DType != F32 {
			t.Errorf("%s: %s %v, want F32 %v", ti.Name, ti.DType, ti.Shape, shape)
		}
		if prevEnd != 0 && ti.Offset != prevEnd {
			t.Errorf("%s: not in storage order", ti.Name)
		}
		prevEnd = ti.Offset + ti.Size
	}
	if md := r.Metadata(); md["format"] != "pt" {
		t.Errorf("metadata = %v, want format=pt", md)
	}

	// The legacy file, read independently with encoding/binary.
	raw, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [7]int32
	for i := range hdr {
		hdr[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if hdr != [7]int32{dim, hidden, layers, heads, kvHeads, vocab, 512} {
		t.Fatalf("legacy header %v", hdr)
	}
	floats := func(off, n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[28+4*(off+i):]))
		}
		return out
	}
	// llama2.c order: embedding, rms_att[L], wq[L], wk[L], wv[L], wo[L],
	// rms_ffn[L], w1[L], w2[L], w3[L], rms_final.
	offEmb := 0
	offAtt := offEmb + vocab*dim
	offWq := offAtt + layers*dim
	offWk := offWq + layers*dim*dim
	offWv := offWk + layers*kvDim*dim
	offWo := offWv + layers*kvDim*dim
	offFfn := offWo + layers*dim*dim
	offW1 := offFfn + layers*dim
	offW2 := offW1 + layers*hidden*dim
	offW3 := offW2 + layers*dim*hidden
	offFinal := offW3 + layers*hidden*dim

	same := func(name string, want []float32) {
		t.Helper()
		got, err := r.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s[%d] = %v, legacy file has %v", name, i, got[i], want[i])
			}
		}
	}
	same("model.embed_tokens.weight", floats(offEmb, vocab*dim))
	same("model.norm.weight", floats(offFinal, dim))
	for _, l := range []int{0, 4} {
		p := fmt.Sprintf("model.layers.%d.", l)
		same(p+"input_layernorm.weight", floats(offAtt+l*dim, dim))
		same(p+"post_attention_layernorm.weight", floats(offFfn+l*dim, dim))
		same(p+"self_attn.v_proj.weight", floats(offWv+l*kvDim*dim, kvDim*dim))
		same(p+"self_attn.o_proj.weight", floats(offWo+l*dim*dim, dim*dim))
		same(p+"mlp.gate_proj.weight", floats(offW1+l*hidden*dim, hidden*dim))
		same(p+"mlp.down_proj.weight", floats(offW2+l*dim*hidden, dim*hidden))
		same(p+"mlp.up_proj.weight", floats(offW3+l*hidden*dim, hidden*dim))
		// q/k rows are permuted from interleaved to rotate_half order: per
		// head, HF row t*(headDim/2)+j is llama2.c row 2j+t.
		perm := func(w []float32, nh int) []float32 {
			out := make([]float32, len(w))
			for h := range nh {
				for tt := range 2 {
					for j := range headDim / 2 {
						dst := h*headDim + tt*headDim/2 + j
						src := h*headDim + 2*j + tt
						copy(out[dst*dim:(dst+1)*dim], w[src*dim:(src+1)*dim])
					}
				}
			}
			return out
		}
		same(p+"self_attn.q_proj.weight", perm(floats(offWq+l*dim*dim, dim*dim), heads))
		same(p+"self_attn.k_proj.weight", perm(floats(offWk+l*kvDim*dim, kvDim*dim), kvHeads))
	}
	// A few values spelled out, as a check on the offset arithmetic above.
	emb, _ := r.Float32("model.embed_tokens.weight")
	if emb[0] != floats(0, 1)[0] || math.Float32bits(emb[vocab*dim-1]) != binary.LittleEndian.Uint32(raw[28+4*(vocab*dim-1):]) {
		t.Error("embedding endpoints differ")
	}
}
