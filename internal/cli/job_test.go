package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

// jobArgs is a small distillation of the fixture child with a PyTorch
// engine.
func jobArgs(t *testing.T, engine string, extra ...string) (args []string, out string) {
	t.Helper()
	data, student := distillFixture(t)
	out = filepath.Join(t.TempDir(), "distilled")
	args = append([]string{"distill", "--teacher", "parent", "--student", student, "--data", data, "--tokens", "512",
		"--seq-len", "32", "--batch", "4", "--out", out, "--engine", engine}, extra...)
	return args, out
}

// TestDistillEnginePrint: --engine torch writes OUT.job and prints how to
// run it; job status says it is emitted.
func TestDistillEnginePrint(t *testing.T) {
	args, out := jobArgs(t, "torch", "--world-size", "2")
	code, stdout, stderr := distillRun(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dir := out + ".job"
	for _, want := range []string{"wrote the distill job for torch to " + dir, "bash launch.sh", "sbatch launch.sbatch"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("print wrote --out")
	}
	code, stdout, stderr = distillRun("job", "status", dir)
	if code != 0 || !strings.Contains(stdout, "distill job, engine torch: emitted, step 0 of 4") {
		t.Errorf("job status: exit %d, %q %s", code, stdout, stderr)
	}
}

// TestDistillEngineRefuses: what the job cannot be is refused before any
// work, in the flags' words.
func TestDistillEngineRefuses(t *testing.T) {
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	deci := filepath.Join(t.TempDir(), "deci")
	plan := &prune.Plan{Version: 1, Hidden: indices(192), OutputFormat: prune.FormatDeciLM}
	for l := range 8 {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Neurons: indices(256 + 256*(l%2))})
	}
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: deci}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"world", []string{"--world-size", "3"}, 1, "does not divide among 3 ranks"},
		{"engine", []string{"--engine", "vllm"}, 2, "--engine \"vllm\": want native|automodel|megatron-bridge|torch"},
		{"launch", []string{"--launch", "ssh"}, 2, "--launch \"ssh\": want print|local|slurm"},
		{"no torch", []string{"--launch", "local", "--python", "/nonexistent/python3"}, 1, "cannot import torch"},
		{"megatron per-layer", []string{"--engine", "megatron-bridge", "--student", deci}, 1, "Puzzletron AnyModel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, out := jobArgs(t, "torch", tc.args...)
			code, _, stderr := distillRun(args...)
			if code != tc.code || !strings.Contains(stderr, tc.says) {
				t.Fatalf("exit %d (want %d), stderr %q lacks %q", code, tc.code, stderr, tc.says)
			}
			if _, err := os.Stat(out + ".job"); err == nil {
				t.Error("the job directory was written")
			}
		})
	}
}

// TestDistillEngineSlurm: --launch slurm submits with sbatch (a fake one
// on PATH) and says how to follow the job.
func TestDistillEngineSlurm(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "sbatch"), []byte("#!/bin/sh\necho 777\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	args, out := jobArgs(t, "automodel", "--launch", "slurm")
	code, stdout, stderr := distillRun(args...)
	if code != 0 || !strings.Contains(stdout, "submitted Slurm job 777") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	code, stdout, _ = distillRun("job", "status", "--json", out+".job")
	if code != 0 || !strings.Contains(stdout, `"slurm_job": "777"`) || !strings.Contains(stdout, `"state": "submitted"`) {
		t.Errorf("job status: %d %s", code, stdout)
	}
}

// TestJobUsage: job wants status or wait and a directory.
func TestJobUsage(t *testing.T) {
	code, _, stderr := distillRun("job", "run", "x")
	if code != 2 || !strings.Contains(stderr, "status|wait DIR") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = distillRun("job", "status", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "contract.json") {
		t.Errorf("a directory without a job: exit %d: %s", code, stderr)
	}
}

// TestEvalImportanceEngineUsage: eval with a PyTorch engine needs --emit
// and takes one model on --data; importance's job goes to OUT.job.
func TestEvalImportanceEngineUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"eval", "--model", "parent", "--data", "parent:test", "--engine", "torch"}, 2, "--engine torch needs --emit DIR"},
		{[]string{"eval", "--model", "parent", "--model", "parent", "--data", "parent:test", "--engine", "torch", "--emit", filepath.Join(t.TempDir(), "j")}, 2, "one --model"},
		{[]string{"eval", "--model", "parent", "--data", "parent:test", "--engine", "automodel", "--emit", filepath.Join(t.TempDir(), "j")}, 1, "choose engine torch"},
	} {
		code, _, stderr := distillRun(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("%v: exit %d (want %d), %q lacks %q", tc.args, code, tc.code, stderr, tc.says)
		}
	}
	out := filepath.Join(t.TempDir(), "scores.safetensors")
	code, stdout, stderr := distillRun("importance", "--model", "parent", "--data", "parent:test", "--seqs", "4", "--seq-len", "32", "--out", out, "--engine", "torch")
	if code != 0 || !strings.Contains(stdout, "wrote the importance job for torch to "+out+".job") {
		t.Errorf("importance --engine torch: exit %d, %s %s", code, stdout, stderr)
	}
	code, stdout, _ = distillRun("job", "status", out+".job")
	if code != 0 || !strings.Contains(stdout, "importance job, engine torch: emitted") {
		t.Errorf("job status: %d %s", code, stdout)
	}
}

// cliFakeTrainer stands in for the torch trainer (run by cliFakePython
// with bash): one rank, every step logged, the student copied to out/.
const cliFakeTrainer = `steps=$(sed -n 's/^    "steps": \([0-9]*\),$/\1/p' contract.json)
for ((s = 1; s <= steps; s++)); do echo "{\"step\": $s, \"steps\": $steps, \"loss\": 2.5}" >> progress.jsonl; done
cp -r student out
echo "{\"version\": 1, \"kind\": \"distill\", \"status\": \"done\", \"steps\": $steps, \"tokens\": 512, \"tokens_per_s\": 100, \"world_size\": 1, \"checkpoint\": \"out\", \"losses\": [2.5]}" > result.json
`

// TestDistillEngineLocal: the job written by --launch print is run by the
// same command with --launch local (the same request finds its job), and
// its checked checkpoint lands at --out.
func TestDistillEngineLocal(t *testing.T) {
	args, out := jobArgs(t, "torch")
	if code, _, stderr := distillRun(args...); code != 0 {
		t.Fatalf("print: %s", stderr)
	}
	dir := out + ".job"
	if err := os.WriteFile(filepath.Join(dir, "trainer", "autocompress_torch.py"), []byte(cliFakeTrainer), 0o644); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(py, []byte("#!/usr/bin/env bash\n[ \"$1\" = -c ] && exit 0\nexec bash \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := distillRun(append(args, "--launch", "local", "--python", py)...)
	if code != 0 {
		t.Fatalf("local: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "holds this job already") || !strings.Contains(stdout, "saved "+out+": 4 steps, 512 tokens on 1 rank(s) of torch") {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
		t.Error(err)
	}
}
