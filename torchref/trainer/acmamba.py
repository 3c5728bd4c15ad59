"""Nemotron-H (NemotronHForCausalLM) as autocompress's native engine runs it.

A hybrid: every layer is one norm and one mixer, chosen by the config's
hybrid_override_pattern (M Mamba2, * attention, - MLP, E mixture of
experts), as transformers' models/nemotron_h/modeling_nemotron_h.py
computes it (NemotronHBlock.forward: out = x + mixer(norm(x))):

  - Mamba2 (NemotronHMamba2Mixer.torch_forward without a cache):
        z, xBC, dt = split(in_proj(x), [d_inner, d_inner + 2*G*N, heads])
        xBC = silu(causal depthwise conv1d(xBC) + bias)
        x, B, C = split(xBC, [d_inner, G*N, G*N])
        dt = clamp(softplus(dt + dt_bias), time_step_limit); A = -exp(A_log)
        per head h of group g = h // (heads / G), over time t:
            state = exp(dt*A) * state + dt * x_h (outer) B_g   (head_dim x N)
            y_h = state . C_g + D * x_h
        y = rmsnorm per group of d_inner / G (y * silu(z)) * norm.weight
        out = out_proj(y)
    The scan (ssd_scan) is torch_forward's chunked SSD in its plain form:
    within a chunk a masked (T x T) decay matrix, across chunks the
    carried state (the engine's sequential recurrence sums the same terms
    in another order);
  - attention without rotary embedding (NemotronHAttention: grouped-query,
    causal, scaled by head_dim**-0.5), acmodel.Attention with no rotation;
  - MLP (NemotronHMLP): down_proj(relu(up_proj(x))**2), not gated;
  - MoE (NemotronHMoE): acmoe.NemotronMoE, sigmoid routing with
    e_score_correction_bias and group-limited top-k, relu² experts
    (through the LatentMoE projections when moe_latent_size is set) and
    the shared expert.

Tensor names are the checkpoint's (backbone.embeddings, backbone.layers.N.norm
and .mixer.*, backbone.norm_f, lm_head), in architecture.Tensors order.
acmodel dispatches here (Arch, load, hf_names, forward_flops) when
config.json's class is NemotronHForCausalLM.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import acmodel
import acmoe

CLASS = "NemotronHForCausalLM"
PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}


def handles(cfg):
    """Whether config.json cfg is a class this module runs."""
    cls = (cfg.get("architectures") or [None])[0]
    if cls is None and cfg.get("model_type") == "nemotron_h":
        cls = CLASS
    return cls == CLASS


class HybridLayer:
    """One layer's kind ("mamba", "attention", "mlp" or "moe") and widths
    (an MoE layer's moe is its acmoe.NemotronSpec)."""

    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)


def _pattern(cfg):
    p = cfg.get("hybrid_override_pattern")
    if not p and isinstance(cfg.get("layers_block_type"), list):
        inv = {v: k for k, v in PATTERN.items()}
        p = "".join(inv.get(t, "?") for t in cfg["layers_block_type"])
    if not p:
        raise acmodel.ConfigError("config.json: a Nemotron-H model needs hybrid_override_pattern")
    for i, c in enumerate(p):
        if c not in PATTERN:
            raise acmodel.ConfigError(f"hybrid_override_pattern[{i}] = {c!r}: want M, *, - or E")
    n = cfg.get("num_hidden_layers")
    if n is not None and n != len(p):
        raise acmodel.ConfigError(f"num_hidden_layers is {n} but hybrid_override_pattern has {len(p)} layers")
    return p


class HybridArch:
    """A Nemotron-H description, with the interface of acmodel.Arch."""

    def __init__(self, cfg):
        self.raw = cfg
        self.cls = CLASS
        self.hidden = acmodel._req(cfg, "hidden_size")
        self.vocab = acmodel._req(cfg, "vocab_size")
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        eps = acmodel._first(cfg, ("layer_norm_epsilon", "rms_norm_eps", "norm_eps"), 1e-5)
        self.eps = eps if eps and eps > 0 else 1e-5
        self.max_positions = cfg.get("max_position_embeddings") or 0
        lim = cfg.get("time_step_limit") or [0.0, float("inf")]
        self.dt_limit = (float(lim[0]), float(lim[1]))
        act = (cfg.get("mlp_hidden_act") or "relu2").lower()
        if act != "relu2":
            raise acmodel.ConfigError(f"mlp_hidden_act {act!r}: the reference trainer's Nemotron-H runs relu2 MLPs only")
        pattern = _pattern(cfg)
        moe = acmoe.nemotron_spec(cfg, acmodel.ConfigError) if "E" in pattern else None
        self.layers = []
        for c in pattern:
            kind = PATTERN[c]
            if kind == "mamba":
                l = HybridLayer(kind, heads=acmodel._req(cfg, "mamba_num_heads"), head_dim=acmodel._req(cfg, "mamba_head_dim"),
                                state=cfg.get("ssm_state_size") or 128, groups=cfg.get("n_groups") or 8,
                                conv=cfg.get("conv_kernel") or 4, conv_bias=bool(cfg.get("use_conv_bias", True)),
                                bias=bool(cfg.get("use_bias", False)))
                if l.heads % l.groups:
                    raise acmodel.ConfigError(f"mamba_num_heads {l.heads} is not a multiple of n_groups {l.groups}")
            elif kind == "attention":
                heads = acmodel._req(cfg, "num_attention_heads")
                kv = cfg.get("num_key_value_heads") or heads
                hd = cfg.get("head_dim") or cfg.get("attention_head_dim") or self.hidden // heads
                bias = bool(cfg.get("attention_bias", False))
                l = HybridLayer(kind, heads=heads, kv_heads=kv, head_dim=hd, qkv_bias=bias, out_bias=bias, qk_norm=False,
                                window=cfg.get("sliding_window") or 0, attention=True)
                if heads % kv:
                    raise acmodel.ConfigError(f"{heads} heads are not a multiple of {kv} KV heads")
            elif kind == "moe":
                l = HybridLayer(kind, moe=moe)
            else:
                l = HybridLayer(kind, ffn=acmodel._req(cfg, "intermediate_size"), mlp_bias=bool(cfg.get("mlp_bias", False)))
            self.layers.append(l)
        self.model_class = HybridModel

    def shape(self):
        """The contract's shape record (job/CONTRACT.md): a Mamba layer has
        "mamba" (and neither attention nor MLP)."""
        out = []
        for l in self.layers:
            s = {"attention": None, "mlp": None}
            if l.kind == "attention":
                s["attention"] = {"heads": l.heads, "kv_heads": l.kv_heads, "head_dim": l.head_dim}
            elif l.kind == "mlp":
                s["mlp"] = {"width": l.ffn}
            elif l.kind == "moe":
                s["moe"] = l.moe.shape()
            else:
                s["mamba"] = {"heads": l.heads, "head_dim": l.head_dim, "state": l.state, "groups": l.groups, "conv": l.conv}
            out.append(s)
        return {"arch": self.cls, "vocab": self.vocab, "hidden": self.hidden, "tied": self.tied, "layers": out}

    def hf_names(self):
        names = ["backbone.embeddings.weight"]
        for i, l in enumerate(self.layers):
            p = f"backbone.layers.{i}."
            names.append(p + "norm.weight")
            m = p + "mixer."
            if l.kind == "mamba":
                names.append(m + "in_proj.weight")
                if l.bias:
                    names.append(m + "in_proj.bias")
                names.append(m + "conv1d.weight")
                if l.conv_bias:
                    names.append(m + "conv1d.bias")
                names += [m + "dt_bias", m + "A_log", m + "D", m + "norm.weight", m + "out_proj.weight"]
                if l.bias:
                    names.append(m + "out_proj.bias")
            elif l.kind == "attention":
                for proj in ("q", "k", "v", "o"):
                    names.append(m + f"{proj}_proj.weight")
                    if (l.qkv_bias and proj != "o") or (l.out_bias and proj == "o"):
                        names.append(m + f"{proj}_proj.bias")
            elif l.kind == "moe":
                names += acmoe.nemotron_names(m, l.moe)
            else:
                for proj in ("up", "down"):
                    names.append(m + f"{proj}_proj.weight")
                    if l.mlp_bias:
                        names.append(m + f"{proj}_proj.bias")
        names.append("backbone.norm_f.weight")
        if not self.tied:
            names.append("lm_head.weight")
        return names

    def forward_flops(self, B, T, first=0):
        """engine.Model.ForwardFLOPsFrom for a hybrid: projections, the LM
        head, attention pairs, and per Mamba layer its convolution and scan
        (engine/mamba.go mambaFLOPs)."""
        N, H = B * T, self.hidden
        f = 2 * N * H * self.vocab
        for l in self.layers[min(max(first, 0), len(self.layers)):]:
            if l.kind == "attention":
                qd, kd = l.heads * l.head_dim, l.kv_heads * l.head_dim
                f += 2 * N * H * (2 * qd + 2 * kd) + 4 * B * l.heads * (T * (T + 1) / 2) * l.head_dim
            elif l.kind == "mlp":
                f += 2 * N * H * l.ffn * 2
            elif l.kind == "moe":
                f += acmoe.nemotron_flops(l.moe, N, H)
            else:
                di = l.heads * l.head_dim
                conv = di + 2 * l.groups * l.state
                f += 2 * N * H * (di + conv + l.heads + di) + 2 * N * conv * l.conv + 6 * N * di * l.state
        return f


# SCAN_CHUNK is ssd_scan's chunk length: any value gives the same sums (up
# to rounding); 32 keeps the within-chunk (T x T) terms small.
SCAN_CHUNK = 32


def ssd_scan(xdt, la, Bm, Cm, chunk):
    """The recurrence state_t = exp(la_t) * state_{t-1} + xdt_t (outer) B_t,
    y_t = state_t . C_t from a zero state, computed a chunk at a time as
    torch_forward's SSD does: within a chunk, with a_t the cumulative sum
    of la over the chunk up to t,
        y_t = sum_{s <= t} exp(a_t - a_s) (C_t . B_s) xdt_s + exp(a_t) C_t . state_0
        state_L = exp(a_L) state_0 + sum_s exp(a_L - a_s) xdt_s (outer) B_s
    xdt (B, T, heads, hd) = dt * x; la (B, T, heads) = dt * A; Bm, Cm
    (B, T, heads, N). Returns y (B, T, heads, hd)."""
    Bsz, T, nh, hd = xdt.shape
    state = xdt.new_zeros(Bsz, nh, hd, Bm.shape[-1])
    ys = []
    for c0 in range(0, T, chunk):
        sl = slice(c0, min(c0 + chunk, T))
        x, b, c = xdt[:, sl], Bm[:, sl], Cm[:, sl]
        a = la[:, sl].cumsum(1)  # (B, L, heads)
        L = a.shape[1]
        causal = torch.ones(L, L, dtype=torch.bool, device=a.device).tril()
        seg = (a[:, :, None, :] - a[:, None, :, :]).masked_fill(~causal[None, :, :, None], float("-inf"))
        w = torch.exp(seg) * torch.einsum("bthn,bshn->btsh", c, b)  # (B, t, s, heads)
        y = torch.einsum("btsh,bshp->bthp", w, x)
        y = y + torch.einsum("bthn,bhpn->bthp", c, state) * torch.exp(a)[..., None]
        last = a[:, -1]  # (B, heads)
        tail = torch.exp(last[:, None, :] - a)  # (B, L, heads)
        state = state * torch.exp(last)[:, :, None, None] + torch.einsum("bsh,bshp,bshn->bhpn", tail, x, b)
        ys.append(y)
    return torch.cat(ys, dim=1)


class Mamba2Mixer(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        H = arch.hidden
        self.heads, self.hd, self.N, self.G, self.K = l.heads, l.head_dim, l.state, l.groups, l.conv
        self.di = l.heads * l.head_dim
        self.conv_dim = self.di + 2 * l.groups * l.state
        self.eps, self.dt_limit = arch.eps, arch.dt_limit
        self.in_proj = nn.Linear(H, self.di + self.conv_dim + l.heads, bias=l.bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, l.conv, groups=self.conv_dim, bias=l.conv_bias,
                                padding=l.conv - 1)
        self.dt_bias = nn.Parameter(torch.zeros(l.heads))
        self.A_log = nn.Parameter(torch.zeros(l.heads))
        self.D = nn.Parameter(torch.ones(l.heads))
        self.norm = acmodel.Norm(self.di, arch.eps)  # the gated norm's weight
        self.out_proj = nn.Linear(self.di, H, bias=l.bias)

    def forward(self, x, observe=None, layer=0):
        Bsz, T, _ = x.shape
        nh, hd, N, G = self.heads, self.hd, self.N, self.G
        z, xbc, dt = self.in_proj(x).split([self.di, self.conv_dim, nh], dim=-1)
        xbc = self.conv1d(xbc.transpose(1, 2))[..., :T].transpose(1, 2)
        xbc = F.silu(xbc)
        xs, Bm, Cm = xbc.split([self.di, G * N, G * N], dim=-1)
        dt = F.softplus(dt + self.dt_bias)
        lo, hi = self.dt_limit
        dt = dt.clamp(min=lo) if math.isinf(hi) else dt.clamp(lo, hi)
        A = -torch.exp(self.A_log.float())
        xs = xs.reshape(Bsz, T, nh, hd)
        Bm = Bm.reshape(Bsz, T, G, N).repeat_interleave(nh // G, dim=2)  # (B, T, heads, N)
        Cm = Cm.reshape(Bsz, T, G, N).repeat_interleave(nh // G, dim=2)
        y = ssd_scan(dt[..., None] * xs, dt * A, Bm, Cm, SCAN_CHUNK) + self.D[:, None] * xs  # (B, T, heads, hd)
        y = y.reshape(Bsz, T, self.di) * F.silu(z)
        g = y.view(Bsz, T, G, self.di // G)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + self.eps)
        y = g.reshape(Bsz, T, self.di) * self.norm.weight
        if observe is not None:
            observe(layer, "mamba_heads", y)
        return self.out_proj(y)


class ReLU2MLP(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        self.up_proj = nn.Linear(arch.hidden, l.ffn, bias=l.mlp_bias)
        self.down_proj = nn.Linear(l.ffn, arch.hidden, bias=l.mlp_bias)

    def forward(self, x, observe=None, layer=0):
        h = F.relu(self.up_proj(x)).square()
        if observe is not None:
            observe(layer, "mlp_act", h)
        return self.down_proj(h)


class HybridBlock(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        self.kind = l.kind
        self.norm = acmodel.Norm(arch.hidden, arch.eps)
        if l.kind == "mamba":
            self.mixer = Mamba2Mixer(arch, l)
        elif l.kind == "attention":
            self.mixer = acmodel.Attention(arch, l)
        elif l.kind == "moe":
            self.mixer = acmoe.NemotronMoE(arch.hidden, l.moe)
        else:
            self.mixer = ReLU2MLP(arch, l)

    def forward(self, x, norope, observe=None, layer=0, skip_attn=False, skip_mlp=False):
        """As acmodel.Block: the mixer of a Mamba or attention layer is its
        "attention" sub-block, an MLP or MoE layer's its "mlp" one."""
        mid = x
        if self.kind not in ("mlp", "moe"):
            if not skip_attn:
                n = self.norm(x)
                if observe is not None:
                    observe(layer, "attn_norm", n)
                if self.kind == "mamba":
                    mid = x + self.mixer(n, observe, layer)
                else:
                    mid = x + self.mixer(n, norope, observe, layer)
            if observe is not None:
                observe(layer, "attn_residual", mid)
            return mid
        if observe is not None:
            observe(layer, "attn_residual", mid)
        if skip_mlp:
            return mid
        n = self.norm(mid)
        if observe is not None:
            observe(layer, "mlp_norm", n)
        return mid + self.mixer(n, observe, layer)


class Backbone(nn.Module):
    """HF's "backbone." prefix: embeddings, layers, norm_f."""

    def __init__(self, arch):
        super().__init__()
        self.embeddings = nn.Embedding(arch.vocab, arch.hidden)
        self.layers = nn.ModuleList([HybridBlock(arch, l) for l in arch.layers])
        self.norm_f = acmodel.Norm(arch.hidden, arch.eps)


class HybridModel(nn.Module):
    """A Nemotron-H causal LM with acmodel.Model's interface (skip sets,
    observe, checkpointing; .model.layers are the blocks)."""

    def __init__(self, arch):
        super().__init__()
        self.arch = arch
        self.backbone = Backbone(arch)
        self.lm_head = None if arch.tied else nn.Linear(arch.hidden, arch.vocab, bias=False)
        self.skip, self.skip_attn, self.skip_mlp = set(), set(), set()
        self.checkpointing = False

    @property
    def model(self):
        return self.backbone

    def forward(self, tokens, observe=None):
        B, T = tokens.shape
        empty = torch.zeros(T, 0, device=tokens.device)
        norope = (empty, empty)  # acmodel.apply_rope leaves heads unrotated
        x = self.backbone.embeddings(tokens)
        for i, blk in enumerate(self.backbone.layers):
            if observe is not None:
                observe(i, "layer_input", x)
            if i not in self.skip:
                args = (x, norope, observe, i, i in self.skip_attn, i in self.skip_mlp)
                if self.checkpointing and self.training and torch.is_grad_enabled() and observe is None:
                    from torch.utils.checkpoint import checkpoint
                    x = checkpoint(blk, *args, use_reentrant=False)
                else:
                    x = blk(*args)
            if observe is not None:
                observe(i, "layer_output", x)
        x = self.backbone.norm_f(x)
        w = self.backbone.embeddings.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w)
