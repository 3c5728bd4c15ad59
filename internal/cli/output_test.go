package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// train --out refuses an existing directory without --force (it used to
// delete it, unrelated files included), and the model it writes is readable
// by others under the usual umask (it used to be 0700/0600).
func TestTrainOutNeedsForce(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	data := evalWrite(t, "train.txt", []byte(strings.Repeat(evalText+"\n\n", 3)))
	out := filepath.Join(t.TempDir(), "model")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--config", cfg, "--out", out, "--bpe-merges", "20",
		"--steps", "2", "--batch", "1", "--seq-len", "8", "--eval-every", "0", "--log-every", "1", "--data", data}
	code, _, errs := evalRun(args...)
	if code != 1 || !strings.Contains(errs, "already exists") || !strings.Contains(errs, "--force") {
		t.Fatalf("train over an existing --out: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(mine); err != nil || string(b) != "mine" {
		t.Fatalf("train touched the existing directory: %v", err)
	}
	if _, err := os.Stat(out + ".ckpt"); err == nil {
		t.Error("train refused the output but wrote a checkpoint")
	}
	code, _, errs = evalRun(append(args, "--force")...)
	if code != 0 {
		t.Fatalf("train --force: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(mine); err == nil {
		t.Error("--force kept the old directory's files")
	}
	if got := perm(t, out); got != 0o755 {
		t.Errorf("model directory mode %#o, want 0755 under umask 022", got)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "generation_config.json", "tokenizer_config.json"} {
		if got := perm(t, filepath.Join(out, f)); got != 0o644 {
			t.Errorf("%s mode %#o, want 0644 under umask 022", f, got)
		}
	}
	if got := perm(t, out+".ckpt"); got != 0o644 {
		t.Errorf("checkpoint mode %#o, want 0644 under umask 022", got)
	}
	ents, _ := os.ReadDir(filepath.Dir(out))
	for _, e := range ents {
		if strings.Contains(e.Name(), "tmp") || strings.Contains(e.Name(), "saving") {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestOutputsNeedForce: every command that writes a file the user names
// refuses an existing one without --force, leaves it as it was, and
// replaces it with --force.
func TestOutputsNeedForce(t *testing.T) {
	dir := t.TempDir()
	scenarios := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(scenarios, []byte("id,model,gpu,engine,isl,osl,concurrency\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1024,256,16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	user := writeUserMeasurements(t, dir)
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	data := evalWrite(t, "train.txt", []byte(strings.Repeat(evalText+"\n\n", 3)))
	tests := []struct {
		name string
		args func(mine string) []string
	}{
		{"estimate --out", func(mine string) []string {
			return []string{"estimate", "--scenarios", scenarios, "--out", mine}
		}},
		{"calibrate --out", func(mine string) []string {
			return []string{"calibrate", "--user", user, "--user-only", "--iter", "60", "--no-validate", "--out", mine}
		}},
		{"train --checkpoint", func(mine string) []string {
			return []string{"train", "--config", cfg, "--out", filepath.Join(t.TempDir(), "model"), "--checkpoint", mine,
				"--bpe-merges", "20", "--steps", "2", "--batch", "1", "--seq-len", "8", "--eval-every", "0", "--log-every", "1", "--data", data}
		}},
		{"train --log", func(mine string) []string {
			return []string{"train", "--config", cfg, "--out", filepath.Join(t.TempDir(), "model"), "--log", mine,
				"--bpe-merges", "20", "--steps", "2", "--batch", "1", "--seq-len", "8", "--eval-every", "0", "--log-every", "1", "--data", data}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mine := filepath.Join(t.TempDir(), "mine")
			if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errs := evalRun(tc.args(mine)...)
			if code != 1 || !strings.Contains(errs, "already exists") || !strings.Contains(errs, "--force") {
				t.Fatalf("over an existing file: exit %d: %s", code, errs)
			}
			if b, _ := os.ReadFile(mine); string(b) != "mine" {
				t.Fatalf("replaced without --force: %q", b)
			}
			if code, _, errs := evalRun(append(tc.args(mine), "--force")...); code != 0 {
				t.Fatalf("--force: exit %d: %s", code, errs)
			}
			if b, _ := os.ReadFile(mine); string(b) == "mine" {
				t.Error("--force left the old file")
			}
		})
	}
}
