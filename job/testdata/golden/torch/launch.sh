#!/usr/bin/env bash
# autocompress distill job, engine torch, 2 rank(s). See contract.json and CONTRACT.md
# (package job). Run from anywhere: bash launch.sh
set -u
cd "$(dirname "$0")"
export PYTHON="${PYTHON:-python3}"
NPROC=2
if [ "${AUTOCOMPRESS_TORCHRUN:-0}" = 1 ]; then
  torchrun --standalone --nproc_per_node "$NPROC" --no-python "$PYTHON" trainer/autocompress_torch.py contract.json
  status=$?
else
  export MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}" MASTER_PORT="${MASTER_PORT:-29500}" WORLD_SIZE="$NPROC"
  pids=()
  stop() { local q; for q in "${pids[@]}"; do kill -TERM "$q" 2>/dev/null; done; }
  trap stop TERM INT
  for ((r = 0; r < NPROC; r++)); do
    ( export RANK=$r LOCAL_RANK=$r; exec "$PYTHON" trainer/autocompress_torch.py contract.json ) &
    pids+=($!)
  done
  status=0
  for p in "${pids[@]}"; do
    while :; do
      wait "$p"; s=$?
      kill -0 "$p" 2>/dev/null || break
    done
    [ "$status" = 0 ] && status=$s
  done
fi
exit $status
