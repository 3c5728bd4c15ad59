package eval

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"context"
	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/engine"
)

func tinyModel(t testing.TB, vocab int, seed uint64) *engine.Model {
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: vocab, Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 64,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{0},
		Layers: []architecture.Layer{{Attention: &architecture.Attention{Heads: 2, KVHeads: 1, HeadDim: 8},
			MLP: &architecture.MLP{Width: 32, Gated: true, Activation: "silu"}}}}
	m, err := engine.New(a, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	for i, p := range m.Params() {
		if p != 1 { // keep norm weights
			m.Params()[i] = float32(0.5 * r.NormFloat64())
		}
	}
	return m
}

func TestWindowsPredictEveryTokenOnce(t *testing.T) {
	for _, tc := range []struct{ n, T, stride int }{
		{2, 4, 0}, {5, 4, 0}, {9, 4, 0}, {10, 4, 0}, {100, 7, 0},
		{10, 4, 1}, {10, 4, 2}, {11, 4, 3}, {100, 16, 5}, {17, 16, 8},
	} {
		ws := windows(tc.n, tc.T, tc.stride)
		seen := make([]int, tc.n-1)
		for _, w := range ws {
			if w.n > tc.T || w.n < 1 || w.start+w.n > tc.n-1 {
				t.Fatalf("%+v: bad window %+v", tc, w)
			}
			for k := w.from; k < w.n; k++ {
				seen[w.start+k]++
				if tc.stride > 0 && tc.stride < tc.T && w.start > 0 && k < tc.T-tc.stride {
					t.Errorf("%+v: window %+v scores position %d with context %d < T-stride", tc, w, k, k)
				}
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("%+v: target %d predicted %d times (windows %+v)", tc, i, c, ws)
			}
		}
	}
}

// refNLL computes the NLL of targets ids[1:] with a full forward over the
// whole stream and an own log-softmax: an independent path.
func refNLL(t *testing.T, m *engine.Model, ids []int32) float64 {
	n := len(ids) - 1
	logits, err := m.Forward(ids[:n], 1, n)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Arch().Vocab
	var nll float64
	for i := 0; i < n; i++ {
		row := logits[i*V : (i+1)*V]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - mx)
		}
		nll += mx + math.Log(s) - float64(row[ids[i+1]])
	}
	return nll
}

func TestScoreMatchesFullForward(t *testing.T) {
	m := tinyModel(t, 20, 1)
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, 30)
	for i := range ids {
		ids[i] = int32(r.IntN(20))
	}
	want := refNLL(t, m, ids)
	// One window covering everything equals the full forward.
	res, err := Score(context.Background(), m, ids, 0, Options{SeqLen: 64})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tokens != 29 || math.Abs(res.NLL-want) > 1e-3*math.Abs(want) {
		t.Errorf("one window: %d tokens NLL %.5f, want 29 and %.5f", res.Tokens, res.NLL, want)
	}
	if !math.IsNaN(res.BitsPerByte) {
		t.Error("bits per byte without bytes")
	}
	// Short windows: every token still predicted once.
	packed, _ := Score(context.Background(), m, ids, 0, Options{SeqLen: 8, Batch: 3})
	if packed.Tokens != 29 || packed.Windows != 4 {
		t.Errorf("packed: %d tokens in %d windows", packed.Tokens, packed.Windows)
	}
	slide, _ := Score(context.Background(), m, ids, 0, Options{SeqLen: 8, Stride: 2})
	if slide.Tokens != 29 {
		t.Errorf("sliding: %d tokens", slide.Tokens)
	}
}

func TestUniformModelPerplexityIsVocab(t *testing.T) {
	m := tinyModel(t, 50, 2)
	clear(m.Params()) // all-zero weights: logits 0, a uniform distribution
	ids := make([]int32, 41)
	res, err := Score(context.Background(), m, ids, 80, Options{SeqLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Perplexity-50) > 1e-3 {
		t.Errorf("perplexity %g, want 50", res.Perplexity)
	}
	// 40 tokens × log2(50) bits over 80 bytes.
	if want := 40 * math.Log2(50) / 80; math.Abs(res.BitsPerByte-want) > 1e-5 {
		t.Errorf("bits per byte %g, want %g", res.BitsPerByte, want)
	}
}

type fakeTok struct{ vocab int }

func (f fakeTok) VocabSize() int { return f.vocab }
func (f fakeTok) Encode(s string, _ bool) ([]int, error) {
	var out []int
	for _, b := range []byte(s) {
		out = append(out, 1+int(b)%(f.vocab-1))
	}
	return out, nil
}

func TestTextErrors(t *testing.T) {
	m := tinyModel(t, 20, 1)
	tests := []struct {
		name string
		text string
		tok  Encoder
		want any
		msg  string
	}{
		{"empty", "", fakeTok{20}, &EmptyTextError{}, "no text"},
		{"blank", " \n\t ", fakeTok{20}, &EmptyTextError{}, "no text"},
		{"utf8", "ok so far\xc3\x28", fakeTok{20}, &corpus.EncodingError{}, "byte offset 9"},
		{"mismatch", "hello", fakeTok{300}, &MismatchError{}, "300 tokens but the model's vocabulary has 20"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Text(context.Background(), m, tc.tok, "f.txt", []byte(tc.text), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %q", err, tc.msg)
			}
			switch tc.want.(type) {
			case *EmptyTextError:
				var e *EmptyTextError
				if !errors.As(err, &e) {
					t.Errorf("type %T", err)
				}
			case *corpus.EncodingError:
				var e *corpus.EncodingError
				if !errors.As(err, &e) || e.Offset != 9 {
					t.Errorf("type %T %v", err, err)
				}
			case *MismatchError:
				var e *MismatchError
				if !errors.As(err, &e) {
					t.Errorf("type %T", err)
				}
			}
		})
	}
	res, err := Text(context.Background(), m, fakeTok{20}, "f.txt", []byte("hello world"), Options{SeqLen: 4})
	if err != nil || res.Tokens != 11 || res.Bytes != 11 || math.IsNaN(res.BitsPerByte) {
		t.Errorf("text: %+v %v", res, err)
	}
}

func TestIDs(t *testing.T) {
	m := tinyModel(t, 20, 1)
	res, err := IDs(context.Background(), m, [][]int{{1, 2, 3, 4}, {5}, {6, 7, 8}}, Options{SeqLen: 8})
	if err != nil || res.Tokens != 5 {
		t.Fatalf("%+v %v", res, err)
	}
	a, _ := Score(context.Background(), m, []int32{1, 2, 3, 4}, 0, Options{})
	b, _ := Score(context.Background(), m, []int32{6, 7, 8}, 0, Options{})
	if math.Abs(res.NLL-(a.NLL+b.NLL)) > 1e-9 {
		t.Errorf("pooled NLL %g, want %g", res.NLL, a.NLL+b.NLL)
	}
	if _, err := IDs(context.Background(), m, [][]int{{1, 25}}, Options{}); err == nil || !strings.Contains(err.Error(), "outside the model's vocabulary") {
		t.Errorf("out-of-vocabulary id: %v", err)
	}
	if _, err := IDs(context.Background(), m, [][]int{{1}}, Options{}); !errors.Is(err, ErrEmpty) {
		t.Errorf("too short: %v", err)
	}
}

func ExampleScore() {
	a := &architecture.Model{Arch: "LlamaForCausalLM", Vocab: 8, Hidden: 4, TiedEmbeddings: true,
		Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 16, Rope: architecture.Rope{Theta: 1e4, PartialFactor: 1},
		BOS: -1, Layers: []architecture.Layer{{MLP: &architecture.MLP{Width: 8, Gated: true, Activation: "silu"}}}}
	m, _ := engine.New(a, 1)
	clear(m.Params()) // uniform predictions
	res, _ := Score(context.Background(), m, []int32{0, 1, 2, 3, 4}, 0, Options{SeqLen: 2})
	fmt.Printf("%d tokens, perplexity %.1f, %d windows\n", res.Tokens, res.Perplexity, res.Windows)
	// Output: 4 tokens, perplexity 8.0, 2 windows
}
