# Written by autocompress (prune) beside the config.json of a per-layer
# DeciLM / nemotron-nas child; autocompress's own code, not NVIDIA's.
"""The configuration class of a nemotron-nas (DeciLMForCausalLM) checkpoint.

transformers has no configuration class for model_type "nemotron-nas", so
AutoConfig.from_pretrained(dir, trust_remote_code=True) loads this one
through config.json's auto_map.AutoConfig ("configuration_decilm.DeciLMConfig").
vLLM (transformers_utils/config.py, HFConfigParser.parse), SGLang
(srt/utils/hf_transformers_utils.py, get_config) and TensorRT-LLM
(_torch/model_config.py, ModelConfig.from_pretrained) all build
the config that way and then read the per-layer blocks as objects
(block_config.py says which attributes).

DeciLMConfig is a LlamaConfig (the engines' DeciLM models are Llama blocks
and read hidden_size, num_attention_heads, head_dim, rms_norm_eps, the RoPE
fields, hidden_act, attention_bias and mlp_bias from it) whose
block_configs are BlockConfig objects. Per-layer KV heads and FFN widths
exist only in block_configs: the global num_key_value_heads and
intermediate_size stay None, as config.json has them, so that nothing reads
a model-wide value that is wrong for some layers. transformers 5 declares
LlamaConfig's fields under huggingface_hub's @strict (intermediate_size:
int, models/llama/configuration_llama.py), so a null is not passed to the
base class; where it then refuses None, intermediate_size is the widest
kept FFN (num_key_value_heads may be None there).
"""

from transformers import LlamaConfig

from .block_config import BlockConfig


# Model-wide fields whose values are per layer in block_configs.
_PER_LAYER = ("num_key_value_heads", "intermediate_size")


class DeciLMConfig(LlamaConfig):
    model_type = "nemotron-nas"

    def __init__(self, block_configs=None, **kwargs):
        layers = kwargs.get("num_hidden_layers")
        for key in _PER_LAYER:
            if key in kwargs and kwargs[key] is None:
                del kwargs[key]
        super().__init__(**kwargs)
        blocks = [b if isinstance(b, BlockConfig) else BlockConfig(**b) for b in (block_configs or [])]
        if blocks:
            if layers is not None and layers != len(blocks):
                raise ValueError("num_hidden_layers is %d but block_configs has %d entries" % (layers, len(blocks)))
            self.num_hidden_layers = len(blocks)
            for i, b in enumerate(blocks):
                b.attention.check(i, self.num_attention_heads)
                b.ffn.resolve(i, self.hidden_size)
        self.block_configs = blocks
        self._unset("num_key_value_heads", None)
        self._unset("intermediate_size", max([b.ffn.intermediate_size or 0 for b in blocks] or [0]))

    def _unset(self, key, fallback):
        """Sets key to None; where the base class's field type refuses None
        (transformers 5's @strict raises a StrictDataclassFieldValidationError,
        whose base is not in transformers' namespace), to fallback, or leaves
        the base class's value when fallback is None."""
        try:
            setattr(self, key, None)
        except Exception:
            if fallback is not None:
                setattr(self, key, fallback)

    def to_dict(self):
        out = super().to_dict()
        out["block_configs"] = [b.to_dict() for b in self.block_configs]
        return out
