#!/usr/bin/python3
"""optimizers.py: PyTorch references for every optimizer of optim/ (optim/optimizers.c).

Each case runs three training steps in float64 on four parameters, as adamw.py does (its
parameters, micro-batches, clipping and schedule): two micro-batches' float32 gradients added
up, clip_grad_norm_, the optimizer's step with weight decay for matrices only (two param
groups), and zero_grad.

  adamw          torch.optim.AdamW, betas (0.9, 0.95), eps 1e-8 (foreach=False)
  sgd            torch.optim.SGD, momentum 0.9 (dampening 0, foreach=False; decay as L2)
  sgd_nesterov   the same with nesterov=True
  sgd_plain      momentum 0: no buffer
  lion           Lion as Chen et al. 2023 give it ("Symbolic Discovery of Optimization
                 Algorithms", Algorithm 2), written here from the paper (torch has none):
                   c = b1 m + (1 - b1) g;  w = w - lr (sign(c) + wd w);  m = b2 m + (1 - b2) g
                 betas (0.9, 0.99), at a tenth of the others' learning rate

Writes tests/fixtures/optimizers.safetensors with, per case C:
  C/init/<name>                    the float32 starting values
  C/step<k>/grad<j>/<name>         micro-batch j's gradient at step k (float32)
  C/step<k>/<name>                 the parameter after step k
  C/step<k>/state<s>/<name>        the optimizer's state slab s after step k, in the order
                                   the C optimizer keeps them (AdamW: exp_avg, exp_avg_sq;
                                   SGD: momentum_buffer; Lion: exp_avg)
  C/lr, C/norm                     each step's learning rate and gradient norm
and the metadata "C/optimizer" (the optimizer's name), "C/options" (its options as JSON, as
the option table names them) and "cases". tests/test_optim.c replays every case through the
optimizer registry in float32, and refuses an optimizer without a case.

Usage: /usr/bin/python3 tests/reference/optimizers.py tests/fixtures/optimizers.safetensors
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

STEPS, MICRO, MAX_NORM, WEIGHT_DECAY = 3, 2, 1.0, 0.1
LR, MIN_LR, WARMUP, TOTAL = 0.05, 0.005, 1, 4  # the schedule (optim/schedule.c's cosine)
GRAD_SCALE = [1.5, 0.06, 1.0]  # step norms about 12, 0.5, 8 against MAX_NORM
PARAMS = [("w", (4, 3)), ("b", (4,)), ("emb", (5, 3)), ("gain", (3,))]


class Lion(torch.optim.Optimizer):
    """Lion from the paper's Algorithm 2, decoupled weight decay as the group gives it."""

    def __init__(self, params, lr, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m, g = state["exp_avg"], p.grad
                update = torch.sign(b1 * m + (1 - b1) * g) + group["weight_decay"] * p
                p.sub_(group["lr"] * update)
                m.mul_(b2).add_((1 - b2) * g)


# case -> (optimizer, its options as the option table names them, the torch optimizer, state keys)
CASES = {
    "adamw": ("adamw", {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8},
              lambda g: torch.optim.AdamW(g, lr=LR, betas=(0.9, 0.95), eps=1e-8, foreach=False),
              ("exp_avg", "exp_avg_sq"), 1.0),
    "sgd": ("sgd", {"momentum": 0.9, "nesterov": False},
            lambda g: torch.optim.SGD(g, lr=LR, momentum=0.9, foreach=False), ("momentum_buffer",), 1.0),
    "sgd_nesterov": ("sgd", {"momentum": 0.9, "nesterov": True},
                     lambda g: torch.optim.SGD(g, lr=LR, momentum=0.9, nesterov=True, foreach=False),
                     ("momentum_buffer",), 1.0),
    "sgd_plain": ("sgd", {"momentum": 0.0, "nesterov": False},
                  lambda g: torch.optim.SGD(g, lr=LR, momentum=0.0, foreach=False), (), 1.0),
    "lion": ("lion", {"lion_beta1": 0.9, "lion_beta2": 0.99},
             lambda g: Lion(g, lr=LR, betas=(0.9, 0.99)), ("exp_avg",), 0.1),
}


def lr_at(step, scale):
    if step < WARMUP:
        return scale * LR * (step + 1) / WARMUP
    p = (step - WARMUP) / (TOTAL - WARMUP)
    return scale * (MIN_LR + (LR - MIN_LR) * 0.5 * (1 + math.cos(math.pi * p)))


def run(case, out, meta, seed):
    name_opt, options, make, keys, lr_scale = CASES[case]
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in PARAMS:
        x = torch.randn(shape, generator=gen).float()
        out[f"{case}/init/{name}"] = x.clone()
        params[name] = torch.nn.Parameter(x.double())
    decay = [params[n] for n, s in PARAMS if len(s) >= 2]
    no_decay = [params[n] for n, s in PARAMS if len(s) < 2]
    opt = make([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}])
    lrs, norms = [], []
    for k in range(STEPS):
        for j in range(MICRO):
            for name, shape in PARAMS:
                g = (torch.randn(shape, generator=gen) * GRAD_SCALE[k]).float()
                out[f"{case}/step{k}/grad{j}/{name}"] = g.clone()
                if params[name].grad is None:
                    params[name].grad = torch.zeros(shape, dtype=torch.float64)
                params[name].grad += g.double()
        lr = lr_at(k, lr_scale)
        for group in opt.param_groups:
            group["lr"] = lr
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM)
        opt.step()
        opt.zero_grad(set_to_none=False)
        lrs.append(lr)
        norms.append(norm.item())
        for name, _ in PARAMS:
            p = params[name]
            out[f"{case}/step{k}/{name}"] = p.detach().clone()
            for s, key in enumerate(keys):
                out[f"{case}/step{k}/state{s}/{name}"] = opt.state[p][key].clone()
    assert norms[0] > MAX_NORM and norms[1] < MAX_NORM and norms[2] > MAX_NORM, norms
    out[f"{case}/lr"] = torch.tensor(lrs)
    out[f"{case}/norm"] = torch.tensor(norms)
    meta[f"{case}/optimizer"] = name_opt
    meta[f"{case}/options"] = json.dumps(options)
    meta[f"{case}/lr_scale"] = str(lr_scale)
    print(f"{case}: lrs {', '.join(f'{x:.4g}' for x in lrs)}, norms {', '.join(f'{x:.4g}' for x in norms)}")


def main(path):
    out, meta = {}, {"format": "attnlab-fixture", "script": "tests/reference/optimizers.py",
                     "torch": torch.__version__, "cases": ",".join(CASES), "steps": str(STEPS),
                     "micro_batches": str(MICRO), "weight_decay": str(WEIGHT_DECAY), "max_norm": str(MAX_NORM),
                     "schedule": f"cosine lr={LR} min_lr={MIN_LR} warmup={WARMUP} total={TOTAL}"}
    for i, case in enumerate(CASES):
        run(case, out, meta, 4242 + i)
    safetensors_io.save(path, out, meta)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: optimizers.py OUT.safetensors")
    main(sys.argv[1])
