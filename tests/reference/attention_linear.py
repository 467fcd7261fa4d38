#!/usr/bin/python3
"""attention_linear.py: PyTorch reference for linear attention and cosFormer (layers/attention/linear.c).

Linear attention (Katharopoulos et al. 2020) with a feature map phi, and cosFormer's cos
re-weighting (Qin et al. 2022). Per batch element and head:

    phi       identity | relu | leakyrelu (slope) | elu (elu(x) + 1)
    q'_i = phi(q_i), k'_j = phi(k_j); with reweight = cos, t_i = (pi/2) i / M, i = 1..M, M = T:
    q~_i = [q'_i sin t_i, q'_i cos t_i] (the same for k~), else q~ = q'
    out_i = sum_j (q~_i . k~_j) v_j / max(sum_j q~_i . k~_j, 1e-6)   (j <= i when causal)

No logit scale. The code follows the official cosFormer implementation (cumulative sums of
k~ v^T when causal, clamp_min on the denominator), which is O(T d^2) memory: fine here.

Inputs are drawn so that every denominator is either well clear of 0 (>= 0.1) or clamped
(< 0): float32 cannot reproduce a row whose den cancels to near 0, and neither can any
implementation. The script checks that before writing. Cases, per phi x reweight x
{causal, bidirectional} at T = 7:
  identity    q, k uniform in [0.5, 1.5]
  relu,       q, k uniform in [0.5, 1.5] times a sign pattern: column 0 positive (so den > 0),
  leakyrelu   the others of either sign (the negative branch gets used)
  elu         q, k ~ N(0, 1) (features > 0, so den > 0)
plus "clamp": identity (none and cos, causal and bidirectional) with rows 1 and 4 of q
multiplied by -1e-6, so those rows have den < 0 and are clamped while the others are not;
a leakyrelu case with slope 0.2; and at T = 37 (more than four chunks of 8, the last one
partial): cosformer causal and bidirectional, elu causal and the identity clamp causal.

Writes tests/fixtures/attn_linear.safetensors with, per case:
  <case>/q, k, v        [B, H, T, key_size or head_size] (float32)
  <case>/R              [B, H, T, head_size]
  <case>/out            [B, H, T, head_size]
  <case>/probs          [B, H, T, T]: P_ij = q~_i . k~_j / max(den_i, 1e-6), 0 above the
                        diagonal when causal (out = P v)
  <case>/grad_q, grad_k, grad_v   d sum(out * R) / d input
and metadata "<case>" = the case's config as JSON (with "clamped", the number of clamped rows),
"cases" = their names, comma-separated. tests/test_attn_linear.c runs the same cases in C.

Usage: /usr/bin/python3 tests/reference/attention_linear.py tests/fixtures/attn_linear.safetensors
(Debian's python3-torch provides torch.)
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

F = torch.nn.functional
B, H, DK, DV = 2, 2, 3, 4
EPS = 1e-6
PHIS = ["identity", "relu", "leakyrelu", "elu"]
CLAMP_ROWS = (1, 4)


def phi_fn(x, phi, slope):
    if phi == "identity":
        return x
    if phi == "relu":
        return torch.relu(x)
    if phi == "leakyrelu":
        return F.leaky_relu(x, slope)
    return F.elu(x) + 1


def features(x, cfg):
    """phi(x), and cosFormer's [phi sin t, phi cos t] with t_i = (pi/2) i / M, i = 1..M."""
    x = phi_fn(x, cfg["phi"], cfg["slope"])
    if cfg["reweight"] == "cos":
        m = x.shape[2]
        t = (math.pi / 2 * torch.arange(1, m + 1, dtype=torch.float64) / m).reshape(1, 1, m, 1)
        x = torch.cat([x * torch.sin(t), x * torch.cos(t)], dim=-1)
    return x


def denominator(q_, k_, causal):
    """Unclamped den_i = q~_i . sum_{j (<= i)} k~_j."""
    if causal:
        return torch.einsum("bhld,bhld->bhl", q_, torch.cumsum(k_, dim=2))
    return torch.einsum("bhld,bhd->bhl", q_, k_.sum(dim=2))


def linear_attention(q, k, v, cfg):
    """The cosFormer reference's forward, on [B, H, T, d] tensors."""
    q_, k_ = features(q, cfg), features(k, cfg)
    if cfg["causal"]:
        kv_cum = torch.cumsum(torch.einsum("bhld,bhlm->bhldm", k_, v), dim=2)
        num = torch.einsum("bhld,bhldm->bhlm", q_, kv_cum)
    else:
        num = torch.einsum("bhld,bhdm->bhlm", q_, torch.einsum("bhld,bhlm->bhdm", k_, v))
    den = torch.clamp_min(denominator(q_, k_, cfg["causal"]), EPS)
    return num / den.unsqueeze(-1)


def probs(q, k, cfg):
    q_, k_ = features(q, cfg), features(k, cfg)
    a = q_ @ k_.transpose(-1, -2)
    if cfg["causal"]:
        a = torch.tril(a)
    return a / torch.clamp_min(a.sum(-1, keepdim=True), EPS)


def draw_qk(kind, t, gen, slope_safe=True):
    """q or k [B, H, t, DK] (float32) of the given kind."""
    if kind == "normal":
        return torch.randn(B, H, t, DK, generator=gen)
    x = 0.5 + torch.rand(B, H, t, DK, generator=gen)
    if kind == "signed":  # column 0 positive, the others of random sign
        sign = torch.where(torch.rand(B, H, t, DK, generator=gen) < 0.5, -1.0, 1.0)
        sign[..., 0] = 1.0
        if not slope_safe:  # a larger slope: make column 0 dominate
            x[..., 0] += 2.0
        x = x * sign
    return x


def case_list():
    cases = []
    kinds = {"identity": "positive", "relu": "signed", "leakyrelu": "signed", "elu": "normal"}
    for phi in PHIS:
        for reweight in ("none", "cos"):
            for causal in (True, False):
                name = f"{phi}{'_cos' if reweight == 'cos' else ''}_{'causal' if causal else 'bidirectional'}"
                cases.append((name, dict(phi=phi, reweight=reweight, causal=causal, slope=0.01, T=7), kinds[phi]))
    for reweight in ("none", "cos"):
        for causal in (True, False):
            name = f"clamp{'_cos' if reweight == 'cos' else ''}_{'causal' if causal else 'bidirectional'}"
            cases.append((name, dict(phi="identity", reweight=reweight, causal=causal, slope=0.01, T=7), "clamp"))
    cases.append(("leakyrelu_slope_causal", dict(phi="leakyrelu", reweight="none", causal=True, slope=0.2, T=7),
                  "signed_wide"))
    cases.append(("cosformer_long_causal", dict(phi="relu", reweight="cos", causal=True, slope=0.01, T=37), "signed"))
    cases.append(("cosformer_long_bidirectional", dict(phi="relu", reweight="cos", causal=False, slope=0.01, T=37),
                  "signed"))
    cases.append(("elu_long_causal", dict(phi="elu", reweight="none", causal=True, slope=0.01, T=37), "normal"))
    cases.append(("clamp_long_causal", dict(phi="identity", reweight="none", causal=True, slope=0.01, T=37), "clamp"))
    return cases


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/attn_linear.safetensors"
    gen = torch.Generator().manual_seed(20261204)
    tensors, meta, names = {}, {}, []
    for name, cfg, kind in case_list():
        t = cfg["T"]
        if kind == "clamp":
            q32, k32 = draw_qk("positive", t, gen), draw_qk("positive", t, gen)
            for r in CLAMP_ROWS:
                q32[:, :, r, :] *= -1e-6
        elif kind == "signed_wide":
            q32, k32 = draw_qk("signed", t, gen, False), draw_qk("signed", t, gen, False)
        else:
            q32, k32 = draw_qk(kind, t, gen), draw_qk(kind, t, gen)
        v32 = torch.randn(B, H, t, DV, generator=gen)
        r32 = torch.randn(B, H, t, DV, generator=gen)
        q, k, v = (x.double().requires_grad_(True) for x in (q32, k32, v32))
        out = linear_attention(q, k, v, cfg)
        (out * r32.double()).sum().backward()
        with torch.no_grad():
            den = denominator(features(q, cfg), features(k, cfg), cfg["causal"])
            clamped = int((den < EPS).sum())
            # every row clamped (den < 0) or well clear of 0
            bad = (den < 0.1) & (den >= -1e-7)
            assert not bad.any(), f"{name}: a denominator near 0: {den[bad]}"
            assert (kind == "clamp") == (clamped > 0), f"{name}: {clamped} clamped rows"
            p = probs(q, k, cfg)
            assert torch.allclose(p @ v, out, rtol=1e-9, atol=1e-9), f"{name}: P v != out"
        for x, n in ((q32, "q"), (k32, "k"), (v32, "v"), (r32, "R")):
            tensors[f"{name}/{n}"] = x
        tensors[f"{name}/out"] = out.detach()
        tensors[f"{name}/probs"] = p
        for x, n in ((q, "q"), (k, "k"), (v, "v")):
            tensors[f"{name}/grad_{n}"] = x.grad
        meta[name] = json.dumps(dict(cfg, clamped=clamped), sort_keys=True)
        names.append(name)
    meta.update({"format": "attnlab-fixture", "made_by": "tests/reference/attention_linear.py",
                 "torch": torch.__version__, "cases": ",".join(names)})
    safetensors_io.save(out_path, tensors, meta)
    print(f"wrote {out_path}: {len(names)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
