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
applied.

Nemotron-H's MoE mixer (an 'E' layer of hybrid_override_pattern, built by
acmamba.py; NemotronMoE below) routes by sigmoid scores with a correction
bias and adds a shared expert, as transformers'
models/nemotron_h/modeling_nemotron_h.py computes it
(NemotronHTopkRouter.forward, NemotronHMoE.route_tokens_to_experts and
.forward, NemotronHExperts.forward, NemotronHMLP.forward):

    logits = x.float() @ gate.weight.float().T     (N, experts), float32
    s = sigmoid(logits); c = s + gate.e_score_correction_bias
    per group of experts/n_group: the sum of its 2 largest c; the
    topk_group best groups kept, the others' c set to -inf
    e = topk(c, k)                                 selection on c
    w = s[e] (the uncorrected scores); w /= sum(w) + 1e-20 when
    norm_topk_prob; w *= routed_scaling_factor
    h = fc1_latent_proj(x) when moe_latent_size is set, else x
    y[row] = sum over its k slots of w * down_proj(relu(up_proj(h))**2)
             accumulated in float32, cast back to x's dtype
    out = fc2_latent_proj(y) (latent) + shared_experts(x)
    shared_experts(x) = down_proj(relu(up_proj(x))**2)  (NemotronHMLP of
                        moe_shared_expert_intermediate_size)

e_score_correction_bias is a buffer in transformers (trained by no
gradient; DeepSeek-V3's balancing updates it outside backprop): here a
parameter with requires_grad False, so that it is loaded, checkpointed and
saved under the checkpoint's name and no optimiser step moves it
(acmodel.no_decay). transformers keeps it float32
(_keep_in_fp32_modules_strict); here it has the model's dtype (float32 on
CPU; bf16 for a GPU teacher).

gpt-oss's MLP (GptOssMoE below; every layer of GptOssForCausalLM) as
transformers' models/gpt_oss/modeling_gpt_oss.py computes it
(GptOssTopKRouter.forward, GptOssExperts.forward, its training branch,
which loops over the experts hit; GptOssMLP.forward):

    logits = router(x) = x @ router.weight.T + router.bias   (N, experts)
    v, e = topk(logits, k)                         the k largest logits
    w = softmax(v) over the k                      (float32 here, cast back)
    gate_up[row] = x[row] @ gate_up_proj[e] + gate_up_proj_bias[e]  (2·width)
    gate, up = gate_up[..., 0::2], gate_up[..., 1::2]   interleaved
    gate = min(gate, limit); up = clamp(up, -limit, limit)
    y = ((up + 1) * gate * sigmoid(alpha * gate)) @ down_proj[e] + down_proj_bias[e]
    out[row] = sum over its k slots of w * y

with alpha = swiglu_alpha and limit = swiglu_limit from config.json,
1.702 and 7.0 when absent (GptOssConfig's documented defaults; the dense
GptOssExperts.__init__ of the transformers version read fixes both at
those values). The experts are stacked: gate_up_proj
(experts, hidden, 2·width), down_proj (experts, width, hidden), applied as
x @ W (not nn.Linear's x @ W.T). No shared expert. Mathematically the
k weights equal Mixtral's renormalised softmax-then-top-k (top-k of a
softmax is top-k of its logits, and the renormalised k probabilities are
the softmax of the k logits); the contract names the rule topk_softmax
with norm_topk_prob false, as package architecture records it.
transformers takes that softmax in the logits' dtype; here it is taken in
float32 (float64 for float64 rows) and cast back, as SparseMoE.route.

Tensor names are the checkpoint's: Qwen3-MoE's mlp.gate and
mlp.experts.E.{gate,up,down}_proj, Mixtral's block_sparse_moe.gate and
block_sparse_moe.experts.E.{w1,w3,w2} (w1 gate, w3 up, w2 down), gpt-oss's
mlp.router.{weight,bias} and mlp.experts.{gate_up_proj,gate_up_proj_bias,
down_proj,down_proj_bias} (architecture/family_gptoss.go, gptOssMoE).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ROUTER = "softmax_topk"  # the contract's name of the rule above
SIGMOID = "sigmoid_corrected"  # the contract's name of Nemotron-H's rule
TOPK_SOFTMAX = "topk_softmax"  # the contract's name of gpt-oss's rule
GPTOSS = "GptOssForCausalLM"

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
    if cls == GPTOSS:
        return [gptoss_spec(cfg, error)] * n
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


def block(hidden, spec):
    """The MoE module of a decoder layer of spec's class."""
    if isinstance(spec, GptOssSpec):
        return GptOssMoE(hidden, spec)
    return SparseMoE(hidden, spec)


def hf_names(prefix, spec):
    """The block's tensor names after prefix (…layers.N.), in
    architecture.Tensors order: the router, then each expert's
    projections."""
    if isinstance(spec, GptOssSpec):
        return gptoss_names(prefix + spec.attr + ".")
    p = prefix + spec.attr + "."
    names = [p + "gate.weight"]
    for j in range(spec.experts):
        names += [f"{p}experts.{j}.{n}.weight" for n in spec.order]
    return names


def flops(spec, N, H):
    """engine.Model.ForwardFLOPsFrom's count of one block over N rows: the
    router, and each row's k gated experts (gpt-oss's too: gate_up_proj
    is 2·width wide, down_proj width; biases not counted)."""
    return 2 * N * H * spec.experts + 2 * N * H * spec.width * 3 * spec.top_k


class NemotronSpec:
    """One Nemotron-H MoE mixer's shape and routing constants, as
    NemotronHConfig names them: experts (n_routed_experts), top_k
    (num_experts_per_tok), width (moe_intermediate_size), shared
    (moe_shared_expert_intermediate_size), latent (moe_latent_size, 0:
    none), n_group, topk_group, norm (norm_topk_prob), scale
    (routed_scaling_factor), bias (mlp_bias: every projection's)."""

    def __init__(self, experts, top_k, width, shared, latent=0, n_group=1, topk_group=1, norm=True, scale=1.0,
                 bias=False):
        self.experts, self.top_k, self.width, self.shared, self.latent = experts, top_k, width, shared, latent
        self.n_group, self.topk_group, self.norm_topk_prob, self.scale, self.bias = n_group, topk_group, norm, scale, bias

    def check(self, error):
        """Raises error unless route() can run: whole groups of at least 2
        experts (the group score sums the 2 largest), 1 <= topk_group <=
        n_group, and k no more than the experts of the kept groups."""
        E, G = self.experts, self.n_group
        if not (isinstance(G, int) and G >= 1 and E % G == 0):
            raise error(f"n_group {G!r} with {E} routed experts: want a positive divisor of n_routed_experts "
                        f"(prune experts in whole groups)")
        if E // G < 2:
            raise error(f"{E} routed experts in {G} group(s): want at least 2 experts per group "
                        f"(NemotronHMoE scores a group by its 2 largest)")
        if not (isinstance(self.topk_group, int) and 1 <= self.topk_group <= G):
            raise error(f"topk_group {self.topk_group!r}: want 1 <= topk_group <= n_group ({G})")
        kept = self.topk_group * (E // G)
        if self.top_k > kept:
            raise error(f"num_experts_per_tok {self.top_k} exceeds the {kept} experts of the topk_group "
                        f"{self.topk_group} kept group(s) of {E // G}")
        if not (isinstance(self.scale, (int, float)) and math.isfinite(self.scale) and self.scale > 0):
            raise error(f"routed_scaling_factor {self.scale!r}: want a positive finite number")
        return self

    def shape(self):
        """The contract's moe record (job/CONTRACT.md)."""
        s = {"experts": self.experts, "top_k": self.top_k, "width": self.width, "router": SIGMOID,
             "norm_topk_prob": self.norm_topk_prob, "n_group": self.n_group, "topk_group": self.topk_group,
             "routed_scaling_factor": self.scale}
        if self.shared:
            s["shared_width"] = self.shared
        return s


def nemotron_spec(cfg, error):
    """The NemotronSpec of config.json cfg's MoE layers, with
    NemotronHConfig.__init__'s defaults (n_group 1, topk_group 1,
    norm_topk_prob true, routed_scaling_factor 1.0, moe_latent_size
    None)."""

    def count(name, default=None, zero=False):
        v = cfg.get(name, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if zero else 1):
            raise error(f"config.json: {name} = {v!r}, want a {'non-negative' if zero else 'positive'} integer")
        return v

    if cfg.get("n_shared_experts", 1) == 0:
        # architecture reads n_shared_experts 0 as no shared expert, while
        # NemotronHMoE.__init__ builds one regardless: refused rather than
        # guessed.
        raise error("config.json: n_shared_experts 0: NemotronHMoE builds its shared expert whatever this says; "
                    "want 1 (the shared expert of moe_shared_expert_intermediate_size)")
    latent = cfg.get("moe_latent_size")
    s = NemotronSpec(count("n_routed_experts"), count("num_experts_per_tok"), count("moe_intermediate_size"),
                     count("moe_shared_expert_intermediate_size"), 0 if latent is None else count("moe_latent_size"),
                     cfg.get("n_group", 1), cfg.get("topk_group", 1), bool(cfg.get("norm_topk_prob", True)),
                     cfg.get("routed_scaling_factor", 1.0), bool(cfg.get("mlp_bias", False)))
    return s.check(error)


class ReLU2(nn.Module):
    """down_proj(relu(up_proj(x))**2): a routed expert (NemotronHExperts)
    or the shared expert (NemotronHMLP)."""

    def __init__(self, i, width, bias):
        super().__init__()
        self.up_proj = nn.Linear(i, width, bias=bias)
        self.down_proj = nn.Linear(width, i, bias=bias)

    def forward(self, x):
        return self.down_proj(F.relu(self.up_proj(x)).square())


class SigmoidRouter(nn.Module):
    """NemotronHTopkRouter: weight (experts, hidden) and
    e_score_correction_bias (experts), frozen."""

    def __init__(self, hidden, experts):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts, hidden))
        self.e_score_correction_bias = nn.Parameter(torch.zeros(experts), requires_grad=False)


class NemotronMoE(nn.Module):
    """The Nemotron-H MoE mixer (module docstring), state_dict names
    gate.weight, gate.e_score_correction_bias, [fc1_latent_proj.*],
    experts.E.{up,down}_proj.*, [fc2_latent_proj.*],
    shared_experts.{up,down}_proj.*."""

    def __init__(self, hidden, spec):
        super().__init__()
        self.spec = spec
        self.gate = SigmoidRouter(hidden, spec.experts)
        inner = spec.latent or hidden
        if spec.latent:
            self.fc1_latent_proj = nn.Linear(hidden, spec.latent, bias=spec.bias)
        self.experts = nn.ModuleList([ReLU2(inner, spec.width, spec.bias) for _ in range(spec.experts)])
        if spec.latent:
            self.fc2_latent_proj = nn.Linear(spec.latent, hidden, bias=spec.bias)
        self.shared_experts = ReLU2(hidden, spec.shared, spec.bias)

    def route(self, x):
        """(weights (N, k), experts (N, k)) of rows x (N, hidden); the
        weights in float32 (float64 for float64 rows: gradcheck)."""
        s = self.spec
        dt = torch.promote_types(x.dtype, torch.float32)
        score = torch.sigmoid(F.linear(x.to(dt), self.gate.weight.to(dt)))
        choice = score + self.gate.e_score_correction_bias.to(dt)
        N, G = choice.shape[0], s.n_group
        if s.topk_group < G:
            groups = choice.view(N, G, -1).topk(2, dim=-1)[0].sum(dim=-1)  # (N, G)
            keep = torch.zeros_like(groups, dtype=torch.bool)
            keep.scatter_(1, groups.topk(s.topk_group, dim=-1)[1], True)
            choice = choice.masked_fill(~keep.repeat_interleave(s.experts // G, dim=1), float("-inf"))
        e = choice.topk(s.top_k, dim=-1)[1]
        w = score.gather(1, e)
        if s.norm_topk_prob:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return w * s.scale, e

    def forward(self, x, observe=None, layer=0):
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        w, e = self.route(xf)
        h = self.fc1_latent_proj(xf) if self.spec.latent else xf
        y = torch.zeros(h.shape, dtype=w.dtype, device=h.device)
        mask = F.one_hot(e, num_classes=self.spec.experts).permute(2, 1, 0)  # (experts, k, N)
        for j in torch.nonzero(mask.sum(dim=(1, 2)) > 0).flatten().tolist():
            slot, rows = torch.where(mask[j])
            y.index_add_(0, rows, (self.experts[j](h[rows]) * w[rows, slot, None]).to(w.dtype))
        y = y.to(x.dtype)
        if self.spec.latent:
            y = self.fc2_latent_proj(y)
        return y.reshape(shape) + self.shared_experts(x)


def nemotron_names(prefix, spec):
    """The mixer's tensor names after prefix (…layers.N.mixer.), in
    architecture.Tensors order (TensorList.nemotronMoE)."""
    b = [".weight", ".bias"] if spec.bias else [".weight"]
    names = [prefix + "gate.weight", prefix + "gate.e_score_correction_bias"]
    if spec.latent:
        names += [prefix + "fc1_latent_proj" + x for x in b]
    for j in range(spec.experts):
        for proj in ("up_proj", "down_proj"):
            names += [f"{prefix}experts.{j}.{proj}{x}" for x in b]
    if spec.latent:
        names += [prefix + "fc2_latent_proj" + x for x in b]
    for proj in ("up_proj", "down_proj"):
        names += [f"{prefix}shared_experts.{proj}{x}" for x in b]
    return names


def nemotron_flops(spec, N, H):
    """2 per multiply-add over N rows: the router, the latent projections,
    each row's k relu² experts and the shared expert."""
    inner = spec.latent or H
    f = 2 * N * H * spec.experts + 2 * N * inner * spec.width * 2 * spec.top_k + 2 * N * H * spec.shared * 2
    if spec.latent:
        f += 2 * N * H * spec.latent * 2
    return f


class GptOssSpec:
    """One gpt-oss MLP's shape and constants, as GptOssConfig names them:
    experts (num_local_experts), top_k (num_experts_per_tok), width
    (intermediate_size), alpha (swiglu_alpha), limit (swiglu_limit)."""

    attr = "mlp"

    def __init__(self, experts, top_k, width, alpha=1.702, limit=7.0):
        self.experts, self.top_k, self.width, self.alpha, self.limit = experts, top_k, width, alpha, limit
        self.norm_topk_prob = False

    def shape(self):
        """The contract's moe record (job/CONTRACT.md): router topk_softmax,
        norm_topk_prob false (architecture's RouterRule for gpt-oss)."""
        return {"experts": self.experts, "top_k": self.top_k, "width": self.width, "router": TOPK_SOFTMAX,
                "norm_topk_prob": False}


def gptoss_spec(cfg, error):
    """The GptOssSpec of config.json cfg with GptOssConfig's defaults
    (num_local_experts 128, num_experts_per_tok 4, or experts_per_token as
    package architecture also reads it; swiglu_alpha 1.702, swiglu_limit
    7.0); intermediate_size is required, as architecture requires it."""

    def count(names, default):
        for name in names:
            if cfg.get(name) is not None:
                v = cfg[name]
                break
        else:
            name, v = names[0], default
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise error(f"config.json: {name} = {v!r}, want a positive integer")
        return v

    def number(name, default):
        v = cfg.get(name)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise error(f"config.json: {name} = {v!r}, want a positive finite number")
        return float(v)

    s = GptOssSpec(count(("num_local_experts",), 128), count(("num_experts_per_tok", "experts_per_token"), 4),
                   count(("intermediate_size",), None), number("swiglu_alpha", 1.702), number("swiglu_limit", 7.0))
    if s.top_k > s.experts:
        raise error(f"num_experts_per_tok {s.top_k} exceeds the {s.experts} experts")
    return s


class GptOssExperts(nn.Module):
    """The stacked experts, state_dict names gate_up_proj (experts, hidden,
    2·width), gate_up_proj_bias (experts, 2·width), down_proj (experts,
    width, hidden), down_proj_bias (experts, hidden)."""

    def __init__(self, hidden, spec):
        super().__init__()
        E, W = spec.experts, spec.width
        self.alpha, self.limit = spec.alpha, spec.limit
        self.gate_up_proj = nn.Parameter(torch.zeros(E, hidden, 2 * W))
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(E, 2 * W))
        self.down_proj = nn.Parameter(torch.zeros(E, W, hidden))
        self.down_proj_bias = nn.Parameter(torch.zeros(E, hidden))

    def expert(self, j, h):
        """Expert j of rows h (n, hidden): the clamped SwiGLU of the module
        docstring (GptOssExperts.forward)."""
        gu = h @ self.gate_up_proj[j] + self.gate_up_proj_bias[j]
        gate, up = gu[..., 0::2], gu[..., 1::2]
        gate = gate.clamp(max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        return ((up + 1) * glu) @ self.down_proj[j] + self.down_proj_bias[j]


class GptOssMoE(nn.Module):
    """gpt-oss's MLP (module docstring): router.{weight,bias} and experts.*."""

    def __init__(self, hidden, spec):
        super().__init__()
        self.spec = spec
        self.router = nn.Linear(hidden, spec.experts, bias=True)
        self.experts = GptOssExperts(hidden, spec)

    def route(self, x):
        """(weights (N, k) in x's dtype, experts (N, k)) of rows x (N,
        hidden): GptOssTopKRouter.forward."""
        v, e = torch.topk(self.router(x), self.spec.top_k, dim=-1)
        w = F.softmax(v, dim=1, dtype=torch.promote_types(x.dtype, torch.float32))
        return w.to(x.dtype), e

    def forward(self, x, observe=None, layer=0):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        w, e = self.route(x)
        out = torch.zeros_like(x)
        mask = F.one_hot(e, num_classes=self.spec.experts).permute(2, 1, 0)  # (experts, k, N)
        for j in torch.nonzero(mask.sum(dim=(1, 2)) > 0).flatten().tolist():
            slot, rows = torch.where(mask[j])
            y = self.experts.expert(j, x[rows]) * w[rows, slot, None]
            out.index_add_(0, rows, y.to(x.dtype))
        return out.reshape(shape)


def gptoss_names(p):
    """gpt-oss's MLP tensor names after p (…layers.N.mlp.), in
    architecture.Tensors order (TensorList.gptOssMoE)."""
    return [p + "router.weight", p + "router.bias", p + "experts.gate_up_proj", p + "experts.gate_up_proj_bias",
            p + "experts.down_proj", p + "experts.down_proj_bias"]
