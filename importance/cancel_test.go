package importance

import (
	"context"
	"errors"
	"testing"
)

func TestComputeStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compute(ctx, model(t), rows(6, 12, 1), Options{Batch: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Compute with a cancelled context: %v, want context.Canceled", err)
	}
}
