#!/usr/bin/env python3
"""Loads DeciLM children with the real transformers and prints what the
serving engines' loaders read from each, checking it against config.json.

STATUS: NOT YET RUN ON A DEVICE (written without one). Run it once where
transformers is installed and record its output in prune/PLAN.md. CI
exercises the same module only with a stand-in for transformers (prune's
TestDeciLMConfigModule).

The children come from scripts/device/decilm_children.sh OUT [--config-only]:

    python3 scripts/device/decilm_autoconfig.py OUT/*

For each child directory it runs AutoConfig.from_pretrained(child,
trust_remote_code=True), as vLLM (transformers_utils/config.py,
HFConfigParser.parse), SGLang and TensorRT-LLM (_torch/model_config.py,
ModelConfig.from_pretrained) do, and prints per layer:
attention.no_op, attention.n_heads_in_group and the KV heads
num_attention_heads // n_heads_in_group (vLLM DeciLMDecoderLayer and
NemotronNasModelArchConfigConvertor.get_total_num_kv_heads, SGLang
DeciLMDecodeLayer and get_total_num_kv_heads, TensorRT-LLM
NemotronNASModel), attention.replace_with_linear and
ffn.replace_with_linear (TensorRT-LLM NemotronNASDecoderLayer), ffn.no_op,
and the FFN width by vLLM's rule (ffn_mult if hasattr, else
intermediate_size) and by SGLang's and TensorRT-LLM's (ffn_mult), with
ffn.intermediate_size. It also checks that the config serialises
(to_json_string) and reloads after save_pretrained. The exit status is 1
if any value disagrees with config.json.
"""
import json
import os
import sys
import tempfile


def width(mult, hidden):
    n = int(2 * mult * hidden / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


def check(child):
    import transformers
    from transformers import AutoConfig

    problems = []
    with open(os.path.join(child, "config.json")) as f:
        raw = json.load(f)
    config = AutoConfig.from_pretrained(child, trust_remote_code=True)
    heads, hidden = config.num_attention_heads, config.hidden_size
    print("%s: transformers %s, %s.%s, model_type %s, %d layers, num_key_value_heads %r, intermediate_size %r" % (
        child, transformers.__version__, type(config).__module__, type(config).__name__, config.model_type,
        config.num_hidden_layers, getattr(config, "num_key_value_heads", "absent"), getattr(config, "intermediate_size", "absent")))
    if len(config.block_configs) != len(raw["block_configs"]):
        problems.append("%d blocks, config.json has %d" % (len(config.block_configs), len(raw["block_configs"])))
    for i, (b, want) in enumerate(zip(config.block_configs, raw["block_configs"])):
        a, x = b.attention, b.ffn
        row = {"attention.no_op": a.no_op, "n_heads_in_group": a.n_heads_in_group,
               "attention.replace_with_linear": a.replace_with_linear,
               "ffn.no_op": x.no_op, "ffn.replace_with_linear": x.replace_with_linear}
        if a.no_op != bool(want["attention"].get("no_op")):
            problems.append("layer %d: attention.no_op %r" % (i, a.no_op))
        if not a.no_op:
            row["kv_heads"] = heads // a.n_heads_in_group
            if row["kv_heads"] != heads // want["attention"]["n_heads_in_group"]:
                problems.append("layer %d: %d KV heads" % (i, row["kv_heads"]))
        if x.no_op != bool(want["ffn"].get("no_op")):
            problems.append("layer %d: ffn.no_op %r" % (i, x.no_op))
        if not x.no_op:
            row["width_vllm"] = width(x.ffn_mult, hidden) if hasattr(x, "ffn_mult") else x.intermediate_size
            row["width_sglang_trtllm"] = width(x.ffn_mult, hidden)
            row["ffn.intermediate_size"] = getattr(x, "intermediate_size", None)
            expect = want["ffn"].get("intermediate_size") or width(want["ffn"]["ffn_mult"], hidden)
            for k in ("width_vllm", "width_sglang_trtllm", "ffn.intermediate_size"):
                if row[k] != expect:
                    problems.append("layer %d: %s %r, config.json's width %d" % (i, k, row[k], expect))
        print("  layer %d: %s" % (i, json.dumps(row, sort_keys=True)))
    config.to_json_string()
    with tempfile.TemporaryDirectory() as tmp:
        config.save_pretrained(tmp)
        for name in os.listdir(child):
            if name.endswith(".py"):
                with open(os.path.join(child, name), "rb") as src, open(os.path.join(tmp, name), "wb") as dst:
                    dst.write(src.read())
        again = AutoConfig.from_pretrained(tmp, trust_remote_code=True)
        if [b.to_dict() for b in again.block_configs] != [b.to_dict() for b in config.block_configs]:
            problems.append("block_configs change through save_pretrained")
    return problems


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: decilm_autoconfig.py CHILD_DIR...")
    failed = False
    for child in sys.argv[1:]:
        try:
            problems = check(child)
        except Exception as e:  # report every child, then fail
            problems = ["%s: %s" % (type(e).__name__, e)]
        for p in problems:
            print("  PROBLEM: " + p)
        failed = failed or bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
