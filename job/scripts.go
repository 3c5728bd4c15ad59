package job

import (
	"fmt"
	"strconv"
	"strings"
)

// requirements is requirements.txt of an engine.
func requirements(e EngineInfo) string {
	return "# " + e.Name + " job written by autocompress; pip install -r requirements.txt\n" + strings.Join(e.Requirements, "\n") + "\n"
}

// launchScript is launch.sh: world_size ranks on this machine started
// directly with the env:// variables (torchrun from Debian's torch 1.13
// fails under Python 3.11), or torchrun when AUTOCOMPRESS_TORCHRUN=1.
// SIGTERM/SIGINT are passed to every rank as SIGTERM and waited for; the
// glue (if any) turns the engine's logs into result.json at the end.
func launchScript(c *Contract, e EngineInfo, entry string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `#!/usr/bin/env bash
# autocompress %s job, engine %s, %d rank(s). See contract.json and CONTRACT.md
# (package job). Run from anywhere: bash launch.sh
set -u
cd "$(dirname "$0")"
export PYTHON="${PYTHON:-python3}"
NPROC=%d
if [ "${AUTOCOMPRESS_TORCHRUN:-0}" = 1 ]; then
  torchrun --standalone --nproc_per_node "$NPROC" --no-python %s
  status=$?
else
  export MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}" MASTER_PORT="${MASTER_PORT:-29500}" WORLD_SIZE="$NPROC"
  pids=()
  stop() { local q; for q in "${pids[@]}"; do kill -TERM "$q" 2>/dev/null; done; }
  trap stop TERM INT
  for ((r = 0; r < NPROC; r++)); do
    ( export RANK=$r LOCAL_RANK=$r; exec %s ) &
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
`, c.Kind, e.Name, c.WorldSize, c.WorldSize, entry, entry)
	if e.Name != "torch" {
		b.WriteString(`"$PYTHON" glue/result.py "$status" || status=1
`)
	}
	b.WriteString("exit $status\n")
	return b.String()
}

// sbatchScript is launch.sbatch: one Slurm task per rank, each setting the
// env:// variables from Slurm's.
func sbatchScript(c *Contract, e EngineInfo, entry string, s SlurmResources) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/usr/bin/env bash\n#SBATCH --job-name=autocompress-%s\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=%d\n#SBATCH --gpus-per-node=%d\n#SBATCH --time=%s\n",
		c.Kind, s.Nodes, c.WorldSize/s.Nodes, s.GPUsPerNode, s.Time)
	if s.Partition != "" {
		fmt.Fprintf(&b, "#SBATCH --partition=%s\n", s.Partition)
	}
	if s.Account != "" {
		fmt.Fprintf(&b, "#SBATCH --account=%s\n", s.Account)
	}
	fmt.Fprintf(&b, `#SBATCH --output=slurm-%%j.log
#SBATCH --signal=TERM@120
# autocompress %s job, engine %s, %d rank(s): sbatch launch.sbatch from the job directory.
set -u
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")}"
export PYTHON="${PYTHON:-python3}"
export MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
export MASTER_PORT="${MASTER_PORT:-29500}"
srun --kill-on-bad-exit=1 bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS; exec %s'
status=$?
`, c.Kind, e.Name, c.WorldSize, entry)
	if e.Name != "torch" {
		b.WriteString(`"$PYTHON" glue/result.py "$status" || status=1
`)
	}
	b.WriteString("exit $status\n")
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// autoModelRecipe is recipe.yaml: AutoModel's knowledge-distillation recipe
// (docs/guides/llm/knowledge-distillation.mdx, examples/llm_kd/llama3_2/
// llama3_2_1b_kd.yaml) with the nanoGPT shard reader
// (examples/llm_pretrain/nanogpt_pretrain.yaml) and the LR scheduler keys
// of examples/llm_pretrain/qwen3_8b_pretrain.yaml, from the contract.
func autoModelRecipe(c *Contract) string {
	r := c.Recipe
	remote := func(m *Model) string {
		if m.Shape.Format == FormatDeciLM {
			return "  trust_remote_code: true  # DeciLM block_configs (nemo_automodel _transformers/auto_model.py shim)\n"
		}
		return ""
	}
	list := func(xs []string) string { return "[" + strings.Join(xs, ", ") + "]" }
	ratio := r.KDWeight / (r.KDWeight + r.CEWeight)
	var b strings.Builder
	fmt.Fprintf(&b, `# AutoModel knowledge-distillation recipe written by autocompress from contract.json.
# Run: bash launch.sh (ranks started directly) or automodel recipe.yaml --nproc-per-node %d.
# Loss: (1 - kd_ratio) x CE + kd_ratio x KD, kd_ratio = kd_weight / (kd_weight + ce_weight)
# (the contract's kd_weight x KD + ce_weight x CE up to the factor kd_weight + ce_weight).
recipe:
  _target_: nemo_automodel.recipes.llm.kd.KnowledgeDistillationRecipeForNextTokenPrediction

step_scheduler:
  global_batch_size: %d
  local_batch_size: %d
  max_steps: %d
  ckpt_every_steps: %d
  val_every_steps: %d
  num_epochs: 1

dist_env:
  backend: nccl
  timeout_minutes: 10

rng:
  _target_: nemo_automodel.components.training.rng.StatefulRNG
  seed: %d
  ranked: true

model:
  _target_: nemo_automodel.NeMoAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: %s
  torch_dtype: bf16
%s
teacher_model:
  _target_: nemo_automodel.NeMoAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: %s
  torch_dtype: bf16
%s
checkpoint:
  enabled: true
  checkpoint_dir: %s/
  model_save_format: safetensors
  save_consolidated: true

distributed:
  strategy: fsdp2
  dp_size: none
  tp_size: 1
  cp_size: 1
  pp_size: 1
  sequence_parallel: false

loss_fn:
  _target_: nemo_automodel.components.loss.masked_ce.MaskedCrossEntropy

kd_ratio: %s
kd_loss_fn:
  _target_: nemo_automodel.components.loss.kd_loss.KDLoss
  ignore_index: -100
  temperature: %s
  fp32_upcast: true

optimizer:
  _target_: torch.optim.AdamW
  lr: %s
  betas: [%s, %s]
  eps: %s
  weight_decay: %s

lr_scheduler:
  lr_decay_style: cosine
  lr_warmup_steps: %d
  init_lr: 0.0
  min_lr: %s

clip_grad_norm:
  max_norm: %s

dataset:
  _target_: nemo_automodel.components.datasets.llm.nanogpt_dataset.NanogptDataset
  file_pattern: %s
  seq_len: %d
  shuffle_files: false
  align_to_bos: false

dataloader:
  _target_: torchdata.stateful_dataloader.StatefulDataLoader
  collate_fn: nemo_automodel.components.datasets.utils.default_collater
  shuffle: false
`, c.WorldSize, r.Batch, r.MicroBatch, r.Steps, max(c.CheckpointEvery, 1), max(c.CheckpointEvery, 1), r.Seed,
		c.Student.Path, remote(c.Student), c.Teacher.Path, remote(c.Teacher), c.Outputs.Resume,
		num(ratio), num(r.Temperature), num(r.LR), num(r.Beta1), num(r.Beta2), num(r.Eps), num(r.WeightDecay),
		r.Warmup, num(r.MinLR), num(r.Clip), list(c.Data.Train), r.SeqLen)
	if len(c.Data.Valid) > 0 {
		fmt.Fprintf(&b, `
validation_dataset:
  _target_: nemo_automodel.components.datasets.llm.nanogpt_dataset.NanogptDataset
  file_pattern: %s
  seq_len: %d
  shuffle_files: false
  align_to_bos: false

validation_dataloader:
  _target_: torchdata.stateful_dataloader.StatefulDataLoader
  collate_fn: nemo_automodel.components.datasets.utils.default_collater
`, list(c.Data.Valid), r.SeqLen)
	}
	return b.String()
}

// autoModelEntry is glue/automodel_kd.py: AutoModel's own KD entry point
// (examples/llm_kd/kd.py) as one rank runs it.
const autoModelEntry = `"""One rank of the AutoModel KD recipe (as examples/llm_kd/kd.py runs it)."""
from nemo_automodel.components.config._arg_parser import parse_args_and_load_config
from nemo_automodel.recipes.llm.kd import KnowledgeDistillationRecipeForNextTokenPrediction

cfg = parse_args_and_load_config("recipe.yaml")
recipe = KnowledgeDistillationRecipeForNextTokenPrediction(cfg)
recipe.setup()
recipe.run_train_validation_loop()
`

// megatronScript is distill.sh: one rank of Model-Optimizer's
// examples/megatron_bridge/distill.py with the contract's recipe and
// --hf_export_path (its argparse flags, read in distill.py get_args).
func megatronScript(c *Contract) string {
	r := c.Recipe
	var data []string
	for _, p := range c.Data.Train {
		data = append(data, "1.0", p)
	}
	lm := ""
	if r.CEWeight > 0 {
		lm = "  --no_skip_lm_loss \\\n"
	}
	return fmt.Sprintf(`#!/usr/bin/env bash
# One rank of Megatron-Bridge distillation (Model-Optimizer examples/megatron_bridge/distill.py),
# written by autocompress from contract.json; launch.sh starts one per rank.
# Loss: kd_loss_scale x KD (+ the LM loss with --no_skip_lm_loss); temperature 1 (distill.py has no flag).
# The Megatron checkpoint goes to %s/checkpoints; the HF export of the last iteration to %s.
set -eu
exec "$PYTHON" "${DISTILL_PY:?set DISTILL_PY to Model-Optimizer examples/megatron_bridge/distill.py}" \
  --student_hf_path %s \
  --teacher_hf_path %s \
  --tp_size 1 --pp_size 1 \
  --data_paths %s \
  --seed %d \
  --output_dir %s \
  --seq_length %d \
  --mbs %d \
  --gbs %d \
  --train_iters %d \
  --kd_loss_scale %s \
%s  --lr %s \
  --min_lr %s \
  --lr_warmup_iters %d \
  --eval_interval %d \
  --log_interval 1 \
  --hf_export_path %s
`, c.Outputs.Resume, c.Outputs.Checkpoint, c.Student.Path, c.Teacher.Path, strings.Join(data, " "), r.Seed, c.Outputs.Resume,
		r.SeqLen, r.MicroBatch, r.Batch, r.Steps, num(r.KDWeight), lm, num(r.LR), num(r.MinLR), r.Warmup, max(c.CheckpointEvery, 1), c.Outputs.Checkpoint)
}

// glueResult is glue/result.py: after the ranks end, it turns the engine's
// own logs (AutoModel's training.jsonl under the checkpoint directory,
// Megatron's "iteration N/ M ... loss" lines in launch.log or Slurm's log) into
// progress.jsonl and result.json, and moves AutoModel's consolidated HF
// checkpoint to out/.
const glueResult = `"""Write progress.jsonl and result.json from the engine's logs (autocompress job glue)."""
import glob, hashlib, json, os, re, shutil, sys

c = json.load(open("contract.json"))
o = c["outputs"]
status = int(sys.argv[1]) if len(sys.argv) > 1 else 0
steps = []
for p in glob.glob(os.path.join(o["resume"], "**", "training.jsonl"), recursive=True):
    for line in open(p):
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "step" in d and "loss" in d:
            steps.append((int(d["step"]), float(d["loss"])))
for p in ["launch.log"] + sorted(glob.glob("slurm-*.log")):
    if c["engine"] != "megatron-bridge" or not os.path.exists(p):
        continue
    for line in open(p, errors="replace"):
        m = re.search(r"iteration\s+(\d+)/\s*\d+.*?loss: ([0-9.eE+-]+)", line)
        if m:
            steps.append((int(m.group(1)), float(m.group(2))))
steps = sorted(dict(steps).items())
n = c["recipe"]["steps"]
with open(o["progress"], "a") as f:
    for s, l in steps:
        f.write(json.dumps({"step": s, "steps": n, "loss": l}) + "\n")
out = o["checkpoint"]
cands = sorted(glob.glob(os.path.join(o["resume"], "**", "consolidated", "config.json"), recursive=True), key=os.path.getmtime)
if cands and not os.path.exists(out):
    shutil.copytree(os.path.dirname(cands[-1]), out)

def h(name):
    x = hashlib.sha256(("%s\0%d\0" % (name, os.path.getsize(name))).encode())
    x.update(open(name, "rb").read())
    return x.hexdigest()

r = {"version": 1, "kind": c["kind"], "engine": c["engine"], "world_size": c["world_size"],
     "steps": len(steps), "losses": [l for _, l in steps],
     "tokens": len(steps) * c["recipe"]["batch"] * c["recipe"]["seq_len"]}
if status == 0 and os.path.isdir(out):
    r["status"], r["checkpoint"] = "done", out
    r["sha256"] = {out + "/" + f: h(out + "/" + f) for f in sorted(os.listdir(out)) if os.path.isfile(os.path.join(out, f))}
else:
    r["status"] = "failed"
    r["error"] = "the engine exited with status %d%s" % (status, "" if os.path.isdir(out) else " and wrote no " + out + "/")
json.dump(r, open(o["result"], "w"), indent=2)
`
