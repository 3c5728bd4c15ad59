#!/usr/bin/env bash
# Trains the small hybrid Mamba2 parent (issue #22) with the PyTorch
# reference trainer, through the project's own commands:
#
#   scripts/hybrid/train.sh WORKDIR        (e.g. /work/hybrid-parent)
#
# 1. `autocompress init` writes random weights (seed 1, bf16) of
#    scripts/hybrid/config.json: Nemotron-H, 6 layers "M-M*M-" (three Mamba2
#    mixers of 8 heads x 32 in 2 groups, state 32; one attention layer 4/2
#    heads; two relu² MLPs of 384), hidden 128, the embedded parent's
#    tokenizer (4,096 ids), 1.1M parameters;
# 2. `autocompress distill --engine torch --launch local` trains it with
#    cross-entropy only (--kd-weight 0 --ce-weight 1: the reference trainer
#    skips the teacher's forward, so teacher = student is only hashed) on the
#    embedded sample of the parent's training split, evaluated on 64 rows of
#    parent:validation before and after. The native engine has no Mamba2
#    backward (engine.ErrMambaBackward), so `autocompress train` cannot.
#
# WORKDIR (outside the repository) receives autocompress (the binary), init/
# (the random start), model/ (the trained parent: config.json,
# model.safetensors, tokenizer files), model.job/ (the torch job directory:
# contract.json, progress.jsonl, result.json) and summary.json (distill's
# --json). TOKENS (default 262144 = 128 steps of 16 x 128) sizes the run;
# 6 min wall, 102 CPU-s on a 2-core VM under load (held-out perplexity
# 4197 -> 298 on the 64 rows). Run it under `nice -n 19`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -ne 1 ]; then
  echo "usage: scripts/hybrid/train.sh WORKDIR" >&2
  exit 2
fi
work=$1
mkdir -p "$work"
work=$(cd "$work" && pwd)
case "$work/" in "$root"/*) echo "hybrid/train.sh: keep WORKDIR outside the repository ($root)" >&2; exit 2;; esac
tokens=${TOKENS:-262144}

(cd "$root" && go build -o "$work/autocompress" ./cmd/autocompress)
ac=$work/autocompress

"$ac" init --config "$root/scripts/hybrid/config.json" --out "$work/init" --dtype bf16 --seed 1 --force
cp "$root/parent/model/tokenizer.json" "$root/parent/model/tokenizer_config.json" "$work/init/"

"$ac" distill --engine torch --launch local --emit "$work/model.job" \
  --teacher "$work/init" --student "$work/init" --kd-weight 0 --ce-weight 1 \
  --data parent:train-sample --eval-data parent:validation --eval-rows 64 \
  --tokens "$tokens" --batch 16 --seq-len 128 --lr 3e-3 --min-lr 3e-4 --warmup 8 \
  --seed 1 --out "$work/model" --force --json >"$work/summary.json"

python3 - "$work/model.job/progress.jsonl" <<'EOF'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"val_loss"' in l]
for r in rows:
    print(f"step {r['step']:4d}  held-out loss {r['val_loss']:.4f}  perplexity {math.exp(r['val_loss']):.1f}")
EOF
echo "parent: $work/model"
