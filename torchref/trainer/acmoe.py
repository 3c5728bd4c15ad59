"""Mixture-of-experts feed-forward blocks as autocompress's native engine
(engine/moe.go) and transformers run them: Qwen3-MoE and Mixtral.

A block replaces a decoder layer's MLP (after post_attention_layernorm).
For the normed hidden states x (N, hidden):

    router_logits = gate(x)                         (N, experts), no bias
    p = softmax(router_logits, float32)             over every expert (float64 rows: float64)
    w, e = topk(p, k)                               the k largest per row
    w = w / sum(w)                                  when norm_topk_prob
    out[row] = sum over its k slots of w * expert_e(x[row])
    expert(x) = down(silu(gate_proj(x)) * up(x))    a gated MLP

as transformers' MixtralSparseMoeBlock.forward
(models/mixtral/modeling_mixtral.py: softmax with dtype=torch.float,
torch.topk, always renormalised, weights cast back to the input's dtype,
then one index_add_ per expert hit, in expert order) and
Qwen3MoeSparseMoeBlock.forward (models/qwen3_moe/modeling_qwen3_moe.py: the
same, renormalised only when config.norm_topk_prob, whose default is
false). Mixtral's router_jitter_noise (0 by default, training only) is not
applied. Routers that take the top-k before the softmax (gpt-oss), sigmoid
routers and shared experts are refused by the job contract's engine table
before a job gets here.

Tensor names are the checkpoint's: Qwen3-MoE's mlp.gate and
mlp.experts.E.{gate,up,down}_proj, Mixtral's block_sparse_moe.gate and
block_sparse_moe.experts.E.{w1,w3,w2} (w1 gate, w3 up, w2 down).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROUTER = "softmax_topk"  # the contract's name of the rule above

# Per class: the block's attribute in a decoder layer, the expert
# projections' names (gate, up, down) in checkpoint order, and how
# config.json names the counts.
CLASSES = {
    "Qwen3MoeForCausalLM": dict(attr="mlp", proj=("gate_proj", "up_proj", "down_proj"),
                                order=("gate_proj", "up_proj", "down_proj"),
                                experts=("num_experts", 128), top_k=("num_experts_per_tok", 8),
                                width=("moe_intermediate_size", 768)),
    "MixtralForCausalLM": dict(attr="block_sparse_moe", proj=("w1", "w3", "w2"), order=("w1", "w2", "w3"),
                               experts=("num_local_experts", 8), top_k=("num_experts_per_tok", 2),
                               width=("intermediate_size", None)),
}


class Spec:
    """One MoE block's shape: experts, top_k, width, norm_topk_prob, and
    the class's naming (attr, proj, order)."""

    def __init__(self, cls, experts, top_k, width, norm):
        c = CLASSES[cls]
        self.experts, self.top_k, self.width, self.norm_topk_prob = experts, top_k, width, norm
        self.attr, self.proj, self.order = c["attr"], c["proj"], c["order"]

    def shape(self):
        """The contract's moe record (job/CONTRACT.md)."""
        return {"experts": self.experts, "top_k": self.top_k, "width": self.width, "router": ROUTER,
                "norm_topk_prob": self.norm_topk_prob}


def specs(cfg, cls, n, error):
    """The MoE Spec of each of the n layers (None for a dense layer), as
    package architecture reads the config: every Mixtral layer; a Qwen3-MoE
    layer i unless i is in mlp_only_layers or (i+1) is not a multiple of
    decoder_sparse_step (Qwen3MoeDecoderLayer.__init__'s rule). error is
    the exception class to raise."""
    c = CLASSES.get(cls)
    if c is None:
        return [None] * n

    def count(key):
        name, default = key
        v = cfg.get(name, default)
        if not isinstance(v, int) or v <= 0:
            raise error(f"config.json: {name} = {v!r}, want a positive integer")
        return v

    experts, top_k, width = count(c["experts"]), count(c["top_k"]), count(c["width"])
    if top_k > experts:
        raise error(f"num_experts_per_tok {top_k} exceeds the {experts} experts")
    # Mixtral always renormalises; Qwen3MoeConfig's norm_topk_prob is false
    # unless set.
    norm = True if cls == "MixtralForCausalLM" else bool(cfg.get("norm_topk_prob", False))
    if cls == "Qwen3MoeForCausalLM":
        step = cfg.get("decoder_sparse_step", 1) or 1
        dense = set(cfg.get("mlp_only_layers") or [])
        moe = [i not in dense and (i + 1) % step == 0 for i in range(n)]
    else:
        moe = [True] * n
    return [Spec(cls, experts, top_k, width, norm) if m else None for m in moe]


class Expert(nn.Module):
    """A gated MLP down(silu(gate(x)) * up(x)) with the class's names."""

    def __init__(self, hidden, width, proj):
        super().__init__()
        self.names = proj
        for name, (i, o) in zip(proj, ((hidden, width), (hidden, width), (width, hidden))):
            setattr(self, name, nn.Linear(i, o, bias=False))

    def forward(self, x):
        gate, up, down = (getattr(self, n) for n in self.names)
        return down(F.silu(gate(x)) * up(x))


class SparseMoE(nn.Module):
    """The MoE block (module docstring), state_dict names gate.weight and
    experts.E.<proj>.weight."""

    def __init__(self, hidden, spec):
        super().__init__()
        self.top_k, self.norm_topk_prob, self.n = spec.top_k, spec.norm_topk_prob, spec.experts
        self.gate = nn.Linear(hidden, spec.experts, bias=False)
        self.experts = nn.ModuleList([Expert(hidden, spec.width, spec.proj) for _ in range(spec.experts)])

    def route(self, x):
        """(weights (N, k) in x's dtype, experts (N, k)) of rows x (N, hidden)."""
        # float32 as transformers' dtype=torch.float for bf16, fp16 and
        # float32 rows; float64 rows (gradcheck) keep float64.
        p = F.softmax(self.gate(x), dim=1, dtype=torch.promote_types(x.dtype, torch.float32))
        w, e = torch.topk(p, self.top_k, dim=-1)
        if self.norm_topk_prob:
            w = w / w.sum(dim=-1, keepdim=True)
        return w.to(x.dtype), e

    def forward(self, x, observe=None, layer=0):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w, e = self.route(x)
        out = torch.zeros_like(x)
        # mask[j] (k, N): which slot of which row went to expert j.
        mask = F.one_hot(e, num_classes=self.n).permute(2, 1, 0)
        for j in torch.nonzero(mask.sum(dim=(1, 2)) > 0).flatten().tolist():
            slot, rows = torch.where(mask[j])
            y = self.experts[j](x[rows]) * w[rows, slot, None]
            out.index_add_(0, rows, y.to(x.dtype))
        return out.reshape(shape)


def hf_names(prefix, spec):
    """The block's tensor names after prefix (…layers.N.), in
    architecture.Tensors order: the router, then each expert's
    projections."""
    p = prefix + spec.attr + "."
    names = [p + "gate.weight"]
    for j in range(spec.experts):
        names += [f"{p}experts.{j}.{n}.weight" for n in spec.order]
    return names


def flops(spec, N, H):
    """engine.Model.ForwardFLOPsFrom's count of one block over N rows: the
    router, and each row's k gated experts."""
    return 2 * N * H * spec.experts + 2 * N * H * spec.width * 3 * spec.top_k
