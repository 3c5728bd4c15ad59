#!/bin/sh
# lm-evaluation-harness run of the avg8 suite (the paper's eight tests: reasoning, coding, knowledge, instruction following),
# written by autocompress eval --engine lm-eval.
# Tests, harness tasks and few-shot examples:
#   reasoning              gsm8k_cot        8-shot  exact_match,strict-match
#   reasoning              arc_challenge    0-shot  acc_norm,none
#   reasoning              winogrande       0-shot  acc,none
#   coding                 humaneval_greedy 0-shot  pass_at_1,n=1
#   coding                 mbpp             3-shot  pass_at_1,none
#   knowledge              mmlu             5-shot  acc,none
#   knowledge              truthfulqa_mc2   0-shot  acc,none
#   instruction following  ifeval           0-shot  prompt_level_strict_acc,none
# The harness reads its copies of these sets from the Hugging Face Hub (reachable, or cached
# with HF_DATASETS_OFFLINE=1); its MMLU is the canonical 14,042 questions.
# HumanEval and MBPP execute the code the model writes: run this in a sandbox.
# Then: autocompress eval --import out/lm-eval/shots-default/*/results_*.json out/lm-eval/shots-5/*/results_*.json
set -eu
export HF_ALLOW_CODE_EVAL=1
lm_eval --model vllm \
  --model_args pretrained=/models/child,dtype=auto,gpu_memory_utilization=0.8 \
  --tasks gsm8k_cot,arc_challenge,winogrande,humaneval_greedy,mbpp,truthfulqa_mc2,ifeval \
  --confirm_run_unsafe_code \
  --batch_size auto \
  --seed 1234 \
  --output_path out/lm-eval/shots-default
lm_eval --model vllm \
  --model_args pretrained=/models/child,dtype=auto,gpu_memory_utilization=0.8 \
  --tasks mmlu \
  --num_fewshot 5 \
  --batch_size auto \
  --seed 1234 \
  --output_path out/lm-eval/shots-5
