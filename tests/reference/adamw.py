#!/usr/bin/python3
"""adamw.py: PyTorch reference for optim/ (AdamW, gradient clipping, the cosine schedule).

Runs STEPS training steps over four parameters shaped like a model's (a linear weight
and its bias, an embedding, a norm gain), with two param groups as attnlab uses them:
weight decay for ndim >= 2, none for the rest. Each step is what a training loop does:
the gradients of MICRO micro-batches added into .grad (as backward adds), then
clip_grad_norm_, torch.optim.AdamW's step and zero_grad(set_to_none=False). attnlab
does the last three as one pass (optim/adamw.c: the clipping factor applied as the
gradient is read, the gradient zeroed once used), so the fixture pins down that the
fused pass clips like clip_grad_norm_ and leaves the gradients at 0 for the next
step's micro-batches to add into.
Everything runs in float64 from float32 starting values and gradients, so the
fixture is the exact answer the float32 C code is compared against.

Gradients are chosen so that clipping is active on steps 0 and 2 and not on step 1.

Writes tests/fixtures/adamw.safetensors with:
  init/<name>           the parameters before the first step
  step<k>/grad<j>/<name>   the gradient of micro-batch j at step k (the step's gradient,
                        before clipping, is their sum)
  step<k>/<name>        the parameter after step k
  step<k>/exp_avg/<name>, step<k>/exp_avg_sq/<name>   AdamW's moments after step k
  lr                    [STEPS] the learning rate of each step (cosine schedule)
  norm                  [STEPS] the gradient norm clip_grad_norm_ returned (before clipping)
tests/test_optim.c replays the steps in C and compares.

Usage: /usr/bin/python3 tests/reference/adamw.py tests/fixtures/adamw.safetensors
(Debian's python3-torch provides torch.)
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

STEPS = 3
BETAS = (0.9, 0.95)
EPS = 1e-8
WEIGHT_DECAY = 0.1
MAX_NORM = 1.0
# The schedule the lrs come from; tests/test_optim.c checks lr_at gives the same.
LR, MIN_LR, WARMUP, TOTAL = 0.05, 0.005, 1, 4
# Micro-batches per step: their gradients add up to the step's.
MICRO = 2
# How large each micro-batch gradient is: step norms about 12, 0.5, 8 against MAX_NORM = 1.
GRAD_SCALE = [1.5, 0.06, 1.0]

PARAMS = [  # name, shape, initial value
    ("w", (4, 3), "randn"),    # a linear weight: decayed
    ("b", (4,), "randn"),      # its bias: not decayed
    ("emb", (5, 3), "randn"),  # an embedding table: decayed
    ("gain", (3,), "ones"),    # a norm gain: not decayed
]


def lr_at(step):
    """Linear warmup, then cosine decay to MIN_LR (the formula of optim/schedule.c)."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    if step >= TOTAL:
        return MIN_LR
    p = (step - WARMUP) / (TOTAL - WARMUP)
    return MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * p))


def main(path):
    torch.manual_seed(1234)
    out = {}
    params = {}
    for name, shape, init in PARAMS:
        x = torch.randn(shape) if init == "randn" else torch.ones(shape)
        x = x.float()  # float32 values, so the C side starts from exactly the same numbers
        out[f"init/{name}"] = x.clone()
        params[name] = torch.nn.Parameter(x.double())
    decay = [params[n] for n, s, _ in PARAMS if len(s) >= 2]
    no_decay = [params[n] for n, s, _ in PARAMS if len(s) < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=LR, betas=BETAS, eps=EPS, foreach=False)
    lrs, norms = [], []
    for k in range(STEPS):
        for j in range(MICRO):
            for name, shape, _ in PARAMS:
                g = (torch.randn(shape) * GRAD_SCALE[k]).float()
                out[f"step{k}/grad{j}/{name}"] = g.clone()
                if params[name].grad is None:
                    params[name].grad = torch.zeros(shape, dtype=torch.float64)
                params[name].grad += g.double()
        lr = lr_at(k)
        for group in opt.param_groups:
            group["lr"] = lr
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM)
        opt.step()
        opt.zero_grad(set_to_none=False)
        lrs.append(lr)
        norms.append(norm.item())
        print(f"step {k}: lr {lr:.6g}, grad norm {norm.item():.6g} "
              f"({'clipped' if norm.item() > MAX_NORM else 'not clipped'})")
        for name, _, _ in PARAMS:
            p = params[name]
            st = opt.state[p]
            out[f"step{k}/{name}"] = p.detach().clone()
            out[f"step{k}/exp_avg/{name}"] = st["exp_avg"].clone()
            out[f"step{k}/exp_avg_sq/{name}"] = st["exp_avg_sq"].clone()
    assert norms[0] > MAX_NORM and norms[1] < MAX_NORM and norms[2] > MAX_NORM, norms
    out["lr"] = torch.tensor(lrs)
    out["norm"] = torch.tensor(norms)
    meta = {
        "format": "attnlab-fixture", "script": "tests/reference/adamw.py", "torch": torch.__version__,
        "steps": str(STEPS), "micro_batches": str(MICRO), "betas": f"{BETAS[0]},{BETAS[1]}", "eps": str(EPS),
        "weight_decay": str(WEIGHT_DECAY), "max_norm": str(MAX_NORM),
        "schedule": f"cosine lr={LR} min_lr={MIN_LR} warmup={WARMUP} total={TOTAL}",
    }
    safetensors_io.save(path, out, meta)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: adamw.py OUT.safetensors")
    main(sys.argv[1])
