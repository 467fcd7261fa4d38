#!/usr/bin/python3
"""torch_reference.py: the reference configuration's training step in PyTorch.

The same model as layers/model.c (tests/reference/gpt.py checks that the two
agree number for number), written the way a PyTorch user would write it for
speed on a CPU: nn.Linear, nn.LayerNorm, F.gelu(approximate="tanh"), one
fused qkv projection, masked softmax attention, AdamW. `./bench --vs-torch`
runs it with the same sizes and threads and prints the ratio.

Prints the median tok/s over --steps timed steps after 3 warm-up steps.
"""

import argparse
import math
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


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("d_model", 256), ("heads", 4), ("context", 256), ("batch", 16),
                          ("steps", 10), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a.layers, a.d_model, a.heads, a.context)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, 256, (a.batch, a.context))
    targets = torch.randint(0, 256, (a.batch, a.context))
    times = []
    for step in range(3 + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(ids, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"  torch {torch.__version__}, {torch.get_num_threads()} threads, median {med * 1e3:.1f} ms/step")
    print(f"  throughput {a.batch * a.context / med:.0f} tok/s")


if __name__ == "__main__":
    main()
