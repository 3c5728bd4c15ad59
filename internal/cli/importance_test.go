package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"path/filepath"

	"github.com/autocompress/autocompress/importance"
)

func TestImportanceCommand(t *testing.T) {
	dir := evalModel(t)
	text := evalWrite(t, "a.txt", []byte(strings.Repeat(evalText+"\n\n", 4)))
	out := filepath.Join(t.TempDir(), "scores.safetensors")
	args := []string{"importance", "--model", dir, "--data", text, "--out", out, "--seqs", "6", "--seq-len", "32", "--batch", "4"}
	code, stdout, errs := evalRun(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "block-influence") || !strings.Contains(errs, "importance [") {
		t.Errorf("stdout %q stderr %q", stdout, errs)
	}
	s, err := importance.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	// "least important" lists the lowest block influence first.
	least := importance.LeastImportant(s.LayerBI, 3)
	if s.LayerBI[least[0]] > s.LayerBI[least[len(least)-1]] || !strings.Contains(stdout, fmt.Sprintf("least important layers first (block influence): %v", least)) {
		t.Errorf("least important layers: BI %v, want %v first in\n%s", s.LayerBI, least, stdout)
	}
	if !strings.Contains(stdout, "attention") || len(s.AttnSkipLoss) != 3 || math.IsNaN(s.AttnSkipLoss[0]) {
		t.Errorf("sub-block scores missing: %v\n%s", s.AttnSkipLoss, stdout)
	}
	h, _ := importance.HashModelDir(dir)
	if s.ModelHash != h || s.Sequences != 6 || s.SeqLen != 32 || len(s.LayerBI) != 3 || len(s.Heads[1]) != 4 || len(s.Neurons[2]) != 32 || len(s.Hidden) != 16 {
		t.Errorf("scores: %+v", s)
	}
	// Same model and data: reused without a new pass.
	code, stdout, errs = evalRun(append(args, "--json")...)
	if code != 0 || !strings.Contains(errs, "reusing") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum struct {
		Reused bool      `json:"reused"`
		BI     []float64 `json:"layer_bi"`
		Tokens int       `json:"tokens"`
		Skip   int       `json:"skip_sequences"`
		Passes float64   `json:"equivalent_passes"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || !sum.Reused || len(sum.BI) != 3 || sum.Tokens != 192 {
		t.Errorf("json %v: %s", err, stdout)
	}
	// The default budget of 4 passes scores the skip losses on fewer rows
	// and says what it cost; --passes 0 scores every row.
	if sum.Skip != s.SkipSequences || sum.Skip < 1 || sum.Skip >= 6 || sum.Passes > 4 || sum.Passes < 1 {
		t.Errorf("default budget: %d of 6 sequences scored at %g passes", sum.Skip, sum.Passes)
	}
	code, stdout, errs = evalRun(append(args, "--passes", "0")...)
	if code != 0 || strings.Contains(errs, "reusing") || !strings.Contains(stdout, "skip losses on 6 of 6 sequences × 32 of 32 tokens; cost") {
		t.Errorf("--passes 0: exit %d: %s\n%s", code, errs, stdout)
	}
	if code, _, errs := evalRun(append(args, "--passes", "2", "--skip-seqs", "3")...); code != 2 || !strings.Contains(errs, "not both") {
		t.Errorf("--passes with --skip-seqs: exit %d: %s", code, errs)
	}
	// Other data: recomputed.
	code, _, errs = evalRun("importance", "--model", dir, "--data", text, "--out", out, "--seqs", "4", "--seq-len", "32", "--no-skip-loss")
	if code != 0 || strings.Contains(errs, "reusing") {
		t.Errorf("exit %d: %s", code, errs)
	}
}

func TestImportanceCommandErrors(t *testing.T) {
	dir := evalModel(t)
	out := filepath.Join(t.TempDir(), "s.safetensors")
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"usage", []string{"importance", "--model", dir, "--out", out}, 2, "calibration data"},
		{"empty", []string{"importance", "--model", dir, "--out", out, "--data", evalWrite(t, "e.txt", []byte("\n\n"))}, 1, "no text"},
		{"utf8", []string{"importance", "--model", dir, "--out", out, "--data", evalWrite(t, "u.txt", []byte("abc\xff"))}, 1, "byte offset 3"},
		{"short", []string{"importance", "--model", dir, "--out", out, "--data", evalWrite(t, "s.txt", []byte("Hello there.")), "--seq-len", "64"}, 1, "fewer than one sequence"},
		{"ids", []string{"importance", "--model", dir, "--out", out, "--data", evalWrite(t, "i.ids", []byte("1 2 70000\n"))}, 1, "this model's tokenizer"},
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

// TestImportanceCommandBadCheckpoint: tensors that disagree with config.json.
func TestImportanceCommandBadCheckpoint(t *testing.T) {
	dir := evalModel(t)
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), bytes.Replace(cfg, []byte(`"num_key_value_heads": 2`), []byte(`"num_key_value_heads": 4`), 1), 0o644)
	code, _, errs := evalRun("importance", "--model", dir, "--out", filepath.Join(t.TempDir(), "s"), "--data", evalWrite(t, "a.txt", []byte(evalText)))
	if code != 1 || !strings.Contains(errs, "k_proj") || !strings.Contains(errs, "disagree") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
