#!/usr/bin/env bash
# One rank of Megatron-Bridge distillation (Model-Optimizer examples/megatron_bridge/distill.py),
# written by autocompress from contract.json; launch.sh starts one per rank.
# Loss: kd_loss_scale x KD (+ the LM loss with --no_skip_lm_loss); temperature 1 (distill.py has no flag).
# The Megatron checkpoint goes to resume/checkpoints; the HF export of the last iteration to out.
set -eu
exec "$PYTHON" "${DISTILL_PY:?set DISTILL_PY to Model-Optimizer examples/megatron_bridge/distill.py}" \
  --student_hf_path student \
  --teacher_hf_path teacher \
  --tp_size 1 --pp_size 1 \
  --data_paths 1.0 data/train_000 \
  --seed 3 \
  --output_dir resume \
  --seq_length 32 \
  --mbs 2 \
  --gbs 4 \
  --train_iters 4 \
  --kd_loss_scale 1 \
  --no_skip_lm_loss \
  --lr 0.002 \
  --min_lr 0.0002 \
  --lr_warmup_iters 1 \
  --eval_interval 2 \
  --log_interval 1 \
  --hf_export_path out
