package tokenizer

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncodeAndTrainStopWhenCancelled(t *testing.T) {
	tok, err := Load(filepath.Join("..", "parent", "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	text := strings.Repeat("It is a truth universally acknowledged. ", 1000)
	if _, err := tok.EncodeContext(ctx, text, false); !errors.Is(err, context.Canceled) {
		t.Errorf("EncodeContext: %v, want context.Canceled", err)
	}
	if ids, err := tok.EncodeContext(context.Background(), text, false); err != nil || len(ids) == 0 {
		t.Errorf("EncodeContext not cancelled: %d ids, %v", len(ids), err)
	}
	if _, err := TrainBPE(ctx, []string{text}, BPETrainOptions{Merges: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("TrainBPE: %v, want context.Canceled", err)
	}
}
