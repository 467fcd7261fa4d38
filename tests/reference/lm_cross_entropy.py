#!/usr/bin/python3
"""lm_cross_entropy.py: PyTorch reference for the fused LM head + cross-entropy
(layers/lm_cross_entropy.c):

    loss = F.cross_entropy(x @ W.T, targets, ignore_index=-1)

the mean over the rows whose target is not -1. The cases are sized to cross
the op's blocks of 64 rows and its groups of 1024 rows, with some targets
ignored; "tied" takes x = W[ids] + h, W being both the embedding and the head
(as the model's tied embeddings), so W's gradient has both parts.

Writes tests/fixtures/lm_cross_entropy.safetensors with, per case:
  <case>/x [B, T, d] (or <case>/ids [B, T] and <case>/h [B, T, d] for "tied"),
  <case>/w [V, d], <case>/targets [B, T] (as F32, -1 = not counted),
  <case>/R [1] (the loss's weight), <case>/out [1] (the loss),
  <case>/grad_x (or grad_h), <case>/grad_w: d (R loss) / d input,
and metadata "cases" = the names, comma-separated. Computed in float64 from the
float32 inputs. tests/test_lm_cross_entropy.c runs the same cases.

Usage: /usr/bin/python3 tests/reference/lm_cross_entropy.py tests/fixtures/lm_cross_entropy.safetensors
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

F = torch.nn.functional
IGNORE = -1

# name, B, T, d, V, every how many rows a target is ignored (0: none), tied
CASES = [
    ("blocks", 2, 70, 6, 11, 5, False),
    ("groups", 2, 600, 4, 7, 9, False),
    ("tied", 2, 40, 6, 13, 0, True),
]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/lm_cross_entropy.safetensors"
    gen = torch.Generator().manual_seed(20261124)
    tensors = {}
    for name, b, t, d, v, every, tied in CASES:
        w32 = torch.randn((v, d), generator=gen).float()
        targets = torch.randint(0, v, (b, t), generator=gen)
        if every:
            targets.view(-1)[::every] = IGNORE
        w = w32.double().requires_grad_(True)
        if tied:
            ids = torch.randint(0, v, (b, t), generator=gen)
            h32 = torch.randn((b, t, d), generator=gen).float()
            h = h32.double().requires_grad_(True)
            x = F.embedding(ids, w) + h
            tensors[f"{name}/ids"] = ids.float()
            tensors[f"{name}/h"] = h32
            leaf, leaf_name = h, "h"
        else:
            x32 = torch.randn((b, t, d), generator=gen).float()
            x = x32.double().requires_grad_(True)
            tensors[f"{name}/x"] = x32
            leaf, leaf_name = x, "x"
        loss = F.cross_entropy((x @ w.T).reshape(-1, v), targets.reshape(-1), ignore_index=IGNORE)
        r = torch.randn((1,), generator=gen).float()
        (loss * r.double()).sum().backward()
        tensors[f"{name}/w"] = w32
        tensors[f"{name}/targets"] = targets.float()
        tensors[f"{name}/R"] = r
        tensors[f"{name}/out"] = loss.detach().reshape(1)
        tensors[f"{name}/grad_{leaf_name}"] = leaf.grad
        tensors[f"{name}/grad_w"] = w.grad
    safetensors_io.save(out_path, tensors, {"format": "attnlab-fixture", "made_by": "tests/reference/lm_cross_entropy.py",
                                            "torch": torch.__version__,
                                            "cases": ",".join(c[0] for c in CASES)})
    print(f"wrote {out_path}: {len(CASES)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
