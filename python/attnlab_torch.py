"""attnlab_torch.py: load an attnlab checkpoint into PyTorch and score it.

Needing only torch and numpy (Debian's python3-torch provides both), and the three modules
beside it, which `import attnlab_torch` brings in whole: attnlab_tables (the C side's tables,
read from attnlab_tables.json, which make writes from ./train --describe, and a config checked
against them), attnlab_safetensors (files and checkpoints checked as the C loader checks them)
and attnlab_model (the model in PyTorch):

    import attnlab_torch as at
    model = at.load("runs/rope")                  # a run folder or a .safetensors checkpoint
    logits = model(torch.tensor([[72, 105]]))     # [B, T, vocab]
    bpb = at.score(model, open("data/brown.txt", "rb").read(), T=256, max_windows=8)

The model is the forward pass of layers/model.c, written as in the project's PyTorch
references (tests/reference/gpt.py and tests/reference/attention_*.py): a pre-norm decoder,
x = tok_emb(ids) (+ pos_emb[:T] for pos=learned, + the sinusoidal table / sqrt(d) for
pos=sinusoidal); each block x += attn(ln1(x)); x += mlp(ln2(x)); logits = ln_f(x) W^T with W
the token embedding when tied, lm_head.weight otherwise. Its state_dict names are the
checkpoint's, so load_state_dict(strict=True) checks every name and shape.

Supported: attn=softmax with every pos value the C tables list whose hooks have a PyTorch
form in attnlab_model (each built-in one); window, logn, bca; talking_heads; key_size /
head_size; norm layernorm / rmsnorm; tie_embeddings; objective clm and mlm (vocabulary 257,
mask id 256, bidirectional attention). attn=linear and attn=cosformer (phi, leaky_slope,
reweight; chunk does not change the math) with pos = none, learned, sinusoidal or rope
(RoFormer's linear form). attn=linformer (objective=mlm only) with pos = none, learned,
sinusoidal or rope, every linformer_proj (linear, mean, max, conv) and linformer_share (none,
headwise, kv, layerwise: then the model holds the one linformer.E), and a per-layer
linformer_k (a list; later layers take the last value), as layers/attention/linformer.c
computes it. attn=sigmoid, and every score-map kernel SCORE_MAPS knows, with the softmax
kernel's positions and masks but for the learned biases (kerple_*). Any other value of these
options (a kernel or position scheme this file does not know, or a combination attnlab itself
refuses) is refused with a CheckpointError (a ValueError) naming the option, never run with
the wrong math.

load() checks a file at least as strictly as the C loader (core/safetensors.c,
experiments/run/checkpoint.c, experiments/run/options.c), in its order, before it builds anything or
allocates more than twice the file's size: a regular file; the header; F32 tensors whose
offsets tile the data section; the format and version; the config's kinds and ranges (the
option table OPTIONS); step and data_rng; exactly the config's tensors with its shapes; finite
weights. The data is mapped (numpy.memmap), never read whole, and nothing in the file is run.
Every refusal is a CheckpointError whose message names the file and the reason.

score() reproduces ./extrapolate's window rule: the held-out split is the last val_fraction
of the corpus (round(val_fraction * size) bytes); it is cut into full = held // (T + 1)
windows, window w covering held-out bytes [w (T + 1), w (T + 1) + T]; max_windows = N takes
N evenly spaced ones (slot floor(i * full / N)); bpb = total nats / ln 2 / (windows * T).
For objective=mlm (./extrapolate's masked-LM rule) window i is its first T bytes, unshifted,
masked as training's validation masks it (mlm_mask: n = max(1, round(0.15 T)) positions,
drawn with core/rng.c's generator seeded from MLM_VAL_SEED + i), and bpb = total nats over
the masked positions / ln 2 / (windows * n).
"""


import math
import os
import warnings

import numpy as np
import torch

from attnlab_tables import *  # noqa: F401,F403  (the public API: one module for users)
from attnlab_tables import INFERENCE, OPTIONS, CheckpointError, _bad, _option_value
from attnlab_safetensors import *  # noqa: F401,F403
from attnlab_safetensors import SafetensorsFile, check_metadata, check_tensors, first_bad
from attnlab_model import *  # noqa: F401,F403
from attnlab_model import GPT, F, model_shapes, resolve_config

MASK_ID = 256
MLM_VAL_SEED = 0x6D6C6D5F76616C  # "mlm_val" (data/mlm.h)


# ---------------------------------------------------------------- loading and scoring


def load(path, dtype=torch.float32, **overrides):
    """The model of a run folder (its model.safetensors) or a .safetensors checkpoint, in eval
    mode. overrides replace inference-time options as ./extrapolate's CHECKPOINT@key=v does
    (window, logn, bca).

    The file is checked as the C loader checks it, in its order, before anything is built:
    SafetensorsFile (a regular file, the header, the offsets tiling the data section),
    check_metadata (format, version, the config's kinds and ranges, step, data_rng), then
    check_tensors (exactly the config's tensors, with its shapes) and every weight finite. Only
    then is the model built (it is no larger than the file) and its weights copied from the
    mapped file. Every refusal is a CheckpointError naming the file; nothing in the file is
    ever run."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    with SafetensorsFile(path) as sf:
        cfg = check_metadata(path, sf.meta, sf.file_size)
        for key, value in overrides.items():
            if key not in INFERENCE:
                raise CheckpointError(None, f"only {', '.join(INFERENCE[:-1])} and {INFERENCE[-1]} can change at "
                                      f"evaluation, not {key}")
            try:
                cfg[key] = _option_value(key, value)
            except CheckpointError as err:
                raise CheckpointError(None, f"override {err.reason}") from None
        try:
            resolved = resolve_config(cfg)
        except CheckpointError as err:
            raise CheckpointError(path, err.reason) from None
        shapes = model_shapes(resolved)
        check_tensors(path, sf.entries, shapes, cfg.get("optimizer", OPTIONS["optimizer"][1]))
        for name in shapes:
            at = first_bad(sf.array(name))
            if at is not None:
                raise CheckpointError(path, f"tensor '{name}': value {at} is {sf.array(name).reshape(-1)[at]}")
        model = GPT(cfg)
        params = model.state_dict()
        if {n: tuple(t.shape) for n, t in params.items()} != shapes:
            raise CheckpointError(path, "attnlab_torch's model_shapes and its modules disagree (a bug of this file)")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # from_numpy of the read-only map: only read
            for name, t in params.items():
                t.copy_(torch.from_numpy(sf.array(name)))
    model.checkpoint = path
    return model.to(dtype).eval()


def held_out(data, val_fraction):
    """The held-out split: the last round(val_fraction * size) bytes (data/corpus.c)."""
    n = len(data)
    val = min(n, int(math.floor(val_fraction * n + 0.5)))
    return data[n - val:]


def window_offsets(held_bytes, T, max_windows=None):
    """Offsets into the held-out split of the scored windows of T + 1 bytes."""
    full = held_bytes // (T + 1)
    count = full if not max_windows or max_windows >= full else max_windows
    return [(i * full // count) * (T + 1) for i in range(count)]


_U64 = (1 << 64) - 1


class Rng:
    """core/rng.c's generator, bit for bit: xoshiro256** seeded through splitmix64."""

    def __init__(self, seed):
        x, self.s = seed & _U64, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & _U64
            z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _U64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & _U64

    def u64(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & _U64, 7) * 9) & _U64
        t = (s[1] << 17) & _U64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def below(self, n):
        """Uniform in [0, n), 0 < n < 2^32: rng_below's multiply-shift with rejection."""
        m = (self.u64() >> 32) * n
        if (m & 0xFFFFFFFF) < n:
            threshold = ((1 << 32) - n) % n
            while (m & 0xFFFFFFFF) < threshold:
                m = (self.u64() >> 32) * n
        return m >> 32


def mlm_count(T):
    """The positions masked in a window of T bytes: max(1, round(0.15 T)) (data/mlm.c)."""
    return max(1, int(math.floor(0.15 * T + 0.5)))


def mlm_mask(window, index):
    """(inputs, targets) of validation window `index` (its position in score's list of windows,
    0 first) holding the bytes `window` (its first T bytes), as data/mlm.c's mlm_val_window
    masks it: an Rng seeded with MLM_VAL_SEED + index chooses mlm_count(T) positions by
    selection sampling (position t is chosen when below(T - t) < the number still needed), and
    each chosen one draws below(10): 0-7 -> MASK_ID, 8 -> below(256) (a random byte), 9 -> left
    as it is. Both are int64 arrays of T: targets holds the original byte at the chosen
    positions and -1 elsewhere."""
    inputs = np.array(bytearray(window), dtype=np.int64)
    T = len(inputs)
    if T < 1:
        _bad("mlm_mask", "the window is empty")
    targets = np.full(T, -1, dtype=np.int64)
    rng, need = Rng(MLM_VAL_SEED + index), mlm_count(T)
    for t in range(T):
        if rng.below(T - t) >= need:
            continue
        need -= 1
        targets[t] = inputs[t]
        r = rng.below(10)
        if r < 8:
            inputs[t] = MASK_ID
        elif r == 8:
            inputs[t] = rng.below(256)
    return inputs, targets


@torch.no_grad()
def score(model, data, T, max_windows=None, val_fraction=None, batch=16):
    """Bits per byte on the held-out split of `data` (bytes: the whole corpus) at length T, as
    ./extrapolate computes it: every predicted byte of every window, summed in float64; for
    objective=mlm the masked positions of every window (mlm_mask), each window unshifted."""
    cfg = model.cfg
    mlm = cfg["objective"] == "mlm"
    if isinstance(data, str):
        data = data.encode("utf-8")
    held = held_out(bytes(data), cfg.get("val_fraction", 0.1) if val_fraction is None else val_fraction)
    offs = window_offsets(len(held), T, max_windows)
    if not offs:
        raise ValueError(f"attnlab_torch: score: the held-out split has {len(held)} bytes, and a window of "
                         f"length {T} needs {T + 1}")
    arr = np.frombuffer(held, dtype=np.uint8)
    nats = 0.0
    for s in range(0, len(offs), batch):
        if mlm:
            rows = [mlm_mask(held[o:o + T], s + i) for i, o in enumerate(offs[s:s + batch])]
            ids = torch.from_numpy(np.stack([r[0] for r in rows]))
            targets = torch.from_numpy(np.stack([r[1] for r in rows]))
        else:
            win = torch.from_numpy(np.stack([arr[o:o + T + 1] for o in offs[s:s + batch]]).astype(np.int64))
            ids, targets = win[:, :T], win[:, 1:]
        logits = model(ids).double()
        nats += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1,
                                reduction="sum").item()
    return nats / math.log(2) / (len(offs) * (mlm_count(T) if mlm else T))

