#!/usr/bin/env bash
# UNRUN: prepared for a GPU session (issue 20's device checks); no figure
# of it is committed yet. On the device machine, from the repository root:
#
#   bash scripts/device/torchref-h200.sh     # writes $OUT/torchref-h200.json
#
# (a) torchref's model against transformers' Llama/Qwen3 on random weights
# of the real 8B configs, (b) FSDP2 distillation step throughput and MFU of
# a Llama-3.1-8B teacher and a 5.25B child at sequence 4096, (c) importance
# forward tokens/s. Needs torch >= 2.4 with CUDA and transformers (the
# machine's own; nothing is installed). About 5 minutes on one H200.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/torchref-h200}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.version.cuda); sys.exit(0 if torch.cuda.is_available() else 1)'
exec timeout 540 python3 scripts/device/torchref_h200.py "$out"
