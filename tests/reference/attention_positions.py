#!/usr/bin/python3
"""attention_positions.py: PyTorch reference for positions inside the plain softmax kernel
(layers/attention/softmax_op.c, the schemes' bias hooks): sliding windows, XPOS's blockwise causal
attention (bca), log-n scaling and the ALiBi, KERPLE (power, log) and Sandwich score biases.

With s = 1/sqrt(key_size), query i, key j, head h and delta = i - j (causal) or |i - j|:

    keys of row i: [lo_i, hi_i]; bidirectional [0, T-1]; causal [0, i]; window W: [max(0, i-W+1), i]
    causal, [max(0, i-W+1), min(T-1, i+W-1)] bidirectional;
                   bca: b = max(1, context // 2), [max(0, (i // b - 1) b), i]
    lambda_i     = max(1, log(n_i) / log(context)), n_i = hi_i - lo_i + 1   (logn; else 1)
    z_ij         = lambda_i s q_i . k_j + bias_h(delta)                     (bias unscaled)
    alibi        : -m_h delta (ALiBi's slopes, H = 3 here: not a power of two)
    kerple_power : -a_h delta^p_h, a = clamp(a, min=0.01), p = clamp(p, 0.01, 2)
    kerple_log   : -r1_h log(1 + r2_h delta), r1, r2 = clamp(., min=0.01)
    sandwich     : lambda sum_{k < d/2} cos(delta w_k) * H / (8 (h+1)), w_k = 10000^(-2k/d), d = H key_size
    P = softmax(z + mask),  O = P V

The kerple parameters have heads inside and outside the clamps (torch.clamp passes no gradient
outside). Everything is computed in float64 from float32 inputs.

Writes, per variant <name>: q, k, v, dout, the parameters (kerple_a, kerple_p or kerple_r1,
kerple_r2), out, probs and grad_<leaf> for every leaf; metadata "variants" (JSON: name, pos,
causal, window, bca, logn) and "shape" (JSON: B, H, T, key_size, head_size, context,
sandwich_lambda). tests/test_attn_positions.c runs the same variants in C and compares.

Usage: /usr/bin/python3 tests/reference/attention_positions.py tests/fixtures/attn_positions.safetensors
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

# Keep in step with tests/test_attn_positions.c (it reads "shape" and "variants").
B, H, T, KEY_SIZE, HEAD_SIZE, CONTEXT, SANDWICH_LAMBDA = 2, 3, 40, 5, 4, 16, 0.5

# name, pos, causal, window, bca, logn
VARIANTS = [
    ("alibi_causal", "alibi", True, 0, False, False),
    ("alibi_bidirectional", "alibi", False, 0, False, False),
    ("kerple_power_causal", "kerple_power", True, 0, False, False),
    ("kerple_power_bidirectional", "kerple_power", False, 0, False, False),
    ("kerple_log_causal", "kerple_log", True, 0, False, False),
    ("kerple_log_bidirectional", "kerple_log", False, 0, False, False),
    ("sandwich_causal", "sandwich", True, 0, False, False),
    ("sandwich_bidirectional", "sandwich", False, 0, False, False),
    ("window1", "none", True, 1, False, False),
    ("window7", "none", True, 7, False, False),
    ("window100", "none", True, 100, False, False),
    ("bca", "none", True, 0, True, False),
    ("logn_causal", "none", True, 0, False, True),
    ("logn_bidirectional", "none", False, 0, False, True),
    ("alibi_window_logn", "alibi", True, 12, False, True),
    ("kerple_power_bca", "kerple_power", True, 0, True, False),
    ("kerple_log_logn", "kerple_log", False, 0, False, True),
    ("window1_bidirectional", "none", False, 1, False, False),
    ("window5_bidirectional", "none", False, 5, False, False),
    ("window100_bidirectional", "none", False, 100, False, False),
    ("alibi_window_logn_bidirectional", "alibi", False, 6, False, True),
]

PARAMS = {"kerple_power": ("kerple_a", "kerple_p"), "kerple_log": ("kerple_r1", "kerple_r2")}
# Heads 0 and 2 inside the clamps, head 1 outside (below 0.01, or p above 2).
PARAM_VALUES = {
    "kerple_a": [0.6, 0.004, 1.2],
    "kerple_p": [0.7, 2.6, 1.5],
    "kerple_r1": [1.3, -0.2, 0.5],
    "kerple_r2": [0.3, 0.8, -0.4],
}


def alibi_slopes(n):
    def power_of_2(n):
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]
    p2 = 2 ** math.floor(math.log2(n))
    if p2 == n:
        return power_of_2(n)
    return power_of_2(p2) + alibi_slopes(2 * p2)[0::2][: n - p2]


def key_ranges(causal, window, bca):
    lo, hi = [], []
    b = max(1, CONTEXT // 2)
    for i in range(T):
        l, h = 0, (i if causal else T - 1)
        if window > 0:  # distance |i - j| < window: the last window keys when causal
            l = max(0, i - window + 1)
            if not causal:
                h = min(T - 1, i + window - 1)
        if causal and bca:
            l = max(0, (i // b - 1) * b)
        lo.append(l)
        hi.append(h)
    return lo, hi


def bias(pos, causal, params):
    i = torch.arange(T, dtype=torch.float64)[:, None]
    j = torch.arange(T, dtype=torch.float64)[None, :]
    delta = (i - j) if causal else (i - j).abs()
    delta = delta.clamp(min=0)  # causal j > i are masked; keep them finite
    if pos == "alibi":
        m = torch.tensor(alibi_slopes(H), dtype=torch.float64)[:, None, None]
        return -m * delta
    if pos == "kerple_power":
        a = params["kerple_a"].clamp(min=0.01)[:, None, None]
        p = params["kerple_p"].clamp(0.01, 2)[:, None, None]
        dp = torch.where(delta > 0, delta.clamp(min=1e-30) ** p, torch.zeros_like(delta * p))
        return -a * dp
    if pos == "kerple_log":
        r1 = params["kerple_r1"].clamp(min=0.01)[:, None, None]
        r2 = params["kerple_r2"].clamp(min=0.01)[:, None, None]
        return -r1 * torch.log1p(r2 * delta)
    if pos == "sandwich":
        d = H * KEY_SIZE
        w = torch.tensor([10000.0 ** (-2.0 * k / d) for k in range(d // 2)], dtype=torch.float64)
        dot = torch.cos(delta[:, :, None] * w).sum(-1)
        scale = torch.tensor([H / (8.0 * (h + 1)) for h in range(H)], dtype=torch.float64)[:, None, None]
        return SANDWICH_LAMBDA * dot * scale
    return None


def attention(q, k, v, pos, causal, window, bca, logn, params):
    lo, hi = key_ranges(causal, window, bca)
    allowed = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        allowed[i, lo[i]: hi[i] + 1] = True
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if logn:
        lam = torch.tensor([max(1.0, math.log(hi[i] - lo[i] + 1) / math.log(CONTEXT)) for i in range(T)],
                           dtype=torch.float64)
        s = s * lam[:, None]
    b = bias(pos, causal, params)
    if b is not None:
        s = s + b
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1)
    return p @ v, p


def run_variant(name, pos, causal, window, bca, logn, gen, out):
    f32 = dict(generator=gen, dtype=torch.float32)
    q = torch.randn(B, H, T, KEY_SIZE, **f32)
    k = torch.randn(B, H, T, KEY_SIZE, **f32)
    v = torch.randn(B, H, T, HEAD_SIZE, **f32)
    dout = torch.randn(B, H, T, HEAD_SIZE, **f32)
    leaves = {"q": q, "k": k, "v": v}
    for pn in PARAMS.get(pos, ()):
        leaves[pn] = torch.tensor(PARAM_VALUES[pn], dtype=torch.float32)
    x = {n: t.double().requires_grad_(True) for n, t in leaves.items()}
    o, p = attention(x["q"], x["k"], x["v"], pos, causal, window, bca, logn, x)
    (o * dout.double()).sum().backward()
    pre = name + "/"
    for n, t in leaves.items():
        out[pre + n] = t
    out[pre + "dout"] = dout
    out[pre + "out"] = o.detach()
    out[pre + "probs"] = p.detach()
    for n, t in x.items():
        out[pre + "grad_" + n] = t.grad
    print(f"{name}: |out| max {o.abs().max().item():.4f}")


def main(path):
    gen = torch.Generator().manual_seed(20261122)
    out = {}
    variants = []
    for name, pos, causal, window, bca, logn in VARIANTS:
        run_variant(name, pos, causal, window, bca, logn, gen, out)
        variants.append(dict(name=name, pos=pos, causal=causal, window=window, bca=bca, logn=logn))
    meta = {"format": "attnlab-fixture", "made_by": "tests/reference/attention_positions.py",
            "torch": torch.__version__, "variants": json.dumps(variants),
            "shape": json.dumps(dict(B=B, H=H, T=T, key_size=KEY_SIZE, head_size=HEAD_SIZE, context=CONTEXT,
                                     sandwich_lambda=SANDWICH_LAMBDA))}
    safetensors_io.save(path, out, meta)
    print(f"wrote {path}: {len(variants)} variants, {len(out)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: attention_positions.py OUT.safetensors")
    main(sys.argv[1])
