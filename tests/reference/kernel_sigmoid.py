#!/usr/bin/python3
"""kernel_sigmoid.py: PyTorch reference for sigmoid attention (layers/attention/sigmoid.c).

    P = sigmoid(s Q K^T - log T) M,  O = P V,  s = 1/sqrt(key_size)

with M zeroing keys j > i when causal, and the score-map op's masks and bias (a window, BCA,
log-n scaling, ALiBi) in the cases that set them. Builds the kernel's gradient-check cases of
tests/layer_cases.c (the shapes of tests/layer_cases.h) in float64 from float32 inputs and
writes, in the format of tests/reference/ops.py, per case:
  <case>/in0, in1, in2   q, k, v (float32)
  <case>/R               weights: the gradients are those of f = sum(out * R)
  <case>/out             the output
  <case>/grad0, 1, 2     df/dq, df/dk, df/dv
tests/test_reference.c runs every kernel case that a tests/fixtures/kernel_<kernel>.safetensors
holds and compares.

Usage: /usr/bin/python3 tests/reference/kernel_sigmoid.py tests/fixtures/kernel_sigmoid.safetensors
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

B, H, T, DK, DV = 2, 2, 5, 3, 4  # KC_B, KC_H, KC_T, KC_DK, KC_DV of tests/layer_cases.h


def visible(t, causal, window, bca, context):
    """[T, T]: whether query i sees key j (the rules of layers/attention/softmax.c)."""
    i, j = torch.arange(t).reshape(t, 1), torch.arange(t).reshape(1, t)
    lo, hi = torch.zeros_like(i), (i if causal else torch.full_like(i, t - 1))
    if window:
        lo = (i - window + 1).clamp(min=0)
        if not causal:
            hi = (i + window - 1).clamp(max=t - 1)
    if causal and bca:
        blen = max(1, context // 2)
        lo = ((i // blen - 1) * blen).clamp(min=0)
    return (j >= lo) & (j <= hi)


def sigmoid_attention(q, k, v, causal, window=0, bca=False, alibi=False, logn=False, context=2):
    """P = sigmoid(lambda s q k^T + b - log T) on the keys a query sees, 0 elsewhere; O = P V.
    lambda = max(1, log n_i / log context) under logn (n_i the keys row i sees); b = -m_h |i - j|
    (ALiBi, m_h = 2^(-8 (h + 1) / H) for H a power of two)."""
    h, t = q.shape[1], q.shape[-2]
    seen = visible(t, causal, window, bca, context)
    z = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if logn:
        n = seen.sum(-1).double()
        z = z * torch.clamp(torch.log(n) / math.log(context), min=1.0).reshape(t, 1)
    if alibi:
        d = (torch.arange(t).reshape(t, 1) - torch.arange(t).reshape(1, t)).abs().double()
        m = torch.tensor([2.0 ** (-8.0 * (g + 1) / h) for g in range(h)], dtype=torch.float64)
        z = z - m.reshape(h, 1, 1) * d
    return (torch.sigmoid(z - math.log(t)) * seen) @ v


# name: the options of its case in tests/layer_cases.c
CASES = {
    "attn_sigmoid_causal": dict(causal=True),
    "attn_sigmoid_bidirectional": dict(causal=False),
    "attn_sigmoid_window_causal": dict(causal=True, window=3, alibi=True, logn=True),
    "attn_sigmoid_window_bidirectional": dict(causal=False, window=3, alibi=True, logn=True),
    "attn_sigmoid_bca": dict(causal=True, bca=True, alibi=True),
}


def main(path):
    gen = torch.Generator().manual_seed(20261126)
    tensors = {}
    for name, opts in CASES.items():
        xs32 = [torch.randn(B, H, T, d, generator=gen) for d in (DK, DK, DV)]
        xs = [x.double().requires_grad_(True) for x in xs32]
        out = sigmoid_attention(*xs, **opts)
        r = torch.randn(out.shape, generator=gen)
        (out * r.double()).sum().backward()
        for i, x in enumerate(xs32):
            tensors[f"{name}/in{i}"] = x
            tensors[f"{name}/grad{i}"] = xs[i].grad
        tensors[f"{name}/R"] = r
        tensors[f"{name}/out"] = out.detach()
    safetensors_io.save(path, tensors, {"format": "attnlab-fixture", "made_by": "tests/reference/kernel_sigmoid.py",
                                        "torch": torch.__version__})
    print(f"wrote {path}: {len(tensors)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: kernel_sigmoid.py OUT.safetensors")
    main(sys.argv[1])
