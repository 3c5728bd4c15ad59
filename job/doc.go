// Package job hands autocompress's model-running work (distillation,
// importance, perplexity, the KL proxy) to PyTorch engines and takes the
// results back.
//
// A job is a self-contained directory (CONTRACT.md describes every file):
// contract.json (Contract: the kind, the models with per-file hashes and
// exact per-layer shapes, the tokenizer, the token shards, the recipe, the
// world size, the checkpoint cadence, the outputs), the checkpoints, the
// data as token shards in the layout the engine's own reader takes
// (nanoGPT .bin for torch and AutoModel, Megatron .bin/.idx for
// Megatron-Bridge), the engine's own recipe, requirements.txt, launch.sh
// (ranks started directly with the env:// variables, since torchrun from
// Debian's torch 1.13 fails under Python 3.11) and launch.sbatch.
//
// Emit writes a job from an EmitConfig, refusing before any file is
// written what the engine cannot run (Engines, the table of engines: the
// kinds each runs, the children it reads, the modules it needs). Launch
// prints the commands, runs the job here as its own process group
// (progress.jsonl streamed; cancelling sends SIGTERM and waits for the
// checkpoint; a rerun resumes), or submits it with sbatch. ReadStatus and
// Wait read progress.jsonl and result.json; Ingest checks a done job's
// output (the shape is the student's, the tensors load in package engine,
// the hashes match) before anything goes on from it.
//
// Engine torch runs the reference trainer of package torchref. The
// automodel and megatron-bridge jobs are only emitted and checked here:
// their recipes follow the engines' documented formats, but no test runs
// them.
package job
