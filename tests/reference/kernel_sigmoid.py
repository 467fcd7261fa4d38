#!/usr/bin/python3
"""kernel_sigmoid.py: PyTorch reference for sigmoid attention (layers/attention/sigmoid.c).

    P = sigmoid(s Q K^T - log T) M,  O = P V,  s = 1/sqrt(key_size)

with M zeroing keys j > i when causal. Builds the kernel's gradient-check cases of
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


def sigmoid_attention(q, k, v, causal):
    t = q.shape[-2]
    p = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) - math.log(t))
    if causal:
        p = p * torch.ones(t, t, dtype=p.dtype).tril()
    return p @ v


def main(path):
    gen = torch.Generator().manual_seed(20261126)
    tensors = {}
    for name, causal in (("attn_sigmoid_causal", True), ("attn_sigmoid_bidirectional", False)):
        xs32 = [torch.randn(B, H, T, d, generator=gen) for d in (DK, DK, DV)]
        xs = [x.double().requires_grad_(True) for x in xs32]
        out = sigmoid_attention(*xs, causal)
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
