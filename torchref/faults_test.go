package torchref

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/autocompress/autocompress/checkpoint"
)

// progressSteps returns the step of every line of the job's progress.jsonl.
func progressSteps(t testing.TB, j *testJob) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, "progress.jsonl"))
	if err != nil {
		return nil
	}
	var steps []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l struct{ Step int }
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			steps = append(steps, l.Step)
		}
	}
	return steps
}

// progressLines returns the job's progress.jsonl lines, decoded.
func progressLines(t testing.TB, j *testJob) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(j.dir, "progress.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("progress.jsonl: %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// startUntil starts the ranks of j and returns them once progress.jsonl
// reports step at least `step`.
func startUntil(t testing.TB, j *testJob, world, step int) []*exec.Cmd {
	t.Helper()
	contract, entry := j.write()
	cmds := ranks(t, entry, contract, world)
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s := progressSteps(t, j)
		if len(s) > 0 && s[len(s)-1] >= step {
			return cmds
		}
		if time.Now().After(deadline) {
			for _, c := range cmds {
				c.Process.Kill()
			}
			t.Fatalf("no progress to step %d after 5 minutes (steps %v)", step, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stateBits returns the float32 bits of every tensor of the job's
// resumable state (weights and both moments).
func stateBits(t testing.TB, j *testJob) map[string][]uint32 {
	t.Helper()
	r, err := checkpoint.Open(filepath.Join(j.dir, "resume", "state.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string][]uint32{}
	for _, info := range r.Tensors() {
		v, err := r.Float32(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		bits := make([]uint32, len(v))
		for i, x := range v {
			bits[i] = math.Float32bits(x)
		}
		out[info.Name] = bits
	}
	return out
}

func sameBits(t *testing.T, what string, a, b map[string][]uint32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors against %d", what, len(a), len(b))
	}
	for name, x := range a {
		y := b[name]
		for i := range x {
			if i >= len(y) || x[i] != y[i] {
				t.Errorf("%s: %s differs first at element %d", what, name, i)
				break
			}
		}
	}
}

// TestFaults: a 2-rank distillation killed with SIGKILL mid-way and run
// again ends bit-identical (weights, both moments, the losses and the
// output checkpoint) to an uninterrupted run; SIGTERM makes both ranks
// checkpoint at the next step boundary and exit 0 (status stopped), and a rerun resumes
// there to the same bits.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: five 2-rank trainer runs (about a minute); run without -short")
	}
	needTorch(t)
	r := distillRecipe{steps: 16, batch: 2, seqLen: 16, warmup: 2, lr: 3e-3, minLR: 3e-4, wd: 0.1, clip: 1,
		temp: 1, kd: 1, ce: 0.1, seed: 5}
	rows := parentRows(t, 32, r.seqLen)
	teacher, student := mustParent(t), deciChild(t)
	job := func() *testJob {
		j := distillJob(t, teacher, student, 2, rows, nil, r)
		j.contract["checkpoint_every"] = 4
		return j
	}
	clean := job()
	contract, entry := clean.write()
	mustRun(t, entry, contract, 2)
	want := stateBits(t, clean)
	wantOut, err := os.ReadFile(filepath.Join(clean.dir, "out", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	finish := func(t *testing.T, j *testJob) {
		t.Helper()
		contract, entry := j.write()
		mustRun(t, entry, contract, 2)
		if st := j.result()["status"]; st != "done" {
			t.Fatalf("rerun ended %v", st)
		}
		sameBits(t, "state after the rerun", want, stateBits(t, j))
		out, err := os.ReadFile(filepath.Join(j.dir, "out", "model.safetensors"))
		if err != nil || !bytes.Equal(out, wantOut) {
			t.Errorf("out/model.safetensors differs from the uninterrupted run's (%v)", err)
		}
		if a, b := clean.result()["losses"], j.result()["losses"]; !jsonEqual(a, b) {
			t.Errorf("losses differ:\n%v\n%v", a, b)
		}
		// The rerun resumed from a checkpoint, not from step 0.
		ones := 0
		for _, s := range progressSteps(t, j) {
			if s == 1 {
				ones++
			}
		}
		if ones != 1 {
			t.Errorf("progress reports step 1 %d times: the rerun started over (steps %v)", ones, progressSteps(t, j))
		}
	}

	t.Run("kill-9", func(t *testing.T) {
		j := job()
		cmds := startUntil(t, j, 2, 6)
		for _, c := range cmds {
			c.Process.Kill() // SIGKILL
		}
		for _, c := range cmds {
			c.Wait()
		}
		if _, err := os.Stat(filepath.Join(j.dir, "result.json")); err == nil {
			t.Fatal("the killed job wrote result.json: it finished before the kill")
		}
		finish(t, j)
	})

	t.Run("sigterm", func(t *testing.T) {
		j := job()
		cmds := startUntil(t, j, 2, 3)
		seen := progressSteps(t, j)
		at := seen[len(seen)-1]
		sent := time.Now()
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGTERM)
		}
		for i, c := range cmds {
			c.Wait()
			if code := c.ProcessState.ExitCode(); code != 0 {
				t.Errorf("rank %d exited %d after SIGTERM, want 0 (stopped, resumable: job/CONTRACT.md)", i, code)
			}
		}
		took := time.Since(sent)
		res := j.result()
		step := int(res["steps"].(float64))
		t.Logf("SIGTERM at step %d: checkpoint at step %d, both ranks gone %.2fs after the signal", at, step, took.Seconds())
		if res["status"] != "stopped" || step < at || step > at+2 {
			t.Errorf("after SIGTERM at step %d: status %v at step %d (want stopped at the next step boundary)", at, res["status"], step)
		}
		if step == r.steps {
			t.Fatal("the job finished before the signal")
		}
		finish(t, j)
	})
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestStopForwardOnly: SIGTERM stops an importance job (nothing to
// checkpoint) at once: exit 0, result.json "stopped".
func TestStopForwardOnly(t *testing.T) {
	needTorch(t)
	const T = 32
	j := newJob(t, "importance", 1, map[string]any{"seq_len": T, "batch": 4})
	j.model("model", mustParent(t))
	j.rows("valid", parentRows(t, 32, T))
	// The first progress line comes after the calibration pass; 24 skip
	// passes of 8 forward passes each follow it (hundreds of times the
	// signal's latency).
	cmds := startUntil(t, j, 1, 32)
	sent := time.Now()
	cmds[0].Process.Signal(syscall.SIGTERM)
	cmds[0].Wait()
	if code := cmds[0].ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	res := j.result()
	t.Logf("stopped %.2fs after the signal: %v", time.Since(sent).Seconds(), res["error"])
	if res["status"] != "stopped" {
		t.Errorf("result %v, want status stopped", res)
	}
}
