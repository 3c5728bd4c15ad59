"""Reference logits of a small Mixtral or Qwen3-MoE checkpoint, in torch.

Re-states, in plain torch (no transformers here), the forward pass of
transformers' models/qwen3_moe/modeling_qwen3_moe.py and
models/mixtral/modeling_mixtral.py (read at huggingface/transformers
00d4b3d2): Qwen3MoeRMSNorm / MixtralRMSNorm, rotate_half and
apply_rotary_pos_emb, eager_attention_forward (GQA by repeat_kv, scaling
head_dim**-0.5, softmax in float32), Qwen3MoeAttention's q_norm/k_norm on
the head dim before RoPE, and the sparse MoE block:

    router_logits = gate(hidden)                       # Qwen3MoeSparseMoeBlock.forward
    routing_weights = softmax(router_logits, dim=1, dtype=float)
    routing_weights, selected = topk(routing_weights, top_k)
    if norm_topk_prob:  # Mixtral: always ("only diff with mixtral")
        routing_weights /= routing_weights.sum(-1, keepdim=True)
    for each expert hit: index_add_(rows, expert(x[rows]) * weight)

with experts down(act(gate(x)) * up(x)) (Qwen3MoeMLP.forward; Mixtral's
w2(act(w1(x)) * w3(x)), MixtralBlockSparseTop2MLP.forward).

usage: moe_reference.py CHECKPOINT_DIR TOKENS_JSON OUT_JSON
TOKENS_JSON holds {"B": b, "T": t, "tokens": [...]}; OUT_JSON receives
{"logits": [...]} (B·T·vocab, row-major).

With "targets" (B·T ids, negative: ignored) in TOKENS_JSON the pass runs
in float64 (the softmaxes too) with every weight requiring grad, and
OUT_JSON also receives "loss" (the mean cross-entropy over the targets
≥ 0), "grads" ({tensor name: its gradient by torch autograd, flattened})
and "selected" (per layer, the top-k experts of every row, row-major):
the gradient parity of the engine's backward pass (TestMoEGradParityTorch).
"""

import json
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']} (write the fixture as F32)"
        lo, hi = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"])
    return out


def rmsnorm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def main():
    ckpt, tokens_path, out_path = sys.argv[1:4]
    cfg = json.load(open(ckpt + "/config.json"))
    W = read_safetensors(ckpt + "/model.safetensors")
    tk = json.load(open(tokens_path))
    B, T = tk["B"], tk["T"]
    grad = "targets" in tk
    dt = torch.float64 if grad else torch.float32
    if grad:
        W = {n: w.double().requires_grad_() for n, w in W.items()}
    selected = []
    ids = torch.tensor(tk["tokens"], dtype=torch.long).reshape(B, T)
    mixtral = cfg["model_type"] == "mixtral"
    H = cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or H // nh
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_theta", 10000.0)
    top_k = cfg["num_experts_per_tok"]
    n_exp = cfg["num_local_experts"] if mixtral else cfg["num_experts"]
    norm_topk = True if mixtral else cfg.get("norm_topk_prob", False)
    assert cfg.get("hidden_act", "silu") == "silu"

    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    pos = torch.arange(T).float()
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dt), emb.sin().to(dt)  # (T, hd)

    x = W["model.embed_tokens.weight"][ids]  # (B, T, H)
    mask = torch.full((T, T), float("-inf"), dtype=dt).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = (h @ W[p + "self_attn.q_proj.weight"].T).view(B, T, nh, hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T).view(B, T, nkv, hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T).view(B, T, nkv, hd)
        if not mixtral:
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = nh // nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(2, 3)) * hd ** -0.5 + mask
        att = torch.softmax(att, dim=-1, dtype=dt)
        o = (att @ v).transpose(1, 2).reshape(B, T, nh * hd)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T

        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps).view(-1, H)
        if mixtral:
            mp = p + "block_sparse_moe."
            names = ("w1", "w3", "w2")  # gate, up, down
        else:
            mp = p + "mlp."
            names = ("gate_proj", "up_proj", "down_proj")
        logits = h @ W[mp + "gate.weight"].T
        rw = torch.softmax(logits, dim=1, dtype=dt)
        rw, sel = torch.topk(rw, top_k, dim=-1)
        selected.append(sel.reshape(-1).tolist())
        if norm_topk:
            rw = rw / rw.sum(dim=-1, keepdim=True)
        final = torch.zeros_like(h)
        for e in range(n_exp):
            rows, slot = torch.where(sel == e)
            if rows.numel() == 0:
                continue
            ep = f"{mp}experts.{e}."
            xe = h[rows]
            g = xe @ W[ep + names[0] + ".weight"].T
            u = xe @ W[ep + names[1] + ".weight"].T
            y = (torch.nn.functional.silu(g) * u) @ W[ep + names[2] + ".weight"].T
            final.index_add_(0, rows, y * rw[rows, slot, None])
        x = x + final.view(B, T, H)

    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    logits = x @ head.T
    res = {"logits": logits.reshape(-1).tolist()}
    if grad:
        tg = torch.tensor(tk["targets"], dtype=torch.long)
        loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tg, ignore_index=-1)
        loss.backward()
        res["loss"] = loss.item()
        res["selected"] = selected
        res["grads"] = {n: w.grad.reshape(-1).tolist() for n, w in W.items() if w.grad is not None}
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    main()
