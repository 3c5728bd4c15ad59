package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

type referenceLogits struct {
	TokenIDs      []int32     `json:"token_ids"`
	Logits        [][]float32 `json:"logits"`
	Argmax        []int32     `json:"argmax"`
	GreedyFromBOS struct {
		TokenIDs []int32 `json:"token_ids"`
	} `json:"greedy_from_bos"`
}

func loadStories(t *testing.T) (*Model, *referenceLogits) {
	t.Helper()
	dir := filepath.Dir(sdtest.Require(t, "models/stories260K/model.safetensors"))
	data, err := os.ReadFile(sdtest.Require(t, "models/stories260K/reference_logits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref referenceLogits
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, &ref
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestStories260KReferenceLogits compares the full-sequence forward pass and
// the KV-cache path with llama2.c's run.c logits on the same weights.
func TestStories260KReferenceLogits(t *testing.T) {
	m, ref := loadStories(t)
	T, V := len(ref.TokenIDs), 512
	logits, err := m.Forward(ref.TokenIDs, 1, T)
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := 0; i < T; i++ {
		d := maxAbsDiff(logits[i*V:(i+1)*V], ref.Logits[i])
		worst = max(worst, d)
		if got := Argmax(logits[i*V : (i+1)*V]); got != ref.Argmax[i] {
			t.Errorf("position %d: argmax %d, reference %d", i, got, ref.Argmax[i])
		}
	}
	if worst > 1e-4 {
		t.Errorf("forward: max |logit − reference| = %.3g > 1e-4", worst)
	}
	t.Logf("forward: max |logit − reference| = %.3g over %d×%d logits", worst, T, V)

	// Same through the KV cache, one token per step as run.c does.
	c := m.NewCache(T)
	worst = 0
	for i, id := range ref.TokenIDs {
		out, err := m.Step([]*Cache{c}, [][]int32{{id}}, false)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(out[0], ref.Logits[i]))
	}
	if worst > 1e-4 {
		t.Errorf("KV-cache decode: max |logit − reference| = %.3g > 1e-4", worst)
	}
	t.Logf("KV-cache decode: max |logit − reference| = %.3g", worst)
}

func TestStories260KGreedy(t *testing.T) {
	m, ref := loadStories(t)
	out, err := m.Generate(context.Background(), []int32{1}, GenerateOptions{MaxTokens: len(ref.GreedyFromBOS.TokenIDs) - 1, Greedy: true, EOS: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	want := ref.GreedyFromBOS.TokenIDs
	if len(want) > 0 && want[0] == 1 {
		want = want[1:]
	}
	if len(out) != len(want) {
		t.Fatalf("generated %d tokens, reference has %d", len(out), len(want))
	}
	for i := range out {
		if out[i] != want[i] {
			t.Fatalf("greedy token %d: %d, reference %d (got %v)", i, out[i], want[i], out)
		}
	}
}
