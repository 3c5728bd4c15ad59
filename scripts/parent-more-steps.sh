#!/bin/sh
# Does further training of the embedded parent still pay? (issue #9: for the
# first parent, 400 more steps lowered its test perplexity 70.9 -> 66.3.)
#
# Fine-tunes the embedded parent STEPS more steps (default 400) on its own
# training split with plain cross-entropy (autocompress distill --kd-weight 0
# --ce-weight 1, so no teacher pass) at a constant learning rate LR (default
# 3e-4, the final LR of scripts/train-parent.sh's cosine), batch 16 x 128
# tokens, weight decay 0.1, clip 1, seed 1, fresh AdamW moments; then scores
# the parent and the fine-tuned copy on the whole test split with
# `autocompress eval --data parent:test` (the README's 70.9-comparable figure)
# and prints both.
#
# Usage (from the module root, assets unpacked by scripts/fetch-assets.sh):
#   WORK=/tmp/parent-more nice -n 10 sh scripts/parent-more-steps.sh
set -eu
STEPS=${STEPS:-400}
LR=${LR:-3e-4}
WORK=${WORK:-/tmp/parent-more}
AC=${AC:-$WORK/autocompress}
mkdir -p "$WORK"
[ -x "$AC" ] || go build -o "$AC" ./cmd/autocompress

tokens=$((STEPS * 16 * 128))
"$AC" distill --teacher parent --student parent --data parent:train --tokens "$tokens" \
	--batch 16 --seq-len 128 --lr "$LR" --min-lr "$LR" --warmup 0 --weight-decay 0.1 --clip 1 \
	--kd-weight 0 --ce-weight 1 --seed 1 --save-every 50 --out "$WORK/more" --force --json >"$WORK/more.json"
"$AC" eval --model parent --data parent:test --json >"$WORK/before.json" 2>"$WORK/before.err"
"$AC" eval --model "$WORK/more" --data parent:test --json >"$WORK/after.json" 2>"$WORK/after.err"

field() { sed -n "s/^  \"$2\": \([0-9.e+-]*\),*$/\1/p" "$1" | head -1; }
echo "parent:test, $(field "$WORK/before.json" tokens) tokens (autocompress eval, packed 128-token windows):"
printf '  parent:                        perplexity %.3f, %.4f bits per byte\n' \
	"$(field "$WORK/before.json" perplexity)" "$(field "$WORK/before.json" bits_per_byte)"
printf '  + %d steps (%d tokens) at %s: perplexity %.3f, %.4f bits per byte\n' "$STEPS" "$tokens" "$LR" \
	"$(field "$WORK/after.json" perplexity)" "$(field "$WORK/after.json" bits_per_byte)"
printf '  fine-tuning: %.0f s, %.0f tokens/s, last training loss %.4f\n' \
	"$(field "$WORK/more.json" elapsed_s)" "$(field "$WORK/more.json" tokens_per_s)" "$(field "$WORK/more.json" train_loss)"
