#!/usr/bin/python3
"""attention_linformer.py: PyTorch reference for the Linformer kernel (layers/attention/linformer.c).

Linformer (Wang et al. 2020) projects keys and values along the sequence before the softmax.
Per batch element and head, with n = context, k = linformer_k and scale = 1/sqrt(key_size):

    K' = E K,  V' = F V,  P = softmax(scale Q K'^T)  [T, k'],  out = P V'

linformer_proj:
  linear  E, F [k, n] learned; an input shorter than n (T < n) uses their first T columns
  mean    average pooling along the sequence, kernel = stride = s = n/k
  max     max pooling, the same windows
  conv    Conv1d(1, 1, s, stride=s, bias=False) along the sequence, run on every feature channel
Windows are [j s, j s + s) for j < k' = ceil(T / s); a partial last window averages (or takes the
max of) the positions present, and conv sees zeros past the end.

linformer_share, with the parameter names attnlab declares (LinformerKernel below holds them the
same way; conv kernels are [s] instead of [k, n]):
  none       blocks.{i}.attn.E, .F  [H, k, n]
  headwise   blocks.{i}.attn.E, .F  [k, n]
  kv         blocks.{i}.attn.E      [k, n], F = E
  layerwise  linformer.E            [k, n], F = E, one tensor for every layer (the model owns it
             and passes it to each layer's forward, so state_dict lists it once)

For every proj x share, at T = n (n = 8, k = 4) and at T < n (n = 12, k = 3, T = 10, so pooling
ends in a partial window), the script draws float32 q, k, v, E, F and weights R, then computes in
float64 the output, P and the gradients of f = sum(out * R). Writes
tests/fixtures/attn_linformer.safetensors with, per case <proj>_<share>_<full|short>:
  <case>/q, k, v      [B, H, T, key_size or head_size] (float32)
  <case>/E, <case>/F  the parameters, as the share mode has them (float32)
  <case>/R            [B, H, T, head_size]
  <case>/out          [B, H, T, head_size]
  <case>/probs        [B, H, T, k']
  <case>/grad_<x>     df/dx for every input above
and metadata "<case>" = the case's config as JSON, "cases" = their names, comma-separated.
tests/test_attn_linformer.c runs the same cases in C and compares.

Usage: /usr/bin/python3 tests/reference/attention_linformer.py tests/fixtures/attn_linformer.safetensors
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

PROJS = ["linear", "mean", "max", "conv"]
SHARES = ["none", "headwise", "kv", "layerwise"]
# name -> (context n, linformer_k, length T)
LENGTHS = {"full": (8, 4, 8), "short": (12, 3, 10)}
B, H, DK, DV = 2, 3, 4, 5


def param_shapes(proj, share, n, k):
    """The kernel's parameters in attnlab's order: [("E", shape)] or [("E", ..), ("F", ..)]."""
    if proj in ("mean", "max"):
        return []
    one = [k, n] if proj == "linear" else [n // k]
    if share == "none":
        one = [H] + one
    names = ["E", "F"] if share in ("none", "headwise") else ["E"]
    return [(name, one) for name in names]


def project(x, w, proj, n, k):
    """x [B, H, T, d] -> x' [B, H, k', d]; w is E [k, n] / [H, k, n] or a conv kernel [s] / [H, s]."""
    T = x.shape[2]
    if proj == "linear":
        w = w[..., :T]  # a shorter input uses the first T columns
        return torch.einsum("hjt,bhtd->bhjd" if w.dim() == 3 else "jt,bhtd->bhjd", w, x)
    s = n // k
    kp = -(-T // s)
    pad = kp * s - T
    if proj == "max":
        xp = F.pad(x, (0, 0, 0, pad), value=-math.inf).reshape(B, H, kp, s, x.shape[3])
        return xp.max(dim=3).values
    xp = F.pad(x, (0, 0, 0, pad)).reshape(B, H, kp, s, x.shape[3])
    if proj == "mean":
        counts = torch.tensor([min(s, T - j * s) for j in range(kp)], dtype=x.dtype)
        return xp.sum(dim=3) / counts.view(1, 1, kp, 1)
    return torch.einsum("hr,bhjrd->bhjd" if w.dim() == 2 else "r,bhjrd->bhjd", w, xp)  # conv


def project_torch_ops(x, w, proj, n, k):
    """The same with PyTorch's pooling and convolution layers, as a cross-check."""
    T, d = x.shape[2], x.shape[3]
    s = n // k
    rows = x.permute(0, 1, 3, 2).reshape(B * H * d, 1, T)  # one channel per (b, h, feature)
    if proj == "mean":
        y = F.avg_pool1d(rows, s, s, ceil_mode=True)
    elif proj == "max":
        y = F.max_pool1d(rows, s, s, ceil_mode=True)
    else:
        pad = -(-T // s) * s - T
        rows = F.pad(rows, (0, pad))
        if w.dim() == 1:
            y = F.conv1d(rows, w.view(1, 1, s), stride=s)
        else:  # per head: the heads as groups
            y = F.conv1d(rows.reshape(B, H, d, -1).permute(0, 2, 1, 3).reshape(B * d, H, -1), w.view(H, 1, s),
                         stride=s, groups=H).reshape(B, d, H, -1).permute(0, 2, 1, 3).reshape(B * H * d, 1, -1)
    return y.reshape(B, H, d, -1).permute(0, 1, 3, 2)


def linformer(q, k, v, E, Fm, proj, n, kk):
    """out, P for per-head q, k [B, H, T, key_size], v [B, H, T, head_size]."""
    kp, vp = project(k, E, proj, n, kk), project(v, Fm, proj, n, kk)
    p = torch.softmax(q @ kp.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    return p @ vp, p


class LinformerKernel(nn.Module):
    """The kernel with its parameters named as attnlab names them under blocks.{i}.attn (none,
    headwise, kv: E, and F unless F = E); under layerwise the model owns linformer.E and passes
    it in as `shared`. Initialised as attnlab does: N(0, 1/fan_in), fan_in = n (linear) or n/k
    (conv)."""

    def __init__(self, proj, share, n, k):
        super().__init__()
        self.proj, self.share, self.n, self.k = proj, share, n, k
        for name, shape in param_shapes(proj, share, n, k) if share != "layerwise" else []:
            self.register_parameter(name, nn.Parameter(torch.randn(shape) / math.sqrt(shape[-1])))

    def forward(self, q, k, v, shared=None):
        E = shared if self.share == "layerwise" else getattr(self, "E", None)
        return linformer(q, k, v, E, getattr(self, "F", E), self.proj, self.n, self.k)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: attention_linformer.py OUT.safetensors")
    gen = torch.Generator().manual_seed(20260401)

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    tensors, meta, names = {}, {}, []
    for proj in PROJS:
        for share in SHARES:
            for length, (n, k, T) in LENGTHS.items():
                case = f"{proj}_{share}_{length}"
                names.append(case)
                inputs = {"q": randn(B, H, T, DK), "k": randn(B, H, T, DK), "v": randn(B, H, T, DV)}
                params = {name: randn(*shape) / math.sqrt(shape[-1]) for name, shape in param_shapes(proj, share, n, k)}
                R = randn(B, H, T, DV)

                x = {name: t.double().requires_grad_(True) for name, t in inputs.items()}
                module = LinformerKernel(proj, share, n, k).double()
                shared = None
                if share == "layerwise":
                    shared = params["E"].double().requires_grad_(True) if params else None
                else:  # strict: exactly the names and shapes attnlab declares
                    module.load_state_dict({name: t.double() for name, t in params.items()})
                out, probs = module(x["q"], x["k"], x["v"], shared)
                (out * R.double()).sum().backward()
                grads = {name: t.grad for name, t in x.items()}
                for name in params:
                    grads[name] = shared.grad if share == "layerwise" else getattr(module, name).grad

                if proj != "linear":  # the reshape formulation against PyTorch's own layers
                    with torch.no_grad():
                        w = {name: t.double() for name, t in params.items()}
                        for leaf, p in (("k", w.get("E")), ("v", w.get("F", w.get("E")))):
                            a = project(x[leaf].detach(), p, proj, n, k)
                            b = project_torch_ops(x[leaf].detach(), p, proj, n, k)
                            assert torch.allclose(a, b, atol=1e-12), f"{case}: {proj} differs from torch's op"

                for name, t in {**inputs, **params}.items():
                    tensors[f"{case}/{name}"] = t
                tensors[f"{case}/R"] = R
                tensors[f"{case}/out"] = out
                tensors[f"{case}/probs"] = probs
                for name, g in grads.items():
                    tensors[f"{case}/grad_{name}"] = g
                meta[case] = json.dumps({"proj": proj, "share": share, "context": n, "k": k, "batch": B, "heads": H,
                                         "length": T, "key_size": DK, "head_size": DV}, sort_keys=True)
    meta.update({"format": "attnlab-fixture", "made_by": "tests/reference/attention_linformer.py",
                 "cases": ",".join(names)})
    safetensors_io.save(sys.argv[1], tensors, meta)
    print(f"wrote {len(names)} cases to {sys.argv[1]}")


if __name__ == "__main__":
    main()
