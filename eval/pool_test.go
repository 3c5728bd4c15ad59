package eval

import (
	"context"
	"math"
	"testing"
)

// Pooling two texts equals scoring the token stream both belong to, window
// for window: the pooled NLL is the sum and perplexity is over all tokens.
func TestPool(t *testing.T) {
	m := tinyModel(t, 20, 1)
	ctx := context.Background()
	a, err := Text(ctx, m, fakeTok{20}, "a", []byte("hello world"), Options{SeqLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Text(ctx, m, fakeTok{20}, "b", []byte("a second text"), Options{SeqLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	p := Pool(a, nil, b)
	if p.Tokens != a.Tokens+b.Tokens || p.Windows != a.Windows+b.Windows || p.Bytes != a.Bytes+b.Bytes {
		t.Fatalf("pooled %+v from %+v and %+v", p, a, b)
	}
	if want := math.Exp((a.NLL + b.NLL) / float64(a.Tokens+b.Tokens)); math.Abs(p.Perplexity-want) > 1e-12*want {
		t.Errorf("perplexity %v, want %v", p.Perplexity, want)
	}
	if want := (a.NLL + b.NLL) / math.Ln2 / float64(a.Bytes+b.Bytes); math.Abs(p.BitsPerByte-want) > 1e-12 {
		t.Errorf("bits per byte %v, want %v", p.BitsPerByte, want)
	}
	ids, err := IDs(ctx, m, [][]int{{1, 2, 3, 4}}, Options{SeqLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	if q := Pool(a, ids); q.Bytes != 0 || !math.IsNaN(q.BitsPerByte) {
		t.Errorf("text pooled with ids: bytes %d, bits per byte %v; want 0 and NaN", q.Bytes, q.BitsPerByte)
	}
	if a.Tokens == p.Tokens || Pool() != nil {
		t.Error("Pool changed its input or invented a result")
	}
}
