package export

import (
	"context"
	"errors"
	"testing"
)

// TestValidateEngines: one report per engine in order, the failures
// counted (hf without its remote-code files fails, the others load), an
// unknown engine and a cancelled context are errors.
func TestValidateEngines(t *testing.T) {
	cfg := deciConfig(func(c map[string]any, b []map[string]any) {
		b[1]["attention"] = map[string]any{"no_op": true}
	})
	dir := writeDeci(t, cfg, nil, nil)
	engines := []string{"vllm", "hf", "sglang"}
	reports, failed, err := ValidateEngines(context.Background(), dir, engines, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 3 || failed != 1 {
		t.Fatalf("%d reports, %d failed; want 3 and 1", len(reports), failed)
	}
	for i, r := range reports {
		if r.OK() != (engines[i] != "hf") {
			t.Errorf("%s: OK %v: %v", engines[i], r.OK(), r.Violations)
		}
	}
	if _, _, err := ValidateEngines(context.Background(), dir, []string{"vllm", "nope"}, Options{}); err == nil {
		t.Error("unknown engine: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := ValidateEngines(ctx, dir, engines, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}
