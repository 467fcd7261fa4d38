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
(RoFormer's linear form). attn=linformer (objective=mlm only) with pos = none, learned,
sinusoidal or rope, every linformer_proj (linear, mean, max, conv) and linformer_share (none,
headwise, kv, layerwise: then the model holds the one linformer.E), and a per-layer
linformer_k (a list; later layers take the last value), as layers/attention/linformer.c
computes it. attn=sigmoid, and every score-map kernel SCORE_MAPS knows, with the softmax
kernel's positions and masks but for the learned biases (kerple_*). Any other value of these options (a kernel or position scheme this file does not
know, or a combination attnlab itself refuses) is refused with a ValueError naming the
option, never run with the wrong math.

score() reproduces ./extrapolate's window rule: the held-out split is the last val_fraction
of the corpus (round(val_fraction * size) bytes); it is cut into full = held // (T + 1)
windows, window w covering held-out bytes [w (T + 1), w (T + 1) + T]; max_windows = N takes
N evenly spaced ones (slot floor(i * full / N)); bpb = total nats / ln 2 / (windows * T).
For objective=mlm (./extrapolate's masked-LM rule) window i is its first T bytes, unshifted,
masked as training's validation masks it (mlm_mask: n = max(1, round(0.15 T)) positions,
drawn with core/rng.c's generator seeded from MLM_VAL_SEED + i), and bpb = total nats over
the masked positions / ln 2 / (windows * n).
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
MLM_VAL_SEED = 0x6D6C6D5F76616C  # "mlm_val" (data/mlm.h)
LF_SHARES = ("none", "headwise", "kv", "layerwise")
LF_PROJS = ("linear", "mean", "max", "conv")
DEN_EPS = 1e-6  # linear attention's denominator clamp
SCALE_BASE = 512.0  # XPOS

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def _refuse(what):
    raise ValueError(f"attnlab_torch: {what} is not supported yet")


def _bad(what, why):
    raise ValueError(f"attnlab_torch: {what}: {why}")


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


# ---------------------------------------------------------------- score maps

# The attn values whose kernel is a score map (layers/attention/scoremap.h): P = f(S) on the
# keys a query sees and 0 elsewhere, S the logits the softmax kernel forms (scale, logn, the
# score bias), O = P V. Teaching this file such a kernel is one function, with @score_map.
SCORE_MAPS = {}


def score_map(name):
    def register(f):
        SCORE_MAPS[name] = f
        return f
    return register


@score_map("sigmoid")
def sigmoid_attention(s, t):
    """attn=sigmoid (layers/attention/sigmoid.c): P = sigmoid(S - log T)."""
    return torch.sigmoid(s - math.log(t))


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
    elif attn == "linformer":
        resolve_linformer(c)
    elif attn in SCORE_MAPS:  # the softmax kernel's scores; its learned biases are refused in C too
        if pos not in ("none", "learned", "sinusoidal", "rope", "alibi", "sandwich", "xpos"):
            _refuse(f"attn={attn} with pos={pos}")
        if c["talking_heads"] != "none":
            _refuse(f"attn={attn} with talking_heads={c['talking_heads']}")
        for key in ("logn", "bca"):
            if c[key] not in ("on", "off"):
                _refuse(f"{key}={c[key]}")
    else:
        _refuse(f"attn={attn}")
    return c


def linformer_ks(value, layers):
    """linformer_k per layer from the config's value: a number (one value), "8,4" (the list
    as a checkpoint's config stores it) or a list; later layers take the last value (lf_k)."""
    if isinstance(value, str):
        try:
            ks = [int(v) for v in value.split(",")]
        except ValueError:
            _bad(f"linformer_k={value}", "not a comma-separated list of integers")
    elif isinstance(value, (list, tuple)):
        ks = [int(v) for v in value]
    else:
        ks = [int(value)]
    if not ks or len(ks) > layers:
        _bad(f"linformer_k={value}", f"{len(ks)} values for {layers} layers")
    return ks + [ks[-1]] * (layers - len(ks))


def resolve_linformer(c):
    """Checks attn=linformer's options as layers/attention/linformer.c's validate does and
    stores linformer_k as one value per layer."""
    c.setdefault("linformer_share", "none")
    c.setdefault("linformer_proj", "linear")
    share, proj, n = c["linformer_share"], c["linformer_proj"], c["context"]
    if c["objective"] != "mlm":
        _bad("attn=linformer", f"it has no causal form, so it needs objective=mlm, not {c['objective']}")
    if c["pos"] not in ("none", "learned", "sinusoidal", "rope"):
        _refuse(f"attn=linformer with pos={c['pos']}")
    if share not in LF_SHARES:
        _refuse(f"linformer_share={share}")
    if proj not in LF_PROJS:
        _refuse(f"linformer_proj={proj}")
    for key, off in (("talking_heads", "none"), ("logn", "off"), ("bca", "off")):
        if c[key] != off:
            _refuse(f"attn=linformer with {key}={c[key]}")
    if c["window"]:
        _refuse("attn=linformer with window")
    given = c.get("linformer_k", 64)
    ks = linformer_ks(given, c["layers"])
    for k in ks:
        if not 0 < k <= n:
            _bad(f"linformer_k={given}", f"{k} is not in 1..context {n}")
        if proj != "linear" and n % k:
            _bad(f"linformer_k={given}", f"linformer_proj={proj} pools with stride context / k, so {k} must "
                 f"divide context {n}")
    if proj in ("mean", "max") and share != "none":
        _bad(f"linformer_share={share}", f"linformer_proj={proj} pools without parameters, so there is nothing "
             "to share")
    if share == "layerwise" and len(set(ks)) > 1:
        _bad(f"linformer_k={given}", "linformer_share=layerwise has one E for all layers, so one k")
    c["linformer_k"] = ks


def linformer_shape(cfg, layer):
    """The shape of layer `layer`'s E (and F): [k, n] for linear, the conv kernel [n / k] for
    conv, with a leading head dimension under share none; None for mean and max."""
    proj, n, k = cfg["linformer_proj"], cfg["context"], cfg["linformer_k"][layer]
    if proj in ("mean", "max"):
        return None
    one = [k, n] if proj == "linear" else [n // k]
    return [cfg["heads"]] + one if cfg["linformer_share"] == "none" else one


def linformer_project(x, w, proj, stride):
    """x [B, H, T, d] projected along the sequence to [B, H, k', d] (layers/attention/linformer.c):
    linear: E[..., :T] x (w = E [k, n] or [H, k, n]; T > n is an error); mean / max / conv: the
    windows [j s, j s + s), j < k' = ceil(T / s), s = stride, a partial last window averaging
    (or taking the max of) the positions present and conv (w = [s] or [H, s]) seeing zeros."""
    b, h, t, d = x.shape
    if proj == "linear":
        if t > w.shape[-1]:
            _bad(f"linformer_proj=linear at length {t}", f"E has n = {w.shape[-1]} columns (the context)")
        w = w[..., :t]
        return torch.einsum("hjt,bhtd->bhjd" if w.dim() == 3 else "jt,bhtd->bhjd", w, x)
    kp = -(-t // stride)
    pad = kp * stride - t
    if proj == "max":
        return F.pad(x, (0, 0, 0, pad), value=-math.inf).reshape(b, h, kp, stride, d).amax(3)
    xs = F.pad(x, (0, 0, 0, pad)).reshape(b, h, kp, stride, d)
    if proj == "mean":
        present = (t - torch.arange(kp) * stride).clamp(max=stride).to(x.dtype)
        return xs.sum(3) / present.reshape(1, 1, kp, 1)
    return torch.einsum("hr,bhjrd->bhjd" if w.dim() == 2 else "r,bhjrd->bhjd", w, xs)


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
    def __init__(self, cfg, layer=0):
        super().__init__()
        d, h = cfg["d_model"], cfg["heads"]
        self.cfg, self.heads, self.key_size, self.head_size = cfg, h, cfg["key_size"], cfg["head_size"]
        self.layer = layer
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
        if cfg["attn"] == "linformer":
            shape = linformer_shape(cfg, layer)
            if shape is not None and cfg["linformer_share"] != "layerwise":
                self.E = nn.Parameter(torch.zeros(shape))
                if cfg["linformer_share"] != "kv":
                    self.F = nn.Parameter(torch.zeros(shape))

    def forward(self, x, shared=None):
        b, t, _ = x.shape
        h = self.heads
        q = self.q(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        k = self.k(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        v = self.v(x).reshape(b, t, h, self.head_size).transpose(1, 2)
        if self.cfg["attn"] == "linear":
            y = self.linear(q, k, v)
        elif self.cfg["attn"] == "linformer":
            y = self.linformer(q, k, v, shared)
        else:
            y = self.softmax(q, k, v)
        return self.o(y.transpose(1, 2).reshape(b, t, h * self.head_size))

    def key_ranges(self, t):
        """[lo_i, hi_i]: the keys query i sees (layers/attention/softmax_op.c's plan)."""
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
        if cfg["attn"] in SCORE_MAPS:
            p = SCORE_MAPS[cfg["attn"]](s, t).masked_fill(hidden, 0.0)
        else:
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

    def linformer(self, q, k, v, shared=None):
        """Linformer: K' = E K, V' = F V, out = softmax(Q K'^T / sqrt(key_size)) V' (no mask);
        pos=rope rotates q and k first. E, F are this layer's, or `shared` (the model's
        linformer.E) under linformer_share=layerwise; F = E unless share is none or headwise."""
        cfg = self.cfg
        if cfg["pos"] == "rope":
            q, k = rotate(q, cfg["rope_dims"]), rotate(k, cfg["rope_dims"])
        e = shared if cfg["linformer_share"] == "layerwise" else getattr(self, "E", None)
        f = getattr(self, "F", e)
        stride = cfg["context"] // cfg["linformer_k"][self.layer]
        kp = linformer_project(k, e, cfg["linformer_proj"], stride)
        vp = linformer_project(v, f, cfg["linformer_proj"], stride)
        return torch.softmax(q @ kp.transpose(-1, -2) / math.sqrt(self.key_size), -1) @ vp

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
    def __init__(self, cfg, layer=0):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = Attention(cfg, layer)
        self.ln2 = make_norm(cfg)
        self.mlp = Mlp(cfg)

    def forward(self, x, shared=None):
        x = x + self.attn(self.ln1(x), shared)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """attnlab's model; cfg is a checkpoint's config (resolved here). forward(ids [B, T]) gives
    the logits [B, T, vocab]. Under attn=linformer with linformer_share=layerwise the model owns
    the one projection, linformer.E, and hands it to every layer."""

    def __init__(self, cfg):
        super().__init__()
        cfg = resolve_config(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab"], cfg["d_model"])
        if cfg["pos"] == "learned":
            self.pos_emb = nn.Embedding(cfg["context"], cfg["d_model"])
        if cfg["attn"] == "linformer" and cfg["linformer_share"] == "layerwise":
            shape = linformer_shape(cfg, 0)
            if shape is not None:  # one E for every layer, held once: linformer.E
                self.linformer = nn.Module()
                self.linformer.E = nn.Parameter(torch.zeros(shape))
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg["layers"]))
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
        shared = self.linformer.E if hasattr(self, "linformer") else None
        for b in self.blocks:
            x = b(x, shared)
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


_U64 = (1 << 64) - 1


class Rng:
    """core/rng.c's generator, bit for bit: xoshiro256** seeded through splitmix64."""

    def __init__(self, seed):
        x, self.s = seed & _U64, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & _U64
            z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _U64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & _U64

    def u64(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & _U64, 7) * 9) & _U64
        t = (s[1] << 17) & _U64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def below(self, n):
        """Uniform in [0, n), 0 < n < 2^32: rng_below's multiply-shift with rejection."""
        m = (self.u64() >> 32) * n
        if (m & 0xFFFFFFFF) < n:
            threshold = ((1 << 32) - n) % n
            while (m & 0xFFFFFFFF) < threshold:
                m = (self.u64() >> 32) * n
        return m >> 32


def mlm_count(T):
    """The positions masked in a window of T bytes: max(1, round(0.15 T)) (data/mlm.c)."""
    return max(1, int(math.floor(0.15 * T + 0.5)))


def mlm_mask(window, index):
    """(inputs, targets) of validation window `index` (its position in score's list of windows,
    0 first) holding the bytes `window` (its first T bytes), as data/mlm.c's mlm_val_window
    masks it: an Rng seeded with MLM_VAL_SEED + index chooses mlm_count(T) positions by
    selection sampling (position t is chosen when below(T - t) < the number still needed), and
    each chosen one draws below(10): 0-7 -> MASK_ID, 8 -> below(256) (a random byte), 9 -> left
    as it is. Both are int64 arrays of T: targets holds the original byte at the chosen
    positions and -1 elsewhere."""
    inputs = np.array(bytearray(window), dtype=np.int64)
    T = len(inputs)
    if T < 1:
        _bad("mlm_mask", "the window is empty")
    targets = np.full(T, -1, dtype=np.int64)
    rng, need = Rng(MLM_VAL_SEED + index), mlm_count(T)
    for t in range(T):
        if rng.below(T - t) >= need:
            continue
        need -= 1
        targets[t] = inputs[t]
        r = rng.below(10)
        if r < 8:
            inputs[t] = MASK_ID
        elif r == 8:
            inputs[t] = rng.below(256)
    return inputs, targets


@torch.no_grad()
def score(model, data, T, max_windows=None, val_fraction=None, batch=16):
    """Bits per byte on the held-out split of `data` (bytes: the whole corpus) at length T, as
    ./extrapolate computes it: every predicted byte of every window, summed in float64; for
    objective=mlm the masked positions of every window (mlm_mask), each window unshifted."""
    cfg = model.cfg
    mlm = cfg["objective"] == "mlm"
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
        if mlm:
            rows = [mlm_mask(held[o:o + T], s + i) for i, o in enumerate(offs[s:s + batch])]
            ids = torch.from_numpy(np.stack([r[0] for r in rows]))
            targets = torch.from_numpy(np.stack([r[1] for r in rows]))
        else:
            win = torch.from_numpy(np.stack([arr[o:o + T + 1] for o in offs[s:s + batch]]).astype(np.int64))
            ids, targets = win[:, :T], win[:, 1:]
        logits = model(ids).double()
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1,
                                reduction="sum").item()
    return nats / math.log(2) / (len(offs) * (mlm_count(T) if mlm else T))
