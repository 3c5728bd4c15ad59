package eval

import (
	"context"
	"errors"
	"testing"
)

func TestScoreStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := tinyModel(t, 20, 1)
	if _, err := Score(ctx, m, []int32{1, 2, 3, 4, 5, 6}, 0, Options{SeqLen: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("Score: %v, want context.Canceled", err)
	}
	if _, err := Text(ctx, m, fakeTok{20}, "f.txt", []byte("hello world"), Options{SeqLen: 4}); !errors.Is(err, context.Canceled) {
		t.Errorf("Text: %v, want context.Canceled", err)
	}
	if _, err := IDs(ctx, m, [][]int{{1, 2, 3}}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("IDs: %v, want context.Canceled", err)
	}
}
