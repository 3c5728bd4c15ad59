"""Reference output of one Nemotron-H Mamba2 mixer, in torch.

Re-states, in plain torch (no transformers here), the no-cache path of
transformers' NemotronHMamba2Mixer.torch_forward
(models/nemotron_h/modeling_nemotron_h.py, read at huggingface/transformers
008d9e95): in_proj, the causal depthwise conv1d (padding conv_kernel-1, cut
to seq_len) with silu, softplus(dt + dt_bias) clamped below at
time_step_min, the chunked SSD ("ssd naive implementation without einsums":
segment_sum, diagonal blocks, chunk states, inter-chunk decay), the D skip,
Zamba2RMSNormGated (y · silu(gate), RMSNorm per group of
d_inner / n_groups, times weight) and out_proj. The chunked scan is a
different order of the sums than the engine's sequential recurrence. The
inter-chunk reduction is the fixed one (see the comment there): the
no-kernel path of transformers at that commit does not carry the state
across chunks, while the CUDA kernels (mamba_chunk_scan_combined) do.

usage: mamba2_reference.py IN.safetensors OUT.json
IN holds the mixer's tensors (in_proj, conv1d, conv1d_bias, dt_bias,
A_log, D, norm, out_proj) and x (B, T, hidden); its __metadata__ holds
heads, head_dim, state, groups, conv, chunk, eps, dt_min.
OUT receives {"out": [...]} (B·T·hidden, row-major).
"""

import json
import struct
import sys

import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        assert info["dtype"] == "F32"
        lo, hi = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[lo:hi]), dtype=torch.float32).reshape(info["shape"])
    return out, meta


def pad_tensor_by_size(t, pad):
    shape = (0, 0, 0, 0, 0, pad, 0, 0) if t.dim() == 4 else (0, 0, 0, pad, 0, 0)
    return F.pad(t, shape, mode="constant", value=0)


def reshape_into_chunks(t, pad, chunk):
    t = pad_tensor_by_size(t, pad)
    if t.dim() == 3:
        return t.reshape(t.shape[0], -1, chunk, t.shape[2])
    return t.reshape(t.shape[0], -1, chunk, t.shape[2], t.shape[3])


def segment_sum(t):
    chunk = t.size(-1)
    t = t[..., None].expand(*t.size(), chunk)
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=-1)
    t = t.masked_fill(~mask, 0)
    s = torch.cumsum(t, dim=-2)
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=0)
    return s.masked_fill(~mask, -torch.inf)


def main():
    W, meta = read_safetensors(sys.argv[1])
    nh, hd, ns, ng = int(meta["heads"]), int(meta["head_dim"]), int(meta["state"]), int(meta["groups"])
    K, chunk = int(meta["conv"]), int(meta["chunk"])
    eps, dt_min = float(meta["eps"]), float(meta["dt_min"])
    x = W["x"]
    bsz, seq_len, _ = x.shape
    di = nh * hd
    conv_dim = di + 2 * ng * ns

    proj = x @ W["in_proj"].T
    gate, hs, dt = proj.split([di, conv_dim, nh], dim=-1)
    hs = hs.transpose(1, 2)
    hs = F.silu(F.conv1d(hs, W["conv1d"], W["conv1d_bias"], padding=K - 1, groups=conv_dim)[..., :seq_len].transpose(1, 2))
    hs, B, C = torch.split(hs, [di, ng * ns, ng * ns], dim=-1)
    A = -torch.exp(W["A_log"].float())

    dt = F.softplus(dt + W["dt_bias"])
    dt = torch.clamp(dt, dt_min)
    hs = hs.reshape(bsz, seq_len, -1, hd).float()
    B = B.reshape(bsz, seq_len, -1, ns).float()
    C = C.reshape(bsz, seq_len, -1, ns).float()
    B = B.repeat_interleave(nh // ng, dim=2)
    C = C.repeat_interleave(nh // ng, dim=2)
    pad = (chunk - seq_len % chunk) % chunk
    D_residual = W["D"][..., None] * pad_tensor_by_size(hs, pad)
    hs = hs * dt[..., None]
    A = A.to(hs.dtype) * dt
    hs, A, B, C = [reshape_into_chunks(t, pad, chunk) for t in (hs, A, B, C)]
    A = A.permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)
    L = torch.exp(segment_sum(A))
    G = (C[:, :, :, None, :, :] * B[:, :, None, :, :, :]).sum(dim=-1)
    M = (G[..., None] * L.permute(0, 2, 3, 4, 1)[..., None]).sum(dim=-1)
    Y_diag = (M[..., None] * hs[:, :, None]).sum(3)
    decay_states = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
    B_decay = B * decay_states.permute(0, 2, 3, 1)[..., None]
    states = (B_decay.permute(0, 1, 3, 2, 4)[..., None] * hs.permute(0, 1, 3, 2, 4)[..., None, :]).sum(dim=3).permute(0, 1, 2, 4, 3)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    decay_chunk = torch.exp(segment_sum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    # torch_forward at 008d9e95 sums over dim=2, the target-chunk axis,
    # which drops the state carried across chunks: the bug of
    # huggingface/transformers issue #34817, fixed for mamba2 in #35154 and
    # for zamba2 / nemotron_h in pull request #47250 (new_state[z] =
    # sum_c decay_chunk[z, c] * state[c], einsum "bhzc,bchpn->bzhpn" of
    # mamba_ssm's ssd_minimal). The fixed reduction, over the source chunk:
    new_states = (decay_chunk[..., None, None] * states.permute(0, 2, 1, 3, 4)[:, :, None, ...]).sum(dim=3).permute(0, 2, 1, 3, 4)
    states = new_states[:, :-1]
    state_decay_out = torch.exp(A_cumsum)
    Y_off = (C[..., None, :] * states[:, :, None, ...]).sum(-1) * state_decay_out.permute(0, 2, 3, 1)[..., None]
    y = (Y_diag + Y_off).reshape(bsz, -1, nh, hd) + D_residual
    y = y[:, :seq_len].reshape(bsz, seq_len, -1)

    # Zamba2RMSNormGated.forward
    h = y * F.silu(gate)
    gs = di // ng
    hg = h.view(bsz, seq_len, ng, gs)
    hg = hg * torch.rsqrt(hg.pow(2).mean(-1, keepdim=True) + eps)
    h = W["norm"] * hg.view(bsz, seq_len, di)
    out = h @ W["out_proj"].T
    json.dump({"out": out.reshape(-1).tolist()}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
