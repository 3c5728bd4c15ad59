package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/tokenizer"
)

const trainConfig = `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1,
 "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 4, "rms_norm_eps": 1e-5, "rope_theta": 10000,
 "max_position_embeddings": 64, "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "float32"}`

func TestTrainCommand(t *testing.T) {
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	data := evalWrite(t, "train.txt", []byte(strings.Repeat(evalText+"\n\n", 6)))
	val := evalWrite(t, "val.txt", []byte(evalText))
	out := filepath.Join(t.TempDir(), "model")
	logPath := out + ".log.jsonl"
	base := []string{"train", "--config", cfg, "--out", out, "--val", val, "--bpe-merges", "60", "--log", logPath,
		"--steps", "12", "--batch", "2", "--seq-len", "16", "--lr", "1e-2", "--eval-every", "6", "--log-every", "3"}

	// Stop half-way, then resume to the end.
	code, _, errs := evalRun(append(append([]string{}, base...), "--stop-at", "5", "--data", data)...)
	if code != 0 || !strings.Contains(errs, "stopped at step 5 of 12") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out + ".ckpt"); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("model written before the run finished")
	}
	code, stdout, errs := evalRun(append(append([]string{}, base...), "--resume", "--json", data)...)
	if code != 0 || !strings.Contains(errs, "resumed") || !strings.Contains(errs, "step 6 validation loss") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum struct {
		Steps   int     `json:"steps"`
		ValLoss float64 `json:"val_loss"`
		Vocab   int     `json:"vocab"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum.Steps != 12 || sum.Vocab != 317 || sum.ValLoss <= 0 {
		t.Fatalf("summary %v: %s", err, stdout)
	}
	// The log holds every step once across the stop and the resume, and
	// the two evaluations.
	lb, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var steps, evals []int
	for _, line := range strings.Split(strings.TrimSpace(string(lb)), "\n") {
		var x struct {
			Step    int      `json:"step"`
			Loss    *float64 `json:"loss"`
			ValLoss *float64 `json:"val_loss"`
		}
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if x.ValLoss != nil {
			evals = append(evals, x.Step)
		} else {
			steps = append(steps, x.Step)
		}
	}
	if !slices.Equal(steps, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) || !slices.Equal(evals, []int{6, 12}) {
		t.Errorf("log steps %v, evaluations %v", steps, evals)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	m, err := engine.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if a := m.Arch(); a.Vocab != 317 || a.NumLayers() != 2 || !slices.Equal(a.EOS, []int{316}) {
		t.Errorf("saved arch: vocab %d layers %d eos %v", a.Vocab, a.NumLayers(), a.EOS)
	}
	// The saved tokenizer loads with the general reader and gives the same
	// ids as the trainer's encoder.
	tok, err := tokenizer.Load(filepath.Join(out, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := tokenizer.ReadTrainedBPE(filepath.Join(out, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(evalText, false)
	if err != nil {
		t.Fatal(err)
	}
	want := own.Encode(evalText)
	if len(ids) != len(want) {
		t.Fatalf("%d ids vs %d", len(ids), len(want))
	}
	for i := range ids {
		if int32(ids[i]) != want[i] {
			t.Fatalf("id %d: %d vs %d", i, ids[i], want[i])
		}
	}
}

func TestTrainCommandUsage(t *testing.T) {
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"train", "--config", cfg, "x.txt"}, 2, "--out is required"},
		{[]string{"train", "--out", "o", "x.txt"}, 2, "exactly one of --config and --preset"},
		{[]string{"train", "--preset", "huge", "--out", "o", "x.txt"}, 2, "unknown --preset"},
		{[]string{"train", "--preset", "parent", "--out", "o"}, 2, "--corpus builtin|extended or text files"},
		{[]string{"train", "--preset", "parent", "--out", "o", "--corpus", "wiki"}, 2, `unknown --corpus "wiki" (known: builtin, extended)`},
		{[]string{"train", "--preset", "parent", "--out", "o", "--dtype", "int4", "x.txt"}, 2, "--dtype"},
		{[]string{"train", "--config", cfg, "--out", filepath.Join(t.TempDir(), "o"), evalWrite(t, "bad.txt", []byte("ok\xfe"))}, 1, "byte offset 2"},
		{[]string{"train", "--config", cfg, "--out", filepath.Join(t.TempDir(), "o"), "--seq-len", "500", evalWrite(t, "s.txt", []byte("tiny text"))}, 1, "give more data"},
	}
	for _, tc := range tests {
		code, _, errs := evalRun(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q, want %q", tc.args, code, tc.code, errs, tc.msg)
		}
	}
}

// TestTrainCommandTokenIDs trains on the same data as text and as token ids
// (text and binary id files) with the same tokenizer and seed: the packed
// rows are the same, so the trained weights must be bit-identical.
func TestTrainCommandTokenIDs(t *testing.T) {
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	data := evalWrite(t, "train.txt", []byte(evalText))
	data2 := evalWrite(t, "train2.txt", []byte("A short first document."))
	val := evalWrite(t, "val.txt", []byte(evalText))
	dir := t.TempDir()
	base := []string{"train", "--config", cfg, "--steps", "8", "--batch", "2", "--seq-len", "16", "--lr", "1e-2",
		"--eval-every", "2", "--log-every", "2", "--dtype", "F32", "--json"}
	run := func(out string, extra ...string) *engine.Model {
		t.Helper()
		code, _, errs := evalRun(append(append(append([]string{}, base...), "--out", out), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errs)
		}
		m, err := engine.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Text, training its own tokenizer; then text again with that tokenizer.
	first := filepath.Join(dir, "first")
	run(first, "--bpe-merges", "60", "--val", val, data2, data)
	tokPath := filepath.Join(first, "tokenizer.json")
	fromText := run(filepath.Join(dir, "text"), "--tokenizer", tokPath, "--val", val, data2, data)

	// The same documents as ids, encoded by the saved tokenizer.
	tok, err := tokenizer.ReadTrainedBPE(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	// One id sequence per document (file).
	encode := func(paths ...string) [][]int {
		var seqs [][]int
		for _, p := range paths {
			doc, err := corpus.ReadText(p)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int
			for _, id := range tok.Encode(doc.Text) {
				ids = append(ids, int(id))
			}
			seqs = append(seqs, ids)
		}
		return seqs
	}
	write := func(name string, seqs [][]int, binary bool) string {
		var b bytes.Buffer
		w := tokenizer.WriteIDs
		if binary {
			w = tokenizer.WriteIDsBinary
		}
		if err := w(&b, seqs); err != nil {
			t.Fatal(err)
		}
		return evalWrite(t, name, b.Bytes())
	}
	trainIDs, valIDs := encode(data2, data), encode(val)
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"text-ids", []string{"--val", write("val.ids", valIDs, false), write("train.ids", trainIDs, false)}},
		{"binary-ids", []string{"--val", write("val.bin", valIDs, true), "--data", write("train.bin", trainIDs, true)}},
		{"flagged", []string{"--ids", "--val", write("val.tok", valIDs, false), write("train.tok", trainIDs, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := run(filepath.Join(dir, tc.name), append([]string{"--tokenizer", tokPath}, tc.extra...)...)
			if !slices.Equal(m.Params(), fromText.Params()) {
				t.Fatal("weights trained on token ids differ from those trained on the same text")
			}
		})
	}

	// Errors a user can fix.
	idsFile := write("x.ids", trainIDs, false)
	bad := write("bad.ids", [][]int{{1, 2, 100000}}, false)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--out", filepath.Join(dir, "e1"), idsFile}, 2, "token-id data needs --tokenizer"},
		{[]string{"--out", filepath.Join(dir, "e2"), "--tokenizer", tokPath, idsFile, data}, 2, "not both"},
		{[]string{"--out", filepath.Join(dir, "e3"), "--tokenizer", tokPath, bad}, 1, "outside the model's vocabulary"},
		{[]string{"--out", filepath.Join(dir, "e4"), "--tokenizer", tokPath, "--seq-len", "60", write("short.ids", [][]int{{1, 2, 3}}, false)}, 1, "give more data"},
	}
	for _, tc := range tests {
		code, _, errs := evalRun(append(append([]string{}, base...), tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.msg) {
			t.Errorf("%v: exit %d (want %d), stderr %q, want %q", tc.args, code, tc.code, errs, tc.msg)
		}
	}
}
