#!/usr/bin/python3
"""ops.py: PyTorch references for the primitive ops of core/.

Builds every case of tests/op_cases.c in PyTorch, in float64 from float32
inputs, and writes tests/fixtures/ops.safetensors with, per case:
  <case>/in<k>    the inputs (float32)
  <case>/R        weights: the gradients are those of f = sum(out * R)
  <case>/out      the output
  <case>/grad<k>  df/d in<k>
tests/test_reference.c runs the same cases in C and compares.

Usage: /usr/bin/python3 tests/reference/ops.py tests/fixtures/ops.safetensors
(Debian's python3-torch provides torch.)
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

F = torch.nn.functional
VOCAB = 7
IGNORE = -1
EMBED_IDS = [3, 0, 6, 3, 1, 1, 5, 3]
CE_TARGETS = [1, 4, 0, IGNORE, 2, 4]


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def add_layernorm(x, y, w, b):
    """s = x + y and h = layernorm(s), as op_add_layernorm returns them."""
    s = x + y
    return s, F.layer_norm(s, (s.shape[-1],), w, b, 1e-5)


def add_rmsnorm(x, y, w):
    s = x + y
    return s, rmsnorm(s, w, 1e-5)


def mul_pair(pair):
    return pair[0] * pair[1]


def add_rmsnorm_reread(x, y, w):
    s, h = add_rmsnorm(x, y, w)
    return (h + y) * s


def elu(x, alpha, shift):
    return torch.where(x > 0, x, alpha * torch.expm1(x)) + shift


def softmax_masked(x, mask=None):
    """Softmax of x + mask; a row with every key at -inf gives zeros (attnlab's rule)."""
    z = x if mask is None else x + mask
    empty = torch.isinf(z).all(-1, keepdim=True) & (z < 0).all(-1, keepdim=True)
    z = torch.where(empty, torch.zeros_like(z), z)
    return torch.softmax(z, -1) * (~empty)


def causal_mask(t):
    m = torch.zeros(t, t, dtype=torch.float64)
    return m.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))


def split_heads(x, h):
    b, t, c = x.shape
    return x.reshape(b, t, h, c // h).permute(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def softmax_empty_row(x):
    m = causal_mask(3)
    m[0, 0] = float("-inf")
    return softmax_masked(x, m)


def cross_entropy(z):
    return F.cross_entropy(z, torch.tensor(CE_TARGETS), ignore_index=IGNORE)


def mlp_block(x, w1, w2, b1):
    h = rmsnorm(x, 0.5 * b1, 1e-5)
    h = gelu_tanh(h @ w1.T)
    return x + h @ w2.T


# name, inputs as (init, shape), function: the same list as tests/op_cases.c
N, NZ, POS = "normal", "nonzero", "positive"
CASES = [
    ("matmul_nn", [(N, (5, 4)), (N, (4, 3))], lambda a, b: a @ b),
    ("matmul_nt", [(N, (5, 4)), (N, (3, 4))], lambda a, b: a @ b.T),
    ("matmul_tn", [(N, (4, 5)), (N, (4, 3))], lambda a, b: a.T @ b),
    ("matmul_tt", [(N, (4, 5)), (N, (3, 4))], lambda a, b: a.T @ b.T),
    ("matmul_rows", [(N, (2, 3, 4)), (N, (5, 4))], lambda a, b: a @ b.T),
    ("bmm_nt", [(N, (2, 2, 3, 4)), (N, (2, 2, 5, 4))], lambda a, b: a @ b.transpose(-1, -2)),
    ("bmm_nn", [(N, (2, 2, 3, 5)), (N, (2, 2, 5, 4))], lambda a, b: a @ b),
    ("bmm_tn", [(N, (2, 3, 4)), (N, (2, 3, 5))], lambda a, b: a.transpose(-1, -2) @ b),
    ("bmm_tt", [(N, (2, 3, 4)), (N, (2, 5, 3))], lambda a, b: a.transpose(-1, -2) @ b.transpose(-1, -2)),
    ("matmul_twice", [(N, (4, 3))], lambda x: x @ x.T),
    ("linear", [(N, (2, 3, 4)), (N, (5, 4)), (N, (5,))], F.linear),
    ("linear_nobias", [(N, (6, 4)), (N, (3, 4))], F.linear),
    ("add_same", [(N, (3, 4)), (N, (3, 4))], lambda a, b: a + b),
    ("add_bias", [(N, (2, 3, 4)), (N, (4,))], lambda a, b: a + b),
    ("add_table", [(N, (2, 3, 4)), (N, (3, 4))], lambda a, b: a + b),
    ("add_twice", [(N, (3, 4))], lambda x: x + x),
    ("mul_same", [(N, (3, 4)), (N, (3, 4))], lambda a, b: a * b),
    ("mul_bias", [(N, (2, 3, 4)), (N, (4,))], lambda a, b: a * b),
    ("mul_twice", [(N, (3, 4))], lambda x: x * x),
    ("div_same", [(N, (3, 4)), (POS, (3, 4))], lambda a, b: a / b),
    ("div_bias", [(N, (2, 3, 4)), (POS, (4,))], lambda a, b: a / b),
    ("div_twice", [(POS, (3, 4))], lambda x: x / (x * x)),
    ("scale", [(N, (3, 4))], lambda x: -1.7 * x),
    ("sum", [(N, (3, 4))], lambda x: x.sum()),
    ("mean", [(N, (2, 3, 4))], lambda x: x.mean()),
    ("reshape", [(N, (2, 3, 4))], lambda x: x.reshape(6, 4)),
    ("split_heads", [(N, (2, 3, 8))], lambda x: split_heads(x, 2)),
    ("merge_heads", [(N, (2, 2, 3, 4))], merge_heads),
    ("gelu", [(N, (4, 5))], gelu_tanh),
    ("relu", [(NZ, (4, 5))], torch.relu),
    ("leakyrelu", [(NZ, (4, 5))], lambda x: F.leaky_relu(x, 0.1)),
    ("elu_plus_one", [(NZ, (4, 5))], lambda x: elu(x, 1.0, 1.0)),
    ("elu_alpha", [(NZ, (4, 5))], lambda x: elu(x, 0.5, 0.0)),
    ("exp", [(N, (4, 5))], torch.exp),
    ("sigmoid", [(N, (4, 5))], torch.sigmoid),
    ("identity", [(N, (4, 5))], lambda x: x),
    ("layernorm", [(N, (3, 4, 6)), (N, (6,)), (N, (6,))], lambda x, w, b: F.layer_norm(x, (6,), w, b, 1e-5)),
    ("rmsnorm", [(N, (3, 6)), (N, (6,))], lambda x, w: rmsnorm(x, w, 1e-5)),
    ("softmax", [(N, (3, 5))], softmax_masked),
    ("softmax_causal", [(N, (2, 2, 4, 4))], lambda x: softmax_masked(x, causal_mask(4))),
    ("softmax_bias", [(N, (2, 4, 4)), (N, (4, 4))], softmax_masked),
    ("softmax_empty_row", [(N, (2, 3, 3))], softmax_empty_row),
    ("embedding", [(N, (VOCAB, 3))], lambda w: F.embedding(torch.tensor(EMBED_IDS).reshape(2, 4), w)),
    ("cross_entropy", [(N, (6, 5))], cross_entropy),
    ("mlp_block", [(N, (2, 3, 4)), (N, (8, 4)), (N, (4, 8)), (POS, (4,))], mlp_block),
    ("add_layernorm", [(N, (2, 3, 6)), (N, (2, 3, 6)), (N, (6,)), (N, (6,))],
     lambda x, y, w, b: mul_pair(add_layernorm(x, y, w, b))),
    ("add_layernorm_norm_only", [(N, (4, 5)), (N, (4, 5)), (N, (5,)), (N, (5,))],
     lambda x, y, w, b: add_layernorm(x, y, w, b)[1]),
    ("add_layernorm_sum_only", [(N, (4, 5)), (N, (4, 5)), (N, (5,)), (N, (5,))],
     lambda x, y, w, b: add_layernorm(x, y, w, b)[0]),
    ("add_layernorm_twice", [(N, (2, 3, 6)), (N, (6,)), (N, (6,))],
     lambda x, w, b: mul_pair(add_layernorm(x, x, w, b))),
    ("add_layernorm_reread", [(N, (4, 6)), (N, (4, 6)), (N, (6,)), (N, (6,))],
     lambda x, y, w, b: (add_layernorm(x, y, w, b)[1] + x) * y),
    ("add_rmsnorm", [(N, (2, 3, 6)), (N, (2, 3, 6)), (N, (6,))], lambda x, y, w: mul_pair(add_rmsnorm(x, y, w))),
    ("add_rmsnorm_norm_only", [(N, (3, 5)), (N, (3, 5)), (N, (5,))], lambda x, y, w: add_rmsnorm(x, y, w)[1]),
    ("add_rmsnorm_reread", [(N, (4, 6)), (N, (4, 6)), (N, (6,))], add_rmsnorm_reread),
]


def draw(init, shape, gen):
    x = torch.randn(shape, generator=gen)
    if init == NZ:  # away from the kink at 0, as the C gradient check does
        x = torch.where(x.abs() < 0.1, x + 0.1 * torch.sign(x) + 0.1 * (x == 0), x)
    if init == POS:
        x = 0.5 + torch.rand(shape, generator=gen)
    return x.float()


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/ops.safetensors"
    gen = torch.Generator().manual_seed(20261122)
    tensors = {}
    for name, inputs, fn in CASES:
        xs32 = [draw(init, shape, gen) for init, shape in inputs]
        xs = [x.double().requires_grad_(True) for x in xs32]
        out = fn(*xs)
        r = torch.randn(out.shape, generator=gen).float()
        (out * r.double()).sum().backward()
        for k, x in enumerate(xs32):
            tensors[f"{name}/in{k}"] = x
        tensors[f"{name}/R"] = r
        tensors[f"{name}/out"] = out.detach()
        for k, x in enumerate(xs):  # 0 for an input out does not depend on (w and b in add_layernorm_sum_only)
            tensors[f"{name}/grad{k}"] = x.grad if x.grad is not None else torch.zeros_like(x)
    safetensors_io.save(out_path, tensors, {"format": "attnlab-fixture", "made_by": "tests/reference/ops.py",
                                            "torch": torch.__version__})
    print(f"wrote {out_path}: {len(CASES)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
