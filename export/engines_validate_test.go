package export

import (
	"context"
	"errors"
	"testing"
)

// TestValidateEngines: one report per engine in order, the failures
// counted (without the remote-code files the engines that build the
// config through transformers' AutoConfig fail, llama.cpp and the native
// engine load), an unknown engine and a cancelled context are errors.
func TestValidateEngines(t *testing.T) {
	cfg := deciConfig(func(c map[string]any, b []map[string]any) {
		b[1]["attention"] = map[string]any{"no_op": true}
	})
	dir := writeDeci(t, cfg, nil, map[string][]byte{"tokenizer.json": []byte(llamaBPETokenizer)})
	engines := []string{"vllm", "hf", "llamacpp", "sglang", "native"}
	reports, failed, err := ValidateEngines(context.Background(), dir, engines, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 5 || failed != 3 {
		t.Fatalf("%d reports, %d failed; want 5 and 3", len(reports), failed)
	}
	for i, r := range reports {
		c, _ := Lookup(engines[i])
		if r.OK() == c.RemoteCode {
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
