package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test split's figures in parent/README.md, from
// scripts/finish-parent.sh (autocompress eval --model parent --data
// parent:test --json); the token count is the parent tokenizer's, exact.
const (
	readmeTestTokens      = 210208
	readmeTestBytes       = 864820
	readmeTestPerplexity  = 47.392
	readmeTestBitsPerByte = 1.3530
)

// TestEvalParentTextWithoutAssets: the embedded parts of the parent's text
// need no testdata/ext (--assets points at an empty directory): a suite cut
// from parent:test, and (without -short) the test split's perplexity as
// parent/README.md gives it. parent:train, which is not embedded, fails
// naming the script that fetches the corpora.
func TestEvalParentTextWithoutAssets(t *testing.T) {
	none := t.TempDir()
	suite := filepath.Join(t.TempDir(), "suite.jsonl")
	code, out, errs := evalRun("eval", "--build", suite, "--data", "parent:test", "--assets", none, "--items", "5", "--json")
	if code != 0 {
		t.Fatalf("--build from parent:test: exit %d: %s", code, errs)
	}
	var b evalBuildJSON
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Cloze != 5 || b.Choice != 5 {
		t.Errorf("--build: %v %+v", err, b)
	}
	if fi, err := os.Stat(suite); err != nil || fi.Size() == 0 {
		t.Errorf("suite: %v", err)
	}

	code, _, errs = evalRun("eval", "--model", "parent", "--data", "parent:train", "--assets", none)
	if code != 1 || !strings.Contains(errs, "scripts/fetch-assets.sh") || !strings.Contains(errs, "parent:train-sample") {
		t.Errorf("parent:train without assets: exit %d: %s", code, errs)
	}

	if testing.Short() {
		t.Logf("-short: not scoring the whole test split (%d tokens)", readmeTestTokens)
		return
	}
	code, out, errs = evalRun("eval", "--model", "parent", "--data", "parent:test", "--assets", none, "--json")
	if code != 0 {
		t.Fatalf("parent:test: exit %d: %s", code, errs)
	}
	var r struct {
		Tokens      int     `json:"tokens"`
		Bytes       int     `json:"bytes"`
		Perplexity  float64 `json:"perplexity"`
		BitsPerByte float64 `json:"bits_per_byte"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	// Another sgemm backend moves the last digits: 0.1 % of slack.
	if r.Tokens != readmeTestTokens || r.Bytes != readmeTestBytes ||
		math.Abs(r.Perplexity/readmeTestPerplexity-1) > 1e-3 || math.Abs(r.BitsPerByte/readmeTestBitsPerByte-1) > 1e-3 {
		t.Errorf("parent:test: %+v; README.md says %d tokens, %d bytes, perplexity %.3f, %.4f bits/byte",
			r, readmeTestTokens, readmeTestBytes, readmeTestPerplexity, readmeTestBitsPerByte)
	}
}

// TestImportanceParentText: importance calibrates on the embedded
// validation text with no assets, its documents ended by end-of-text.
func TestImportanceParentText(t *testing.T) {
	out := filepath.Join(t.TempDir(), "scores.safetensors")
	code, stdout, errs := evalRun("importance", "--model", "parent", "--data", "parent:validation", "--assets", t.TempDir(),
		"--out", out, "--seqs", "2", "--seq-len", "32", "--no-skip-loss", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var sum struct {
		BI     []float64 `json:"layer_bi"`
		Tokens int       `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || len(sum.BI) != 8 || sum.Tokens != 64 {
		t.Errorf("json %v: %s", err, stdout)
	}
	code, _, errs = evalRun("importance", "--model", "parent", "--data", "parent:dev", "--out", out)
	if code != 2 || !strings.Contains(errs, `unknown split "dev"`) {
		t.Errorf("parent:dev: exit %d: %s", code, errs)
	}
}
