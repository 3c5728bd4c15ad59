"""autocompress's portable PyTorch reference trainer.

Usage:
    python3 autocompress_torch.py JOB/contract.json
    python3 autocompress_torch.py logits B T TOKENS.bin OUT.safetensors MODEL_DIR...

The first form runs the job a contract describes (job/CONTRACT.md in the
autocompress source): kind "distill", "importance", "eval" or "proxy";
paths in the contract are relative to its directory. Ranks come from the env://
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), as
torchrun sets them or as launch.sh sets them by hand where torchrun is
broken (Debian's torch 1.13 under Python 3.11); without them it runs as one
rank. CPU ranks talk over gloo and train with DDP; CUDA ranks over NCCL,
with FSDP2 sharding and bf16 compute when torch >= 2.4 has it, else DDP
with bf16 autocast.

The second form writes each model's float32 logits on the first B x T
tokens of a shard as tensor "logits.I" (I: the model's place in the list),
the parity tests' tool.

Exit status: 0 done, or stopped by SIGTERM or SIGINT after writing a
resumable checkpoint (result.json: status "stopped"; run it again to
resume); 1 failed (result.json says why); 2 the contract or its files were
refused before any work.

A forward-only job (importance, eval, proxy) keeps no state: SIGTERM stops
it at once (status "stopped", exit 0) and a rerun starts it over.

Beyond job/CONTRACT.md v1, the trainer reads these optional recipe keys
(package job's Recipe names them too): "activation_checkpointing"
(recompute each block in backward; what an 8B distillation at sequence
4096 needs on one GPU), "fsdp" (false: DDP even where FSDP2 exists),
"shared_vocab" (KD over ids [0, n); default the smaller vocabulary),
and for importance "skip_rows", "skip_passes", "no_skip_loss",
"no_subblock_skip_loss"
(importance.Options' SkipRows, Passes, NoSkipLoss, NoSubBlockSkipLoss).

Everything that decides the next step (the student's float32 weights, both
AdamW moments, the step) is in JOB/resume/state.safetensors, written
atomically every checkpoint_every steps and on SIGTERM; the data position is
the step (rows are read in file order, see rows()). A run killed at any
point and started again with the same world size ends bit-identical to an
uninterrupted one.
"""
import json
import math
import os
import shutil
import signal
import struct
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def cpu_threads():
    """The CPU threads of this rank: OMP_NUM_THREADS, else the machine's
    cores shared by the ranks on it (torch would give each all of them).
    The count must not change between a run and its resumption for the two
    to be bit-identical."""
    if os.environ.get("OMP_NUM_THREADS"):
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)
    return max(1, (os.cpu_count() or 1) // max(1, local))


THREADS = cpu_threads()
# Read once, when torch loads its OpenMP and BLAS libraries (a user's own
# setting wins): OpenBLAS keeps a thread pool of its own (Debian's
# python3-torch calls the pthread OpenBLAS), sized like torch's; and idle
# workers of both pools sleep at once instead of spinning, so that neither
# burns the cores the other (or another process) is computing on: with
# two threads on two shared cores, spinning made a step 10× slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import acio  # noqa: E402
import acmodel  # noqa: E402

EXIT_DONE, EXIT_FAILED, EXIT_REFUSED, EXIT_STOPPED = 0, 1, 2, 0
STATE_VERSION = 1


class Refused(Exception):
    """The contract or its files cannot be run; nothing was done."""


def f32(x):
    """x rounded to float32, as the native engine's float32 constants."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- ranks


class Ranks:
    def __init__(self):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        self.cuda = torch.cuda.is_available()
        self.device = torch.device(f"cuda:{self.local}" if self.cuda else "cpu")
        self.joined = False

    def join(self):
        """Joins the process group (after the contract is checked, so that
        a refused contract does not wait for the other ranks)."""
        if self.cuda:
            torch.cuda.set_device(self.device)
        if self.world > 1:
            dist.init_process_group("nccl" if self.cuda else "gloo")
            self.joined = True

    def sum(self, values, dtype=torch.float64):
        """The sum over ranks of a list of numbers (or a tensor)."""
        t = values if torch.is_tensor(values) else torch.tensor(values, dtype=dtype)
        if self.world > 1:
            t = t.to(self.device)
            dist.all_reduce(t)
        return t.cpu()

    def barrier(self):
        if self.world > 1:
            dist.barrier()

    def close(self):
        if self.joined:
            dist.destroy_process_group()


def fsdp2():
    """fully_shard when torch >= 2.4 has it (CUDA only), else None."""
    try:
        from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy  # torch >= 2.6
        return fully_shard, MixedPrecisionPolicy
    except ImportError:
        pass
    try:
        from torch.distributed._composable.fsdp import fully_shard, MixedPrecisionPolicy  # 2.4, 2.5
        return fully_shard, MixedPrecisionPolicy
    except ImportError:
        return None


# ---------------------------------------------------------------- contract


class Job:
    def __init__(self, path, ranks):
        self.path = os.path.abspath(path)
        self.dir = os.path.dirname(self.path)
        try:
            with open(self.path) as f:
                self.c = json.load(f)
        except (OSError, ValueError) as e:
            raise Refused(f"{path}: cannot read the contract: {e}") from e
        if not isinstance(self.c, dict):
            raise Refused(f"{path}: the contract is not a JSON object")
        self.ranks = ranks
        c = self.c
        self.kind = c.get("kind")
        self.recipe = c.get("recipe") or {}
        self.world = int(c.get("world_size", 1))
        self.device_name = "cuda" if ranks.cuda else "cpu"
        out = c.get("outputs") or {}
        self.progress = self.file(out.get("progress", "progress.jsonl"))
        self.result = self.file(out.get("result", "result.json"))
        self.out = self.file(out.get("checkpoint", "out"))
        self.state = self.file(out.get("resume", "resume"))
        self.data = c.get("data") or {}
        self.seq_len = int(self.data.get("seq_len") or self.recipe.get("seq_len") or 128)
        self.batch = int(self.recipe.get("batch") or 8)

    def check(self):
        """Refuses a contract this trainer cannot run, before any work."""
        c, ranks = self.c, self.ranks
        if c.get("version") != 3:
            raise Refused(f"contract version {c.get('version')!r}: this trainer reads version 3")
        if self.kind not in ("distill", "importance", "eval", "proxy"):
            raise Refused(f"kind {self.kind!r}: the torch engine runs distill, importance, eval and proxy")
        if c.get("engine", "torch") != "torch":
            raise Refused(f"engine {c.get('engine')!r}: this is the torch reference trainer")
        if self.world != ranks.world:
            raise Refused(f"the contract's world_size is {self.world} but {ranks.world} rank(s) were started "
                          f"(WORLD_SIZE); start it with launch.sh")
        if self.data.get("format", "nanogpt-bin") != "nanogpt-bin":
            raise Refused(f"data format {self.data.get('format')!r}: the torch trainer reads nanogpt-bin shards")
        if self.batch % self.world:
            raise Refused(f"batch {self.batch} is not a multiple of world_size {self.world}: "
                          f"each rank takes batch/world_size rows")
        mb = self.recipe.get("micro_batch")
        if mb and int(mb) * self.world != self.batch:
            raise Refused(f"micro_batch {mb} × world_size {self.world} is not the batch {self.batch}")

    def file(self, rel):
        return os.path.join(self.dir, rel)

    def check_hashes(self):
        """Every hash the contract lists must match its file (the contract's
        rule: checkpoint.HashFiles over the file, named by its key)."""
        sets = [(".", self.data.get("sha256") or {})]
        for key in ("teacher", "student", "model", "tokenizer"):
            ent = self.c.get(key)
            if ent:
                sets.append((ent.get("path", "."), ent.get("sha256") or {}))
        for root, sums in sets:
            for name in sorted(sums):
                rel = os.path.normpath(os.path.join(root, name))
                if not os.path.isfile(self.file(rel)):
                    raise Refused(f"{rel}: listed in the contract but missing from the job directory")
                if acio.contract_hash(self.file(root), name) != sums[name]:
                    raise Refused(f"{rel}: its hash is not the contract's (the file changed after the job was "
                                  f"written; write the job again)")

    def load(self, key, device, dtype=torch.float32):
        """Loads the contract's model `key`, checking its shape first."""
        d = self.model_dir(key)
        want = (self.c.get(key) or {}).get("shape")
        if want:
            got = acmodel.Arch(acmodel.load_config(d)).shape()
            for k in ("vocab", "hidden", "tied", "layers"):
                if k in want and normal(want[k]) != normal(got[k]):
                    raise Refused(f"{key}/config.json does not have the contract's shape: {k} is {got[k]}, "
                                  f"the contract says {want[k]}")
        m = acmodel.load(d, device, dtype)
        if m.arch.max_positions and self.seq_len > m.arch.max_positions:
            raise Refused(f"seq_len {self.seq_len} exceeds the {key}'s max_position_embeddings {m.arch.max_positions}")
        return m

    def model_dir(self, key):
        """The directory of the contract's model `key`."""
        ent = self.c.get(key)
        if not ent or not ent.get("path"):
            raise Refused(f"the contract has no {key} checkpoint, which kind {self.kind} needs")
        return self.file(ent["path"])

    def rows(self, which, T=None):
        """Rows of T+1 tokens: each shard cut at stride T+1 from its start
        (a trailing part shorter than a row is dropped), shards in the
        contract's order. The Go side wrote them in the order the steps
        take them: they are read in file order, never shuffled."""
        T = T or self.seq_len
        files = self.data.get(which) or []
        if not files:
            raise Refused(f"the contract lists no {which} shards")
        parts = []
        for f in files:
            t = acio.read_shard(self.file(f))
            n = t.numel() // (T + 1)
            if n:
                parts.append(t[: n * (T + 1)].view(n, T + 1))
        if not parts:
            raise Refused(f"the {which} shards hold no row of {T + 1} tokens")
        return torch.cat(parts)


# ---------------------------------------------------------------- outputs


class Progress:
    def __init__(self, job):
        self.job, self.start, self.tokens = job, time.time(), 0

    def rate(self):
        """elapsed_s and tokens_per_s for result.json."""
        el = time.time() - self.start
        out = dict(elapsed_s=round(el, 3))
        if self.tokens and el > 0:
            out["tokens_per_s"] = self.tokens / el
        return out

    def line(self, **kv):
        if self.job.ranks.rank != 0:
            return
        el = time.time() - self.start
        kv["elapsed_s"] = round(el, 3)
        if self.tokens and el > 0:
            kv["tokens_per_s"] = round(self.tokens / el, 1)
        with open(self.job.progress, "a") as f:
            f.write(json.dumps(kv) + "\n")


def normal(v):
    """A shape value with JSON's key order and types, for comparing."""
    return json.loads(json.dumps(v, sort_keys=True))


def write_result(job, res):
    if job.ranks.rank != 0:
        return
    res = dict(version=1, kind=job.kind, engine="torch", world_size=job.world, device=job.device_name, **res)
    tmp = job.result + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    os.replace(tmp, job.result)


def model_hash(d):
    """importance.HashModelDir: sha256 over config.json then the sorted
    *.safetensors files, each as name NUL size NUL contents."""
    import hashlib
    h = hashlib.sha256()
    names = ["config.json"] + sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))
    for n in names:
        p = os.path.join(d, n)
        h.update(f"{n}\0{os.path.getsize(p)}\0".encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def rows_hash(rows):
    """dataset.HashRows: each row as its uint32 length then its uint32 ids."""
    import hashlib
    h = hashlib.sha256()
    for r in rows.tolist():
        h.update(struct.pack("<%dI" % (len(r) + 1), len(r), *r))
    return h.hexdigest()


# ---------------------------------------------------------------- evaluation


def ce_sum(model, rows, batch, ranks, lockstep=False):
    """Σ over the rows' tokens of the cross-entropy (float64, summed over
    ranks), and the token count: batch k is run by rank k % world. Each
    batch's mean is rounded to float32, as engine.ForwardLoss returns it.
    lockstep (FSDP2, whose forward is a collective): every rank runs the
    same number of forward passes, spare ones on batch 0, discarded."""
    T = rows.shape[1] - 1
    s, n = 0.0, 0
    nb = -(-rows.shape[0] // batch)
    rounds = -(-nb // ranks.world)
    with torch.no_grad():
        for k in range(rounds * ranks.world):
            if k % ranks.world != ranks.rank:
                continue
            if k >= nb:
                if lockstep:
                    model(rows[:batch, :T].to(ranks.device))
                continue
            i = k * batch
            part = rows[i:i + batch].to(ranks.device)
            logits = model(part[:, :T]).float().reshape(-1, model.arch.vocab).double()
            tg = part[:, 1:].reshape(-1)
            per = torch.logsumexp(logits, -1) - logits.gather(1, tg[:, None])[:, 0]
            mean = f32(per.mean().item())
            s += mean * tg.numel()
            n += tg.numel()
    tot = ranks.sum([s, float(n)])
    return tot[0].item(), int(tot[1].item())


def infer_dtype(ranks):
    """The weights' dtype of a forward-only kind: float32 on CPU (the
    native engine's), bf16 on a GPU (the statistics stay float64)."""
    return torch.bfloat16 if ranks.cuda else torch.float32


def run_eval(job, ranks):
    """Held-out perplexity of the model on data.valid."""
    prog = Progress(job)
    m = job.load("model", ranks.device, infer_dtype(ranks)).eval()
    rows = job.rows("valid")
    s, n = ce_sum(m, rows, job.batch, ranks)
    loss = s / n
    prog.tokens = n
    prog.line(step=rows.shape[0], steps=rows.shape[0])
    write_result(job, dict(status="done", tokens=n, loss=loss, perplexity=math.exp(loss), **prog.rate()))


def run_proxy(job, ranks):
    """Mean KL(teacher ‖ student) per token at T = 1 over the shared ids of
    data.valid's rows, no training."""
    prog = Progress(job)
    dt = infer_dtype(ranks)
    teacher, student = job.load("teacher", ranks.device, dt).eval(), job.load("student", ranks.device, dt).eval()
    shared = int(job.recipe.get("shared_vocab") or min(teacher.arch.vocab, student.arch.vocab))
    rows = job.rows("valid")
    T = job.seq_len
    s, n = 0.0, 0
    with torch.no_grad():
        for k, i in enumerate(range(0, rows.shape[0], job.batch)):
            if k % ranks.world != ranks.rank:
                continue
            x = rows[i:i + job.batch, :T].to(ranks.device)
            lp = F.log_softmax(teacher(x).double()[..., :shared], -1)
            lq = F.log_softmax(student(x).double()[..., :shared], -1)
            s += (lp.exp() * (lp - lq)).sum().item()
            n += x.numel()
    tot = ranks.sum([s, float(n)])
    prog.tokens = int(tot[1].item())
    prog.line(step=rows.shape[0], steps=rows.shape[0])
    write_result(job, dict(status="done", tokens=prog.tokens, kl=tot[0].item() / tot[1].item(), **prog.rate()))


# ---------------------------------------------------------------- importance


class Collector:
    """The native importance collector (importance/importance.go): per site,
    A[c] += Σ_b (mean_t |x[b,t,c]|)²; Σ over rows of 1 − cos for the layer
    and its two sub-blocks."""

    def __init__(self, L):
        self.acc = {}  # (site, layer) -> float64 tensor
        self.bi = torch.zeros(L, dtype=torch.float64)
        self.attn_bi = torch.zeros(L, dtype=torch.float64)
        self.mlp_bi = torch.zeros(L, dtype=torch.float64)
        self.rows = torch.zeros(L, dtype=torch.float64)
        self.x_in, self.mid, self.out = {}, {}, {}

    def __call__(self, layer, site, x):
        x = x.detach().double()
        if site in ("attn_norm", "mlp_norm", "attn_heads", "mlp_act"):
            m = x.abs().mean(dim=1)  # (B, width): mean over the sequence
            a = (m * m).sum(dim=0).cpu()
            key = (site, layer)
            self.acc[key] = self.acc[key] + a if key in self.acc else a
        elif site == "layer_input":
            self.x_in[layer], self.mid[layer] = x, None
        elif site == "attn_residual":
            self.mid[layer] = x
        elif site == "layer_output":
            self.out[layer] = x
            n = x.shape[0] * x.shape[1]
            self.rows[layer] += n
            self.bi[layer] += n - sum_cos(self.x_in[layer], x)
            if self.mid[layer] is not None:
                self.attn_bi[layer] += n - sum_cos(self.x_in[layer], self.mid[layer])
                self.mlp_bi[layer] += n - sum_cos(self.mid[layer], x)


def sum_cos(a, b):
    """Σ over rows of cos(a_row, b_row); a zero row counts as 1."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    dot, na, nb = (a * b).sum(-1), (a * a).sum(-1), (b * b).sum(-1)
    zero = (na == 0) | (nb == 0)
    c = dot / torch.sqrt(torch.where(zero, torch.ones_like(na), na * nb))
    return torch.where(zero, torch.ones_like(c), c).sum().item()


def run_importance(job, ranks):
    prog = Progress(job)
    d_ = job.model_dir("model")
    a = acmodel.Arch(acmodel.load_config(d_))
    if not isinstance(a, acmodel.Arch) or any(l.moe is not None for l in a.layers):
        raise Refused("the reference trainer scores Llama-family layers only: run the importance of this "
                      "hybrid or mixture-of-experts model in the native engine")
    m = job.load("model", ranks.device, infer_dtype(ranks)).eval()
    arch = m.arch
    L = len(arch.layers)
    T = job.seq_len
    rows = job.rows("valid")
    batch = job.batch
    col = Collector(L)
    # Skip passes: every layer, then each sub-block of layers with both.
    passes = []
    if not job.recipe.get("no_skip_loss"):
        passes = [("layer", l) for l in range(L)]
        if not job.recipe.get("no_subblock_skip_loss"):
            for l, lay in enumerate(arch.layers):
                if lay.attention and lay.mlp:
                    passes += [("attention", l), ("mlp", l)]
    budget = float(job.recipe.get("skip_passes") or 0)
    N = rows.shape[0]
    K, Tk = skip_scope(arch, passes, N, T, int(job.recipe.get("skip_rows") or 0), budget)
    if not passes:
        K, Tk = 0, 0
    full = acmodel.forward_flops(arch, N, T)
    # importance.Compute: without a budget (or when it affords every
    # sequence) every pass on the K sequences importance.Scored picks;
    # otherwise regression estimates on the first K of score_order, and a
    # round two on the ones after them.
    regression = bool(budget > 0 and not int(job.recipe.get("skip_rows") or 0) and K < N and passes)
    order = score_order(N) if regression else [j for j in range(N) if int((j + 1) * K // N) > int(j * K // N)]
    grad_flops = 2.0 * N * T * arch.hidden * arch.vocab if regression else 0.0
    cov_all = torch.zeros(len(passes), N, T, dtype=torch.float64)
    # Base pass with the collector; its sums are reduced over ranks below.
    s, n = 0.0, 0
    base_tl = torch.zeros(rows.shape[0], T, dtype=torch.float64)  # per-token losses, summed over ranks below
    with torch.no_grad():
        for k, i in enumerate(range(0, rows.shape[0], batch)):
            if k % ranks.world != ranks.rank:
                continue
            part = rows[i:i + batch].to(ranks.device)
            logits = m(part[:, :T], observe=col).reshape(-1, arch.vocab).double()
            tg = part[:, 1:].reshape(-1)
            per = torch.logsumexp(logits, -1) - logits.gather(1, tg[:, None])[:, 0]
            base_tl[i:i + part.shape[0]] = per.view(part.shape[0], T).cpu()
            if regression:
                cov_all[:, i:i + part.shape[0]] = first_order(m, col, logits, tg, passes).view(len(passes), part.shape[0], T).cpu()
            s += f32(per.mean().item()) * tg.numel()
            n += tg.numel()
    tot = ranks.sum([s, float(n)])
    base = tot[0].item() / tot[1].item()
    base_tl = ranks.sum(base_tl)
    if regression:
        cov_all = ranks.sum(cov_all)
    # Reduce every accumulator over ranks (each rank sees the same layers
    # and widths, so the keys agree).
    acc = {}
    for key in sorted(k for k in acc_keys(arch)):
        v = col.acc.get(key)
        width = key_width(arch, key)
        acc[key] = ranks.sum(v if v is not None else torch.zeros(width, dtype=torch.float64))
    bi, attn_bi, mlp_bi, cnt = (ranks.sum(t) for t in (col.bi, col.attn_bi, col.mlp_bi, col.rows))
    nan = float("nan")
    hidden = torch.zeros(arch.hidden, dtype=torch.float64)
    for (site, l), v in acc.items():
        if site in ("attn_norm", "mlp_norm"):
            hidden += v.sqrt()
    sc = dict(hidden=hidden.tolist(), layer_bi=[], layer_skip_loss=[nan] * L, attn_bi=[], mlp_bi=[],
              attn_skip_loss=[nan] * L, mlp_skip_loss=[nan] * L, heads={}, head_channels={}, neurons={}, kv_heads=[])
    for l, lay in enumerate(arch.layers):
        c = cnt[l].item()
        sc["layer_bi"].append(bi[l].item() / c if c else 0.0)
        sc["attn_bi"].append(attn_bi[l].item() / c if c and lay.attention else nan)
        sc["mlp_bi"].append(mlp_bi[l].item() / c if c and lay.mlp else nan)
        sc["kv_heads"].append(lay.kv_heads if lay.attention else 0)
        if lay.attention:
            ch = acc[("attn_heads", l)].sqrt()
            sc["head_channels"][l] = ch.tolist()
            sc["heads"][l] = ch.view(lay.heads, lay.head_dim).pow(2).sum(-1).sqrt().tolist()
        if lay.mlp:
            sc["neurons"][l] = acc[("mlp_act", l)].sqrt().tolist()
    cost = [acmodel.forward_flops(arch, 1, Tk, l) for _, l in passes]
    P = len(passes)
    kind = [{"layer": 0, "attention": 1, "mlp": 2}[what] for what, _ in passes]
    # importance.skipScorer: Σy, tokens; for a regression estimate Σx, Σx²,
    # Σxy and the per-sequence sums (y the paired loss difference, x the
    # first-order covariate).
    st = {k: [0.0] * P for k in ("sum", "tokens", "sx", "sxx", "sxy", "rows", "ry", "ryy", "rx", "rxx", "rxy")}
    mu = [cov_all[j].sum().item() / (N * T) for j in range(P)] if regression else None
    left = (budget - 1) * full - grad_flops - K * sum(cost) if regression else 0.0
    total = N + P * K + (int(max(0, left / (sum(cost) / P))) if regression else 0)
    done = N
    prog.tokens = done * T
    prog.line(step=done, steps=total, loss=base)

    def score(j, idx):
        """Pass j on the sequences idx against the calibration pass's
        per-token losses (importance.skipScorer.run)."""
        nonlocal done
        if not idx:
            return
        what, l = passes[j]
        m.skip, m.skip_attn, m.skip_mlp = set(), set(), set()
        {"layer": m.skip, "attention": m.skip_attn, "mlp": m.skip_mlp}[what].add(l)
        d = token_losses(m, rows[idx][:, :Tk + 1], batch, ranks) - base_tl[idx][:, :Tk]
        m.skip, m.skip_attn, m.skip_mlp = set(), set(), set()
        xs_all = cov_all[j][idx][:, :Tk].tolist() if regression else None
        for b, r in enumerate(d.tolist()):
            ys = xs = 0.0
            for t, y in enumerate(r):
                ys += y
                if regression:
                    x = xs_all[b][t]
                    xs += x
                    st["sxx"][j] += x * x
                    st["sxy"][j] += x * y
            st["sum"][j] += ys
            st["tokens"][j] += len(r)
            if regression:
                st["sx"][j] += xs
                y, x = ys / len(r), xs / len(r)
                st["rows"][j] += 1
                st["ry"][j] += y
                st["ryy"][j] += y * y
                st["rx"][j] += x
                st["rxx"][j] += x * x
                st["rxy"][j] += x * y
        done += len(idx)
        prog.tokens += len(idx) * Tk
        prog.line(step=done, steps=total)

    def beta(j):
        """importance.skipScorer.beta: the slope pooled over j's kind."""
        cxy = vx = 0.0
        for k in range(P):
            if kind[k] != kind[j]:
                continue
            n = st["tokens"][k]
            xk, yk = st["sx"][k] / n, st["sum"][k] / n
            cxy += st["sxy"][k] - n * xk * yk
            vx += st["sxx"][k] - n * xk * xk
        return cxy / vx if vx > 0 else 0.0

    def loss(j):
        """importance.skipScorer.loss."""
        n = st["tokens"][j]
        y = st["sum"][j] / n
        return y - beta(j) * (st["sx"][j] / n - mu[j]) if regression else y

    def spread(j):
        """importance.skipScorer.spread."""
        n = st["rows"][j]
        if n < 2:
            return 1.0
        b = beta(j)
        vy = st["ryy"][j] - st["ry"][j] * st["ry"][j] / n
        vx = st["rxx"][j] - st["rx"][j] * st["rx"][j] / n
        cxy = st["rxy"][j] - st["rx"][j] * st["ry"][j] / n
        return max(0.0, (vy - 2 * b * cxy + b * b * vx) / (n - 1))

    for j in range(P):
        score(j, order[:K])
    if regression:
        more = min(N, K + int(max(0, math.floor(left / min(cost)))), 2 * K + 1)
        upto = allocate([loss(j) for j in range(P)], [spread(j) for j in range(P)], cost,
                        orderings(arch, passes, not job.recipe.get("no_subblock_skip_loss")), K, more, max(1, (K + 1) // 2), left)
        for j in range(P):
            score(j, order[K:upto[j]])
    sub = not job.recipe.get("no_subblock_skip_loss")
    for j, (what, l) in enumerate(passes):
        dl = loss(j)
        lay = arch.layers[l]
        if what == "layer":
            sc["layer_skip_loss"][l] = dl
            if lay.attention and not lay.mlp and sub:
                sc["attn_skip_loss"][l] = dl
            if lay.mlp and not lay.attention and sub:
                sc["mlp_skip_loss"][l] = dl
        elif what == "attention":
            sc["attn_skip_loss"][l] = dl
        else:
            sc["mlp_skip_loss"][l] = dl
    if ranks.rank == 0:
        rel = "importance.safetensors"
        spent = 0.0
        for j in range(P):
            spent += st["tokens"][j] / Tk * cost[j]
        save_scores(job.file(rel), sc, dict(model_hash=model_hash(d_), data_hash=rows_hash(rows), seq_len=T,
                                            sequences=N, tokens=N * T, base_loss=repr(base),
                                            layers=L, skip_sequences=K, skip_tokens=Tk,
                                            equivalent_passes=repr(1 + (spent + grad_flops) / full),
                                            pass_budget=repr(budget), skip_regression="true" if regression else "false"))
        write_result(job, dict(status="done", tokens=N * T, loss=base, importance=rel,
                               sha256={rel: acio.contract_hash(job.dir, rel)}, **prog.rate()))


def first_order(m, col, logits, tg, passes):
    """importance.firstOrder for one calibration batch: per pass and token
    −⟨g, Δ⟩, g the gradient of the token's loss with respect to the last
    layer's output (engine.Model.FinalGradients: softmax − onehot through
    the LM head and the final RMSNorm) and Δ what the skipped block adds to
    the residual stream; (passes, B·T) float64."""
    arch = m.arch
    L = len(arch.layers)
    w = (m.model.embed_tokens.weight if m.lm_head is None else m.lm_head.weight).detach().double()
    dl = torch.softmax(logits, -1)
    dl[torch.arange(tg.numel()), tg] -= 1
    gl = dl @ w  # (N, H): gradient at the final norm's output
    x = col.out[L - 1].reshape(-1, arch.hidden)
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + arch.eps)
    gw = m.model.norm.weight.detach().double() * gl
    dot = (gw * x * r).sum(-1, keepdim=True) / arch.hidden
    g = r * (gw - x * r * dot)
    out = []
    for what, l in passes:
        nxt = col.out[l] if l == L - 1 else col.x_in[l + 1]
        lo, hi = col.x_in[l], nxt
        if what == "attention":
            hi = col.mid[l]
        elif what == "mlp":
            lo = col.mid[l]
        out.append(-(g * (hi - lo).reshape(-1, arch.hidden)).sum(-1))
    return torch.stack(out)


def token_losses(model, rows, batch, ranks):
    """The per-token cross-entropy (float64, rows x T) of rows (T+1 ids
    each) in batches of batch, batch k run by rank k % world and summed
    over ranks (engine.Model.TokenLosses)."""
    T = rows.shape[1] - 1
    out = torch.zeros(rows.shape[0], T, dtype=torch.float64)
    with torch.no_grad():
        for k, i in enumerate(range(0, rows.shape[0], batch)):
            if k % ranks.world != ranks.rank:
                continue
            part = rows[i:i + batch].to(ranks.device)
            logits = model(part[:, :T]).float().reshape(-1, model.arch.vocab).double()
            tg = part[:, 1:].reshape(-1)
            per = torch.logsumexp(logits, -1) - logits.gather(1, tg[:, None])[:, 0]
            out[i:i + part.shape[0]] = per.view(part.shape[0], T).cpu()
    return ranks.sum(out)


def score_order(rows):
    """importance.ScoreOrder: the bit-reversal permutation of 0..rows-1."""
    bits = 0
    while (1 << bits) < rows:
        bits += 1
    out = []
    for i in range(1 << bits):
        r = 0
        for b in range(bits):
            if i & (1 << b):
                r |= 1 << (bits - 1 - b)
        if r < rows:
            out.append(r)
    return out


def orderings(arch, passes, sub):
    """importance.orderings: the passes of the layer, attention and MLP
    orderings (a layer with one sub-block in the layer's and its own)."""
    g = ([], [], [])
    for j, (what, l) in enumerate(passes):
        lay = arch.layers[l]
        if what == "attention":
            g[1].append(j)
        elif what == "mlp":
            g[2].append(j)
        else:
            g[0].append(j)
            if not sub:
                continue
            if lay.attention and not lay.mlp:
                g[1].append(j)
            if lay.mlp and not lay.attention:
                g[2].append(j)
    return g


def allocate(d, v, cost, groups, n1, most, step, left):
    """importance.allocate: round two's sequences per pass, from n1 up to
    most, within left model FLOPs, to the closest neighbours first."""
    n = [n1] * len(d)
    srt = [sorted(g, key=lambda j: d[j]) for g in groups]

    def grow(j):
        k = min(step, most - n[j])
        while k > 0 and k * cost[j] > left:
            k -= 1
        return k
    while True:
        bj, bk, bz = -1, -1, math.inf
        for s in srt:
            for i in range(1, len(s)):
                j, k = s[i - 1], s[i]
                if grow(j) == 0 and grow(k) == 0:
                    continue
                se = math.sqrt(v[j] / n[j] + v[k] / n[k])
                gap = abs(d[j] - d[k])
                z = gap / se if se > 0 else (0.0 if gap == 0 else math.inf)
                if z < bz:
                    bj, bk, bz = j, k, z
        if bj < 0:
            return n
        for j in (bj, bk):
            g = grow(j)
            if g > 0:
                n[j] += g
                left -= g * cost[j]


def skip_scope(arch, passes, rows, T, skip_rows, budget):
    """importance.Options.SkipScope: how many whole calibration sequences
    k every skip loss is scored on. skip_rows > 0 scores that many (spread
    evenly: importance.Scored); a budget of equivalent forward passes that
    affords every row scores them all, else the most it affords after the
    first-order covariate's LM-head product (the first k of score_order,
    as regression estimates; round two gives what is left to the skips
    whose ranks are uncertain: allocate)."""
    if skip_rows > 0:
        return min(skip_rows, rows), T
    if budget == 0 or rows == 0:
        return rows, T
    def per_row(t):
        return skip_row_flops(arch, passes, t)
    full = acmodel.forward_flops(arch, rows, T)
    if 1 + rows * per_row(T) / full <= budget:
        return rows, T
    grad = 2.0 * rows * T * arch.hidden * arch.vocab  # engine.Model.FinalGradientFLOPs
    k = int(math.floor(max(0.0, (budget - 1) * full - grad) / per_row(T)))
    return min(rows, max(1, k)), T


def skip_row_flops(arch, passes, t):
    """The model FLOPs of scoring every pass on one sequence's first t
    tokens, each from its layer on (importance.perRowFLOPs)."""
    return sum(acmodel.forward_flops(arch, 1, t, l) for _, l in passes)


def acc_keys(arch):
    for l, lay in enumerate(arch.layers):
        if lay.attention:
            yield ("attn_norm", l)
            yield ("attn_heads", l)
        if lay.mlp:
            yield ("mlp_norm", l)
            yield ("mlp_act", l)


def key_width(arch, key):
    site, l = key
    lay = arch.layers[l]
    return {"attn_norm": arch.hidden, "mlp_norm": arch.hidden, "attn_heads": lay.heads * lay.head_dim,
            "mlp_act": lay.ffn}[site]


def save_scores(path, sc, meta):
    """importance.Scores.Save's file: float32 tensors and __metadata__."""
    t = {"hidden": sc["hidden"], "layer_bi": sc["layer_bi"], "layer_skip_loss": sc["layer_skip_loss"],
         "attn_bi": sc["attn_bi"], "mlp_bi": sc["mlp_bi"], "attn_skip_loss": sc["attn_skip_loss"],
         "mlp_skip_loss": sc["mlp_skip_loss"]}
    for l in range(len(sc["layer_bi"])):
        if l in sc["heads"]:
            t[f"layers.{l}.heads"] = sc["heads"][l]
            t[f"layers.{l}.head_channels"] = sc["head_channels"][l]
        if l in sc["neurons"]:
            t[f"layers.{l}.neurons"] = sc["neurons"][l]
    md = {"format": "autocompress-importance", "version": "3", "kv_heads": ",".join(str(k) for k in sc["kv_heads"]),
          "aggregation": "mean over tokens, L2 over sequences (Minitron); computed by the torch reference trainer"}
    md.update({k: str(v) for k, v in meta.items()})
    acio.write_safetensors(path, {k: torch.tensor(v, dtype=torch.float64) for k, v in t.items()}, "F32", md)


# ---------------------------------------------------------------- distillation


def schedule(r, steps):
    """train.Schedule: linear warm-up to lr, cosine decay to min_lr."""
    peak = float(r.get("lr", 3e-3))
    lo = float(r["min_lr"]) if r.get("min_lr") is not None else peak / 10
    warm = int(r["warmup_steps"]) if r.get("warmup_steps") is not None else max(1, steps // 20)

    def lr(step):
        if step < warm:
            return peak * (step + 1) / warm
        if step >= steps or steps <= warm:
            return lo
        p = (step - warm) / (steps - warm)
        return lo + 0.5 * (peak - lo) * (1 + math.cos(math.pi * p))
    return lr


class AdamW:
    """train.AdamW, element for element in float32:
    m = b1·m + (1−b1)·g; v = b2·v + (1−b2)·g²;
    p −= lr·(m·c1/(sqrt(v·c2)+eps) + wd·p), wd = 0 for train.NoDecay names."""

    def __init__(self, named, r):
        self.params = named  # [(name, param)]
        self.b1, self.b2 = f32(r.get("beta1", 0.9)), f32(r.get("beta2", 0.95))
        self.b1d, self.b2d = float(r.get("beta1", 0.9)), float(r.get("beta2", 0.95))
        self.eps, self.wd = f32(r.get("eps", 1e-8)), f32(r.get("weight_decay", 0.1))
        self.m = {n: torch.zeros_like(p) for n, p in named}
        self.v = {n: torch.zeros_like(p) for n, p in named}
        self.t = 0

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        c1 = f32(1 / (1 - self.b1d ** self.t))
        c2 = f32(1 / (1 - self.b2d ** self.t))
        one_b1, one_b2 = f32(f32(1) - self.b1), f32(f32(1) - self.b2)
        lr32 = f32(lr)
        for n, p in self.params:
            g = p.grad
            m, v = self.m[n], self.v[n]
            m.mul_(self.b1).add_(g * one_b1)
            v.mul_(self.b2).add_(g * g * one_b2)
            u = m * c1 / (torch.sqrt(v * c2) + self.eps)
            if not acmodel.no_decay(n):
                u = u + p * self.wd
            p.sub_(u * lr32)


def local(t):
    """The local shard of a DTensor (FSDP2), else t."""
    return t.to_local() if hasattr(t, "to_local") else t


def full(t):
    """The whole tensor of a DTensor (a collective under FSDP2), else t."""
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def clip_grads(named, limit, ranks, sharded):
    """train.ClipGradNorm: the global L2 norm in float64; scale by
    float32(limit/norm) when it exceeds limit (> 0) and is finite."""
    s = torch.zeros((), dtype=torch.float64)
    for _, p in named:
        s += local(p.grad).double().pow(2).sum().cpu()
    if sharded:
        s = ranks.sum(s)
    n = math.sqrt(s.item())
    if limit > 0 and n > limit and math.isfinite(n):
        f = f32(limit / n)
        for _, p in named:
            p.grad.mul_(f)
    return n


def kd_loss(zs, zt, tg, r, shared):
    """distill.KD: KDWeight·T²·mean KL(p_t ‖ q_s) over the shared ids (top-k:
    the teacher renormalised onto its K largest) + CEWeight·mean CE."""
    T = float(r.get("temperature", 1.0))
    kdw, cew, k = float(r.get("kd_weight", 1.0)), float(r.get("ce_weight", 0.0)), int(r.get("top_k", 0))
    loss = zs.new_zeros(())
    if kdw:
        # No slice when every id is shared and no division at T = 1: the
        # same values, without the full-size copies their backward makes.
        s = zs if shared == zs.shape[1] else zs[:, :shared]
        t = (zt if shared == zt.shape[1] else zt[:, :shared]).detach()
        lq = F.log_softmax(s if T == 1 else s / T, dim=-1)
        if k > 0:
            vals, ids = t.topk(k, dim=-1)
            lp = F.log_softmax(vals if T == 1 else vals / T, dim=-1)
            kl = (lp.exp() * (lp - lq.gather(1, ids))).sum(-1)
        else:
            lp = F.log_softmax(t if T == 1 else t / T, dim=-1)
            kl = (lp.exp() * (lp - lq)).sum(-1)
        loss = loss + kdw * T * T * kl.mean()
    if cew:
        loss = loss + cew * F.cross_entropy(zs, tg)
    return loss


def job_tag(c):
    """A hash of everything besides checkpoint cadence and outputs that the
    steps depend on: a state resumes only the same job."""
    import hashlib
    keep = {k: v for k, v in c.items() if k not in ("checkpoint_every", "outputs")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:16]


def save_state(job, student, opt, step, losses, tag, ranks):
    """Writes JOB/state/state.safetensors atomically (rank 0): float32
    weights ("p."), moments ("m.", "v."), step and losses in metadata."""
    named = dict(student.named_parameters())
    src, specs = {}, []
    for n in acmodel.hf_names(student.arch):
        for key, t in (("p." + n, named[n]), ("m." + n, opt.m[n]), ("v." + n, opt.v[n])):
            src[key] = t
            specs.append((key, list(t.shape)))
    meta = dict(version=STATE_VERSION, step=step, adam_t=opt.t, tag=tag, losses=json.dumps(losses),
                world_size=job.world)
    if ranks.rank == 0:
        os.makedirs(job.state, exist_ok=True)
    acio.write_safetensors_stream(os.path.join(job.state, "state.safetensors"), specs,
                                  lambda k: full(src[k].detach()), "F32", meta, write=ranks.rank == 0)
    ranks.barrier()


def load_state(job, student, opt, tag):
    """Restores a state written by save_state; returns (step, losses), or
    (0, []) when there is none."""
    path = os.path.join(job.state, "state.safetensors")
    if not os.path.exists(path):
        return 0, []
    header, _ = acio.read_safetensors_header(path)
    meta = header.get("__metadata__") or {}
    if meta.get("tag") != tag or int(meta.get("version", 0)) != STATE_VERSION:
        raise Refused(f"{os.path.relpath(path, job.dir)} is the state of another job (its contract differs); "
                      f"remove the state directory to start over")
    if int(meta.get("world_size", 0)) != job.world:
        raise Refused(f"{os.path.relpath(path, job.dir)} was written with world size {meta.get('world_size')}, "
                      f"the contract has {job.world}")
    named = dict(student.named_parameters())
    stores = {}
    for n in acmodel.hf_names(student.arch):
        stores.update({"p." + n: named[n], "m." + n: opt.m[n], "v." + n: opt.v[n]})
    missing = set(stores)
    with torch.no_grad():
        for key, t in acio.iter_safetensors(path, names=stores):
            store = stores[key]
            if tuple(t.shape) != tuple(store.shape):
                raise Refused(f"{os.path.relpath(path, job.dir)}: {key} has shape {list(t.shape)}, the student's "
                              f"{list(store.shape)}; remove the state directory to start over")
            src = t.to(store.device)
            if hasattr(store, "device_mesh"):  # FSDP2 DTensor: keep our shard
                from torch.distributed._tensor import distribute_tensor
                src = distribute_tensor(src, store.device_mesh, store.placements)
            store.copy_(src)
            missing.discard(key)
    if missing:
        raise Refused(f"{os.path.relpath(path, job.dir)} lacks {sorted(missing)[0]}; remove the state directory to start over")
    opt.t = int(meta["adam_t"])
    return int(meta["step"]), json.loads(meta["losses"])


STOP = {"flag": False}


class Stopped(Exception):
    """A forward-only job (importance, eval, proxy) stopped by a signal: it
    keeps no state, and a rerun starts it over."""


def on_signal(signum, frame):
    STOP["flag"] = True


def on_signal_stop(signum, frame):
    raise Stopped(f"stopped by signal {signum} before the end; run it again to start over")


def save_out(job, student, student_dir, ranks):
    """The student as a HF checkpoint in JOB/out: its config.json and other
    files copied, the weights in the student's dtype."""
    named = dict(student.named_parameters())
    specs = [(n, list(named[n].shape)) for n in acmodel.hf_names(student.arch)]
    get = lambda n: full(named[n].detach())  # noqa: E731
    if ranks.rank != 0:
        acio.write_safetensors_stream(None, specs, get, write=False)  # the collectives of full()
        return {}
    dtype = acio.safetensors_dtype(acio.checkpoint_files(student_dir)[0])
    if dtype not in ("F32", "BF16", "F16"):
        dtype = "F32"
    tmp = job.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for n in os.listdir(student_dir):
        if n.endswith(".safetensors") or n == "model.safetensors.index.json":
            continue
        src = os.path.join(student_dir, n)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(tmp, n))
    acio.write_safetensors_stream(os.path.join(tmp, "model.safetensors"), specs, get, dtype, {"format": "pt"})
    shutil.rmtree(job.out, ignore_errors=True)
    os.replace(tmp, job.out)
    rel = os.path.relpath(job.out, job.dir)
    rel = rel.replace(os.sep, "/")
    return {f"{rel}/{n}": acio.contract_hash(job.dir, f"{rel}/{n}") for n in sorted(os.listdir(job.out))}


class DistillStep:
    """One optimiser step of distillation, on whatever the ranks are: DDP
    over gloo or NCCL, or FSDP2 (torch >= 2.4 with CUDA: every block and
    the root sharded, bf16 compute, float32 reduction); bf16 autocast on a
    GPU without FSDP2. The step computes the teacher's logits (no grad),
    the student's, kd_loss, backward, clip_grads and AdamW; it returns the
    loss (the mean over all ranks' tokens) and the norm before clipping."""

    def __init__(self, student, teacher, ranks, r, shared):
        self.student, self.teacher, self.ranks, self.r, self.shared = student, teacher, ranks, r, shared
        for p in teacher.parameters():
            p.requires_grad_(False)
        student.checkpointing = bool(r.get("activation_checkpointing"))
        self.sharded = False
        self.model = student
        fs = fsdp2() if ranks.cuda else None
        if fs is not None and r.get("fsdp", True):
            fully_shard, MP = fs
            mp = MP(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for m in (student, teacher):
                for blk in m.model.layers:
                    fully_shard(blk, mp_policy=mp)
                fully_shard(m, mp_policy=mp)
            self.sharded = True
        elif ranks.world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            # An MoE step may route no token of a rank's rows to an expert.
            moe = any(getattr(l, "moe", None) is not None for l in student.arch.layers)
            self.model = DDP(student, device_ids=[ranks.local] if ranks.cuda else None, find_unused_parameters=moe)
        self.autocast = ranks.cuda and not self.sharded
        self.named = [(n, p) for n, p in student.named_parameters()]
        self.opt = AdamW(self.named, r)

    def forward(self, m, x):
        if self.autocast:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m(x)
        return m(x)

    def __call__(self, x, tg, lr, clip):
        zt = None
        if float(self.r.get("kd_weight", 1.0)):  # kd_weight 0: CE-only training, the teacher is not run
            with torch.no_grad():
                zt = self.forward(self.teacher, x)
        zs = self.forward(self.model, x)
        loss = kd_loss(zs.float().reshape(-1, self.student.arch.vocab),
                       None if zt is None else zt.float().reshape(-1, self.teacher.arch.vocab), tg, self.r, self.shared)
        for _, p in self.named:
            p.grad = None
        loss.backward()
        for _, p in self.named:
            if p.grad is None:  # an expert no row of the step reached: its gradient is zero
                p.grad = torch.zeros_like(p)
        lval = self.ranks.sum([loss.item()])[0].item() / self.ranks.world
        if not math.isfinite(lval):
            return lval, float("nan")
        norm = clip_grads(self.named, clip, self.ranks, self.sharded)
        self.opt.step(lr)
        return lval, norm


def run_distill(job, ranks):
    r = job.recipe
    T, B = job.seq_len, job.batch
    sdir = job.model_dir("student")
    # On GPU the frozen teacher is held in bf16 (it never takes a step);
    # the student keeps float32 master weights.
    teacher = job.load("teacher", ranks.device, torch.bfloat16 if ranks.cuda else torch.float32).eval()
    student = job.load("student", ranks.device)
    shared = int(r.get("shared_vocab") or min(teacher.arch.vocab, student.arch.vocab))
    rows = job.rows("train")
    valid = job.rows("valid") if job.data.get("valid") else None
    if valid is not None and int(r.get("eval_rows") or 0) > 0:
        valid = valid[: int(r["eval_rows"])]
    steps = int(r["steps"]) if r.get("steps") else -(-int(r.get("tokens", 0)) // (B * T))
    if steps < 1:
        raise Refused("recipe: tokens (or steps) must give at least one step")
    lr_at = schedule(r, steps)
    clip = float(r.get("clip", 1.0))
    step_fn = DistillStep(student, teacher, ranks, r, shared)
    opt, sharded = step_fn.opt, step_fn.sharded
    tag = job_tag(job.c)
    start, losses = load_state(job, student, opt, tag)
    every = int(job.c.get("checkpoint_every", 100) or 0)
    prog = Progress(job)
    if start:
        prog.line(event="resumed", step=start)
    elif valid is not None:
        s, n = ce_sum(student, valid, B, ranks, lockstep=sharded)
        prog.line(step=0, steps=steps, val_loss=s / n)
    per = B // job.world
    n_rows = rows.shape[0]
    step = start
    while step < steps:
        stop = ranks.sum([1.0 if STOP["flag"] else 0.0])[0].item() > 0
        if stop:
            save_state(job, student, opt, step, losses, tag, ranks)
            prog.line(event="checkpoint", step=step)
            write_result(job, dict(status="stopped", steps=step, tokens=step * B * T, losses=losses,
                                   error=f"stopped by a signal at step {step} of {steps}; run again to resume",
                                   **prog.rate()))
            return EXIT_STOPPED
        lr = lr_at(step)
        first = step * B + ranks.rank * per
        idx = torch.tensor([(first + j) % n_rows for j in range(per)])
        part = rows[idx].to(ranks.device)
        lval, norm = step_fn(part[:, :T], part[:, 1:].reshape(-1), lr, clip)
        if not math.isfinite(lval):
            raise RuntimeError(f"step {step}: loss is {lval}; lower the learning rate (now {lr:g})")
        step += 1
        losses.append(lval)
        prog.tokens += B * T
        prog.line(step=step, steps=steps, loss=lval, lr=lr, grad_norm=norm, tokens=step * B * T)
        if (every > 0 and step % every == 0) or step == steps:
            save_state(job, student, opt, step, losses, tag, ranks)
            prog.line(event="checkpoint", step=step)
    res = dict(status="done", steps=steps, tokens=steps * B * T, losses=losses,
               checkpoint=os.path.relpath(job.out, job.dir).replace(os.sep, "/"), **prog.rate())
    if valid is not None:
        s, n = ce_sum(student, valid, B, ranks, lockstep=sharded)
        res["loss"] = s / n
        res["perplexity"] = math.exp(s / n)
        prog.line(step=steps, steps=steps, val_loss=s / n)
    res["sha256"] = save_out(job, student, sdir, ranks)
    write_result(job, res)
    return EXIT_DONE


# ---------------------------------------------------------------- tools


def tool_logits(args):
    """logits B T TOKENS.bin OUT.safetensors MODEL_DIR..."""
    B, T, shard, out, dirs = int(args[0]), int(args[1]), args[2], args[3], args[4:]
    tok = acio.read_shard(shard)[: B * T].view(B, T)
    res = {}
    for i, d in enumerate(dirs):
        m = acmodel.load(d).eval()
        with torch.no_grad():
            res[f"logits.{i}"] = m(tok).reshape(B * T, -1)
    acio.write_safetensors(out, res, "F32")
    return EXIT_DONE


def main(argv):
    if len(argv) >= 2 and argv[1] == "logits":
        return tool_logits(argv[2:])
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return EXIT_REFUSED
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    ranks = Ranks()
    job = None
    try:
        job = Job(argv[1], ranks)
        job.check()
        if job.kind != "distill":
            # Nothing to checkpoint: stop at once.
            signal.signal(signal.SIGTERM, on_signal_stop)
            signal.signal(signal.SIGINT, on_signal_stop)
        ranks.join()
        err = ""
        if ranks.rank == 0:
            try:
                job.check_hashes()
            except Refused as e:
                err = str(e)
        if ranks.sum([1.0 if err else 0.0])[0].item() > 0:
            raise Refused(err or "rank 0 refused the contract's files")
        run = {"distill": run_distill, "importance": run_importance, "eval": run_eval, "proxy": run_proxy}[job.kind]
        code = run(job, ranks)
        return code or EXIT_DONE
    except Stopped as e:
        sys.stderr.write(f"autocompress_torch: {e}\n")
        write_result(job, dict(status="stopped", error=str(e)))
        return EXIT_STOPPED
    except (Refused, acmodel.ConfigError, acio.FormatError) as e:
        sys.stderr.write(f"autocompress_torch: {e}\n")
        if job is not None:
            write_result(job, dict(status="failed", error=str(e)))
        return EXIT_REFUSED
    except Exception as e:  # noqa: BLE001 - every failure goes to result.json
        traceback.print_exc()
        if job is not None:
            write_result(job, dict(status="failed", error=f"{type(e).__name__}: {e}"))
        return EXIT_FAILED
    finally:
        ranks.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
