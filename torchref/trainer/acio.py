"""Files the reference trainer reads and writes, by hand so that torch 1.13
needs no other package: safetensors, nanoGPT token shards, sha256.

safetensors: an 8-byte little-endian header length n, n bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{...}}), then the raw little-endian tensor bytes; offsets are relative to
the end of the header.

Token shards (nanoGPT .bin, job/CONTRACT.md): 256 little-endian int32
words of header, [0] = 278895051, [1] = 1, [2] = the number of tokens,
[3] = bytes per token (2: uint16, 4: uint32); then the tokens. The legacy
llm.c magic 20240520 is read too (version 1: uint16, 2: uint32).

Contract hashes (checkpoint.HashFiles over one file): hex SHA-256 of
name NUL decimal-size NUL contents, name being the key the hash is listed
under.
"""
import hashlib
import json
import os
import struct

import torch

# safetensors dtype names -> (torch dtype to read the bytes as, element size)
_RAW = {
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.int16, 2),  # bfloat16 read as int16, then viewed
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
}


class FormatError(Exception):
    """A file that is not what it claims to be."""


def read_safetensors_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise FormatError(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20:
            raise FormatError(f"{path}: safetensors header of {n} bytes (not a safetensors file?)")
        header = json.loads(f.read(n))
    return header, 8 + n


def read_safetensors(path, names=None):
    """Returns {name: float32 tensor} (BF16/F16 converted) and the metadata."""
    out = dict(iter_safetensors(path, names))
    header, _ = read_safetensors_header(path)
    return out, header.get("__metadata__") or {}


def iter_safetensors(path, names=None):
    """Yields (name, float32 tensor) one tensor at a time, in file order
    (only those in names, when given), so that a caller copying them into
    place never holds a second copy of the whole model."""
    header, base = read_safetensors_header(path)
    header.pop("__metadata__", None)
    items = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    with open(path, "rb") as f:
        for name, info in items:
            if names is not None and name not in names:
                continue
            dt = info["dtype"]
            if dt not in _RAW:
                raise FormatError(f"{path}: tensor {name} has dtype {dt} (want F32, BF16 or F16)")
            raw_dtype, size = _RAW[dt]
            b, e = info["data_offsets"]
            shape = [int(d) for d in info["shape"]]
            count = 1
            for d in shape:
                count *= d
            if e - b != count * size:
                raise FormatError(f"{path}: tensor {name}: {e - b} bytes for shape {shape} of {dt}")
            f.seek(base + b)
            buf = bytearray(f.read(e - b))
            if len(buf) != e - b:
                raise FormatError(f"{path}: tensor {name} runs past the end of the file")
            if count == 0:
                t = torch.zeros(shape, dtype=torch.float32)
            else:
                t = torch.frombuffer(buf, dtype=raw_dtype).reshape(shape)
                if dt == "BF16":
                    t = t.view(torch.bfloat16)
                if t.is_floating_point():
                    t = t.float()
            yield name, t


_CONV = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Writes {name: tensor} (in insertion order) in dtype F32, BF16 or F16,
    to a temporary name, synced and renamed into place."""
    specs = [(n, list(t.shape)) for n, t in tensors.items()]
    write_safetensors_stream(path, specs, lambda n: tensors[n], dtype, metadata)


def write_safetensors_stream(path, specs, get, dtype="F32", metadata=None, write=True):
    """Writes the tensors specs names ([(name, shape)], in order), asking
    get(name) for each one only when its turn comes, so that at most one
    tensor is converted at a time (a 5B student's weights and moments are
    never all in memory twice). With write false, get is still called for
    every name in order but nothing is written: the other ranks' part of a
    collective get (FSDP2's full_tensor)."""
    if dtype not in _CONV:
        raise ValueError(f"safetensors dtype {dtype}: want F32, BF16 or F16")
    conv, size = _CONV[dtype]
    header, off = {}, 0
    for name, shape in specs:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n * size]}
        off += n * size
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    if not write:
        for name, _ in specs:
            get(name)
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shape in specs:
            t = get(name).detach().to("cpu", conv).contiguous()
            if list(t.shape) != list(shape):
                raise ValueError(f"tensor {name}: shape {list(t.shape)}, announced {list(shape)}")
            raw = t.view(torch.int16) if dtype == "BF16" else t
            f.write(raw.numpy().tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def safetensors_dtype(path):
    """The dtype of the first tensor of a safetensors file."""
    header, _ = read_safetensors_header(path)
    for name, info in header.items():
        if name != "__metadata__":
            return info["dtype"]
    raise FormatError(f"{path}: holds no tensors")


def checkpoint_files(d):
    """The safetensors files of a HF checkpoint directory (single or sharded)."""
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return [single]
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        return [os.path.join(d, n) for n in sorted(set(wm.values()))]
    files = sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
    if not files:
        raise FormatError(f"{d}: no model.safetensors (nor an index of shards)")
    return [os.path.join(d, n) for n in files]


SHARD_MAGIC, LEGACY_MAGIC = 278895051, 20240520


def read_shard(path):
    """The tokens of one nanoGPT shard as an int64 tensor."""
    with open(path, "rb") as f:
        head = f.read(256 * 4)
        if len(head) != 1024:
            raise FormatError(f"{path}: shorter than the 1024-byte shard header")
        magic, version, n, width = struct.unpack("<4i", head[:16])
        if magic == SHARD_MAGIC and version == 1 and width in (2, 4):
            size = width
        elif magic == LEGACY_MAGIC and version in (1, 2):
            size = 2 if version == 1 else 4
        else:
            raise FormatError(f"{path}: header magic {magic}, version {version}, {width} bytes per token: "
                              f"want magic {SHARD_MAGIC}, version 1, 2 or 4 bytes (or the legacy {LEGACY_MAGIC})")
        buf = bytearray(f.read())
    if len(buf) != n * size:
        raise FormatError(f"{path}: header says {n} tokens, the file holds {len(buf) // size}")
    if n == 0:
        return torch.zeros(0, dtype=torch.int64)
    if size == 2:
        # uint16 has no torch 1.13 dtype: read int16 and undo the sign.
        return torch.frombuffer(buf, dtype=torch.int16).to(torch.int64) & 0xFFFF
    return torch.frombuffer(buf, dtype=torch.int32).to(torch.int64) & 0xFFFFFFFF


def write_shard(path, tokens, width=2):
    """Writes tokens (a list of ints) as a nanoGPT shard."""
    tokens = [int(x) for x in tokens]
    head = struct.pack("<4i", SHARD_MAGIC, 1, len(tokens), width) + b"\0" * (1024 - 16)
    with open(path, "wb") as f:
        f.write(head)
        f.write(struct.pack(("<%dH" if width == 2 else "<%dI") % len(tokens), *tokens))


def contract_hash(root, name):
    """The contract's hash of root/name: checkpoint.HashFiles over it."""
    p = os.path.join(root, *name.split("/"))
    h = hashlib.sha256(f"{name}\0{os.path.getsize(p)}\0".encode())
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
