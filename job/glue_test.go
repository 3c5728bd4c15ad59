//go:build unix

package job

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runGlue runs glue/result.py in the job directory with the engine's exit
// status; Python's standard library is all it needs.
func runGlue(t *testing.T, dir, status string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the result glue")
	}
	cmd := exec.Command(py, "glue/result.py", status)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("glue/result.py: %v\n%s", err, out)
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

// TestGlueAutoModel: AutoModel's training.jsonl and consolidated HF
// checkpoint (as a finished KD recipe leaves them) become progress lines,
// out/ and a done result.json that Ingest takes, hashes included.
func TestGlueAutoModel(t *testing.T) {
	e := emit(t, distillConfig(t, "automodel", child(t, "native")))
	ckpt := filepath.Join(e.Dir, "resume", "epoch_0_step_3", "model")
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join(e.Dir, "student"), filepath.Join(ckpt, "consolidated"))
	log := `{"step": 1, "loss": 3.5, "lr": 0.001}` + "\n" + `{"step": 2, "loss": 3.25}` + "\n" + `{"step": 3, "loss": 3.0}` + "\n" + `{"step": 4, "loss": 2.75}` + "\n"
	if err := os.WriteFile(filepath.Join(e.Dir, "resume", "training.jsonl"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	runGlue(t, e.Dir, "0")
	in, err := Ingest(e.Dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, readFile(t, filepath.Join(e.Dir, "result.json")))
	}
	if r := in.Result; r.Steps != 4 || len(r.Losses) != 4 || r.Losses[3] != 2.75 || len(r.SHA256) == 0 || r.Engine != "automodel" {
		t.Errorf("result %+v", r)
	}
	if n := strings.Count(string(readFile(t, filepath.Join(e.Dir, "progress.jsonl"))), `"step"`); n != 4 {
		t.Errorf("%d progress lines, want 4", n)
	}
}

// TestGlueMegatron: Megatron's "iteration N/ M ... lm loss" lines in the
// launch log and the HF export in out/ become a done result; a failed
// engine a failed one.
func TestGlueMegatron(t *testing.T) {
	e := emit(t, distillConfig(t, "megatron-bridge", child(t, "native")))
	log := " [2026-08-01 10:00:00] iteration        1/       4 | consumed samples: 4 | lm loss: 1.053E+01 | kd loss: 2.5E+00 |\n" +
		" [2026-08-01 10:00:01] iteration        2/       4 | consumed samples: 8 | lm loss: 9.5E+00 |\n"
	if err := os.WriteFile(filepath.Join(e.Dir, LaunchLog), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	runGlue(t, e.Dir, "1")
	s, err := ReadStatus(e.Dir)
	if err != nil || s.Result == nil || s.Result.Status != StatusFailed || !strings.Contains(s.Result.Error, "status 1") {
		t.Fatalf("failed engine: %+v %v", s, err)
	}
	copyTree(t, filepath.Join(e.Dir, "student"), filepath.Join(e.Dir, "out"))
	os.Remove(filepath.Join(e.Dir, "progress.jsonl"))
	runGlue(t, e.Dir, "0")
	in, err := Ingest(e.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if r := in.Result; r.Steps != 2 || r.Losses[0] != 10.53 || r.Losses[1] != 9.5 {
		t.Errorf("result %+v", r)
	}
}
