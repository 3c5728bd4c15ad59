# A STAND-IN for the transformers package, for prune's tests only (run by
# Debian's /usr/bin/python3, which has no transformers). It provides just
# the base classes the DeciLM configuration module subclasses, with the
# behaviour of transformers 4.x that the module relies on:
# PretrainedConfig keeps every keyword as an attribute and to_dict returns a
# deep copy of them with model_type; LlamaConfig applies Llama's defaults,
# num_key_value_heads None -> num_attention_heads and head_dim None ->
# hidden_size // num_attention_heads. It is not transformers; the real
# thing is exercised by scripts/device/decilm_autoconfig.py.
#
# With STANDIN_STRICT=1 LlamaConfig also refuses a non-int for the fields
# transformers 5 types `int` under @strict (models/llama/
# configuration_llama.py), on construction and on assignment, as
# huggingface_hub's strict dataclasses do.
import copy
import os

_STRICT = os.environ.get("STANDIN_STRICT") == "1"


class PretrainedConfig(object):
    model_type = ""

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)

    def to_dict(self):
        out = copy.deepcopy(self.__dict__)
        out["model_type"] = self.__class__.model_type
        return out


PreTrainedConfig = PretrainedConfig


class LlamaConfig(PretrainedConfig):
    model_type = "llama"
    _INT_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")

    def __setattr__(self, key, value):
        if _STRICT and key in self._INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError("stand-in @strict: %s must be an int, got %r" % (key, value))
        super().__setattr__(key, value)

    def __init__(self, vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, head_dim=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        if num_key_value_heads is None:
            num_key_value_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim if head_dim is not None else hidden_size // num_attention_heads
        super().__init__(**kwargs)
