// Package torchref is autocompress's portable PyTorch reference trainer:
// Python files embedded in the binary and written out with every job whose
// engine is "torch" (see package job and job/CONTRACT.md). The trainer runs
// the Llama family as package engine runs it, on torch 1.13 (Debian's
// python3-torch, CPU, gloo) and on torch 2.x (CUDA, NCCL, FSDP2).
//
// The files (trainer/): acmodel.py, the model and its config.json readers
// (Llama, Mistral, Qwen2, Qwen3, DeciLM block_configs, Qwen3-MoE,
// Mixtral and gpt-oss with its attention sinks, sliding windows and YaRN);
// acmoe.py, their mixture-of-experts blocks; acmamba.py,
// Nemotron-H's Mamba2 hybrid; acio.py,
// safetensors, nanoGPT token shards and the contract's hashes, by hand;
// autocompress_torch.py, the entry point that runs a contract's kind
// (distill, importance, eval, proxy) on env:// ranks, with its resumable
// state and SIGTERM handling.
//
// The package's tests are the trainer's parity evidence against the
// native stages, run on Debian's torch 1.13 with two gloo ranks started
// by hand (they skip without /usr/bin/python3 and its torch): logits
// (TestLogitsParity), importance scores (TestImportanceParity),
// perplexity (TestPerplexityParity), the proxy KL (TestProxyParity),
// distillation losses step by step (TestDistillParity, TestDistillTopKParity),
// bit-identical resumption after SIGKILL and SIGTERM (TestFaults), and
// contracts refused before any work (TestRefusals).
package torchref

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed trainer
var files embed.FS

// Entry is the trainer's entry point, relative to the directory Write
// fills: launch it as `python3 Entry CONTRACT.json`.
const Entry = "trainer/autocompress_torch.py"

// Write writes the trainer's files under dir (dir/trainer/...), creating
// the folders it needs. dir is a job directory being assembled, not a
// user's file: existing trainer files there are replaced.
func Write(dir string) error {
	return fs.WalkDir(files, "trainer", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755) //output:inside the job directory the caller assembles
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return fmt.Errorf("torchref: reading embedded %s: %w", p, err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil { //output:inside the job directory the caller assembles
			return fmt.Errorf("torchref: writing %s: %w", dst, err)
		}
		return nil
	})
}
