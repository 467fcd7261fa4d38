"""attnlab_torch.py: load an attnlab checkpoint into PyTorch and score it.

One file, needing only torch and numpy (Debian's python3-torch provides both):

    import attnlab_torch as at
    model = at.load("runs/rope")                  # a run folder or a .safetensors checkpoint
    logits = model(torch.tensor([[72, 105]]))     # [B, T, vocab]
    bpb = at.score(model, open("data/brown.txt", "rb").read(), T=256, max_windows=8)

The model is the forward pass of layers/model.c, written as in the project's PyTorch
references (tests/reference/gpt.py and tests/reference/attention_*.py): a pre-norm decoder,
x = tok_emb(ids) (+ pos_emb[:T] for pos=learned, + the sinusoidal table / sqrt(d) for
pos=sinusoidal); each block x += attn(ln1(x)); x += mlp(ln2(x)); logits = ln_f(x) W^T with W
the token embedding when tied, lm_head.weight otherwise. Its state_dict names are the
checkpoint's, so load_state_dict(strict=True) checks every name and shape.

Supported: attn=softmax with pos = none, learned, sinusoidal, rope (rope_dims), alibi,
kerple_power, kerple_log, sandwich, xpos; window, logn, bca; talking_heads; key_size /
head_size; norm layernorm / rmsnorm; tie_embeddings; objective clm and mlm (vocabulary 257,
mask id 256, bidirectional attention). attn=linear and attn=cosformer (phi, leaky_slope,
reweight; chunk does not change the math) with pos = none, learned, sinusoidal or rope
(RoFormer's linear form). Anything else (attn=linformer, say) is refused with a ValueError
naming the option, never run with the wrong math.

score() reproduces ./extrapolate's window rule: the held-out split is the last val_fraction
of the corpus (round(val_fraction * size) bytes); it is cut into full = held // (T + 1)
windows, window w covering held-out bytes [w (T + 1), w (T + 1) + T]; max_windows = N takes
N evenly spaced ones (slot floor(i * full / N)); bpb = total nats / ln 2 / (windows * T).
"""

import json
import math
import os
import struct

import numpy as np
import torch

nn = torch.nn
F = torch.nn.functional

MASK_ID = 256
DEN_EPS = 1e-6  # linear attention's denominator clamp
SCALE_BASE = 512.0  # XPOS

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def _refuse(what):
    raise ValueError(f"attnlab_torch: {what} is not supported yet")


# ---------------------------------------------------------------- safetensors


def read_safetensors(path):
    """(tensors, metadata) of a safetensors file: name -> torch tensor, str -> str."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"attnlab_torch: {path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"attnlab_torch: {path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"attnlab_torch: {path}: the header is not JSON ({err})") from None
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    tensors = {}
    for name, info in header.items():
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"attnlab_torch: {path}: tensor '{name}' has dtype {info['dtype']}")
        start, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if not 0 <= start <= end <= len(data) or end - start != count * np.dtype(dtype).itemsize:
            raise ValueError(f"attnlab_torch: {path}: tensor '{name}' has bad offsets [{start}, {end})")
        arr = np.frombuffer(data[start:end], dtype=np.dtype(dtype).newbyteorder("<"), count=count)
        tensors[name] = torch.from_numpy(arr.astype(dtype).reshape(shape))
    return tensors, meta


# ---------------------------------------------------------------- the config


def resolve_config(cfg):
    """The config with derived values filled in (key_size 0 = d_model / heads, and so on),
    refusing every option this file cannot run."""
    c = dict(cfg)
    c.setdefault("attn", "softmax")
    c.setdefault("pos", "learned")
    c.setdefault("objective", "clm")
    c.setdefault("talking_heads", "none")
    c.setdefault("norm", "layernorm")
    c.setdefault("tie_embeddings", True)
    c.setdefault("mlp_ratio", 4)
    for key in ("window", "rope_dims", "key_size", "head_size"):
        c[key] = int(c.get(key, 0) or 0)
    for key in ("logn", "bca"):
        c[key] = c.get(key, "off")
    c.setdefault("phi", "relu")
    c.setdefault("leaky_slope", 0.01)
    c.setdefault("reweight", "none")
    c.setdefault("sandwich_lambda", 1.0)
    d, h = c["d_model"], c["heads"]
    c["key_size"] = c["key_size"] or d // h
    c["head_size"] = c["head_size"] or d // h
    c["rope_dims"] = c["rope_dims"] or c["key_size"]
    if c["objective"] not in ("clm", "mlm"):
        _refuse(f"objective={c['objective']}")
    c["vocab"] = 257 if c["objective"] == "mlm" else 256
    c["causal"] = c["objective"] == "clm"
    if c["norm"] not in ("layernorm", "rmsnorm"):
        _refuse(f"norm={c['norm']}")
    if c["attn"] == "cosformer":
        c["attn"], c["phi"], c["reweight"] = "linear", "relu", "cos"
    attn, pos = c["attn"], c["pos"]
    if attn == "softmax":
        if pos not in ("none", "learned", "sinusoidal", "rope", "alibi", "kerple_power", "kerple_log", "sandwich",
                       "xpos"):
            _refuse(f"pos={pos}")
        if c["talking_heads"] not in ("none", "pre", "post", "both"):
            _refuse(f"talking_heads={c['talking_heads']}")
        if c["logn"] not in ("on", "off"):
            _refuse(f"logn={c['logn']}")
        if c["bca"] not in ("on", "off"):
            _refuse(f"bca={c['bca']}")
    elif attn == "linear":
        if pos not in ("none", "learned", "sinusoidal", "rope"):
            _refuse(f"attn=linear with pos={pos}")
        if c["phi"] not in ("identity", "relu", "leakyrelu", "elu"):
            _refuse(f"phi={c['phi']}")
        if c["reweight"] not in ("none", "cos"):
            _refuse(f"reweight={c['reweight']}")
        for key, off in (("talking_heads", "none"), ("logn", "off"), ("bca", "off")):
            if c[key] != off:
                _refuse(f"attn=linear with {key}={c[key]}")
        if c["window"]:
            _refuse("attn=linear with window")
    else:
        _refuse(f"attn={attn}")
    return c


# ---------------------------------------------------------------- the model's parts


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg):
    return nn.LayerNorm(cfg["d_model"], eps=1e-5) if cfg["norm"] == "layernorm" else RMSNorm(cfg["d_model"])


def alibi_slopes(h):
    """2^(-8 i / h), i = 1..h, for a power of two; otherwise those of the nearest lower power of
    two n, then every other slope of 2n."""
    def power_of_two(n):
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]
    n = 2 ** math.floor(math.log2(h))
    if n == h:
        return power_of_two(h)
    return power_of_two(n) + power_of_two(2 * n)[0::2][: h - n]


def rotate(x, dims, xpos=0):
    """RoPE on the leading `dims` features of x [B, H, T, D] in adjacent pairs, pair i turned by
    t 10000^(-2i / dims); with xpos = +1 (q) or -1 (k) also scaled by zeta_i^(xpos t' / 512),
    zeta_i = (2i + 0.4 dims) / (1.4 dims), t' = t + floor(-T / 2)."""
    t, pairs = x.shape[2], dims // 2
    idx = torch.arange(pairs, dtype=torch.float64)
    pos = torch.arange(t, dtype=torch.float64).reshape(t, 1)
    angle = pos * 10000.0 ** (-2.0 * idx / dims)
    scale = torch.ones_like(angle)
    if xpos:
        zeta = (2.0 * idx + 0.4 * dims) / (1.4 * dims)
        scale = zeta ** (xpos * (pos + (-t // 2)) / SCALE_BASE)
    cos, sin = (torch.cos(angle) * scale).to(x.dtype), (torch.sin(angle) * scale).to(x.dtype)
    x1, x2 = x[..., 0:2 * pairs:2], x[..., 1:2 * pairs:2]
    r = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)
    return torch.cat((r, x[..., 2 * pairs:]), -1)


def sinusoidal(t, d):
    """PE[t, 2i] = sin(t w_i), PE[t, 2i + 1] = cos(t w_i), w_i = 10000^(-2i / d)."""
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = torch.arange(t, dtype=torch.float64).reshape(t, 1) * w
    return torch.stack((torch.sin(a), torch.cos(a)), -1).flatten(-2)


def phi_fn(x, phi, slope):
    if phi == "identity":
        return x
    if phi == "relu":
        return torch.relu(x)
    if phi == "leakyrelu":
        return F.leaky_relu(x, slope)
    return F.elu(x) + 1


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, h = cfg["d_model"], cfg["heads"]
        self.cfg, self.heads, self.key_size, self.head_size = cfg, h, cfg["key_size"], cfg["head_size"]
        self.q = nn.Linear(d, h * self.key_size)
        self.k = nn.Linear(d, h * self.key_size)
        self.v = nn.Linear(d, h * self.head_size)
        self.o = nn.Linear(h * self.head_size, d)
        if cfg["pos"] == "kerple_power":
            self.kerple_a = nn.Parameter(torch.ones(h))
            self.kerple_p = nn.Parameter(torch.ones(h))
        if cfg["pos"] == "kerple_log":
            self.kerple_r1 = nn.Parameter(torch.ones(h))
            self.kerple_r2 = nn.Parameter(torch.ones(h))
        if cfg["talking_heads"] in ("pre", "both"):
            self.talking_pre = nn.Linear(h, h, bias=False)
        if cfg["talking_heads"] in ("post", "both"):
            self.talking_post = nn.Linear(h, h, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.heads
        q = self.q(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        k = self.k(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        v = self.v(x).reshape(b, t, h, self.head_size).transpose(1, 2)
        if self.cfg["attn"] == "linear":
            y = self.linear(q, k, v)
        else:
            y = self.softmax(q, k, v)
        return self.o(y.transpose(1, 2).reshape(b, t, h * self.head_size))

    def key_ranges(self, t):
        """[lo_i, hi_i]: the keys query i sees (layers/attention/softmax.c's plan)."""
        cfg, causal = self.cfg, self.cfg["causal"]
        i = torch.arange(t)
        lo, hi = torch.zeros(t, dtype=torch.long), (i.clone() if causal else torch.full((t,), t - 1))
        w = cfg["window"]
        if w > 0:
            lo = (i - w + 1).clamp(min=0)
            if not causal:
                hi = (i + w - 1).clamp(max=t - 1)
        if causal and cfg["bca"] == "on":
            blen = max(1, cfg["context"] // 2)
            lo = ((i // blen - 1) * blen).clamp(min=0)
        return lo, hi

    def softmax(self, q, k, v):
        cfg, t = self.cfg, q.shape[2]
        if cfg["pos"] in ("rope", "xpos"):
            xpos = cfg["pos"] == "xpos"
            q, k = rotate(q, cfg["rope_dims"], +1 if xpos else 0), rotate(k, cfg["rope_dims"], -1 if xpos else 0)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.key_size)
        if hasattr(self, "talking_pre"):  # out head g = sum_h W[g, h] in head h
            s = torch.einsum("gh,bhij->bgij", self.talking_pre.weight, s)
        lo, hi = self.key_ranges(t)
        j = torch.arange(t).reshape(1, t)
        hidden = (j < lo.reshape(t, 1)) | (j > hi.reshape(t, 1))
        if cfg["logn"] == "on" and cfg["context"] > 1:
            n = (hi - lo + 1).double()
            lam = torch.clamp(torch.log(n) / math.log(cfg["context"]), min=1.0)
            s = s * lam.to(s.dtype).reshape(t, 1)
        i = torch.arange(t).reshape(t, 1)
        bias = self.score_bias((i - j) if cfg["causal"] else (i - j).abs())
        if bias is not None:
            s = s + bias.to(s.dtype)
        p = torch.softmax(s.masked_fill(hidden, float("-inf")), -1)
        if hasattr(self, "talking_post"):
            p = torch.einsum("gh,bhij->bgij", self.talking_post.weight, p)
        return p @ v

    def score_bias(self, delta):
        """[H, T, T] added to the scores, or None; delta = i - j (causal) or |i - j|."""
        pos, h = self.cfg["pos"], self.heads
        d = delta.clamp(min=0).double()  # masked keys (j > i) stay finite
        if pos == "alibi":
            return -torch.tensor(alibi_slopes(h), dtype=torch.float64).reshape(h, 1, 1) * d
        if pos == "kerple_power":
            a = self.kerple_a.double().clamp(min=0.01).reshape(h, 1, 1)
            p = self.kerple_p.double().clamp(0.01, 2).reshape(h, 1, 1)
            return -a * torch.where(d > 0, d.clamp(min=1e-30) ** p, torch.zeros_like(d * p))
        if pos == "kerple_log":
            r1 = self.kerple_r1.double().clamp(min=0.01).reshape(h, 1, 1)
            r2 = self.kerple_r2.double().clamp(min=0.01).reshape(h, 1, 1)
            return -r1 * torch.log1p(r2 * d)
        if pos == "sandwich":
            width = h * self.key_size
            w = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
            dots = torch.cos(d.unsqueeze(-1) * w).sum(-1)
            per_head = torch.tensor([h / (8 * (g + 1)) for g in range(h)], dtype=torch.float64).reshape(h, 1, 1)
            return float(self.cfg["sandwich_lambda"]) * per_head * dots
        return None

    def linear(self, q, k, v):
        """Linear attention / cosFormer: out_i = sum_j (q~_i . k~_j) v_j / max(sum_j q~_i . k~_j, 1e-6),
        j <= i when causal; with pos=rope the numerator uses the rotated features (RoFormer)."""
        cfg, t = self.cfg, q.shape[2]
        fq, fk = phi_fn(q, cfg["phi"], cfg["leaky_slope"]), phi_fn(k, cfg["phi"], cfg["leaky_slope"])
        if cfg["reweight"] == "cos":
            ang = (math.pi / 2 * torch.arange(1, t + 1, dtype=torch.float64) / t).reshape(1, 1, t, 1)
            sn, cs = torch.sin(ang).to(q.dtype), torch.cos(ang).to(q.dtype)
            fq, fk = torch.cat([fq * sn, fq * cs], -1), torch.cat([fk * sn, fk * cs], -1)
        a0 = fq @ fk.transpose(-1, -2)
        a = a0
        if cfg["pos"] == "rope":
            a = rotate(fq, cfg["rope_dims"]) @ rotate(fk, cfg["rope_dims"]).transpose(-1, -2)
        if cfg["causal"]:
            a, a0 = torch.tril(a), torch.tril(a0)
        den = torch.clamp_min(a0.sum(-1, keepdim=True), DEN_EPS)
        return (a @ v) / den


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.fc = nn.Linear(d, cfg["mlp_ratio"] * d)
        self.proj = nn.Linear(cfg["mlp_ratio"] * d, d)

    def forward(self, x):
        return self.proj(gelu_tanh(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = Attention(cfg)
        self.ln2 = make_norm(cfg)
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """attnlab's model; cfg is a checkpoint's config (resolved here). forward(ids [B, T]) gives
    the logits [B, T, vocab]."""

    def __init__(self, cfg):
        super().__init__()
        cfg = resolve_config(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab"], cfg["d_model"])
        if cfg["pos"] == "learned":
            self.pos_emb = nn.Embedding(cfg["context"], cfg["d_model"])
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["layers"]))
        self.ln_f = make_norm(cfg)
        if not cfg["tie_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab"], bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok_emb(ids)
        if self.cfg["pos"] == "learned":
            if t > self.cfg["context"]:
                raise ValueError(f"attnlab_torch: pos=learned has positions up to its context "
                                 f"{self.cfg['context']} only, not length {t}")
            x = x + self.pos_emb.weight[:t]
        if self.cfg["pos"] == "sinusoidal":
            x = x + (sinusoidal(t, self.cfg["d_model"]) / math.sqrt(self.cfg["d_model"])).to(x.dtype)
        for b in self.blocks:
            x = b(x)
        x = self.ln_f(x)
        w = self.tok_emb.weight if self.cfg["tie_embeddings"] else self.lm_head.weight
        return x @ w.T


# ---------------------------------------------------------------- loading and scoring


def load(path, dtype=torch.float32, **overrides):
    """The model of a run folder (its model.safetensors) or a .safetensors checkpoint, in eval
    mode. overrides replace inference-time options as ./extrapolate's CHECKPOINT@key=v does
    (window, logn, bca)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = read_safetensors(path)
    if "config" not in meta:
        raise ValueError(f"attnlab_torch: {path}: no config in the metadata (not an attnlab checkpoint)")
    cfg = json.loads(meta["config"])
    for key, value in overrides.items():
        if key not in ("window", "logn", "bca"):
            raise ValueError(f"attnlab_torch: only window, logn and bca can change at evaluation, not {key}")
        cfg[key] = value
    model = GPT(cfg)
    state = {name: t for name, t in tensors.items() if not name.startswith("optim.")}
    model.load_state_dict(state, strict=True)
    model.checkpoint = path
    return model.to(dtype).eval()


def held_out(data, val_fraction):
    """The held-out split: the last round(val_fraction * size) bytes (data/corpus.c)."""
    n = len(data)
    val = min(n, int(math.floor(val_fraction * n + 0.5)))
    return data[n - val:]


def window_offsets(held_bytes, T, max_windows=None):
    """Offsets into the held-out split of the scored windows of T + 1 bytes."""
    full = held_bytes // (T + 1)
    count = full if not max_windows or max_windows >= full else max_windows
    return [(i * full // count) * (T + 1) for i in range(count)]


@torch.no_grad()
def score(model, data, T, max_windows=None, val_fraction=None, batch=16):
    """Bits per byte on the held-out split of `data` (bytes: the whole corpus) at length T, as
    ./extrapolate computes it: every predicted byte of every window, summed in float64."""
    cfg = model.cfg
    if cfg["objective"] != "clm":
        raise ValueError("attnlab_torch: score: objective=mlm models do not predict left to right")
    if isinstance(data, str):
        data = data.encode("utf-8")
    held = held_out(bytes(data), cfg.get("val_fraction", 0.1) if val_fraction is None else val_fraction)
    offs = window_offsets(len(held), T, max_windows)
    if not offs:
        raise ValueError(f"attnlab_torch: score: the held-out split has {len(held)} bytes, and a window of "
                         f"length {T} needs {T + 1}")
    arr = np.frombuffer(held, dtype=np.uint8)
    nats = 0.0
    for s in range(0, len(offs), batch):
        win = torch.from_numpy(np.stack([arr[o:o + T + 1] for o in offs[s:s + batch]]).astype(np.int64))
        logits = model(win[:, :T]).double()
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1),
                                reduction="sum").item()
    return nats / math.log(2) / (len(offs) * T)
