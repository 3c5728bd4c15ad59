"""The reference trainer on one GPU (issue 20's device checks). UNRUN: no
GPU session has run this yet; no figure of it is in the repository.

    python3 scripts/device/torchref_h200.py OUT_DIR          # on the H200
    python3 scripts/device/torchref_h200.py OUT_DIR --tiny   # a CPU smoke run, tiny shapes

(a) parity: torchref's model against transformers' LlamaForCausalLM and
    Qwen3ForCausalLM on random bf16 weights of the real 8B configs
    (architecture/presets: meta-llama--Meta-Llama-3.1-8B.json,
    Qwen--Qwen3-8B.json, the same as ../shared/data/configs): max |Δ logit|
    over max |logit|, bf16 and (4 layers) float32.
(b) distillation throughput: one optimiser step of torchref's DistillStep
    (FSDP2 when torch >= 2.4, bf16 compute, float32 master weights and AdamW
    moments, activation checkpointing) for a Llama-3.1-8B teacher and a ~5B
    child of it (FFN 14336 -> 7168 in every layer: 5.25B parameters),
    sequence 4096, batch 1: tokens/s and MFU against the H200's dense bf16
    peak (989 TFLOP/s, NVIDIA's H200 SXM figure), counting model FLOPs as
    engine.ForwardFLOPs does (3x for the student's forward+backward, 1x for
    the teacher's forward).
(c) importance: forward tokens/s of the 8B teacher with the importance
    collector attached (sequence 4096).

Writes OUT_DIR/torchref-h200.json and prints it.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "torchref", "trainer"))

import torch  # noqa: E402

import acmodel  # noqa: E402
import autocompress_torch as act  # noqa: E402

H200_BF16_PEAK = 989e12


def preset(name):
    with open(os.path.join(ROOT, "architecture", "presets", name)) as f:
        return json.load(f)


def tiny(cfg):
    """A small model of the same family (for --tiny)."""
    c = dict(cfg)
    c.update(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=512)
    return c


def random_model(cfg, device, dtype, seed):
    torch.manual_seed(seed)
    with torch.device(device) if hasattr(torch, "device") and device != "cpu" else _null():
        m = acmodel.Model(acmodel.Arch(cfg))
    m = m.to(device=device, dtype=dtype)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("norm.weight"):
                p.fill_(1)
            else:
                p.normal_(0, 0.02)
    return m


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def sync(dev):
    if dev != "cpu":
        torch.cuda.synchronize()


def parity(cfg, cls_name, device, small):
    """(a): our model and transformers' on the same random weights."""
    try:
        import transformers
    except ImportError:
        return {"skipped": "transformers is not installed"}
    out = {"transformers": transformers.__version__}
    for label, dtype, layers in (("bf16", torch.bfloat16, None), ("float32_4_layers", torch.float32, 4)):
        c = dict(cfg)
        if layers:
            c["num_hidden_layers"] = layers
        conf = getattr(transformers, cls_name.replace("ForCausalLM", "Config"))(**{k: v for k, v in c.items()
                                                                                   if k not in ("architectures",)})
        conf._attn_implementation = "eager"
        torch.manual_seed(1)
        with torch.device(device):
            hf = getattr(transformers, cls_name)(conf)
        hf = hf.to(dtype).eval()
        ours = acmodel.Model(acmodel.Arch(c)).to(device=device, dtype=dtype).eval()
        sd = hf.state_dict()
        with torch.no_grad():
            for n, p in ours.named_parameters():
                p.copy_(sd[n])
        T = 64 if small else 512
        x = torch.randint(0, c["vocab_size"], (1, T), device=device)
        with torch.no_grad():
            a = hf(x).logits.float()
            b = ours(x).float()
        out[label] = {"tokens": T, "layers": c["num_hidden_layers"],
                      "max_abs_diff_over_max_abs": ((a - b).abs().max() / a.abs().max()).item(),
                      "argmax_agreement": (a.argmax(-1) == b.argmax(-1)).float().mean().item()}
        del hf, ours, sd, a, b
        if device != "cpu":
            torch.cuda.empty_cache()
    return out


def distill_throughput(tcfg, scfg, device, small):
    """(b): DistillStep on a teacher and its child, timed."""
    ranks = act.Ranks()
    if device != "cpu" and act.fsdp2() is not None:
        import torch.distributed as dist
        dist.init_process_group("nccl")
        ranks.joined = True
    teacher = random_model(tcfg, device, torch.bfloat16 if device != "cpu" else torch.float32, 2).eval()
    student = random_model(scfg, device, torch.float32, 3)
    T = 128 if small else 4096
    r = {"lr": 1e-5, "min_lr": 1e-6, "temperature": 1.0, "kd_weight": 1.0, "ce_weight": 0.0,
         "activation_checkpointing": not small, "weight_decay": 0.1}
    step = act.DistillStep(student, teacher, ranks, r, min(teacher.arch.vocab, student.arch.vocab))
    x = torch.randint(0, scfg["vocab_size"], (1, T + 1), device=device)
    times = []
    for i in range(2 + (2 if small else 5)):
        sync(device)
        t0 = time.time()
        loss, norm = step(x[:, :T], x[:, 1:].reshape(-1), 1e-5, 1.0)
        sync(device)
        times.append(time.time() - t0)
    timed = times[2:]
    per = sum(timed) / len(timed)
    flops = 3 * acmodel.forward_flops(student.arch, 1, T) + acmodel.forward_flops(teacher.arch, 1, T)
    res = {"seq_len": T, "batch": 1, "fsdp2": step.sharded, "activation_checkpointing": student.checkpointing,
           "teacher_params": sum(p.numel() for p in teacher.parameters()),
           "student_params": sum(p.numel() for p in student.parameters()),
           "step_s": per, "steps_timed": len(timed), "tokens_per_s": T / per, "model_tflops_per_step": flops / 1e12,
           "mfu": flops / per / H200_BF16_PEAK if device != "cpu" else None, "last_loss": loss}
    if device != "cpu":
        res["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    del step, teacher, student
    if device != "cpu":
        torch.cuda.empty_cache()
    return res


def importance_throughput(cfg, device, small):
    """(c): forward tokens/s with the importance collector attached."""
    m = random_model(cfg, device, torch.bfloat16 if device != "cpu" else torch.float32, 4).eval()
    T = 128 if small else 4096
    col = act.Collector(len(m.arch.layers))
    x = torch.randint(0, cfg["vocab_size"], (1, T), device=device)
    times = []
    with torch.no_grad():
        for i in range(2 + 3):
            sync(device)
            t0 = time.time()
            m(x, observe=col)
            sync(device)
            times.append(time.time() - t0)
    per = sum(times[2:]) / 3
    return {"seq_len": T, "batch": 1, "forward_s": per, "tokens_per_s": T / per,
            "forward_tflops": acmodel.forward_flops(m.arch, 1, T) / 1e12}


def main(argv):
    out_dir = argv[1]
    small = "--tiny" in argv
    device = "cpu" if small or not torch.cuda.is_available() else "cuda"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    llama, qwen = preset("meta-llama--Meta-Llama-3.1-8B.json"), preset("Qwen--Qwen3-8B.json")
    if small:
        llama, qwen = tiny(llama), tiny(qwen)
    child = dict(llama, intermediate_size=llama["intermediate_size"] // 2)
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if device != "cpu" else "cpu",
           "tiny": small}
    t0 = time.time()
    for key, fn in (("parity_llama", lambda: parity(llama, "LlamaForCausalLM", device, small)),
                    ("parity_qwen3", lambda: parity(qwen, "Qwen3ForCausalLM", device, small)),
                    ("distill", lambda: distill_throughput(llama, child, device, small)),
                    ("importance", lambda: importance_throughput(llama, device, small))):
        try:
            res[key] = fn()
        except Exception as e:  # noqa: BLE001 - record and go on to the next check
            res[key] = {"error": f"{type(e).__name__}: {e}"}
        res[key + "_wall_s"] = round(time.time() - t0, 1)
        print(key, json.dumps(res[key]), flush=True)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "torchref-h200.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(sys.argv)
