# Written by autocompress (prune) beside the config.json of a per-layer
# DeciLM / nemotron-nas child; autocompress's own code, not NVIDIA's.
"""Per-layer block descriptions of a nemotron-nas (DeciLM) checkpoint.

config.json's block_configs is a list of {"attention": {...}, "ffn": {...}}
objects, one per decoder layer. The serving engines read them as attributes
of objects, not as dict keys; these classes are those objects. The
attributes read, by the engines' loader source:

* vLLM model_executor/models/nemotron_nas.py, DeciLMDecoderLayer.__init__:
  attention.no_op, attention.n_heads_in_group (KV heads =
  num_attention_heads // n_heads_in_group), ffn.no_op,
  hasattr(ffn, "ffn_mult") then ffn.ffn_mult, else ffn.intermediate_size,
  hasattr(ffn, "hidden_act").
* vLLM transformers_utils/model_arch_config_convertor.py,
  NemotronNasModelArchConfigConvertor.get_total_num_kv_heads:
  attention.no_op, attention.n_heads_in_group.
* SGLang srt/models/nemotron_nas.py, DeciLMDecodeLayer.__init__:
  attention.no_op, attention.n_heads_in_group, ffn.no_op, ffn.ffn_mult.
* SGLang srt/configs/model_config.py, get_total_num_kv_heads:
  attention.no_op, attention.n_heads_in_group.
* TensorRT-LLM _torch/models/modeling_nemotron_nas.py,
  NemotronNASDecoderLayer.__init__: attention.no_op,
  attention.replace_with_linear, ffn.no_op, ffn.replace_with_linear,
  ffn.ffn_mult; NemotronNASModel.__init__: attention.n_heads_in_group
  (None or 0 gives 0 KV heads).

Every engine turns ffn_mult into a width with ffn_mult_to_intermediate_size
below. So that vLLM's hasattr test falls back to intermediate_size when a
block gives no ffn_mult, FFNConfig has an ffn_mult attribute only when the
block has one (or when DeciLMConfig derives one from an intermediate_size
that round-trips); intermediate_size is always set on a kept FFN.
"""

import copy

# The engines round a width computed from ffn_mult up to this multiple.
FFN_MULTIPLE = 256


def ffn_mult_to_intermediate_size(ffn_mult, hidden_size):
    """The engines' width rule: round_up(int(2 * ffn_mult * hidden / 3), 256)."""
    width = int(2 * ffn_mult * hidden_size / 3)
    return -(-width // FFN_MULTIPLE) * FFN_MULTIPLE


class _SubBlock(object):
    """A sub-block (attention or FFN) of one layer.

    Known fields get their defaults; fields this module does not know are
    kept as attributes, and in to_dict, unchanged.
    """

    # (name, default) of the known fields, in the order to_dict writes them.
    FIELDS = (("no_op", False), ("replace_with_linear", False), ("sparsify", None))
    # Known fields set as attributes only when not None (see FFNConfig).
    OPTIONAL = ()

    def __init__(self, **fields):
        for name, default in self.FIELDS:
            value = fields.pop(name, default)
            if name in self.OPTIONAL and value is None:
                continue
            setattr(self, name, value)
        self._extra = sorted(fields)
        for name, value in fields.items():
            setattr(self, name, value)
        self.no_op = bool(self.no_op)
        self.replace_with_linear = bool(self.replace_with_linear)

    def to_dict(self):
        out = {}
        for name, _ in self.FIELDS:
            out[name] = copy.deepcopy(getattr(self, name, None))
        for name in self._extra:
            out[name] = copy.deepcopy(getattr(self, name))
        return out

    def __eq__(self, other):
        return type(self) is type(other) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.to_dict().items()))


class AttentionConfig(_SubBlock):
    """The attention of one layer. With no_op the layer has no attention and
    no input_layernorm; otherwise it has num_attention_heads query heads and
    num_attention_heads // n_heads_in_group KV heads."""

    FIELDS = _SubBlock.FIELDS + (
        ("n_heads_in_group", None),
        ("window_length", None),
        ("num_sink_tokens", None),
        ("use_prefill_window_in_sink_attention", False),
        ("unshifted_sink", False),
    )

    def num_key_value_heads(self, num_attention_heads):
        """KV heads as the engines compute them; 0 for a removed or linear attention."""
        if self.no_op or self.replace_with_linear or not self.n_heads_in_group:
            return 0
        return num_attention_heads // self.n_heads_in_group

    def check(self, layer, num_attention_heads):
        if self.no_op or self.replace_with_linear:
            return
        g = self.n_heads_in_group
        if isinstance(g, bool) or not isinstance(g, int) or g <= 0:
            raise ValueError("block_configs[%d].attention.n_heads_in_group must be a positive integer when no_op is false, got %r" % (layer, g))
        if num_attention_heads % g:
            raise ValueError("block_configs[%d].attention.n_heads_in_group %d does not divide num_attention_heads %d" % (layer, g, num_attention_heads))


class FFNConfig(_SubBlock):
    """The gated MLP of one layer. With no_op the layer has no MLP and no
    post_attention_layernorm; otherwise intermediate_size is its width."""

    FIELDS = _SubBlock.FIELDS + (("ffn_mult", None), ("intermediate_size", None))
    OPTIONAL = ("ffn_mult",)

    def resolve(self, layer, hidden_size):
        """Checks a kept FFN against hidden_size and fills the width fields:
        intermediate_size from ffn_mult, or ffn_mult from an intermediate_size
        that is a multiple of 256 (3 * width / (2 * hidden) maps back to it)."""
        if self.no_op or self.replace_with_linear:
            return
        mult = getattr(self, "ffn_mult", None)
        size = self.intermediate_size
        where = "block_configs[%d].ffn" % layer
        if mult is not None:
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or mult <= 0:
                raise ValueError("%s.ffn_mult must be a positive number, got %r" % (where, mult))
            width = ffn_mult_to_intermediate_size(mult, hidden_size)
            if size is None:
                self.intermediate_size = width
            elif size != width:
                raise ValueError("%s: ffn_mult %r gives width %d at hidden_size %d (round_up(int(2*ffn_mult*hidden/3), 256)), "
                                 "but intermediate_size is %r: engines reading one or the other would build different MLPs" % (where, mult, width, hidden_size, size))
            return
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError("%s needs ffn_mult or a positive intermediate_size when no_op is false, got %r" % (where, size))
        if size % FFN_MULTIPLE == 0:
            derived = 3.0 * size / (2.0 * hidden_size)
            if ffn_mult_to_intermediate_size(derived, hidden_size) == size:
                self.ffn_mult = derived


class BlockConfig(object):
    """One decoder layer: .attention (AttentionConfig) and .ffn (FFNConfig)."""

    def __init__(self, attention=None, ffn=None, **extra):
        self.attention = _build(AttentionConfig, attention)
        self.ffn = _build(FFNConfig, ffn)
        self._extra = sorted(extra)
        for name, value in extra.items():
            setattr(self, name, value)

    def to_dict(self):
        out = {"attention": self.attention.to_dict(), "ffn": self.ffn.to_dict()}
        for name in self._extra:
            out[name] = copy.deepcopy(getattr(self, name))
        return out

    def __eq__(self, other):
        return isinstance(other, BlockConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return "BlockConfig(attention=%r, ffn=%r)" % (self.attention, self.ffn)


def _build(cls, value):
    if value is None:
        return cls()
    if isinstance(value, cls):
        return copy.deepcopy(value)
    if isinstance(value, _SubBlock):
        return cls(**value.to_dict())
    if isinstance(value, dict):
        return cls(**value)
    raise TypeError("%s: want a dict, got %s" % (cls.__name__, type(value).__name__))
