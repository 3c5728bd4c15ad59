"""Loads a DeciLM child's configuration the way transformers'
AutoConfig.from_pretrained(child, trust_remote_code=True) does, and prints
what the serving engines' loaders read from it, as JSON.

Run by prune's TestDeciLMConfigModule with the stand-in transformers
(testdata/remotecode/standin) on PYTHONPATH. Like
dynamic_module_utils.get_cached_module_file, it copies the auto_map module
and the modules it imports relatively (get_relative_import_files, the same
two patterns) into a package transformers_modules.<name> under a cache
directory, imports it as a package, takes the class and builds it from
config.json as PretrainedConfig.from_dict does (cls(**config_dict)).

usage: load_child.py CHILD_DIR CACHE_DIR
"""
import importlib
import json
import os
import re
import shutil
import sys


def relative_imports(path):
    with open(path, encoding="utf-8") as f:
        content = f.read()
    found = re.findall(r"^\s*import\s+\.(\S+)\s*$", content, flags=re.MULTILINE)
    found += re.findall(r"^\s*from\s+\.(\S+)\s+import", content, flags=re.MULTILINE)
    return sorted(set(found))


def load_class(child, cache, ref):
    module, cls = ref.rsplit(".", 1)
    pkg = os.path.join(cache, "transformers_modules", "child")
    os.makedirs(pkg, exist_ok=True)
    for d in (os.path.dirname(pkg), pkg):
        open(os.path.join(d, "__init__.py"), "a").close()
    todo, copied = [module], []
    while todo:
        m = todo.pop()
        if m in copied:
            continue
        src = os.path.join(child, m + ".py")
        if not os.path.exists(src):
            raise SystemExit("%s.py, needed by auto_map %s, is not in the child" % (m, ref))
        shutil.copy(src, os.path.join(pkg, m + ".py"))
        copied.append(m)
        todo.extend(relative_imports(src))
    sys.path.insert(0, cache)
    mod = importlib.import_module("transformers_modules.child." + module)
    return getattr(mod, cls), sorted(copied)


def width_vllm(ffn, hidden):
    # vLLM nemotron_nas.py DeciLMDecoderLayer.__init__
    if hasattr(ffn, "ffn_mult"):
        return formula(ffn.ffn_mult, hidden)
    return ffn.intermediate_size


def formula(mult, hidden):
    # every engine's _ffn_mult_to_intermediate_size
    n = int(2 * mult * hidden / 3)
    return n if n % 256 == 0 else n + 256 - n % 256


def main():
    child, cache = sys.argv[1], sys.argv[2]
    with open(os.path.join(child, "config.json")) as f:
        raw = json.load(f)
    cls, modules = load_class(child, cache, raw["auto_map"]["AutoConfig"])
    config = cls(**raw)
    heads, hidden = config.num_attention_heads, config.hidden_size
    layers = []
    for b in config.block_configs:
        a, x = b.attention, b.ffn
        layer = {"attention_no_op": a.no_op, "attention_linear": a.replace_with_linear,
                 "n_heads_in_group": a.n_heads_in_group, "ffn_no_op": x.no_op, "ffn_linear": x.replace_with_linear}
        if not a.no_op:
            layer["kv_heads"] = heads // a.n_heads_in_group  # vLLM, SGLang, TensorRT-LLM
        if not x.no_op:
            layer["has_ffn_mult"] = hasattr(x, "ffn_mult")
            layer["intermediate_size"] = x.intermediate_size
            layer["width_vllm"] = width_vllm(x, hidden)
            layer["width_ffn_mult"] = formula(x.ffn_mult, hidden)  # SGLang, TensorRT-LLM
        layers.append(layer)
    d = config.to_dict()
    text = json.dumps(d)  # must be JSON-serialisable (save_pretrained, repr)
    again = cls(**json.loads(text))
    print(json.dumps({
        "class": "%s.%s" % (cls.__module__, cls.__name__), "modules": modules,
        "model_type": config.model_type, "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads, "intermediate_size": config.intermediate_size,
        "round_trip": again.to_dict()["block_configs"] == d["block_configs"],
        "layers": layers,
    }))


if __name__ == "__main__":
    main()
