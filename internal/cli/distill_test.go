package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// distillText is plain English written for these tests.
const distillText = `The committee met again in the autumn, when the roads were dry and the
harvest was in. Its members agreed that the bridge over the river should be
rebuilt in stone, and that the cost should be shared by the towns on either
bank. Some thought the old wooden bridge would last another ten years; others
said it had already lasted twenty years too long. Mrs. Hale listened to the
debate from the back of the room. She had crossed that bridge every week of
her life, and she did not believe that stone would make it any safer. What
made a bridge safe, she said when at last they asked her, was that people
looked after it. The President told the Congress that the nation had grown in
strength and in wealth, that its trade had increased, and that its people were
at peace with their neighbours.`

func distillRun(args ...string) (int, string, string) {
	var out, errs bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errs)
	return code, out.String(), errs.String()
}

// distillFixture writes the training text and a child of the embedded
// parent (hidden 128, FFN 256, 6 layers) and returns their paths.
func distillFixture(t *testing.T) (data, student string) {
	t.Helper()
	dir := t.TempDir()
	data = filepath.Join(dir, "train.txt")
	if err := os.WriteFile(data, []byte(strings.Repeat(distillText+"\n\n", 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1, Hidden: indices(128)}
	for l := range 8 {
		lp := prune.LayerPlan{Layer: l, Neurons: indices(256)}
		if l == 2 || l == 5 {
			lp = prune.LayerPlan{Layer: l, Remove: true}
		}
		plan.Layers = append(plan.Layers, lp)
	}
	student = filepath.Join(dir, "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: student}); err != nil {
		t.Fatal(err)
	}
	return data, student
}

func TestDistillUsage(t *testing.T) {
	data, student := distillFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	base := []string{"distill", "--teacher", "parent", "--student", student, "--data", data, "--out", out}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"distill", "--student", student, "--data", data, "--tokens", "64", "--out", out}, "--teacher and --student are required"},
		{append(base[:len(base):len(base)], "--tokens", "0"), "-tokens"},
		{append(base[:len(base):len(base)], "--tokens", "64", "--kd-weight", "0"), "not both 0"},
		{append(base[:len(base):len(base)], "--tokens", "64", "--temperature", "-1"), "-temperature"},
		{append(base[:len(base):len(base)], "--tokens", "64", "--min-lr", "1"), "--min-lr"},
		{[]string{"distill", "--teacher", "parent", "--student", filepath.Join(t.TempDir(), "nope"), "--data", data, "--tokens", "64", "--out", out}, "no such file"},
		{[]string{"distill", "--teacher", "parent", "--student", student, "--data", "parent:dev", "--tokens", "64", "--out", out}, `unknown split "dev"`},
	}
	for _, tc := range tests {
		code, _, errs := distillRun(tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want 2 with %q:\n%s", tc.args[1:], code, tc.want, errs)
		}
	}
	os.MkdirAll(out, 0o755)
	code, _, errs := distillRun(append(base[:len(base):len(base)], "--tokens", "64")...)
	if code != ExistsExit || !strings.Contains(errs, "--force") {
		t.Errorf("existing --out: exit %d: %s", code, errs)
	}
}

// TestDistillKillResume builds the binary, runs a distillation to the end,
// runs it again and kills it with SIGKILL between checkpoints, resumes it,
// and compares the outputs and final checkpoints byte for byte.
func TestDistillKillResume(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to build the binary with")
	}
	data, student := distillFixture(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "autocompress")
	build := exec.Command(goBin, "build", "-o", bin, "../../cmd/autocompress")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	const steps = 60
	args := func(out string) []string {
		return []string{"distill", "--teacher", "parent", "--student", student, "--data", data, "--out", out,
			"--tokens", "3840", "--batch", "2", "--seq-len", "32", "--save-every", "5", "--temperature", "2",
			"--ce-weight", "0.5", "--lr", "2e-3", "--json"}
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if out, err := exec.Command(bin, args(a)...).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}

	// Kill the second run once its log shows step 12 (past the checkpoint
	// at step 10, before the next at 15).
	cmd := exec.Command(bin, args(b)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killedAt := 0
	deadline := time.Now().Add(2 * time.Minute)
	for killedAt == 0 && time.Now().Before(deadline) {
		if s := lastLoggedStep(b + ".log.jsonl"); s >= 12 {
			cmd.Process.Signal(syscall.SIGKILL)
			killedAt = s
		}
		time.Sleep(2 * time.Millisecond)
	}
	err = cmd.Wait()
	if killedAt == 0 {
		t.Fatalf("the run never reached step 12: %v\n%s", err, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the run ended by itself (%v) before the kill at step %d", err, killedAt)
	}
	if _, err := os.Stat(b); err == nil {
		t.Fatal("a killed run left an output directory")
	}
	out, err := exec.Command(bin, append(args(b), "--resume")...).CombinedOutput()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	var sum struct {
		ResumedAt int `json:"resumed_at"`
		Steps     int `json:"steps"`
	}
	if i := bytes.IndexByte(out, '{'); i < 0 || json.Unmarshal(out[i:], &sum) != nil || sum.ResumedAt == 0 || sum.ResumedAt > killedAt || sum.Steps != steps {
		t.Fatalf("killed at step %d; resumed run said:\n%s", killedAt, out)
	}
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the uninterrupted and the killed-and-resumed run", f)
		}
	}
	x, _ := os.ReadFile(a + ".ckpt")
	y, _ := os.ReadFile(b + ".ckpt")
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Error("final checkpoints (float32 weights and AdamW moments) differ")
	}
	// The log has each step once.
	if n := countLogSteps(t, b+".log.jsonl"); n != steps {
		t.Errorf("resumed log has %d step lines, want %d", n, steps)
	}
	t.Logf("killed at step %d, resumed from %d; outputs identical", killedAt, sum.ResumedAt)
}

func lastLoggedStep(path string) int {
	b, _ := os.ReadFile(path)
	last := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var x struct{ Step int }
		if json.Unmarshal(sc.Bytes(), &x) == nil {
			last = x.Step
		}
	}
	return last
}

func countLogSteps(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	seen := map[int]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var x struct {
			Step int
			Loss *float64
		}
		if json.Unmarshal(sc.Bytes(), &x) == nil && x.Loss != nil {
			if seen[x.Step] {
				t.Errorf("step %d logged twice", x.Step)
			}
			seen[x.Step] = true
			n++
		}
	}
	return n
}

// indices returns 0, 1, …, n-1: a plan keeping the first n units.
func indices(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
