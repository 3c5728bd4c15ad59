package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/tokenizer"
)

func evalRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

const evalText = `It is a truth universally acknowledged, that a single man in possession
of a good fortune, must be in want of a wife. However little known the feelings
or views of such a man may be on his first entering a neighbourhood, this truth
is so well fixed in the minds of the surrounding families, that he is considered
the rightful property of some one or other of their daughters.`

// evalModel writes a small random Llama with a byte-level BPE tokenizer
// trained on evalText: a complete HF directory.
func evalModel(t *testing.T) string {
	t.Helper()
	tok, err := tokenizer.TrainBPE(context.Background(), []string{evalText}, tokenizer.BPETrainOptions{Merges: 40, Special: []string{"<|endoftext|>"}})
	if err != nil {
		t.Fatal(err)
	}
	eot := int(tok.Special["<|endoftext|>"])
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: tok.VocabSize(), Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 128,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: -1, EOS: []int{eot}}
	for range 3 {
		a.Layers = append(a.Layers, architecture.Layer{Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4},
			MLP: &architecture.MLP{Width: 32, Gated: true, Activation: "silu"}})
	}
	m, err := engine.New(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func evalWrite(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEvalCommand(t *testing.T) {
	dir := evalModel(t)
	text := evalWrite(t, "austen.txt", []byte(evalText))
	code, out, errs := evalRun("eval", "--model", dir, "--data", text, "--seq-len", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "perplexity") || !strings.Contains(out, "bits per byte") || !strings.Contains(out, "packed windows of 32") {
		t.Errorf("stdout: %s", out)
	}
	code, out, errs = evalRun("eval", "--model", dir, "--data", text, "--seq-len", "32", "--stride", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Tokens      int     `json:"tokens"`
		Perplexity  float64 `json:"perplexity"`
		BitsPerByte float64 `json:"bits_per_byte"`
		Bytes       int     `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// A random model over a vocabulary of 297: perplexity near 297.
	if r.Bytes != len(evalText) || r.Tokens < 50 || r.Perplexity < 100 || r.Perplexity > 900 || r.BitsPerByte <= 0 {
		t.Errorf("json: %+v", r)
	}
	ids := evalWrite(t, "x.ids", []byte("1 2 3 4 5\n6 7 8\n"))
	code, out, errs = evalRun("eval", "--model", dir, "--data", ids)
	if code != 0 || !strings.Contains(out, "perplexity") || strings.Contains(out, "bits per byte") {
		t.Errorf("ids: exit %d\n%s%s", code, out, errs)
	}
}

func TestEvalCommandErrors(t *testing.T) {
	dir := evalModel(t)
	big, _ := tokenizer.TrainBPE(context.Background(), []string{evalText + evalText}, tokenizer.BPETrainOptions{Merges: 100})
	bigPath := filepath.Join(t.TempDir(), "tokenizer.json")
	big.Save(bigPath)
	// A checkpoint whose tensors disagree with its config.
	bad := t.TempDir()
	for _, f := range []string{"model.safetensors", "tokenizer.json"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(bad, f), b, 0o644)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(bad, "config.json"), bytes.Replace(cfg, []byte(`"intermediate_size": 32`), []byte(`"intermediate_size": 48`), 1), 0o644)

	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no model", []string{"eval", "--data", "x"}, 2, "--model and --data are required"},
		{"empty", []string{"eval", "--model", dir, "--data", evalWrite(t, "e.txt", nil)}, 1, "no text to score"},
		{"utf8", []string{"eval", "--model", dir, "--data", evalWrite(t, "b.txt", []byte("caf\xe9 au lait"))}, 1, "invalid byte 0xe9 at byte offset 3"},
		{"mismatch", []string{"eval", "--model", dir, "--data", evalWrite(t, "a.txt", []byte(evalText)), "--tokenizer", bigPath}, 1, "use the tokenizer.json that belongs to the model"},
		{"ids out of vocab", []string{"eval", "--model", dir, "--data", evalWrite(t, "o.ids", []byte("1 2 99999\n"))}, 1, "outside the model's vocabulary"},
		{"shape", []string{"eval", "--model", bad, "--data", evalWrite(t, "c.txt", []byte(evalText))}, 1, "config.json implies [48 16]"},
		{"seq-len", []string{"eval", "--model", dir, "--data", "x", "--seq-len", "4096"}, 2, "max_position_embeddings"},
		{"not a dir", []string{"eval", "--model", bigPath, "--data", "x"}, 2, "holds no weights"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := evalRun(tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d (want %d), stderr %q, want %q", code, tc.code, errs, tc.msg)
			}
		})
	}
}

func TestEvalCommandParent(t *testing.T) {
	text := evalWrite(t, "t.txt", []byte(evalText))
	code, out, errs := evalRun("eval", "--model", "parent", "--data", text, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Perplexity  float64 `json:"perplexity"`
		BitsPerByte float64 `json:"bits_per_byte"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// Jane Austen's first sentence: the parent has read her other chapters.
	if r.Perplexity <= 1 || r.Perplexity > 1000 || r.BitsPerByte <= 0 || r.BitsPerByte > 3 {
		t.Errorf("parent on Austen: %+v", r)
	}
}
