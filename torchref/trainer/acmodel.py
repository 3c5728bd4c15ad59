"""The Llama family as autocompress's native engine (package engine) runs it.

One decoder layer is

    mid = x + o_proj(attention(rope(qk_norm(q, k)), v))   (x if no attention)
    out = mid + down_proj(silu(gate_proj(n2)) * up_proj(n2)) (mid if no MLP)

with n1 = input_layernorm(x) feeding q, k, v and n2 =
post_attention_layernorm(mid); RMSNorm is x * rsqrt(mean(x^2) + eps) * w.
Attention is grouped-query (query head h reads KV head h // (heads /
kv_heads)), causal, optionally sliding-window, scaled by 1/sqrt(head_dim);
RoPE is HF's rotate_half on the first rot = partial * head_dim dims of each
head, with "linear" or "llama3" frequency scaling. Layers may differ in KV
heads and FFN width and may lack attention or MLP (DeciLM block_configs,
"no_op"). The attention is written with matmul + mask + softmax, so it runs
on torch 1.13 (no scaled_dot_product_attention, no nn.RMSNorm).

Config readers follow package architecture: LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and
DeciLMForCausalLM, and the MoE classes Qwen3MoeForCausalLM,
MixtralForCausalLM and GptOssForCausalLM, whose mixture-of-experts blocks
(in place of a layer's MLP) live in acmoe.py. The hybrid
NemotronHForCausalLM lives in acmamba.py: Arch, load, hf_names and
forward_flops hand it over there.

gpt-oss (GptOssForCausalLM) adds to the Llama layer, as transformers'
models/gpt_oss/modeling_gpt_oss.py computes it:
  - attention sinks (GptOssAttention.sinks, eager_attention_forward): one
    learned logit per query head joins every row's softmax as an extra
    column and is dropped after it, so that
        p[t, u] = exp(s[t, u]) / (sum over allowed u' of exp(s[t, u']) + exp(sink[h]))
    (the max subtracted first, as softmax does);
  - q/k/v/o biases (attention_bias, default true);
  - sliding-window layers by layer_types (sliding_attention: key u
    visible from query t when t - u < sliding_window, masking_utils'
    sliding_window_overlay kv_idx > q_idx - sliding_window; default
    alternating, sliding at even layers, GptOssConfig.__post_init__);
  - YaRN RoPE (modeling_rope_utils._compute_yarn_parameters: see yarn())
    whose attention factor multiplies cos and sin
    (GptOssRotaryEmbedding.forward), so q·k scales by its square;
  - RMSNorm as Llama's (GptOssRMSNorm: float32 statistics, weight times
    the normed input, cast back).
Its MLP is acmoe.GptOssMoE. Checkpoints must hold dense (bf16, float16 or
float32) experts: MXFP4 blocks (*_blocks, *_scales) are refused by load.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import acio
import acmoe


class ConfigError(Exception):
    """A config.json the reference trainer cannot run."""


# Per-class defaults (transformers' configuration classes, as package
# architecture records them) and attention rules.
FAMILIES = {
    "LlamaForCausalLM": dict(theta=10000, eps=1e-6, kv=None, head_dim=0, bias="attention_bias", qk_norm=False, windows="none"),
    "MistralForCausalLM": dict(theta=10000, eps=1e-6, kv=8, head_dim=0, bias="none", qk_norm=False, windows="one"),
    "Qwen2ForCausalLM": dict(theta=10000, eps=1e-6, kv=32, head_dim=0, bias="qkv", qk_norm=False, windows="qwen"),
    "Qwen3ForCausalLM": dict(theta=10000, eps=1e-6, kv=32, head_dim=128, bias="attention_bias", qk_norm=True, windows="qwen"),
    "DeciLMForCausalLM": dict(theta=10000, eps=1e-6, kv=None, head_dim=0, bias="attention_bias", qk_norm=False, windows="none"),
    "Qwen3MoeForCausalLM": dict(theta=10000, eps=1e-6, kv=4, head_dim=128, bias="attention_bias", qk_norm=True, windows="qwen"),
    "MixtralForCausalLM": dict(theta=1e6, eps=1e-5, kv=8, head_dim=0, bias="none", qk_norm=False, windows="mixtral"),
    # GptOssConfig: attention_bias true, head_dim 64, 8 KV heads.
    "GptOssForCausalLM": dict(theta=150000, eps=1e-5, kv=8, head_dim=64, bias="attention_bias_true", qk_norm=False,
                              windows="gptoss", sinks=True),
}
MODEL_TYPES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
               "qwen3": "Qwen3ForCausalLM", "nemotron-nas": "DeciLMForCausalLM",
               "qwen3_moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM", "gpt_oss": "GptOssForCausalLM"}


class Layer:
    """One decoder layer's shape: attention (None when absent) and MLP, or
    in its place an MoE block (moe, an acmoe.Spec; mlp is then False)."""

    def __init__(self, heads=0, kv_heads=0, head_dim=0, qkv_bias=False, out_bias=False, qk_norm=False,
                 window=0, ffn=0, mlp_bias=False, act="silu", attention=True, mlp=True, moe=None, sinks=False):
        self.attention, self.mlp, self.moe = attention, mlp and moe is None, moe
        self.sinks = sinks
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.qkv_bias, self.out_bias, self.qk_norm, self.window = qkv_bias, out_bias, qk_norm, window
        self.ffn, self.mlp_bias, self.act = ffn, mlp_bias, act


class Arch:
    """A model description: the globals and one Layer per decoder layer."""

    def __new__(cls, cfg):
        import acmamba  # the hybrid family has its own description
        if cls is Arch and acmamba.handles(cfg):
            return acmamba.HybridArch(cfg)
        return super().__new__(cls)

    def __init__(self, cfg):
        self.raw = cfg
        cls = (cfg.get("architectures") or [None])[0]
        if cls is None:
            cls = MODEL_TYPES.get(cfg.get("model_type", ""))
        if cls not in FAMILIES:
            raise ConfigError(f"architecture {cls!r} is not one the reference trainer runs "
                              f"(supported: {', '.join(sorted(FAMILIES))})")
        fam = FAMILIES[cls]
        self.cls = cls
        self.hidden = _req(cfg, "hidden_size")
        self.vocab = _req(cfg, "vocab_size")
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        eps = _first(cfg, ("rms_norm_eps", "layer_norm_epsilon", "norm_eps"), fam["eps"])
        self.eps = eps if eps and eps > 0 else 1e-6
        self.max_positions = cfg.get("max_position_embeddings") or 0
        self.rope_theta, self.rope_partial, self.rope_scaling = _rope(cfg, fam["theta"], cls)
        act = cfg.get("hidden_act", "silu") or "silu"
        if act.lower() not in ("silu", "swish"):
            raise ConfigError(f"hidden_act {act!r}: the reference trainer runs SwiGLU (silu) MLPs only")
        heads = _req(cfg, "num_attention_heads")
        if "num_key_value_heads" in cfg:
            kv = cfg["num_key_value_heads"] if cfg["num_key_value_heads"] is not None else heads
        else:
            kv = heads if fam["kv"] is None else fam["kv"]
        hd = cfg.get("head_dim") or cfg.get("attention_head_dim") or fam["head_dim"] or self.hidden // heads
        if fam["bias"] == "qkv":
            qkv_bias, out_bias = True, False
        elif fam["bias"] == "none":
            qkv_bias = out_bias = False
        else:
            qkv_bias = out_bias = bool(cfg.get("attention_bias", fam["bias"] == "attention_bias_true"))
        mlp_bias = bool(cfg.get("mlp_bias", False)) if cls in ("LlamaForCausalLM", "DeciLMForCausalLM") else False
        if cls == "DeciLMForCausalLM":
            self.layers = _deci_layers(cfg, heads, hd, qkv_bias, mlp_bias, self.hidden)
            return
        n = _req(cfg, "num_hidden_layers")
        moe = acmoe.specs(cfg, cls, n, ConfigError)
        width = _req(cfg, "intermediate_size") if None in moe else 0
        windows = _windows(cfg, fam["windows"], n)
        self.layers = [Layer(heads, kv, hd, qkv_bias, out_bias, fam["qk_norm"], windows[i], width, mlp_bias, moe=moe[i],
                             sinks=fam.get("sinks", False)) for i in range(n)]
        for i, l in enumerate(self.layers):
            if l.heads % l.kv_heads:
                raise ConfigError(f"layer {i}: {l.heads} heads are not a multiple of {l.kv_heads} KV heads")

    def shape(self):
        """The contract's shape record (job/CONTRACT.md) of this model."""
        layers = [{"attention": {"heads": l.heads, "kv_heads": l.kv_heads, "head_dim": l.head_dim} if l.attention else None,
                   "mlp": {"width": l.ffn} if l.mlp else None} for l in self.layers]
        for s, l in zip(layers, self.layers):
            if l.moe is not None:
                s["moe"] = l.moe.shape()
        return {"arch": self.cls, "vocab": self.vocab, "hidden": self.hidden, "tied": self.tied, "layers": layers}


def _req(cfg, key):
    v = cfg.get(key)
    if not isinstance(v, int) or v <= 0:
        raise ConfigError(f"config.json: {key} = {v!r}, want a positive integer")
    return v


def _first(cfg, keys, default):
    for k in keys:
        if cfg.get(k) is not None:
            return float(cfg[k])
    return default


# GPTOSS_YARN is GptOssConfig's rope scaling when config.json gives none.
GPTOSS_YARN = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
               "original_max_position_embeddings": 4096}


def _rope(cfg, theta, cls=None):
    theta = float(cfg.get("rope_theta", theta) or theta)
    partial = float(cfg.get("partial_rotary_factor", 1) or 1)
    s = cfg.get("rope_scaling")
    explicit = False  # a rope_type "default" said so
    if s is None and isinstance(cfg.get("rope_parameters"), dict):  # transformers 5
        p = cfg["rope_parameters"]
        theta = float(p.get("rope_theta", theta))
        if p.get("rope_type", "default") != "default":
            s = p
        else:
            explicit = "rope_type" in p
    if cls == "GptOssForCausalLM" and not s and not explicit:
        # GptOssConfig fills in its YaRN when the config has no rope
        # scaling (rope_parameters None: __post_init__).
        s = GPTOSS_YARN
    if not s:
        return theta, partial, None
    kind = (s.get("rope_type") or s.get("type") or "").lower()
    factor = float(s.get("factor") or 0)
    if kind == "default" and factor == 0:
        return theta, partial, None
    if kind == "yarn":
        if cls != "GptOssForCausalLM":
            raise ConfigError(f"rope_scaling type 'yarn' is run for GptOssForCausalLM only here, not {cls}")
        return theta, partial, _yarn_params(cfg, s)
    if kind not in ("", "default", "linear", "llama3"):
        raise ConfigError(f"rope_scaling type {kind!r} (supported: linear, llama3; yarn for gpt-oss)")
    return theta, partial, dict(type=kind, factor=factor, low=float(s.get("low_freq_factor") or 0),
                                high=float(s.get("high_freq_factor") or 0),
                                old=float(s.get("original_max_position_embeddings") or 0))


def _yarn_params(cfg, s):
    """The YaRN constants of rope_scaling s, with
    _compute_yarn_parameters' defaults: factor (max_position_embeddings /
    original_max_position_embeddings when absent), beta_fast 32, beta_slow
    1, truncate true, the attention factor given or derived (yarn()),
    original_max_position_embeddings (max_position_embeddings when absent).
    A config whose factor differs from max_position_embeddings / original
    is read as the newest transformers reads it: factor as given."""
    maxpos = cfg.get("max_position_embeddings") or 0
    old = s.get("original_max_position_embeddings") or maxpos
    if not old or old <= 0:
        raise ConfigError("rope_scaling yarn: want original_max_position_embeddings (or max_position_embeddings)")
    factor = s.get("factor")
    factor = float(factor) if factor is not None else maxpos / old
    if not (factor > 0 and math.isfinite(factor)):
        raise ConfigError(f"rope_scaling yarn: factor {factor!r}, want a positive finite number")
    num = lambda k: None if s.get(k) is None else float(s[k])  # noqa: E731
    return dict(type="yarn", factor=factor, old=float(old), beta_fast=float(s.get("beta_fast") or 32),
                beta_slow=float(s.get("beta_slow") or 1), truncate=bool(s.get("truncate", True)),
                attention_factor=num("attention_factor"), mscale=num("mscale"), mscale_all_dim=num("mscale_all_dim"))


def _windows(cfg, rule, n):
    if rule == "gptoss":
        # GptOssConfig: sliding_window 128 (architecture reads null as
        # that default too); layer_types, else sliding at even layers.
        window = cfg.get("sliding_window")
        window = 128 if window is None else window
        types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
        if len(types) != n:
            raise ConfigError(f"layer_types has {len(types)} entries for {n} layers")
        for i, t in enumerate(types):
            if t not in ("sliding_attention", "full_attention"):
                raise ConfigError(f"layer_types[{i}] = {t!r}: want sliding_attention or full_attention")
        return [window if t == "sliding_attention" else 0 for t in types]
    if rule == "mixtral":  # MixtralConfig's sliding_window defaults to None
        return [cfg.get("sliding_window") or 0] * n
    if rule == "one":
        w = cfg["sliding_window"] if "sliding_window" in cfg else 4096
        return [w or 0] * n
    if rule == "qwen":
        window = cfg.get("sliding_window") or 4096
        types = cfg.get("layer_types")
        if types:
            return [window if t == "sliding_attention" else 0 for t in types]
        if not cfg.get("use_sliding_window") or cfg.get("sliding_window") is None:
            return [0] * n
        mwl = cfg.get("max_window_layers", 28)
        return [window if i >= mwl else 0 for i in range(n)]
    return [0] * n


def ffn_mult_to_width(mult, hidden):
    """DeciLM's rule: round_up(int(2 * ffn_mult * hidden / 3), 256)."""
    w = int(2 * mult * hidden / 3)
    return (w + 255) // 256 * 256


def _deci_layers(cfg, heads, hd, bias, mlp_bias, hidden):
    blocks = cfg.get("block_configs")
    if not isinstance(blocks, list) or not blocks:
        raise ConfigError("config.json: DeciLM needs a non-empty block_configs")
    layers = []
    for i, b in enumerate(blocks):
        a, x = b.get("attention") or {}, b.get("ffn") or {}
        for sub, name in ((a, "attention"), (x, "ffn")):
            for k in ("replace_with_linear", "sparsify", "num_sink_tokens", "parallel_blocks", "mamba", "moe"):
                if sub.get(k):
                    raise ConfigError(f"block_configs[{i}].{name}.{k} is set: not supported")
        l = Layer(heads=heads, head_dim=hd, qkv_bias=bias, out_bias=bias, mlp_bias=mlp_bias)
        if a.get("no_op"):
            l.attention = False
        else:
            if a.get("num_key_value_heads"):
                l.kv_heads = a["num_key_value_heads"]
            elif a.get("n_heads_in_group"):
                l.kv_heads = heads // a["n_heads_in_group"]
            else:
                raise ConfigError(f"block_configs[{i}].attention: no n_heads_in_group")
            l.window = a.get("window_length") or 0
        if x.get("no_op"):
            l.mlp = False
        elif x.get("intermediate_size"):
            l.ffn = x["intermediate_size"]
        elif x.get("ffn_mult"):
            l.ffn = ffn_mult_to_width(float(x["ffn_mult"]), hidden)
        else:
            raise ConfigError(f"block_configs[{i}].ffn: no ffn_mult")
        layers.append(l)
    return layers


def inv_freq(arch, hd):
    """Inverse frequencies (float64) of HF's rotary embedding, as engine/rope.go."""
    rot = int(round(hd * (arch.rope_partial if 0 < arch.rope_partial <= 1 else 1)))
    theta = arch.rope_theta if arch.rope_theta > 0 else 10000
    f = [1 / theta ** (2 * i / rot) for i in range(rot // 2)]
    s = arch.rope_scaling
    if s and s["type"] == "yarn":
        return yarn(theta, rot, s)[0]
    if s and s["factor"] > 0:
        if s["type"] == "linear":
            f = [x / s["factor"] for x in f]
        elif s["type"] == "llama3":
            low, high, old = s["low"] or 1, s["high"] or 4, s["old"] or 8192
            low_wave, high_wave = old / low, old / high
            out = []
            for x in f:
                wave = 2 * math.pi / x
                if wave < high_wave:
                    out.append(x)
                elif wave > low_wave:
                    out.append(x / s["factor"])
                else:
                    smooth = (old / wave - low) / (high - low)
                    out.append((1 - smooth) * x / s["factor"] + smooth * x)
            f = out
    return torch.tensor(f, dtype=torch.float64)


def yarn(base, dim, s):
    """(inverse frequencies float64 (dim/2,), attention factor) of YaRN, as
    transformers' modeling_rope_utils._compute_yarn_parameters: with
    inv_extra[i] = base^(-2i/dim) and inv_inter = inv_extra / factor,
        corr(r) = dim · ln(old / (2π r)) / (2 ln base)
        low, high = corr(beta_fast), corr(beta_slow)   floored / ceiled when truncate
        low, high = max(low, 0), min(high, dim - 1)    (high += 0.001 when equal)
        ramp[i] = clamp((i - low) / (high - low), 0, 1);  x = 1 - ramp
        inv[i] = inv_inter·(1 - x) + inv_extra·x
    and the attention factor as given, else mscale(factor, mscale) /
    mscale(factor, mscale_all_dim) when both are set, else
    mscale(factor) = 0.1·ln(factor) + 1 (1 when factor <= 1)."""
    factor, old = s["factor"], s["old"]

    def corr(r):
        return dim * math.log(old / (r * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(s["beta_fast"]), corr(s["beta_slow"])
    if s["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    inv = []
    for i in range(dim // 2):
        extra = 1 / base ** (2 * i / dim)
        x = 1 - min(max((i - low) / (high - low), 0.0), 1.0)
        inv.append(extra / factor * (1 - x) + extra * x)

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    att = s["attention_factor"]
    if att is None:
        if s["mscale"] and s["mscale_all_dim"]:
            att = mscale(factor, s["mscale"]) / mscale(factor, s["mscale_all_dim"])
        else:
            att = mscale(factor)
    return torch.tensor(inv, dtype=torch.float64), float(att)


def rope_attention_factor(arch, hd):
    """The factor cos and sin are multiplied by (YaRN's; 1 otherwise)."""
    s = arch.rope_scaling
    if not s or s["type"] != "yarn":
        return 1.0
    rot = int(round(hd * (arch.rope_partial if 0 < arch.rope_partial <= 1 else 1)))
    return yarn(arch.rope_theta if arch.rope_theta > 0 else 10000, rot, s)[1]


def rms_norm(x, w, eps):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * w.float()).to(x.dtype) if x.dtype != torch.float32 else y * w


class Norm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Attention(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        H, hd = arch.hidden, l.head_dim
        self.heads, self.kv_heads, self.hd, self.window = l.heads, l.kv_heads, hd, l.window
        self.q_proj = nn.Linear(H, l.heads * hd, bias=l.qkv_bias)
        self.k_proj = nn.Linear(H, l.kv_heads * hd, bias=l.qkv_bias)
        self.v_proj = nn.Linear(H, l.kv_heads * hd, bias=l.qkv_bias)
        self.o_proj = nn.Linear(l.heads * hd, H, bias=l.out_bias)
        if l.qk_norm:
            self.q_norm = Norm(hd, arch.eps)
            self.k_norm = Norm(hd, arch.eps)
        else:
            self.q_norm = self.k_norm = None
        # gpt-oss: one sink logit per query head (GptOssAttention.sinks).
        self.sinks = nn.Parameter(torch.zeros(l.heads)) if getattr(l, "sinks", False) else None

    def forward(self, x, rope, observe=None, layer=0):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.hd)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.hd)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if x.is_cuda and hasattr(F, "scaled_dot_product_attention") and self.sinks is None:
            # torch >= 2.0 on GPU: the fused kernel (flash attention for the
            # causal case), which never holds the T x T scores.
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, h, T, hd)
            g = self.heads // self.kv_heads
            if g > 1:
                k = k.repeat_interleave(g, dim=1)
                v = v.repeat_interleave(g, dim=1)
            if self.window > 0:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_bias(T, self.window, 1, x.dtype, x.device) == 0)
            else:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o = o.transpose(1, 2).reshape(B, T, self.heads * self.hd)
        else:
            # (with sinks on GPU too: the fused kernel has no sink column,
            # so the T x T scores are held.)
            o = grouped_attention(q, k, v, self.window, 1 / math.sqrt(self.hd), self.sinks).reshape(B, T, self.heads * self.hd)
        if observe is not None:
            observe(layer, "attn_heads", o)
        return self.o_proj(o)


def grouped_attention(q, k, v, window, scale, sinks=None):
    """Causal softmax attention of q (B, T, h, hd) over k, v (B, T, kv, hd),
    query head i reading KV head i // (h / kv), as (B, T, h, hd); torch 1.13
    and CPU (matmul, mask, softmax). The g = h / kv query heads of a group
    are stacked along the sequence, so each group is one matrix product
    against its own KV head (no repeated K or V), and the mask is added in
    the same product (baddbmm: scale·q·kᵀ + bias, bias 0 or −inf).
    With sinks (h,), head i's sink logit is one more column of each of its
    rows' softmax, dropped after it (gpt-oss, eager_attention_forward)."""
    B, T, h, hd = q.shape
    kv = k.shape[2]
    g = h // kv
    qg = q.view(B, T, kv, g, hd).permute(0, 2, 3, 1, 4).reshape(B * kv, g * T, hd)
    kg = k.permute(0, 2, 1, 3).reshape(B * kv, T, hd)
    vg = v.permute(0, 2, 1, 3).reshape(B * kv, T, hd)
    s = torch.baddbmm(causal_bias(T, window, g, q.dtype, q.device), qg, kg.transpose(1, 2), alpha=scale)
    # The softmax in float32 (float64 rows, as gradcheck's, keep float64).
    acc = torch.promote_types(s.dtype, torch.float32)
    if sinks is not None:
        # Row j·T + t of group c is query head c·g + j: its sink.
        col = sinks.to(s.dtype).view(1, kv, g, 1).expand(B, kv, g, T).reshape(B * kv, g * T, 1)
        p = torch.softmax(torch.cat([s, col], dim=-1).to(acc), dim=-1)[..., :T].to(v.dtype)
    else:
        p = torch.softmax(s.to(acc), dim=-1).to(v.dtype)
    o = torch.bmm(p, vg)  # (B·kv, g·T, hd)
    return o.view(B, kv, g, T, hd).permute(0, 3, 1, 2, 4)


_BIAS = {}


def causal_bias(T, window, g, dtype, device):
    """The additive attention mask (g·T, T): 0 where query t (row r, t = r
    mod T) may read key u (u ≤ t, and t − u < window when window > 0),
    −inf elsewhere; made once per shape."""
    key = (T, window, g, dtype, str(device))
    b = _BIAS.get(key)
    if b is None:
        i = torch.arange(T)
        allowed = i[None, :] <= i[:, None]
        if window > 0:
            allowed = allowed & (i[:, None] - i[None, :] < window)
        b = torch.zeros(T, T, dtype=dtype).masked_fill(~allowed, float("-inf")).repeat(g, 1).to(device)
        _BIAS[key] = b
    return b


def apply_rope(x, cos, sin):
    """Rotates the first 2*half dims of every head of x (B, T, h, hd):
    (a, b) -> (a·cos − b·sin, b·cos + a·sin), HF's rotate_half."""
    half = cos.shape[-1]
    if half == 0:
        return x
    c, s = cos[None, :, None, :].to(x.dtype), sin[None, :, None, :].to(x.dtype)
    if 2 * half == x.shape[-1]:
        # The whole head turns: x·[cos, cos] + swap(x)·[−sin, sin], swap
        # exchanging the halves (the same products and sums, bit for bit).
        swapped = x.view(*x.shape[:-1], 2, half).flip(-2).reshape(x.shape)
        return x * torch.cat([c, c], -1) + swapped * torch.cat([-s, s], -1)
    a, b, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return torch.cat([a * c - b * s, b * c + a * s, rest], dim=-1)


class MLP(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        H = arch.hidden
        self.gate_proj = nn.Linear(H, l.ffn, bias=l.mlp_bias)
        self.up_proj = nn.Linear(H, l.ffn, bias=l.mlp_bias)
        self.down_proj = nn.Linear(l.ffn, H, bias=l.mlp_bias)

    def forward(self, x, observe=None, layer=0):
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)
        if observe is not None:
            observe(layer, "mlp_act", h)
        return self.down_proj(h)


class Block(nn.Module):
    def __init__(self, arch, l):
        super().__init__()
        self.eps = arch.eps
        if l.attention:
            self.input_layernorm = Norm(arch.hidden, arch.eps)
            self.self_attn = Attention(arch, l)
        else:
            self.input_layernorm = self.self_attn = None
        # ffn names the feed-forward block's attribute: mlp, or Mixtral's
        # block_sparse_moe.
        self.ffn = "mlp"
        if l.mlp:
            self.post_attention_layernorm = Norm(arch.hidden, arch.eps)
            self.mlp = MLP(arch, l)
        elif l.moe is not None:
            self.post_attention_layernorm = Norm(arch.hidden, arch.eps)
            self.mlp = None
            self.ffn = l.moe.attr
            setattr(self, self.ffn, acmoe.block(arch.hidden, l.moe))
        else:
            self.post_attention_layernorm = self.mlp = None
        self.hd = l.head_dim

    def forward(self, x, ropes, observe=None, layer=0, skip_attn=False, skip_mlp=False):
        mid = x
        if self.self_attn is not None and not skip_attn:
            n1 = self.input_layernorm(x)
            if observe is not None:
                observe(layer, "attn_norm", n1)
            mid = x + self.self_attn(n1, ropes[self.hd], observe, layer)
        if observe is not None:
            observe(layer, "attn_residual", mid)
        ffn = getattr(self, self.ffn)
        if ffn is None or skip_mlp:
            return mid
        n2 = self.post_attention_layernorm(mid)
        if observe is not None:
            observe(layer, "mlp_norm", n2)
        return mid + ffn(n2, observe, layer)


class Inner(nn.Module):
    """HF's "model." prefix: embed_tokens, layers, norm."""

    def __init__(self, arch):
        super().__init__()
        self.embed_tokens = nn.Embedding(arch.vocab, arch.hidden)
        self.layers = nn.ModuleList([Block(arch, l) for l in arch.layers])
        self.norm = Norm(arch.hidden, arch.eps)


class Model(nn.Module):
    """A causal LM whose state_dict names are the HF checkpoint's."""

    def __init__(self, arch):
        super().__init__()
        self.arch = arch
        self.model = Inner(arch)
        self.lm_head = None if arch.tied else nn.Linear(arch.hidden, arch.vocab, bias=False)
        self.inv, self.att = {}, {}
        for l in arch.layers:
            if l.attention and l.head_dim not in self.inv:
                self.inv[l.head_dim] = inv_freq(arch, l.head_dim)
                self.att[l.head_dim] = rope_attention_factor(arch, l.head_dim)
        # skip sets, as engine.SetSkip / SetSkipBlock
        self.skip, self.skip_attn, self.skip_mlp = set(), set(), set()
        # checkpointing recomputes each block's activations in backward
        # (activation checkpointing) instead of keeping them.
        self.checkpointing = False

    def ropes(self, T, device):
        """{head_dim: (cos, sin)} of positions 0..T-1, made once per T."""
        key = (T, str(device))
        cache = self.__dict__.setdefault("_ropes", {})
        if key not in cache:
            out = {}
            pos = torch.arange(T, dtype=torch.float32)
            for hd, inv in self.inv.items():
                # HF and the engine take the angle in float32; YaRN's
                # attention factor scales cos and sin (1 otherwise).
                ang = pos[:, None] * inv.float()[None, :]
                c, s = torch.cos(ang), torch.sin(ang)
                if self.att[hd] != 1:
                    c, s = c * self.att[hd], s * self.att[hd]
                out[hd] = (c.to(device), s.to(device))
            cache.clear()
            cache[key] = out
        return cache[key]

    def forward(self, tokens, observe=None):
        """tokens (B, T) int64 -> logits (B, T, vocab). observe(layer,
        site, tensor), when given, sees every activation the native
        engine's Observer sees (sites as engine/observer.go names them)."""
        B, T = tokens.shape
        ropes = self.ropes(T, tokens.device)
        x = self.model.embed_tokens(tokens)
        for i, blk in enumerate(self.model.layers):
            if observe is not None:
                observe(i, "layer_input", x)
            if i in self.skip:
                pass
            elif self.checkpointing and self.training and torch.is_grad_enabled() and observe is None:
                from torch.utils.checkpoint import checkpoint
                x = checkpoint(blk, x, ropes, None, i, i in self.skip_attn, i in self.skip_mlp, use_reentrant=False)
            else:
                x = blk(x, ropes, observe, i, i in self.skip_attn, i in self.skip_mlp)
            if observe is not None:
                observe(i, "layer_output", x)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w)


def hf_names(arch):
    """The tensor names of a checkpoint of arch, in architecture.Tensors order."""
    if hasattr(arch, "hf_names"):
        return arch.hf_names()
    names = ["model.embed_tokens.weight"]
    for i, l in enumerate(arch.layers):
        p = f"model.layers.{i}."
        if l.attention:
            names.append(p + "input_layernorm.weight")
            for proj in ("q", "k", "v"):
                names.append(p + f"self_attn.{proj}_proj.weight")
                if l.qkv_bias:
                    names.append(p + f"self_attn.{proj}_proj.bias")
            names.append(p + "self_attn.o_proj.weight")
            if l.out_bias:
                names.append(p + "self_attn.o_proj.bias")
            if l.qk_norm:
                names += [p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"]
            if l.sinks:
                names.append(p + "self_attn.sinks")
        if l.mlp:
            names.append(p + "post_attention_layernorm.weight")
            for proj in ("gate", "up", "down"):
                names.append(p + f"mlp.{proj}_proj.weight")
                if l.mlp_bias:
                    names.append(p + f"mlp.{proj}_proj.bias")
        elif l.moe is not None:
            names.append(p + "post_attention_layernorm.weight")
            names += acmoe.hf_names(p, l.moe)
    names.append("model.norm.weight")
    if not arch.tied:
        names.append("lm_head.weight")
    return names


def load_config(d):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        # Python's json takes bare NaN/Infinity as transformers writes them.
        return json.load(f)


def load(d, device="cpu", dtype=torch.float32):
    """Loads a HF checkpoint directory into a Model (float32 unless dtype
    says otherwise), on device."""
    arch = Arch(load_config(d))
    m = getattr(arch, "model_class", Model)(arch)
    want = dict(m.named_parameters())
    # Every shape is checked before any weight is read.
    shapes = {}
    for f in acio.checkpoint_files(d):
        header, _ = acio.read_safetensors_header(f)
        shapes.update({n: tuple(i["shape"]) for n, i in header.items() if n != "__metadata__"})
    quantized = sorted(n for n in shapes if n.endswith("_blocks") or n.endswith("_scales"))
    if quantized:
        # gpt-oss's released checkpoints hold the experts in MXFP4
        # (gate_up_proj_blocks / _scales, transformers' Mxfp4 quantizer).
        raise ConfigError(f"{d}: tensor {quantized[0]!r} ({len(quantized)} such) is an MXFP4-quantized block: the "
                          f"reference trainer reads dense bf16, float16 or float32 weights; dequantize first "
                          f"(e.g. load with transformers' Mxfp4Config(dequantize=True) and save_pretrained in bf16)")
    for name, p in want.items():
        if name not in shapes:
            raise ConfigError(f"{d}: missing tensor {name!r} that config.json implies")
        if shapes[name] != tuple(p.shape):
            raise ConfigError(f"{d}: tensor {name!r} has shape {list(shapes[name])}, config.json implies {list(p.shape)}")
    m = m.to(dtype)
    with torch.no_grad():
        for f in acio.checkpoint_files(d):
            for name, t in acio.iter_safetensors(f, names=want):
                want[name].copy_(t)
    return m.to(device)


def state_in_order(m):
    """{HF name: tensor} in checkpoint order (for writing)."""
    sd = dict(m.named_parameters())
    return {n: sd[n] for n in hf_names(m.arch)}


def no_decay(name):
    """train.NoDecay: norm weights and biases are not decayed (nor Mamba2's
    A_log, D and dt_bias, which mamba_ssm marks _no_weight_decay, nor the
    frozen e_score_correction_bias of a sigmoid router, which no step may
    move, nor gpt-oss's stacked expert biases and per-head sink logits,
    biases by another name)."""
    return name.endswith(".bias") or name.endswith("norm.weight") or name.rsplit(".", 1)[-1] in (
        "A_log", "D", "dt_bias", "e_score_correction_bias", "gate_up_proj_bias", "down_proj_bias", "sinks")


def forward_flops(arch, B, T, first=0):
    """engine.Model.ForwardFLOPs (ForwardFLOPsFrom with first > 0: the
    layers from first on): 2 per multiply-add of every projection and the
    LM head, plus 4*head_dim per causal (query, key) pair and head."""
    if hasattr(arch, "forward_flops"):
        return arch.forward_flops(B, T, first)
    N, H = B * T, arch.hidden
    f = 2 * N * H * arch.vocab
    for l in arch.layers[min(max(first, 0), len(arch.layers)):]:
        if l.attention:
            qd, kd = l.heads * l.head_dim, l.kv_heads * l.head_dim
            f += 2 * N * H * (2 * qd + 2 * kd)
            pairs = T * (T + 1) / 2 if l.window <= 0 or l.window >= T else l.window * (l.window + 1) / 2 + (T - l.window) * l.window
            f += 4 * B * l.heads * pairs * l.head_dim
        if l.mlp:
            f += 2 * N * H * l.ffn * 3
        if l.moe is not None:
            f += acmoe.flops(l.moe, N, H)
    return f
