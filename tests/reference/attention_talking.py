#!/usr/bin/python3
"""attention_talking.py: PyTorch reference for Talking-Heads attention (Shazeer et al. 2020),
the softmax kernel's talking_heads = pre | post | both (layers/attention/softmax.c).

Per batch element, with s = 1/sqrt(key_size) and W[h, h'] the weight of input head h' in
output head h (nn.Linear(H, H, bias=False) over the head axis, the layout of the parameters
blocks.{i}.attn.talking_pre.weight and talking_post.weight):

    S_h  = s Q_h K_h^T
    A_h  = sum_h' Wpre[h, h'] S_h'       (pre, both; else A = S)
    P_h  = softmax(A_h + mask)           (causal: keys j > i removed, after the mix)
    P'_h = sum_h' Wpost[h, h'] P_h'      (post, both; else P' = P)
    O_h  = P'_h V_h

For each variant (pre, post, both) x (causal, bidirectional) the script draws float32 q, k
[B, H, T, key_size], v [B, H, T, head_size] with key_size != head_size, random mixing
matrices (not the identity, not symmetric) and an output gradient dO, then computes in float64
the output, P' and the gradients of sum(O * dO) with respect to q, k, v and each matrix.

Writes tests/fixtures/attn_talking.safetensors with, per variant <name> (e.g. "both_causal"):
  <name>/q, <name>/k, <name>/v, <name>/dout            the inputs (float32)
  <name>/talking_pre, <name>/talking_post              the matrices the variant uses
  <name>/out, <name>/probs                              O [B, H, T, head_size], P' [B, H, T, T]
  <name>/grad_q, grad_k, grad_v, grad_talking_pre, grad_talking_post
and the metadata "variants" (JSON: name, talking_heads, causal) and "shape" (JSON: B, H, T,
key_size, head_size). tests/test_attn_talking.c runs the same variants in C and compares.

Usage: /usr/bin/python3 tests/reference/attention_talking.py tests/fixtures/attn_talking.safetensors
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

# Keep in step with tests/test_attn_talking.c (it reads "shape" and "variants").
B, H, T, KEY_SIZE, HEAD_SIZE = 2, 3, 7, 5, 4
MODES = ("pre", "post", "both")


def mix_heads(w, x):
    """out[b, g] = sum_h w[g, h] x[b, h] for x [B, H, T, T]."""
    return torch.einsum("gh,bhij->bgij", w, x)


def talking_attention(q, k, v, w_pre, w_post, causal):
    """Returns (O, P'); w_pre / w_post may be None."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if w_pre is not None:
        s = mix_heads(w_pre, s)  # the raw logits, before the mask
    if causal:
        t = s.shape[-1]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(s, -1)
    if w_post is not None:
        p = mix_heads(w_post, p)
    return p @ v, p


def run_variant(name, mode, causal, gen, out):
    f32 = dict(generator=gen, dtype=torch.float32)
    q = torch.randn(B, H, T, KEY_SIZE, **f32)
    k = torch.randn(B, H, T, KEY_SIZE, **f32)
    v = torch.randn(B, H, T, HEAD_SIZE, **f32)
    dout = torch.randn(B, H, T, HEAD_SIZE, **f32)
    # Mixing matrices far from the identity (and from symmetric): a transposed
    # or skipped mix changes every output.
    mats = {}
    if mode in ("pre", "both"):
        mats["talking_pre"] = 0.7 * torch.randn(H, H, **f32)
    if mode in ("post", "both"):
        mats["talking_post"] = 0.7 * torch.randn(H, H, **f32)

    leaves = {"q": q, "k": k, "v": v, **mats}
    x = {n: t.double().requires_grad_(True) for n, t in leaves.items()}
    o, p = talking_attention(x["q"], x["k"], x["v"], x.get("talking_pre"), x.get("talking_post"), causal)
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
    gen = torch.Generator().manual_seed(20261124)
    out = {}
    variants = []
    for mode in MODES:
        for causal in (True, False):
            name = f"{mode}_{'causal' if causal else 'bidirectional'}"
            run_variant(name, mode, causal, gen, out)
            variants.append(dict(name=name, talking_heads=mode, causal=causal))
    meta = {"format": "attnlab-fixture", "made_by": "tests/reference/attention_talking.py",
            "torch": torch.__version__, "variants": json.dumps(variants),
            "shape": json.dumps(dict(B=B, H=H, T=T, key_size=KEY_SIZE, head_size=HEAD_SIZE))}
    safetensors_io.save(path, out, meta)
    print(f"wrote {path}: {len(variants)} variants, {len(out)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: attention_talking.py OUT.safetensors")
    main(sys.argv[1])
