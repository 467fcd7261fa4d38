#!/usr/bin/python3
"""attention_rope.py: PyTorch reference for pos=rope and pos=xpos (layers/attention/rope.c) and
for linear attention with RoPE inside (layers/attention/linear.c).

RoPE (Su et al. 2021, RoFormer): at position t = 0..T-1, pair i < P = rope_dims / 2 of x
(elements 2i, 2i + 1) turns by t theta_i, theta_i = 10000^(-2i / rope_dims):
    (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos);   dimensions >= rope_dims pass unchanged.
XPOS (Sun et al. 2023), with the conventions of torchscale's xpos_relative_position.py (offset 0):
the rotated pair i is also scaled by zeta_i^(t' / 512) on the q side and zeta_i^(-t' / 512) on
the k side, zeta_i = (2i + 0.4 D) / (1.4 D), D = rope_dims, t' = t + floor(-T / 2) (the centred
position; the angles keep the uncentred t).

Linear attention with RoPE (RoFormer eq. 19): the rotation acts on the features phi(q), phi(k)
in the numerator only,
    out_i = sum_j (R_i phi(q_i)) . (R_j phi(k_j)) v_j / max(sum_j phi(q_i) . phi(k_j), 1e-6),
j <= i when causal; computed here the O(T^2) way. probs is that matrix (out = probs v).
Inputs as in attention_linear.py, so that every denominator is well clear of 0.

Writes tests/fixtures/attn_rope.safetensors with, per case:
  rope / xpos cases:   <case>/x [B, H, T, D], R, out, grad_x     (d sum(out * R) / dx)
  linear cases:        <case>/q, k, v, R, out, probs, grad_q, grad_k, grad_v
and metadata "<case>" = the case's config as JSON, "cases" = their names, comma-separated.
Everything is computed in float64 from float32 inputs. tests/test_attn_rope.c runs the same cases.

Usage: /usr/bin/python3 tests/reference/attention_rope.py tests/fixtures/attn_rope.safetensors
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

F = torch.nn.functional
B, H = 2, 2
EPS = 1e-6
SCALE_BASE = 512.0


def rotation(t_len, pairs, pos, key):
    """a cos(t theta_i), a sin(t theta_i) as [T, P] float64 (a = 1, or XPOS's decay)."""
    d = 2 * pairs
    t = torch.arange(t_len, dtype=torch.float64)[:, None]
    i = torch.arange(pairs, dtype=torch.float64)[None, :]
    angle = t * 10000.0 ** (-2.0 * i / d)
    a = torch.ones_like(angle)
    if pos == "xpos":
        zeta = (2.0 * i + 0.4 * d) / (1.4 * d)
        centred = t + (-t_len // 2)
        a = zeta ** ((-centred if key else centred) / SCALE_BASE)
    return a * torch.cos(angle), a * torch.sin(angle)


def rotate(x, rope_dims, pos="rope", key=False):
    """RoPE / XPOS on the last dimension of x [B, H, T, D], leading rope_dims dimensions."""
    t_len, pairs = x.shape[2], rope_dims // 2
    cos, sin = rotation(t_len, pairs, pos, key)
    x1, x2 = x[..., 0:2 * pairs:2], x[..., 1:2 * pairs:2]
    y1, y2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    rotated = torch.stack((y1, y2), dim=-1).flatten(-2)
    return torch.cat((rotated, x[..., 2 * pairs:]), dim=-1)


def phi_fn(x, phi, slope):
    if phi == "identity":
        return x
    if phi == "relu":
        return torch.relu(x)
    if phi == "leakyrelu":
        return F.leaky_relu(x, slope)
    return F.elu(x) + 1


def linear_rope(q, k, v, cfg):
    """out and probs of linear attention with RoPE on the features, the O(T^2) way."""
    fq, fk = phi_fn(q, cfg["phi"], cfg["slope"]), phi_fn(k, cfg["phi"], cfg["slope"])
    rq, rk = rotate(fq, cfg["rope_dims"]), rotate(fk, cfg["rope_dims"])
    a, a0 = rq @ rk.transpose(-1, -2), fq @ fk.transpose(-1, -2)
    if cfg["causal"]:
        a, a0 = torch.tril(a), torch.tril(a0)
    den = a0.sum(-1, keepdim=True)
    p = a / torch.clamp_min(den, EPS)
    return p @ v, p, den


def draw_qk(kind, t, d, gen):
    if kind == "normal":
        return torch.randn(B, H, t, d, generator=gen)
    x = 0.5 + torch.rand(B, H, t, d, generator=gen)
    if kind == "signed":  # column 0 positive, the others of random sign
        sign = torch.where(torch.rand(B, H, t, d, generator=gen) < 0.5, -1.0, 1.0)
        sign[..., 0] = 1.0
        x = x * sign
    return x


def rope_cases():
    return [
        ("rope", dict(pos="rope", key=False, T=7, D=6, rope_dims=6)),
        ("rope_partial", dict(pos="rope", key=False, T=7, D=6, rope_dims=4)),
        ("rope_long", dict(pos="rope", key=True, T=40, D=8, rope_dims=8)),
        ("xpos_q", dict(pos="xpos", key=False, T=7, D=6, rope_dims=6)),
        ("xpos_k", dict(pos="xpos", key=True, T=8, D=6, rope_dims=6)),
        ("xpos_partial_k", dict(pos="xpos", key=True, T=7, D=6, rope_dims=2)),
        ("xpos_long_q", dict(pos="xpos", key=False, T=301, D=4, rope_dims=4)),
        ("xpos_long_k", dict(pos="xpos", key=True, T=301, D=4, rope_dims=4)),
    ]


def linear_cases():
    kinds = {"identity": "positive", "relu": "signed", "leakyrelu": "signed", "elu": "normal"}
    cases = []
    for phi in ("identity", "relu", "leakyrelu", "elu"):
        for causal in (True, False):
            name = f"linear_{phi}_{'causal' if causal else 'bidirectional'}"
            cases.append((name, dict(phi=phi, causal=causal, slope=0.01, T=7, DK=4, DV=3, rope_dims=4, chunk=3),
                          kinds[phi]))
    cases.append(("linear_elu_partial_causal",
                  dict(phi="elu", causal=True, slope=0.01, T=7, DK=4, DV=3, rope_dims=2, chunk=3), "normal"))
    cases.append(("linear_relu_long_causal",
                  dict(phi="relu", causal=True, slope=0.01, T=37, DK=4, DV=3, rope_dims=4, chunk=8), "signed"))
    cases.append(("linear_elu_long_bidirectional",
                  dict(phi="elu", causal=False, slope=0.01, T=37, DK=4, DV=3, rope_dims=4, chunk=8), "normal"))
    return cases


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/attn_rope.safetensors"
    gen = torch.Generator().manual_seed(20261205)
    tensors, meta, names = {}, {}, []
    for name, cfg in rope_cases():
        x32 = torch.randn(B, H, cfg["T"], cfg["D"], generator=gen)
        r32 = torch.randn(B, H, cfg["T"], cfg["D"], generator=gen)
        x = x32.double().requires_grad_(True)
        out = rotate(x, cfg["rope_dims"], cfg["pos"], cfg["key"])
        (out * r32.double()).sum().backward()
        tensors.update({f"{name}/x": x32, f"{name}/R": r32, f"{name}/out": out.detach(), f"{name}/grad_x": x.grad})
        meta[name] = json.dumps(cfg, sort_keys=True)
        names.append(name)
    for name, cfg, kind in linear_cases():
        t = cfg["T"]
        q32, k32 = draw_qk(kind, t, cfg["DK"], gen), draw_qk(kind, t, cfg["DK"], gen)
        v32 = torch.randn(B, H, t, cfg["DV"], generator=gen)
        r32 = torch.randn(B, H, t, cfg["DV"], generator=gen)
        q, k, v = (x.double().requires_grad_(True) for x in (q32, k32, v32))
        out, p, den = linear_rope(q, k, v, cfg)
        (out * r32.double()).sum().backward()
        assert bool((den > 0.1).all()), f"{name}: a denominator near 0 or clamped"
        for x, n in ((q32, "q"), (k32, "k"), (v32, "v"), (r32, "R")):
            tensors[f"{name}/{n}"] = x
        tensors[f"{name}/out"] = out.detach()
        tensors[f"{name}/probs"] = p.detach()
        for x, n in ((q, "q"), (k, "k"), (v, "v")):
            tensors[f"{name}/grad_{n}"] = x.grad
        meta[name] = json.dumps(cfg, sort_keys=True)
        names.append(name)
    meta.update({"format": "attnlab-fixture", "made_by": "tests/reference/attention_rope.py",
                 "torch": torch.__version__, "cases": ",".join(names)})
    safetensors_io.save(out_path, tensors, meta)
    print(f"wrote {out_path}: {len(names)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
