#!/usr/bin/python3
"""torch_scaling.py: `./bench --scaling --vs-torch`'s PyTorch side.

One causal cosFormer attention layer (Qin et al. 2022), forward + backward,
as a PyTorch user would write it for speed on a CPU: one fused qkv
nn.Linear, the chunked form of causal linear attention (intra-chunk scores
under the causal mask, plus the running k v^T state of the earlier chunks,
the same algorithm as layers/attention/linear.c) vectorised over the chunks
with a cumulative sum of the per-chunk states, and autograd for the
backward. The same sizes as ./bench --scaling: d_model 256, 4 heads, B 1,
the same chunk and threads.

Sweeps the lengths --rounds times; prints, per length, the median over the
rounds of the median of --reps timed steps after one warm-up step, the
fastest step, the peak RSS of the process while that length ran, and how far
that peak is above the RSS at the length's start (the layer's own memory:
activations, saved tensors and gradients; the library itself is in both):
  torch T 8192: 210.3 ms (fastest 201.2), peak RSS 600.1 MiB, 433.0 above the start
"""

import argparse
import math
import statistics
import time

import torch

nn = torch.nn
F = torch.nn.functional
EPS = 1e-6  # the cosFormer reference's clamp on the denominator


def cosformer_causal(q, k, v, chunk):
    """q, k, v [B, H, T, d] -> [B, H, T, d]; relu features, cos re-weighting."""
    b, h, t, d = q.shape
    theta = torch.arange(1, t + 1, dtype=q.dtype) * (math.pi / 2 / t)
    sn, cs = theta.sin()[:, None], theta.cos()[:, None]
    q, k = F.relu(q), F.relu(k)
    qf = torch.cat([q * sn, q * cs], -1)  # [B, H, T, 2d]
    kf = torch.cat([k * sn, k * cs], -1)
    v1 = torch.cat([v, torch.ones(b, h, t, 1, dtype=v.dtype)], -1)  # den rides along
    pad = (-t) % chunk
    if pad:
        qf, kf, v1 = (F.pad(x, (0, 0, 0, pad)) for x in (qf, kf, v1))
    n = (t + pad) // chunk
    qf, kf, v1 = (x.view(b, h, n, chunk, x.shape[-1]) for x in (qf, kf, v1))
    mask = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    intra = (qf @ kf.transpose(-1, -2)).masked_fill(~mask, 0.0) @ v1
    kv = kf.transpose(-1, -2) @ v1  # [B, H, n, 2d, d + 1]
    state = kv.cumsum(2) - kv  # the sum over the earlier chunks
    out = (intra + qf @ state).view(b, h, n * chunk, d + 1)[:, :, :t]
    return out[..., :d] / out[..., d:].clamp_min(EPS)


def check():
    """cosformer_causal against the O(T^2) form, in float64, at a T that is not a
    multiple of the chunk; returns the largest difference."""
    torch.manual_seed(1)
    b, h, t, d = 1, 2, 150, 8
    q, k, v = (torch.randn(b, h, t, d, dtype=torch.float64) for _ in range(3))
    theta = torch.arange(1, t + 1, dtype=torch.float64) * (math.pi / 2 / t)
    s = (F.relu(q) @ F.relu(k).transpose(-1, -2)) * torch.cos(theta[:, None] - theta[None, :])
    s = s.tril()
    want = (s @ v) / s.sum(-1, keepdim=True).clamp_min(EPS)
    return (cosformer_causal(q, k, v, 64) - want).abs().max().item()


class Layer(nn.Module):
    def __init__(self, d, heads, chunk):
        super().__init__()
        self.heads, self.chunk = heads, chunk
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = cosformer_causal(q, k, v, self.chunk)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


def status_mib(key):
    """VmHWM (the peak RSS) or VmRSS from /proc/self/status, in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def reset_rss_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192,16384")
    for name, default in [("d_model", 256), ("heads", 4), ("chunk", 64), ("reps", 5), ("rounds", 1), ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--check", action="store_true", help="only check the chunked form against the O(T^2) one")
    a = ap.parse_args()
    if a.check:
        diff = check()
        print(f"chunked against O(T^2), float64: largest difference {diff:.3g}")
        raise SystemExit(0 if diff < 1e-10 else 1)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layer = Layer(a.d_model, a.heads, a.chunk)
    lengths = [int(s) for s in a.lengths.split(",")]
    medians = {t: [] for t in lengths}
    fastest = {t: float("inf") for t in lengths}
    growth = {t: 0.0 for t in lengths}
    peaks = {t: 0.0 for t in lengths}
    for _ in range(a.rounds):  # as ./bench --scaling --rounds: sweeps, then each length's median
        for t in lengths:
            x = torch.randn(1, t, a.d_model, requires_grad=True)
            seed = torch.randn(1, t, a.d_model)
            reset_rss_peak()
            start = status_mib("VmRSS")
            times = []
            for rep in range(1 + a.reps):
                t0 = time.perf_counter()
                layer.zero_grad(set_to_none=True)
                x.grad = None
                layer(x).backward(seed)
                if rep:
                    times.append(time.perf_counter() - t0)
            medians[t].append(statistics.median(times))
            fastest[t] = min(fastest[t], min(times))
            peak = status_mib("VmHWM")
            peaks[t] = max(peaks[t], peak)
            growth[t] = max(growth[t], peak - start)
    for t in lengths:
        print(f"torch T {t}: {statistics.median(medians[t]) * 1e3:.1f} ms (fastest {fastest[t] * 1e3:.1f}), "
              f"peak RSS {peaks[t]:.1f} MiB, {growth[t]:.1f} above the start", flush=True)

if __name__ == "__main__":
    main()
