//go:build unix

package job

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/progress"
)

// fakeTrainer stands in for the torch trainer (a bash script: the fake
// interpreter runs it with bash). Rank 0 takes the contract's steps,
// appends a progress line per step, checkpoints its step in resume/ every
// two steps and on SIGTERM (then writes a stopped result and exits 0),
// resumes from resume/step, and at the end copies the student to out/ and
// writes a done result. With FAKE_HOLD_AT=N it waits after step N until
// SIGTERM. Other ranks wait for the result. With FAKE_BURN=1 rank 0
// first spends CPU time and holds a 160 MB string.
const fakeTrainer = `set -u
steps=$(sed -n 's/^    "steps": \([0-9]*\),$/\1/p' contract.json)
if [ "${FAKE_BURN:-0}" = 1 ] && [ "$RANK" = 0 ]; then
  big=$(head -c 160000000 /dev/zero | tr '\0' a)
  i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done
  unset big
fi
if [ "$RANK" != 0 ]; then
  trap 'exit 0' TERM
  while [ ! -f result.json ]; do sleep 0.01; done
  exit 0
fi
mkdir -p resume
s=0
if [ -f resume/step ]; then s=$(cat resume/step); echo "{\"event\": \"resumed\", \"step\": $s}" >> progress.jsonl; fi
stop=0
trap 'stop=1' TERM
stopped() { echo $s > resume/step; echo "{\"version\": 1, \"kind\": \"distill\", \"status\": \"stopped\", \"steps\": $s, \"tokens\": 0}" > result.json; exit 0; }
while [ $s -lt $steps ]; do
  [ $stop = 1 ] && stopped
  s=$((s + 1))
  echo "{\"step\": $s, \"steps\": $steps, \"loss\": 2.5, \"tokens_per_s\": 1000}" >> progress.jsonl
  [ $((s % 2)) = 0 ] && echo $s > resume/step
  if [ "${FAKE_HOLD_AT:-0}" = $s ]; then
    while [ $stop = 0 ]; do sleep 0.01; done
  fi
done
cp -r student out
echo "{\"version\": 1, \"kind\": \"distill\", \"engine\": \"torch\", \"status\": \"done\", \"steps\": $s, \"tokens\": $((s * 128)), \"tokens_per_s\": 1000, \"world_size\": 2, \"checkpoint\": \"out\"}" > result.json
`

// fakePython is an interpreter for the tests: "-c import M" succeeds (or
// fails for the module named in its second line), anything else runs
// with bash.
func fakePython(t *testing.T, missing string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	script := "#!/usr/bin/env bash\nmissing=" + missing + "\nif [ \"$1\" = -c ]; then\n  if [ -n \"$missing\" ] && [ \"$2\" = \"import $missing\" ]; then echo \"ModuleNotFoundError: No module named '$missing'\" >&2; exit 1; fi\n  exit 0\nfi\nexec bash \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeJob(t *testing.T, steps int) *Emitted {
	t.Helper()
	c := distillConfig(t, "torch", child(t, "native"))
	c.Recipe.Tokens = int64(steps * 4 * 32)
	e := emit(t, c)
	if err := os.WriteFile(filepath.Join(e.Dir, "trainer", "autocompress_torch.py"), []byte(fakeTrainer), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLaunchLocal: the job runs to its end with its steps reported, its
// output in launch.log; it ingests; a second launch does not run it again.
func TestLaunchLocal(t *testing.T) {
	e := fakeJob(t, 6)
	var steps []int64
	lc := LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, ""), Poll: 5 * time.Millisecond,
		Progress: func(ev progress.Event) {
			if ev.Unit == "step" {
				steps = append(steps, ev.Done)
			}
		}}
	l, err := Launch(context.Background(), lc)
	if err != nil {
		t.Fatal(err)
	}
	if l.Result == nil || l.Result.Status != StatusDone || l.Result.Steps != 6 {
		t.Fatalf("result %+v", l.Result)
	}
	if len(steps) == 0 || steps[len(steps)-1] != 6 {
		t.Errorf("steps reported %v, want them to end at 6", steps)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, LaunchLog)); err != nil {
		t.Error(err)
	}
	in, err := Ingest(e.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if in.Checkpoint != filepath.Join(e.Dir, "out") || in.SHA256["out/config.json"] == "" {
		t.Errorf("ingested %s with hashes %v", in.Checkpoint, in.SHA256)
	}
	s, err := ReadStatus(e.Dir)
	if err != nil || s.State != StatusDone || s.Step != 6 || s.Steps != 6 || s.TokensPerS != 1000 {
		t.Errorf("status %+v, %v", s, err)
	}
	mark := filepath.Join(e.Dir, "progress.jsonl")
	before := readFile(t, mark)
	if _, err := Launch(context.Background(), lc); err != nil {
		t.Fatal(err)
	}
	if string(readFile(t, mark)) != string(before) {
		t.Error("a done job ran again")
	}
}

// TestLaunchInterruptResumes: cancelling a local job sends it SIGTERM and
// waits for its checkpoint (a stopped result); launching it again resumes
// from that step and finishes.
func TestLaunchInterruptResumes(t *testing.T) {
	e := fakeJob(t, 8)
	t.Setenv("FAKE_HOLD_AT", "3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lc := LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, ""), Poll: 5 * time.Millisecond,
		Progress: func(ev progress.Event) {
			if ev.Unit == "step" && ev.Done >= 3 {
				cancel()
			}
		}}
	l, err := Launch(ctx, lc)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted launch: %v", err)
	}
	if l == nil || l.Result == nil || l.Result.Status != StatusStopped || l.Result.Steps != 3 {
		t.Fatalf("interrupted result %+v; launch.log:\n%s", l, readFile(t, filepath.Join(e.Dir, LaunchLog)))
	}
	if got := strings.TrimSpace(string(readFile(t, filepath.Join(e.Dir, "resume", "step")))); got != "3" {
		t.Errorf("checkpointed step %s, want 3", got)
	}
	t.Setenv("FAKE_HOLD_AT", "0")
	var first *progress.Event
	lc.Progress = func(ev progress.Event) {
		if ev.Unit == "step" && first == nil {
			first = &ev
		}
	}
	l, err = Launch(context.Background(), lc)
	if err != nil {
		t.Fatal(err)
	}
	if l.Result.Status != StatusDone || l.Result.Steps != 8 {
		t.Errorf("resumed result %+v", l.Result)
	}
	if first == nil || first.Resumed != 3 || first.Total != 8 {
		t.Errorf("the resumed launch's first step event %+v, want 3 steps resumed of 8", first)
	}
	if !strings.Contains(string(readFile(t, filepath.Join(e.Dir, "progress.jsonl"))), `{"event": "resumed", "step": 3}`) {
		t.Error("the second launch did not resume from step 3")
	}
}

// TestLaunchRefuses: no torch for the interpreter, and a job whose files
// no longer match its contract, are refused before anything runs.
func TestLaunchRefuses(t *testing.T) {
	e := fakeJob(t, 2)
	_, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, "torch")})
	var me *ModuleError
	if !errors.As(err, &me) || me.Module != "torch" || !strings.Contains(err.Error(), "apt-get install python3-torch") {
		t.Fatalf("no torch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.Dir, LaunchLog)); err == nil {
		t.Error("the job ran without torch")
	}
	if err := os.WriteFile(filepath.Join(e.Dir, "data", "train_000.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{LaunchLocal, LaunchSlurm} {
		_, err = Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: mode, Python: fakePython(t, ""), Sbatch: "false"})
		if !errors.As(err, new(*HashError)) {
			t.Errorf("%s launch of a changed job: %v, want a *HashError", mode, err)
		}
	}
}

// TestLaunchEngineMissing: a local AutoModel launch without nemo_automodel
// is refused, naming the module and requirements.txt.
func TestLaunchEngineMissing(t *testing.T) {
	e := emit(t, distillConfig(t, "automodel", child(t, "native")))
	_, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, "nemo_automodel")})
	if !errors.As(err, new(*ModuleError)) || !strings.Contains(err.Error(), "requirements.txt") {
		t.Fatalf("got %v", err)
	}
}

// TestLaunchSlurm: sbatch (a fake one on PATH) is run in the job directory
// on launch.sbatch and its job id recorded in slurm.json; status says
// submitted.
func TestLaunchSlurm(t *testing.T) {
	e := fakeJob(t, 2)
	bin := t.TempDir()
	record := filepath.Join(bin, "args")
	script := "#!/usr/bin/env bash\necho \"$PWD $*\" > " + record + "\necho '4242;cluster'\n"
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	l, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchSlurm})
	if err != nil {
		t.Fatal(err)
	}
	if l.JobID != "4242" {
		t.Errorf("job id %q", l.JobID)
	}
	abs, _ := filepath.EvalSymlinks(e.Dir)
	if got := strings.TrimSpace(string(readFile(t, record))); got != abs+" --parsable launch.sbatch" {
		t.Errorf("sbatch ran as %q", got)
	}
	s, err := ReadStatus(e.Dir)
	if err != nil || s.State != StateSubmitted || s.SlurmJob != "4242" {
		t.Errorf("status %+v, %v", s, err)
	}
}

// TestLaunchPrint: print runs nothing and says the commands.
func TestLaunchPrint(t *testing.T) {
	e := fakeJob(t, 2)
	l, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchPrint, Python: "/usr/bin/python3"})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(l.Commands, "\n")
	for _, want := range []string{"PYTHON=/usr/bin/python3 bash launch.sh", "sbatch launch.sbatch", "autocompress job wait"} {
		if !strings.Contains(all, want) {
			t.Errorf("commands %q lack %q", all, want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Dir, "progress.jsonl")); err == nil {
		t.Error("print ran the job")
	}
}

// TestIngestRefusesWrongShape: an output whose config is not the
// student's shape is refused.
func TestIngestRefusesWrongShape(t *testing.T) {
	e := fakeJob(t, 2)
	if _, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, ""), Poll: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(e.Dir, "out", "config.json")
	os.Remove(out)
	if err := os.WriteFile(out, readFile(t, filepath.Join(e.Dir, "teacher", "config.json")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Ingest(e.Dir)
	var ie *IngestError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "differs from the student's") {
		t.Fatalf("got %v", err)
	}
}

// TestIngestImportance: an importance result's scores load, and get the
// model's and the rows' identities from the Go side.
func TestIngestImportance(t *testing.T) {
	c := EmitConfig{Kind: Importance, Engine: "torch", Dir: filepath.Join(t.TempDir(), "job"), Model: parentDir(t),
		Data: []string{"parent:test"}, Recipe: Recipe{SeqLen: 32, Batch: 4}, Rows: 4}
	e := emit(t, c)
	m, err := engine.Load(filepath.Join(e.Dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := validRows(e.Dir, e.Contract)
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	sc, err := importance.Compute(context.Background(), m, rows, importance.Options{NoSkipLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	sc.ModelHash, sc.DataHash = "", ""
	if err := sc.Save(filepath.Join(e.Dir, "importance.safetensors")); err != nil {
		t.Fatal(err)
	}
	res := `{"version": 1, "kind": "importance", "status": "done", "steps": 4, "tokens": 128, "importance": "importance.safetensors"}`
	if err := os.WriteFile(filepath.Join(e.Dir, "result.json"), []byte(res), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Ingest(e.Dir)
	if err != nil {
		t.Fatal(err)
	}
	wantModel, _ := importance.HashModelDir(parentDir(t))
	if in.Scores == nil || in.Scores.ModelHash != wantModel || in.Scores.DataHash != dataset.HashRows(rows) {
		t.Errorf("scores identities %q %q, want %q %q", in.Scores.ModelHash, in.Scores.DataHash, wantModel, dataset.HashRows(rows))
	}
}

// glooRanks is a stand-in trainer that needs torch: the ranks launch.sh
// starts meet over gloo from the env:// variables and all-reduce their
// rank numbers; rank 0 logs the sum and writes the result.
const glooRanks = `import json, shutil, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
r, w = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
c = json.load(open(sys.argv[1]))
o = c["outputs"]
if r == 0:
    with open(o["progress"], "a") as f:
        f.write(json.dumps({"step": 1, "steps": 1, "loss": float(t.item())}) + "\n")
    shutil.copytree(c["student"]["path"], o["checkpoint"])
    json.dump({"version": 1, "kind": "distill", "status": "done", "steps": 1, "tokens": 1,
               "world_size": w, "checkpoint": o["checkpoint"]}, open(o["result"], "w"))
dist.barrier()
dist.destroy_process_group()
`

// TestLaunchGlooRanks: launch.sh's ranks, started without torchrun,
// rendezvous over gloo with Debian's torch 1.13 (or any torch).
func TestLaunchGlooRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two torch processes")
	}
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skip("no torch for /usr/bin/python3 (Debian: apt-get install python3-torch)")
	}
	e := fakeJob(t, 2)
	if err := os.WriteFile(filepath.Join(e.Dir, "trainer", "autocompress_torch.py"), []byte(glooRanks), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: python, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("%v\n%s", err, readFile(t, filepath.Join(e.Dir, LaunchLog)))
	}
	if l.Result.WorldSize != 2 {
		t.Errorf("world size %d, want 2", l.Result.WorldSize)
	}
	if !strings.Contains(string(readFile(t, filepath.Join(e.Dir, "progress.jsonl"))), `"loss": 3.0`) {
		t.Error("the two ranks did not all-reduce 1 + 2")
	}
}

// TestLaunchUsage: a local launch reports the CPU time and the peak
// resident set of the job's processes (the ranks under launch.sh), not
// this process's: rank 0 here spends CPU time and holds 160 MB.
func TestLaunchUsage(t *testing.T) {
	t.Setenv("FAKE_BURN", "1")
	e := fakeJob(t, 2)
	l, err := Launch(context.Background(), LaunchConfig{Dir: e.Dir, Mode: LaunchLocal, Python: fakePython(t, ""), Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if l.CPUSeconds < 0.1 {
		t.Errorf("CPU %.3f s: the job's busy loop is not counted", l.CPUSeconds)
	}
	if runtime.GOOS == "linux" && l.PeakRSSBytes < 160e6 {
		t.Errorf("peak RSS %d B: the rank's 160 MB string is not counted", l.PeakRSSBytes)
	}
}
