#!/usr/bin/python3
"""gpt.py: PyTorch reference for the model of layers/ (layers/model.c).

GPT is the same decoder as model_init/model_forward, written as a plain
nn.Module: its state_dict names and shapes are exactly the parameter names and
shapes attnlab declares, so an attnlab checkpoint loads with load_state_dict.

    x = tok_emb(ids) (+ pos_emb.weight[:T] when pos = learned)
    each block:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))
    logits = ln_f(x) W^T,  W = tok_emb.weight when tied, else lm_head.weight

with LayerNorm (eps 1e-5) or RMSNorm, GELU in its tanh form, causal softmax
attention scaled by 1/sqrt(key_size), q, k [H*key_size, d], v [H*head_size, d],
o [d, H*head_size], every Linear with a bias except the untied LM head. With
talking_heads (Shazeer et al. 2020), talking_pre / talking_post are
nn.Linear(H, H, bias=False) over the head axis: the first mixes the scaled
logits across heads before the causal mask and the softmax, the second mixes
the probabilities after it.

For each config in CONFIGS the script draws float32 weights (larger than the
N(0, 0.02) of training, with norm gains 1 +- 0.1 and non-zero biases, so that
every path of the model matters to the result), a batch of ids and targets,
then in float64:
  the logits, the mean cross-entropy (targets of -1 not counted), every
  parameter gradient, clip_grad_norm_(max_norm 1) and one torch.optim.AdamW
  step (two param groups: weight decay 0.1 for ndim >= 2, none otherwise;
  betas (0.9, 0.95), eps 1e-8, lr 1e-3, foreach=False), which is what
  optim/optim.h implements.

Writes tests/fixtures/gpt.safetensors with, per config k:
  cfg<k>/param/<name>   the weights before the step (float32, the C side loads them)
  cfg<k>/ids            [B, T] token ids, as F32
  cfg<k>/targets        [B, T] targets, as F32 (-1 = not counted)
  cfg<k>/logits         [B, T, V]
  cfg<k>/loss           [1]
  cfg<k>/grad/<name>    d loss / d <name>
  cfg<k>/grad_norm      [1] the global gradient norm (before clipping)
  cfg<k>/step/<name>    the parameter after clipping and one AdamW step
and the metadata "cfg<k>/config": the config as JSON (ModelConfig's fields
plus batch and length), and "configs": how many there are.
tests/test_model.c runs the same configs in C and compares.

Usage: /usr/bin/python3 tests/reference/gpt.py tests/fixtures/gpt.safetensors
(Debian's python3-torch provides torch.)
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

nn = torch.nn
F = torch.nn.functional

# The optimizer step (optim/optim.h: adamw_default, grad_norm, clip_scale).
LR = 1e-3
BETAS = (0.9, 0.95)
EPS = 1e-8
WEIGHT_DECAY = 0.1
MAX_NORM = 1.0

# Keep in step with golden_configs in tests/test_model.c (it checks the JSON).
CONFIGS = [
    # the reference model: layernorm, learned positions, tied head, key_size = head_size
    dict(vocab=256, layers=2, d_model=32, heads=4, key_size=8, head_size=8, mlp_ratio=4, context=16,
         norm="layernorm", tie_embeddings=True, pos="learned", batch=3, length=16, ignored=0),
    # low-rank bottleneck (key_size 12 != head_size 6), untied head, T < context (pos_emb sliced),
    # an odd vocabulary and some targets not counted
    dict(vocab=97, layers=2, d_model=24, heads=4, key_size=12, head_size=6, mlp_ratio=2, context=16,
         norm="layernorm", tie_embeddings=False, pos="learned", batch=2, length=11, ignored=3),
    # rmsnorm (no biases in the norms), no position embedding, one layer
    dict(vocab=64, layers=1, d_model=16, heads=2, key_size=8, head_size=8, mlp_ratio=4, context=8,
         norm="rmsnorm", tie_embeddings=True, pos="none", batch=2, length=8, ignored=0),
    # Talking-Heads attention, mixing both the logits and the probabilities (talking_pre and
    # talking_post), with 3 heads and key_size 10 != head_size 6; configs without the key have
    # talking_heads "none"
    dict(vocab=80, layers=2, d_model=24, heads=3, key_size=10, head_size=6, mlp_ratio=2, context=12,
         norm="layernorm", tie_embeddings=False, pos="learned", batch=2, length=12, ignored=2,
         talking_heads="both"),
    # positions (issue: positions and length extrapolation). Configs without these keys have
    # rope_dims = key_size, window 0, logn off. Lengths may pass the context when nothing is learned
    # per position, so that log-n scaling (n_i > context) and the windows matter.
    # sinusoidal table, rmsnorm
    dict(vocab=64, layers=2, d_model=16, heads=2, key_size=8, head_size=8, mlp_ratio=2, context=8,
         norm="rmsnorm", tie_embeddings=True, pos="sinusoidal", batch=2, length=10, ignored=0),
    # RoPE on 6 of key_size 10's dimensions, key_size != head_size
    dict(vocab=50, layers=2, d_model=24, heads=3, key_size=10, head_size=6, mlp_ratio=2, context=12,
         norm="layernorm", tie_embeddings=False, pos="rope", rope_dims=6, batch=2, length=12, ignored=1),
    # ALiBi with 3 heads (the slopes' rule for a head count that is not a power of two), a sliding
    # window and log-n scaling past the context
    dict(vocab=40, layers=2, d_model=24, heads=3, key_size=8, head_size=8, mlp_ratio=2, context=6,
         norm="layernorm", tie_embeddings=True, pos="alibi", window=9, logn="on", batch=2, length=14, ignored=0),
    # KERPLE, power variant (learned a, p per head)
    dict(vocab=40, layers=2, d_model=16, heads=4, key_size=4, head_size=4, mlp_ratio=2, context=8,
         norm="layernorm", tie_embeddings=True, pos="kerple_power", batch=2, length=8, ignored=0),
    # KERPLE, log variant (learned r1, r2 per head), with log-n scaling
    dict(vocab=40, layers=1, d_model=16, heads=2, key_size=8, head_size=8, mlp_ratio=2, context=5,
         norm="layernorm", tie_embeddings=True, pos="kerple_log", logn="on", batch=2, length=9, ignored=0),
    # Sandwich with lambda 0.7 and 3 heads
    dict(vocab=40, layers=2, d_model=24, heads=3, key_size=8, head_size=8, mlp_ratio=2, context=8,
         norm="layernorm", tie_embeddings=True, pos="sandwich", sandwich_lambda=0.7, batch=2, length=10, ignored=0),
    # XPOS on 6 of key_size 8's dimensions, a length past the context
    dict(vocab=40, layers=2, d_model=16, heads=2, key_size=8, head_size=8, mlp_ratio=2, context=8,
         norm="layernorm", tie_embeddings=False, pos="xpos", rope_dims=6, batch=2, length=13, ignored=0),
]


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


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, h = cfg["d_model"], cfg["heads"]
        self.heads, self.key_size, self.head_size = h, cfg["key_size"], cfg["head_size"]
        self.q = nn.Linear(d, h * self.key_size)
        self.k = nn.Linear(d, h * self.key_size)
        self.v = nn.Linear(d, h * self.head_size)
        self.o = nn.Linear(h * self.head_size, d)
        self.cfg = cfg
        if cfg["pos"] == "kerple_power":
            self.kerple_a = nn.Parameter(torch.ones(h))
            self.kerple_p = nn.Parameter(torch.ones(h))
        if cfg["pos"] == "kerple_log":
            self.kerple_r1 = nn.Parameter(torch.ones(h))
            self.kerple_r2 = nn.Parameter(torch.ones(h))
        talking = cfg.get("talking_heads", "none")
        if talking in ("pre", "both"):
            self.talking_pre = nn.Linear(h, h, bias=False)
        if talking in ("post", "both"):
            self.talking_post = nn.Linear(h, h, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        h, cfg = self.heads, self.cfg
        q = self.q(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        k = self.k(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        v = self.v(x).reshape(b, t, h, self.head_size).transpose(1, 2)
        if cfg["pos"] in ("rope", "xpos"):
            dims, xpos = cfg.get("rope_dims", self.key_size), cfg["pos"] == "xpos"
            q, k = rope(q, dims, +1 if xpos else 0), rope(k, dims, -1 if xpos else 0)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.key_size)
        if hasattr(self, "talking_pre"):  # out head g = sum_h W[g, h] in head h
            s = torch.einsum("gh,bhij->bgij", self.talking_pre.weight, s)
        i = torch.arange(t).reshape(t, 1)
        j = torch.arange(t).reshape(1, t)
        window = cfg.get("window", 0)
        hidden = (j > i) | ((i - j >= window) if window else torch.zeros(t, t, dtype=torch.bool))
        if cfg.get("logn", "off") == "on":  # n_i = the keys query i sees
            n = (~hidden).sum(-1).double()
            s = s * torch.clamp(torch.log(n) / math.log(cfg["context"]), min=1.0).reshape(t, 1)
        s = s + self.score_bias(i - j)
        p = torch.softmax(s.masked_fill(hidden, float("-inf")), -1)
        if hasattr(self, "talking_post"):
            p = torch.einsum("gh,bhij->bgij", self.talking_post.weight, p)
        y = (p @ v).transpose(1, 2).reshape(b, t, h * self.head_size)
        return self.o(y)


    def score_bias(self, delta):
        """[H, T, T] added to the scores; delta = i - j (>= 0 where keys are visible)."""
        pos, h = self.cfg["pos"], self.heads
        d = delta.abs().double()
        if pos == "alibi":
            return -torch.tensor(alibi_slopes(h), dtype=torch.float64).reshape(h, 1, 1) * d
        if pos == "alibi_log":  # ALiBi's slopes on log(1 + |i - j|)
            return -torch.tensor(alibi_slopes(h), dtype=torch.float64).reshape(h, 1, 1) * torch.log1p(d)
        if pos == "kerple_power":
            a = self.kerple_a.clamp(min=0.01).reshape(h, 1, 1)
            p = self.kerple_p.clamp(0.01, 2).reshape(h, 1, 1)
            return -a * d.pow(p)
        if pos == "kerple_log":
            r1 = self.kerple_r1.clamp(min=0.01).reshape(h, 1, 1)
            r2 = self.kerple_r2.clamp(min=0.01).reshape(h, 1, 1)
            return -r1 * torch.log(1 + r2 * d)
        if pos == "sandwich":  # lambda p_i . p_j of sinusoids of width H key_size, head h divided by 8(h+1)/H
            width = h * self.key_size
            w = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
            dots = torch.cos(d.unsqueeze(-1) * w).sum(-1)
            per_head = torch.tensor([h / (8 * (g + 1)) for g in range(h)], dtype=torch.float64).reshape(h, 1, 1)
            return self.cfg["sandwich_lambda"] * per_head * dots
        return torch.zeros(1, dtype=torch.float64)


def alibi_slopes(h):
    """ALiBi's head slopes: 2^(-8 i / h), i = 1..h, for a power of two; otherwise those of the
    nearest lower power of two n, then every other slope of 2n."""
    def power_of_two(n):
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]
    n = 2 ** math.floor(math.log2(h))
    if n == h:
        return power_of_two(h)
    return power_of_two(n) + power_of_two(2 * n)[0::2][: h - n]


def rope(x, dims, xpos=0):
    """RoPE (Su et al. 2021) on the first `dims` features of x [B, H, T, d], in adjacent pairs
    (2i, 2i + 1) rotated by t 10000^(-2i / dims) at position t. With xpos = +1 (q) or -1 (k), XPOS
    (Sun et al. 2023): pair i is also scaled by zeta_i^(xpos t' / 512), zeta_i = (2i + 0.4 dims) /
    (1.4 dims), t' = t - ceil(T / 2) the centred position (torchscale's min_pos = -T // 2)."""
    t = x.shape[2]
    theta = 10000.0 ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)
    angle = torch.arange(t, dtype=torch.float64).reshape(t, 1) * theta
    scale = torch.ones(t, dims // 2, dtype=torch.float64)
    if xpos:
        zeta = (torch.arange(0, dims, 2, dtype=torch.float64) + 0.4 * dims) / (1.4 * dims)
        centred = torch.arange(t, dtype=torch.float64).reshape(t, 1) + (-t // 2)
        scale = zeta ** (xpos * centred / 512)
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
    r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    rotated = torch.stack((r1, r2), -1).flatten(-2)
    return torch.cat((rotated, x[..., dims:]), -1)


def sinusoidal(t, d):
    """Vaswani et al.'s table: PE[t, 2i] = sin(t w_i), PE[t, 2i + 1] = cos(t w_i), w_i = 10000^(-2i / d)."""
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = torch.arange(t, dtype=torch.float64).reshape(t, 1) * w
    return torch.stack((torch.sin(a), torch.cos(a)), -1).flatten(-2)


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
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab"], cfg["d_model"])
        if cfg["pos"] == "learned":
            self.pos_emb = nn.Embedding(cfg["context"], cfg["d_model"])
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg["layers"]))
        self.ln_f = make_norm(cfg)
        if not cfg["tie_embeddings"]:
            # no module when tied: a shared lm_head would put a second name in the state_dict
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab"], bias=False)

    def forward(self, ids):
        x = self.tok_emb(ids)
        if self.cfg["pos"] == "learned":
            x = x + self.pos_emb.weight[: ids.shape[1]]
        if self.cfg["pos"] == "sinusoidal":
            x = x + sinusoidal(ids.shape[1], self.cfg["d_model"]) / math.sqrt(self.cfg["d_model"])
        for b in self.blocks:
            x = b(x)
        x = self.ln_f(x)
        w = self.tok_emb.weight if self.cfg["tie_embeddings"] else self.lm_head.weight
        return x @ w.T

    def loss(self, ids, targets):
        logits = self(ids)
        return logits, F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)


def random_weights(model, gen):
    """float32 values: matrices N(0, 0.2), biases N(0, 0.1), norm gains 1 + N(0, 0.1), talking-heads
    matrices I + N(0, 0.3) (mixing, but not far from where training starts)."""
    weights = {}
    for name, p in model.state_dict().items():
        if ".kerple_a" in name or ".kerple_r" in name:  # inside the clamps (>= 0.01)
            w = 0.2 + 0.5 * torch.rand(p.shape, generator=gen)
        elif ".kerple_p" in name:  # inside [0.01, 2]
            w = 0.3 + 1.2 * torch.rand(p.shape, generator=gen)
        elif ".talking_" in name:
            w = torch.eye(p.shape[0]) + 0.3 * torch.randn(p.shape, generator=gen)
        elif p.ndim >= 2:
            w = 0.2 * torch.randn(p.shape, generator=gen)
        elif name.endswith(".weight"):  # a norm gain
            w = 1 + 0.1 * torch.randn(p.shape, generator=gen)
        else:
            w = 0.1 * torch.randn(p.shape, generator=gen)
        weights[name] = w.float()
    return weights


def run_config(k, cfg, gen, out, pre=None):
    """Runs cfg and puts its tensors into out under pre (default "cfg<k>/")."""
    model = GPT(cfg)
    weights = random_weights(model, gen)
    model.load_state_dict(weights)  # strict: the names and shapes are the module's
    model = model.double()
    B, T, V = cfg["batch"], cfg["length"], cfg["vocab"]
    assert T <= cfg["context"] or cfg["pos"] != "learned"
    ids = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    if cfg["ignored"]:
        where = torch.randperm(B * T, generator=gen)[: cfg["ignored"]]
        targets.view(-1)[where] = -1

    logits, loss = model.loss(ids, targets)
    loss.backward()
    params = dict(model.named_parameters())
    assert sorted(params) == sorted(weights), "named_parameters and state_dict differ"

    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    grads = {name: p.grad.detach().clone() for name, p in params.items()}
    norm = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM)
    assert norm.item() > MAX_NORM, f"{pre or k}: gradient norm {norm.item()} does not exercise clipping"
    opt.step()

    pre = pre or f"cfg{k}/"
    for name, w in weights.items():
        out[pre + "param/" + name] = w
    out[pre + "ids"] = ids.float()
    out[pre + "targets"] = targets.float()
    out[pre + "logits"] = logits.detach()
    out[pre + "loss"] = loss.detach().reshape(1)
    for name, g in grads.items():
        out[pre + "grad/" + name] = g
    out[pre + "grad_norm"] = norm.detach().reshape(1)
    for name, p in params.items():
        out[pre + "step/" + name] = p.detach()
    print(f"{pre or f'cfg{k}/'}: {sum(w.numel() for w in weights.values())} parameters, loss {loss.item():.6f}, "
          f"gradient norm {norm.item():.4f}")


def main(path):
    gen = torch.Generator().manual_seed(20261123)
    out = {}
    meta = {"format": "attnlab-fixture", "made_by": "tests/reference/gpt.py", "torch": torch.__version__,
            "configs": str(len(CONFIGS)),
            "optim": json.dumps(dict(lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, max_norm=MAX_NORM))}
    for k, cfg in enumerate(CONFIGS):
        run_config(k, cfg, gen, out)
        meta[f"cfg{k}/config"] = json.dumps(cfg)
    safetensors_io.save(path, out, meta)
    print(f"wrote {path}: {len(CONFIGS)} configs, {len(out)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gpt.py OUT.safetensors")
    main(sys.argv[1])
