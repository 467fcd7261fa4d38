#!/usr/bin/python3
"""torch_reference.py: the reference configuration's training step in PyTorch.

The same model as layers/model.c (tests/reference/gpt.py checks that the two
agree number for number), written the way a PyTorch user would write it for
speed on a CPU: nn.Linear, nn.LayerNorm, F.gelu(approximate="tanh"), one
fused qkv projection, masked softmax attention, AdamW. `./bench --vs-torch`
runs it with the same sizes, first briefly under a few thread and OpenMP
settings (`--warmup 1 --steps 3`, the variables set in its environment), then
in rounds beside attnlab under the fastest, and prints the ratio.

Prints the threads and ATen's CPU capability, the BLAS libraries this process
mapped and OpenBLAS's kernel (so that the bench can check they are attnlab's),
and the median tok/s over --steps timed steps after --warmup warm-up steps.

--precision bf16 runs the forward pass and the loss under
torch.autocast("cpu", dtype=torch.bfloat16), as a PyTorch user trains in bf16
on a CPU: products in bf16 through oneDNN, fp32 master weights and AdamW.
"""

import argparse
import ctypes
import math
import os
import re
import statistics
import time

import torch

nn = torch.nn
F = torch.nn.functional


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, mask):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d // h))
        p = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
        x = x + self.o((p @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, d, heads, context, vocab=256):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids, targets):
        t = ids.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        x = self.tok_emb(ids) + self.pos_emb.weight[:t]
        for blk in self.blocks:
            x = blk(x, mask)
        logits = self.ln_f(x) @ self.tok_emb.weight.T
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def blas_in_use():
    """The BLAS libraries mapped into this process and OpenBLAS's kernel, as
    "lib1, lib2; OpenBLAS kernel Haswell" (Linux; else what can be said)."""
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if re.search(r"/lib[^/]*(blas|lapack)[^/]*\.so", line)})
    except OSError:
        return "unknown (no /proc/self/maps)"
    kernel = "not OpenBLAS"
    for lib in libs:
        if "openblas" in os.path.basename(lib):
            openblas = ctypes.CDLL(lib)
            openblas.openblas_get_corename.restype = ctypes.c_char_p
            kernel = "OpenBLAS kernel " + openblas.openblas_get_corename().decode()
    return f"{', '.join(libs) or 'none'}; {kernel}"


def cpu_capability():
    """The vector width ATen's kernels use (ATEN_CPU_CAPABILITY), e.g. AVX2."""
    found = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("d_model", 256), ("heads", 4), ("context", 256), ("batch", 16),
                          ("steps", 10), ("warmup", 3), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"  torch {torch.__version__}: {torch.get_num_threads()} threads (interop {torch.get_num_interop_threads()}), "
          f"ATen CPU capability {cpu_capability()}, precision {a.precision}"
          + (" (autocast bf16)" if a.precision == "bf16" else ""))
    print(f"  BLAS: {blas_in_use()}", flush=True)
    torch.manual_seed(0)
    model = GPT(a.layers, a.d_model, a.heads, a.context)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, 256, (a.batch, a.context))
    targets = torch.randint(0, 256, (a.batch, a.context))
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = model(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"  {a.steps} timed steps after {a.warmup} warm-up: median {med * 1e3:.1f} ms/step")
    print(f"  throughput {a.batch * a.context / med:.0f} tok/s")


if __name__ == "__main__":
    main()
