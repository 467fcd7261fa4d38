"""attnlab_model.py: attnlab's model in PyTorch (layers/model.c's forward pass), as the
project's references write it (tests/reference/gpt.py, attention_*.py), for a config the C
tables (attnlab_tables) describe. Each attention kernel and position scheme the C side has needs
its PyTorch form here: a score-map kernel is one @score_map function, a score bias one @pos_bias
function; a kernel or scheme without one is refused, never run with the wrong math.
"""

import math

import torch

from attnlab_tables import KERNELS, OPTIONS, POSITIONS, PRESETS, CheckpointError, _bad, _option_value, _refuse

nn = torch.nn
F = torch.nn.functional

DEN_EPS = 1e-6  # linear attention's denominator clamp (layers/attention/linear_op.c)
SCALE_BASE = 512.0  # XPOS (layers/attention/rope.h)


def model_shapes(cfg):
    """name -> shape of every tensor GPT(cfg) holds (cfg resolved), worked out without building
    it, so a checkpoint's tensors are checked against its config before anything is allocated.
    It follows the modules below; load() checks the two agree."""
    d, h, ks, hs, r = cfg["d_model"], cfg["heads"], cfg["key_size"], cfg["head_size"], cfg["mlp_ratio"]
    norm = ("weight", "bias") if cfg["norm"] == "layernorm" else ("weight",)
    shapes = {"tok_emb.weight": (cfg["vocab"], d)}
    if POSITIONS[cfg["pos"]]["table"]:
        shapes["pos_emb.weight"] = (cfg["context"], d)
    lf = cfg["attn"] == "linformer"
    if lf and cfg["linformer_share"] == "layerwise" and linformer_shape(cfg, 0) is not None:
        shapes["linformer.E"] = tuple(linformer_shape(cfg, 0))
    for i in range(cfg["layers"]):
        b = f"blocks.{i}."
        for n in ("ln1", "ln2"):
            shapes.update({f"{b}{n}.{w}": (d,) for w in norm})
        for n, width in (("q", h * ks), ("k", h * ks), ("v", h * hs)):
            shapes.update({f"{b}attn.{n}.weight": (width, d), f"{b}attn.{n}.bias": (width,)})
        shapes.update({f"{b}attn.o.weight": (d, h * hs), f"{b}attn.o.bias": (d,)})
        shapes.update({f"{b}attn.{n}": (h,) for n in POSITIONS[cfg["pos"]]["params"]})
        talking = {"pre": ("pre",), "post": ("post",), "both": ("pre", "post")}.get(cfg["talking_heads"], ())
        shapes.update({f"{b}attn.talking_{n}.weight": (h, h) for n in talking})
        shape = linformer_shape(cfg, i) if lf else None
        if shape is not None and cfg["linformer_share"] != "layerwise":
            shapes[f"{b}attn.E"] = tuple(shape)
            if cfg["linformer_share"] != "kv":
                shapes[f"{b}attn.F"] = tuple(shape)
        shapes.update({f"{b}mlp.fc.weight": (r * d, d), f"{b}mlp.fc.bias": (r * d,),
                       f"{b}mlp.proj.weight": (d, r * d), f"{b}mlp.proj.bias": (d,)})
    shapes.update({f"ln_f.{w}": (d,) for w in norm})
    if not cfg["tie_embeddings"]:
        shapes["lm_head.weight"] = (cfg["vocab"], d)
    return shapes



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


# ---------------------------------------------------------------- position schemes

# What each pos value does comes from the C side (attnlab_tables.POSITIONS: its hooks table,
# embed, rotary, decay, bias and its learned parameters' names); the PyTorch form of each hook
# is here, one function per scheme, registered by name:
#   @pos_bias(name)    f(attn, d) -> [H, T, T] in float64, the score bias at distances
#                      d = i - j (or |i - j|), d >= 0; attn the layer (heads, key_size, cfg and
#                      the scheme's parameters, named as POSITIONS[name]["params"] names them)
#   @pos_embed(name)   f(t, d) -> [t, d] in float64, added to the token embeddings
#   @pos_decay(name)   f(i, dims) -> the per-pair decay rate of a rotary scheme (q scaled by
#                      exp(rate t'), k by exp(-rate t'), t' = t + floor(-T / 2))
# A learned table (`table`) and plain rotations need none. A scheme whose hook has no function
# here is refused.
POS_BIASES, POS_EMBEDS, POS_DECAYS = {}, {}, {}


def _registrar(table):
    def decorator(name):
        def register(f):
            table[name] = f
            return f
        return register
    return decorator


pos_bias, pos_embed, pos_decay = _registrar(POS_BIASES), _registrar(POS_EMBEDS), _registrar(POS_DECAYS)


def _slopes(attn):
    return torch.tensor(alibi_slopes(attn.heads), dtype=torch.float64).reshape(attn.heads, 1, 1)


@pos_bias("alibi")
def alibi_bias(attn, d):
    """-m_h delta (layers/attention/alibi.c)."""
    return -_slopes(attn) * d


@pos_bias("alibi_log")
def alibi_log_bias(attn, d):
    """-m_h log(1 + delta) (layers/attention/alibi_log.c)."""
    return -_slopes(attn) * torch.log1p(d)


@pos_bias("kerple_power")
def kerple_power_bias(attn, d):
    """-a_h delta^p_h, a >= 0.01, p in [0.01, 2] (layers/attention/kerple.c)."""
    h = attn.heads
    a = attn.kerple_a.double().clamp(min=0.01).reshape(h, 1, 1)
    p = attn.kerple_p.double().clamp(0.01, 2).reshape(h, 1, 1)
    return -a * torch.where(d > 0, d.clamp(min=1e-30) ** p, torch.zeros_like(d * p))


@pos_bias("kerple_log")
def kerple_log_bias(attn, d):
    """-r1_h log(1 + r2_h delta), r1, r2 >= 0.01 (layers/attention/kerple.c)."""
    h = attn.heads
    r1 = attn.kerple_r1.double().clamp(min=0.01).reshape(h, 1, 1)
    r2 = attn.kerple_r2.double().clamp(min=0.01).reshape(h, 1, 1)
    return -r1 * torch.log1p(r2 * d)


@pos_bias("sandwich")
def sandwich_bias(attn, d):
    """lambda sum_k cos(delta w_k) H / (8 (h + 1)) over sinusoids of width H key_size
    (layers/attention/sandwich.c)."""
    h, width = attn.heads, attn.heads * attn.key_size
    w = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    dots = torch.cos(d.unsqueeze(-1) * w).sum(-1)
    per_head = torch.tensor([h / (8 * (g + 1)) for g in range(h)], dtype=torch.float64).reshape(h, 1, 1)
    return float(attn.cfg["sandwich_lambda"]) * per_head * dots


@pos_embed("sinusoidal")
def sinusoidal_embed(t, d):
    """Vaswani et al.'s table divided by sqrt(d) (layers/attention/sinusoidal.c)."""
    return sinusoidal(t, d) / math.sqrt(d)


@pos_decay("xpos")
def xpos_decay(i, dims):
    """log(zeta_i) / 512, zeta_i = (2i + 0.4 dims) / (1.4 dims) (layers/attention/rope.c)."""
    return torch.log((2.0 * i + 0.4 * dims) / (1.4 * dims)) / SCALE_BASE


# ---------------------------------------------------------------- the config


def _check_position(c, attn):
    """Refuses pos values this file has no PyTorch form of, and those kernel `attn` cannot run
    (the rules the C side's validation applies to the hooks)."""
    pos = c["pos"]
    scheme, kernel = POSITIONS[pos], KERNELS[attn]
    for hook, table in (("bias", POS_BIASES), ("embed", POS_EMBEDS), ("decay", POS_DECAYS)):
        if scheme[hook] and pos not in table:
            _refuse(f"pos={pos} (no PyTorch form of its {hook} here)")
    if (scheme["bias"] or scheme["decay"]) and not kernel["scores"]:
        _refuse(f"attn={attn} with pos={pos}")
    if scheme["decay"] and not c["causal"]:
        _refuse(f"pos={pos} with objective={c['objective']}")
    if scheme["params"] and attn in SCORE_MAPS:  # a score-map kernel declares no parameters
        _refuse(f"attn={attn} with pos={pos}")


def resolve_config(cfg):
    """The config with derived values filled in (key_size 0 = d_model / heads, and so on),
    refusing every option this file cannot run. Missing options take their defaults; numbers,
    bools and strings are checked against the option table first (check_config checks the
    rest of a loaded config), so a bad value is a CheckpointError, never a TypeError."""
    c = {name: row[1] for name, row in OPTIONS.items()}
    c.update(cfg)
    for name, value in cfg.items():
        if name in OPTIONS and OPTIONS[name][0] in ("int", "float", "bool", "string"):
            c[name] = _option_value(name, value)
        elif name in OPTIONS and OPTIONS[name][0] == "choice" and value not in OPTIONS[name][2]:
            _refuse(f"{name}={value}")
    if (not c["key_size"] or not c["head_size"]) and c["d_model"] % c["heads"]:
        raise CheckpointError(None, f"--heads {c['heads']} does not divide --d_model {c['d_model']}")
    d, h = c["d_model"], c["heads"]
    c["key_size"] = c["key_size"] or d // h
    c["head_size"] = c["head_size"] or d // h
    c["rope_dims"] = c["rope_dims"] or c["key_size"]
    c["vocab"] = 257 if c["objective"] == "mlm" else 256
    c["causal"] = c["objective"] == "clm"
    kernel, fixes = PRESETS.get(c["attn"], (c["attn"], {}))
    c.update(fixes)
    c["attn"] = attn = kernel
    if not hasattr(Attention, "kernel_" + attn) and attn not in SCORE_MAPS:  # no PyTorch form here
        _refuse(f"attn={attn}")
    _check_position(c, attn)
    if not KERNELS[attn]["scores"]:  # the masks act on a score matrix
        for key, off in (("logn", "off"), ("bca", "off")):
            if c[key] != off:
                _refuse(f"attn={attn} with {key}={c[key]}")
        if c["window"]:
            _refuse(f"attn={attn} with window")
    if attn != "softmax" and c["talking_heads"] != "none":
        _refuse(f"attn={attn} with talking_heads={c['talking_heads']}")
    if attn == "linformer":
        resolve_linformer(c)
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


def rotate(x, dims, decay=None, sign=0):
    """RoPE on the leading `dims` features of x [B, H, T, D] in adjacent pairs, pair i turned by
    t 10000^(-2i / dims); with a decay (POS_DECAYS) and sign = +1 (q) or -1 (k) also scaled by
    exp(sign decay(i, dims) t'), t' = t + floor(-T / 2)."""
    t, pairs = x.shape[2], dims // 2
    idx = torch.arange(pairs, dtype=torch.float64)
    pos = torch.arange(t, dtype=torch.float64).reshape(t, 1)
    angle = pos * 10000.0 ** (-2.0 * idx / dims)
    scale = torch.ones_like(angle)
    if decay is not None and sign:
        scale = torch.exp(sign * decay(idx, dims) * (pos + (-t // 2)))
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
        for name in POSITIONS[cfg["pos"]]["params"]:
            setattr(self, name, nn.Parameter(torch.ones(h)))
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
        # a kernel this file runs itself is the method kernel_<name>; a score map runs on
        # the softmax kernel's scores (SCORE_MAPS)
        kernel = getattr(self, "kernel_" + self.cfg["attn"], self.kernel_softmax)
        y = kernel(q, k, v, shared)
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

    def kernel_softmax(self, q, k, v, shared=None):
        cfg, t = self.cfg, q.shape[2]
        if POSITIONS[cfg["pos"]]["rotary"]:
            decay = POS_DECAYS.get(cfg["pos"])
            q, k = rotate(q, cfg["rope_dims"], decay, +1), rotate(k, cfg["rope_dims"], decay, -1)
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
        bias = POS_BIASES.get(self.cfg["pos"])
        if bias is None:
            return None
        return bias(self, delta.clamp(min=0).double())  # masked keys (j > i) stay finite

    def kernel_linformer(self, q, k, v, shared=None):
        """Linformer: K' = E K, V' = F V, out = softmax(Q K'^T / sqrt(key_size)) V' (no mask);
        pos=rope rotates q and k first. E, F are this layer's, or `shared` (the model's
        linformer.E) under linformer_share=layerwise; F = E unless share is none or headwise."""
        cfg = self.cfg
        if POSITIONS[cfg["pos"]]["rotary"]:  # plain rotations only (_check_position)
            q, k = rotate(q, cfg["rope_dims"]), rotate(k, cfg["rope_dims"])
        e = shared if cfg["linformer_share"] == "layerwise" else getattr(self, "E", None)
        f = getattr(self, "F", e)
        stride = cfg["context"] // cfg["linformer_k"][self.layer]
        kp = linformer_project(k, e, cfg["linformer_proj"], stride)
        vp = linformer_project(v, f, cfg["linformer_proj"], stride)
        return torch.softmax(q @ kp.transpose(-1, -2) / math.sqrt(self.key_size), -1) @ vp

    def kernel_linear(self, q, k, v, shared=None):
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
        if POSITIONS[cfg["pos"]]["rotary"]:  # RoFormer's linear form, plain rotations only
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
        if POSITIONS[cfg["pos"]]["table"]:
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
        pos = self.cfg["pos"]
        if POSITIONS[pos]["bounded"] and t > self.cfg["context"]:
            raise ValueError(f"attnlab_torch: pos={pos} has positions up to its context "
                             f"{self.cfg['context']} only, not length {t}")
        if POSITIONS[pos]["table"]:
            x = x + self.pos_emb.weight[:t]
        if POSITIONS[pos]["embed"]:
            x = x + POS_EMBEDS[pos](t, self.cfg["d_model"]).to(x.dtype)
        shared = self.linformer.E if hasattr(self, "linformer") else None
        for b in self.blocks:
            x = b(x, shared)
        x = self.ln_f(x)
        w = self.tok_emb.weight if self.cfg["tie_embeddings"] else self.lm_head.weight
        return x @ w.T


