// Package prune cuts a HuggingFace checkpoint down to what a pruning plan
// keeps and writes the child checkpoint.
//
// # Plans
//
// A Plan (JSON, version 1, documented in PLAN.md) lists the kept hidden
// channels and, per parent layer, the kept query heads, KV groups, MLP
// neurons, Mamba heads and the channels within them, and routed experts,
// and which layers or sub-blocks are removed. ReadPlan checks its
// structure; Resolve checks it against the parent model (grouped-query and
// Mamba groups kept evenly, the same expert count in every MoE layer and
// at least the router's top-k unless the plan lowers it, indices in range,
// formats) and computes the child's Layout. PlanFromScores builds a plan
// from importance scores and target widths, KeepExperts adds the experts
// kept by expert scores (importance.ExpertScores).
//
// # Slicing
//
// Layout.Map turns the parent's tensor list into child tensors, each a
// Selection of rows and columns of one parent tensor (an index of -1 is a
// zero row or column, for padding). The rules read each tensor's kind and
// sub-block from the parent's family (architecture.TensorSpec), never its
// name, and name it as the child's tensor of the same kind: a family added
// in package architecture is pruned without a change here. Gather applies a selection to bytes of
// any element size. Prune streams every tensor through that selection with
// positioned reads, so memory stays at a few MiB of buffers whatever the
// model size; the output is sharded like the parent and built in a
// temporary directory that is renamed into place only after the target
// engine's validator (package export) accepted it.
//
// # Formats
//
// The child is written in the parent's native architecture, as DeciLM
// block_configs (Llama family, per-layer KV groups and FFN widths padded to
// multiples of 256, removed sub-blocks), or made uniform by zero-padding
// every layer to the widest one (FormatPadded), which leaves the function
// unchanged. A DeciLM child gets autocompress's own configuration module
// (package remotecode: configuration_decilm.py and block_config.py), which
// vLLM, SGLang and TensorRT-LLM load through transformers' AutoConfig; its
// auto_map names only modules the child contains (PLAN.md, "Remote code of
// a DeciLM child").
package prune
