"""attnlab_torch.py: load an attnlab checkpoint into PyTorch and score it.

One file, needing only torch and numpy (Debian's python3-torch provides both):

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

Supported: attn=softmax with pos = none, learned, sinusoidal, rope (rope_dims), alibi,
kerple_power, kerple_log, sandwich, xpos; window, logn, bca; talking_heads; key_size /
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
experiments/checkpoint.c, experiments/options.c), in its order, before it builds anything or
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

import json
import math
import os
import re
import stat
import struct
import warnings

import numpy as np
import torch

nn = torch.nn
F = torch.nn.functional

MASK_ID = 256
MLM_VAL_SEED = 0x6D6C6D5F76616C  # "mlm_val" (data/mlm.h)
LF_SHARES = ("none", "headwise", "kv", "layerwise")
LF_PROJS = ("linear", "mean", "max", "conv")
DEN_EPS = 1e-6  # linear attention's denominator clamp
SCALE_BASE = 512.0  # XPOS

class CheckpointError(ValueError):
    """Every refusal of this file: a checkpoint or safetensors file that is not what it claims
    (then `path` names it and the message starts "attnlab_torch: PATH: "), or a config this file
    cannot run. `reason` is the message without the prefix."""

    def __init__(self, path, reason):
        self.path, self.reason = path, reason
        super().__init__(f"attnlab_torch: {path}: {reason}" if path is not None else f"attnlab_torch: {reason}")


def _refuse(what):
    raise CheckpointError(None, f"{what} is not supported yet")


def _bad(what, why):
    raise CheckpointError(None, f"{what}: {why}")


# ---------------------------------------------------------------- safetensors
# The checks of core/safetensors.c's st_open, in its order and with its words: a regular file;
# the 8-byte header length (at most ST_MAX_HEADER_BYTES, inside the file); the header, JSON
# with no repeated key; every tensor F32 with at most 4 dims and data_offsets that lie in the
# data section and span its shape; no name twice; the tensors tiling the data section.

ST_MAX_HEADER_BYTES = 100_000_000
ST_MAX_DIMS = 4
_JSON_INT_MAX = 2 ** 53  # cJSON keeps numbers as doubles: above this they are not exact
_SIZE_MAX = 2 ** 64 - 1


class _Obj(dict):
    """A JSON object that remembers the first key it was given twice (`dup`)."""
    dup = None


def _pairs(pairs):
    obj = _Obj()
    for key, value in pairs:
        if key in obj and obj.dup is None:
            obj.dup = key
        obj[key] = value
    return obj


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


JSON_SLACK = 512 * 1024


def json_budget(file_size):
    """What parsing a file's JSON may take: twice the file's size and JSON_SLACK."""
    return 2 * file_size + JSON_SLACK


def json_cost(text):
    """An upper bound, in bytes, of what json.loads(text) allocates for its objects: an object
    250 bytes, every other value, key and nesting level 100 (they measure under half that)."""
    return 250 * text.count("{") + 100 * (text.count("[") + text.count(",") + text.count(":"))


def parse_json(text, path, what, budget=None):
    """text (str) as JSON, refusing NaN / Infinity, nesting too deep for the parser, and (given
    a budget in bytes) more values than the budget holds, before any is made; objects are
    _Obj, so a caller can refuse a repeated key."""
    if budget is not None and json_cost(text) > budget:
        raise CheckpointError(path, f"{what} holds too many JSON values for its file (parsing them could take "
                              f"{json_cost(text)} bytes, more than twice the file's size)")
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except RecursionError:
        raise CheckpointError(path, f"{what} is not valid JSON (nested too deeply)") from None
    except json.JSONDecodeError as err:
        at = len(text[:err.pos].encode("utf-8", "surrogatepass"))
        if err.msg == "Extra data":
            raise CheckpointError(path, f"{what} has stray bytes after the JSON (at byte {at})") from None
        raise CheckpointError(path, f"{what} is not valid JSON (near byte {at}: {err.msg})") from None
    except ValueError as err:  # NaN or Infinity, or an integer too long to convert
        raise CheckpointError(path, f"{what} is not valid JSON ({err})") from None


def _json_uint(v, limit):
    """v as a non-negative integer no larger than limit, or None: a JSON number with an integer
    value (4.0 too, as cJSON reads it), never a bool or a string."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return None
    v = int(v)
    return v if 0 <= v <= min(limit, _JSON_INT_MAX) else None


def _open_regular(path):
    """A descriptor of path, opened only when it is a regular file: stat first, then open
    non-blocking (a FIFO put there since cannot block) and check the descriptor again."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise CheckpointError(path, f"cannot open: {err.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise CheckpointError(path, "is a directory, not a safetensors file")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(path, "not a regular file (a safetensors file is one)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise CheckpointError(path, f"cannot open: {err.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CheckpointError(path, "not a regular file (a safetensors file is one)")
    os.set_blocking(fd, True)
    return fd


def _read_exactly(fd, n, path, what):
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise CheckpointError(path, f"cannot read {what}")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _parse_entry(path, name, info, data_size):
    """(shape, begin, end) of one tensor entry, checked as st_open's parse_entry checks it."""
    where = f"tensor '{name}'"
    if not isinstance(info, dict):
        raise CheckpointError(path, f"{where}: entry is not a JSON object")
    if info.dup is not None:
        raise CheckpointError(path, f"{where}: key '{info.dup}' appears more than once")
    dtype, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise CheckpointError(path, f"{where}: missing or non-string dtype")
    if dtype != "F32":
        raise CheckpointError(path, f"{where}: dtype {dtype} not supported (only F32)")
    if not isinstance(shape, list):
        raise CheckpointError(path, f"{where}: missing or non-array shape")
    if len(shape) > ST_MAX_DIMS:
        raise CheckpointError(path, f"{where}: shape has {len(shape)} dims (at most {ST_MAX_DIMS} supported)")
    dims = []
    for i, d in enumerate(shape):
        v = _json_uint(d, 2 ** 63 - 1)
        if v is None:
            raise CheckpointError(path, f"{where}: shape entry {i} is not a non-negative integer")
        dims.append(v)
    numel = math.prod(dims)
    if any(d and math.prod(dims[:i]) > _SIZE_MAX // 4 // d for i, d in enumerate(dims)):
        raise CheckpointError(path, f"{where}: shape {dims} has too many elements")
    pair = [_json_uint(v, _SIZE_MAX) for v in offs] if isinstance(offs, list) and len(offs) == 2 else [None]
    if None in pair:
        raise CheckpointError(path, f"{where}: data_offsets must be two non-negative integers")
    begin, end = pair
    if end < begin:
        raise CheckpointError(path, f"{where}: data_offsets [{begin}, {end}] end before begin")
    if end - begin != numel * 4:
        raise CheckpointError(path, f"{where}: shape {dims} needs {numel * 4} bytes but data_offsets span "
                              f"{end - begin}")
    if end > data_size:
        raise CheckpointError(path, f"{where}: data_offsets [{begin}, {end}] out of range (data section has "
                              f"{data_size} bytes; file truncated?)")
    return tuple(dims), begin, end


def _check_tiling(path, entries, data_size):
    """The tensors, in the order of their offsets, tile the data section: no gap, no overlap."""
    at, prev = 0, None
    for name, (_, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][1], kv[1][2])):
        if begin < at:
            raise CheckpointError(path, f"tensors '{prev[0]}' and '{name}' overlap (data_offsets [{prev[1]}, "
                                  f"{prev[2]}] and [{begin}, {end}])")
        if begin > at:
            raise CheckpointError(path, f"data section bytes [{at}, {begin}) belong to no tensor (before '{name}')")
        at, prev = end, (name, begin, end)
    if at != data_size:
        raise CheckpointError(path, f"data section bytes [{at}, {data_size}) belong to no tensor (after the last one)")


class SafetensorsFile:
    """An open safetensors file, checked as st_open checks one: `entries` maps each tensor name
    to (shape, begin, end), `meta` the __metadata__ strings; nothing of the data is read.
    array(name) is that tensor as a read-only view of the file, mapped (numpy.memmap)."""

    def __init__(self, path):
        self.path = path
        fd = _open_regular(path)
        try:
            self.file_size = os.fstat(fd).st_size
            self._parse(fd)
            self._file = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        self._map = None

    def _parse(self, fd):
        path, size = self.path, self.file_size
        if size < 8:
            raise CheckpointError(path, f"file is {size} bytes, too short for a safetensors header")
        (n,) = struct.unpack("<Q", _read_exactly(fd, 8, path, "the header length"))
        if n > ST_MAX_HEADER_BYTES:
            raise CheckpointError(path, f"not a safetensors file (its first 8 bytes give a header length of {n}, "
                                  f"which exceeds the {ST_MAX_HEADER_BYTES}-byte limit)")
        if n > size - 8:
            raise CheckpointError(path, f"not a safetensors file, or a truncated one (header length {n} runs past "
                                  f"the end of the file, {size} bytes)")
        self.data_start, data_size = 8 + n, size - 8 - n
        raw = _read_exactly(fd, n, path, f"the {n}-byte header")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise CheckpointError(path, f"header is not valid UTF-8 (byte {err.start}), so a tensor name or "
                                  "metadata is not valid UTF-8") from None
        del raw
        root = parse_json(text, path, "header", json_budget(size))
        if not isinstance(root, dict):
            raise CheckpointError(path, "header is not a JSON object")
        if root.dup == "__metadata__":
            raise CheckpointError(path, "__metadata__ appears more than once")
        self.meta, self.entries = {}, {}
        for name, info in root.items():
            if name == "__metadata__":
                self.meta = self._parse_metadata(info)
            else:
                self.entries[name] = _parse_entry(path, name, info, data_size)
        if root.dup is not None:
            raise CheckpointError(path, f"tensor '{root.dup}' appears more than once in the header")
        _check_tiling(path, self.entries, data_size)

    def _parse_metadata(self, m):
        if not isinstance(m, dict):
            raise CheckpointError(self.path, "__metadata__ is not a JSON object")
        for key, value in m.items():
            if not isinstance(value, str):
                raise CheckpointError(self.path, f"__metadata__ value for '{key}' is not a string")
        if m.dup is not None:
            raise CheckpointError(self.path, f"__metadata__ key '{m.dup}' appears more than once")
        return dict(m)

    def array(self, name):
        """Tensor `name` as a read-only float32 numpy array mapped from the file."""
        shape, begin, end = self.entries[name]
        if end == begin:
            return np.zeros(shape, dtype=np.float32)
        if self._map is None:
            if os.fstat(self._file.fileno()).st_size != self.file_size:
                raise CheckpointError(self.path, "the file changed size since it was opened")
            self._map = np.memmap(self._file, dtype="<f4", mode="r", offset=self.data_start,
                                  shape=((self.file_size - self.data_start) // 4,))
        return self._map[begin // 4:end // 4].reshape(shape)

    def close(self):
        self._map = None
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def first_bad(arr, chunk=1 << 20):
    """The flat index of the first value of arr that is not finite, or None; read a chunk at a
    time, so the check needs no copy of the tensor."""
    flat = arr.reshape(-1)
    for at in range(0, flat.size, chunk):
        bad = np.flatnonzero(~np.isfinite(flat[at:at + chunk]))
        if bad.size:
            return at + int(bad[0])
    return None


def read_safetensors(path):
    """(tensors, metadata) of a safetensors file checked as core/safetensors.c checks one:
    name -> torch tensor (a copy), str -> str."""
    with SafetensorsFile(path) as sf:
        return {name: torch.from_numpy(np.array(sf.array(name))) for name in sf.entries}, sf.meta


# ---------------------------------------------------------------- the option table
# experiments/options.c's table and the kernels' and position schemes' rows (./train --help
# prints them; tests/cli_pyloader.sh holds this copy to that): name -> (kind, default, allowed)
# with allowed (lo, hi) for int, ints and float, the values for choice and bool, the byte limit
# for string. A checkpoint's config must give each value as its kind: ints as JSON numbers of
# integer value ("2" is refused), bools as true / false, choices and strings as strings;
# linformer_k as a number or "8,4", as config_to_json writes it.

OPTIONS = {
    "attn": ("choice", "softmax", ("softmax", "linear", "cosformer", "linformer")),
    "talking_heads": ("choice", "none", ("none", "pre", "post", "both")),
    "phi": ("choice", "relu", ("identity", "relu", "leakyrelu", "elu")),
    "leaky_slope": ("float", 0.01, (0, 1)),
    "reweight": ("choice", "none", ("none", "cos")),
    "chunk": ("int", 64, (1, 65536)),
    "linformer_k": ("ints", 64, (1, 65536)),
    "linformer_share": ("choice", "none", LF_SHARES),
    "linformer_proj": ("choice", "linear", LF_PROJS),
    "pos": ("choice", "learned", ("none", "learned", "sinusoidal", "rope", "alibi", "kerple_power", "kerple_log",
                                  "sandwich", "xpos")),
    "rope_dims": ("int", 0, (0, 4096)),
    "sandwich_lambda": ("float", 1.0, (0, 1000)),
    "window": ("int", 0, (0, 1048576)),
    "logn": ("choice", "off", ("off", "on")),
    "bca": ("choice", "off", ("off", "on")),
    "layers": ("int", 4, (1, 64)),
    "d_model": ("int", 128, (8, 8192)),
    "heads": ("int", 4, (1, 256)),
    "key_size": ("int", 0, (0, 4096)),
    "head_size": ("int", 0, (0, 4096)),
    "mlp_ratio": ("int", 4, (1, 16)),
    "norm": ("choice", "layernorm", ("layernorm", "rmsnorm")),
    "context": ("int", 128, (2, 65536)),
    "tie_embeddings": ("bool", True, (False, True)),
    "objective": ("choice", "clm", ("clm", "mlm")),
    "batch": ("int", 16, (1, 4096)),
    "steps": ("int", 1500, (1, 100000000)),
    "lr": ("float", 2e-3, (0, 10)),
    "min_lr": ("float", 1e-4, (0, 10)),
    "warmup": ("int", 100, (0, 100000000)),
    "schedule": ("choice", "cosine", ("cosine", "linear", "constant")),
    "weight_decay": ("float", 0.1, (0, 10)),
    "clip": ("float", 1.0, (0, 1e6)),
    "seed": ("int", 1337, (0, 9007199254740991)),
    "eval_every": ("int", 250, (1, 100000000)),
    "eval_batches": ("int", 8, (1, 100000)),
    "save_every": ("int", 500, (1, 100000000)),
    "threads": ("int", 0, (0, 1024)),
    "precision": ("choice", "fp32", ("fp32", "bf16")),
    "recompute": ("choice", "auto", ("auto", "off", "on")),
    "val_fraction": ("float", 0.1, (1e-6, 0.9)),
    "log_every": ("int", 10, (1, 100000000)),
    "out": ("string", "", 256),
    "prompt": ("string", "The ", 256),
    "temperature": ("float", 0.8, (0, 100)),
    "top_k": ("int", 40, (0, 256)),
    "sample_length": ("int", 400, (0, 100000)),
}
LF_MAX_LAYERS = 64
# who owns an option: a kernel (attn values, with the presets it runs) or position schemes
KERNEL_OPTIONS = {"softmax": ("talking_heads",), "linear": ("phi", "leaky_slope", "reweight", "chunk"),
                  "linformer": ("linformer_k", "linformer_share", "linformer_proj")}
KERNEL_TITLES = {"softmax": "attn=softmax", "linear": "linear attention", "linformer": "attn=linformer"}
PRESETS = {"cosformer": ("linear", {"phi": "relu", "reweight": "cos"})}
POS_OPTIONS = {"rope_dims": ("rope", "xpos"), "sandwich_lambda": ("sandwich",)}


def _option_value(name, value):
    """value (from JSON) checked against option `name`'s row, as option_set checks its text;
    returns it normalised (ints as int, linformer_k as a list), or raises CheckpointError."""
    kind, _, allowed = OPTIONS[name]
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    if isinstance(value, str):
        shown = f"'{value}' (a string)"
    elif number:
        shown = f"'{value:.17g}'" if math.isfinite(value) else f"'{value}'"
    else:
        shown = json.dumps(value)[:40]
    if kind == "int":
        lo, hi = allowed
        if not number or not math.isfinite(value) or value != math.floor(value) or not lo <= value <= hi:
            _bad(f"--{name}", f"expected an integer in [{lo}, {hi}], got {shown}")
        return int(value)
    if kind == "ints":
        lo, hi = allowed
        items = value.split(",") if isinstance(value, str) else [value]
        out = []
        for v in items:
            if isinstance(v, str):
                try:
                    v = float(v) if v.strip() == v and v and "_" not in v else None
                except ValueError:
                    v = None
            ok = v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
            if not ok or v != math.floor(v) or not lo <= v <= hi or len(out) == LF_MAX_LAYERS:
                _bad(f"--{name}", f"expected up to {LF_MAX_LAYERS} comma-separated integers in [{lo}, {hi}] (one per "
                     f"layer), got {shown}")
            out.append(int(v))
        return out
    if kind == "float":
        lo, hi = allowed
        if not number or not math.isfinite(value) or not lo <= value <= hi:
            _bad(f"--{name}", f"expected a number in [{lo:g}, {hi:g}], got {shown}")
        return float(value)
    if kind == "bool":
        if isinstance(value, str) and value not in ("true", "false"):
            _bad(f"--{name}", f"'{value}' is not one of: false, true")
        if not isinstance(value, bool):
            _bad(f"--{name}", f"expected true or false (a JSON bool), got {shown}")
        return value
    if kind == "choice":
        if not isinstance(value, str) or value not in allowed:
            quoted = f"'{value}'" if isinstance(value, str) else shown
            _bad(f"--{name}", f"{quoted} is not one of: {', '.join(allowed)}")
        return value
    if not isinstance(value, str):
        _bad(f"--{name}", f"expected text, got {shown}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        _bad(f"--{name}", "not valid UTF-8")
    if size >= allowed or "\0" in value:
        _bad(f"--{name}", f"value longer than {allowed - 1} bytes, or holding a NUL")
    return value


def _changed(cfg, name):
    """Whether option `name` differs from its default (a loaded config has no "given" flags),
    compared as the C side stores it: floats as float32."""
    kind, default, _ = OPTIONS[name]
    value = cfg[name]
    if kind == "float":
        return np.float32(value) != np.float32(default)
    if kind == "ints":
        return value != [default]
    return value != default


def check_config(obj):
    """The config of a checkpoint (a JSON object) as experiments/options.c's config_from_json and
    config_validate check it: every key an option, every value of its kind and range, missing
    ones at their defaults; then what validate refuses of the options together. Returns the
    config with every option, normalised; raises CheckpointError (without a path)."""
    if not isinstance(obj, dict):
        _bad("config", "not a JSON object")
    if isinstance(obj, _Obj) and obj.dup is not None:
        _bad("config", f"option '{obj.dup}' appears more than once")
    cfg = {name: (row[1] if row[0] != "ints" else [row[1]]) for name, row in OPTIONS.items()}
    for name, value in obj.items():
        if name not in OPTIONS:
            _bad("config", f"unknown option '{name}'")
        cfg[name] = _option_value(name, value)
    attn = cfg["attn"]
    kernel, fixes = PRESETS.get(attn, (attn, {}))
    if (not cfg["key_size"] or not cfg["head_size"]) and cfg["d_model"] % cfg["heads"]:
        raise CheckpointError(None, f"--heads {cfg['heads']} does not divide --d_model {cfg['d_model']}")
    for name, wanted in fixes.items():
        if _changed(cfg, name) and cfg[name] != wanted:
            _bad(f"--{name}", f"attn={attn} fixes {name}={wanted}")
    for owner, names in KERNEL_OPTIONS.items():
        for name in names:
            if owner != kernel and _changed(cfg, name):
                raise CheckpointError(None, f"--{name} applies to {KERNEL_TITLES[owner]}, not attn={attn}")
    for name, schemes in POS_OPTIONS.items():
        if cfg["pos"] not in schemes and _changed(cfg, name):
            raise CheckpointError(None, f"--{name} applies to pos={' or '.join(schemes)}, not pos={cfg['pos']}")
    if cfg["objective"] == "mlm":
        for name in ("prompt", "temperature", "top_k"):
            if _changed(cfg, name):
                _bad(f"--{name}", "objective=mlm is not sampled left to right (its samples are a fill-in demo)")
    if cfg["min_lr"] > cfg["lr"]:
        raise CheckpointError(None, f"--min_lr {cfg['min_lr']:g} is above --lr {cfg['lr']:g}")
    return cfg


# ---------------------------------------------------------------- the checkpoint
# experiments/checkpoint.c's checkpoint_open, in its order: format, format_version, config,
# step, data_rng (four words of 16 lowercase hex digits, not all zero), best_val_bpb, ranks.

CHECKPOINT_FORMAT = "attnlab"
CHECKPOINT_VERSION = "1"
_RNG_RE = re.compile(r"[0-9a-f]{16}( [0-9a-f]{16}){3}")
_INT_RE = re.compile(r"[+-]?[0-9]+")


def check_metadata(path, meta, file_size=None):
    """The config of a checkpoint whose __metadata__ is meta, after every check of
    checkpoint_open; raises CheckpointError naming path. file_size bounds what parsing the
    config may take (json_budget)."""
    fmt, version = meta.get("format"), meta.get("format_version")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(path, f"not an attnlab checkpoint (metadata 'format' is {fmt or 'missing'})")
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(path, f"checkpoint format version {version or 'missing'}; this build reads version "
                              f"{CHECKPOINT_VERSION}")
    text = meta.get("config")
    try:
        if text is None:
            raise CheckpointError(None, "missing or not JSON")
        budget = None if file_size is None else json_budget(file_size)
        try:
            obj = parse_json(text, None, "config", budget)
        except CheckpointError as err:
            raise CheckpointError(None, f"missing or not JSON ({err.reason})") from None
        cfg = check_config(obj)
    except CheckpointError as err:
        raise CheckpointError(path, f"bad config in checkpoint: {err.reason}") from None
    step = meta.get("step")
    if step is None or not _INT_RE.fullmatch(step) or int(step) < 0 or int(step) > 2 ** 63 - 1:
        raise CheckpointError(path, "bad or missing 'step' in metadata")
    rng = meta.get("data_rng")
    if rng is None or not _RNG_RE.fullmatch(rng):
        raise CheckpointError(path, "bad or missing 'data_rng' in metadata (four words of 16 lowercase hex digits)")
    if not any(int(word, 16) for word in rng.split()):
        raise CheckpointError(path, "'data_rng' in metadata is all zero, a state the generator cannot have")
    best = meta.get("best_val_bpb")
    if best:
        try:
            value = float(best) if best.strip() == best and "_" not in best else None
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < 0:
            raise CheckpointError(path, f"bad 'best_val_bpb' in metadata ('{best}')")
    ranks = meta.get("ranks")
    if ranks is not None and (not _INT_RE.fullmatch(ranks) or not 1 <= int(ranks) <= 1 << 20):
        raise CheckpointError(path, f"bad 'ranks' in metadata ('{ranks}')")
    return cfg


def model_shapes(cfg):
    """name -> shape of every tensor GPT(cfg) holds (cfg resolved), worked out without building
    it, so a checkpoint's tensors are checked against its config before anything is allocated.
    It follows the modules below; load() checks the two agree."""
    d, h, ks, hs, r = cfg["d_model"], cfg["heads"], cfg["key_size"], cfg["head_size"], cfg["mlp_ratio"]
    norm = ("weight", "bias") if cfg["norm"] == "layernorm" else ("weight",)
    shapes = {"tok_emb.weight": (cfg["vocab"], d)}
    if cfg["pos"] == "learned":
        shapes["pos_emb.weight"] = (cfg["context"], d)
    lf = cfg["attn"] == "linformer"
    if lf and cfg["linformer_share"] == "layerwise" and linformer_shape(cfg, 0) is not None:
        shapes["linformer.E"] = tuple(linformer_shape(cfg, 0))
    for i in range(cfg["layers"]):
        b = f"blocks.{i}."
        for n in ("ln1", "ln2"):
            shapes.update({f"{b}{n}.{w}": (d,) for w in norm})
        for n, width in (("q", h * ks), ("k", h * ks), ("v", h * hs)):
            shapes.update({f"{b}attn.{n}.weight": (width, d), f"{b}attn.{n}.bias": (width,)})
        shapes.update({f"{b}attn.o.weight": (d, h * hs), f"{b}attn.o.bias": (d,)})
        shapes.update({f"{b}attn.{n}": (h,) for n in POS_BIASES.get(cfg["pos"], (None, ()))[1]})
        talking = {"pre": ("pre",), "post": ("post",), "both": ("pre", "post")}.get(cfg["talking_heads"], ())
        shapes.update({f"{b}attn.talking_{n}.weight": (h, h) for n in talking})
        shape = linformer_shape(cfg, i) if lf else None
        if shape is not None and cfg["linformer_share"] != "layerwise":
            shapes[f"{b}attn.E"] = tuple(shape)
            if cfg["linformer_share"] != "kv":
                shapes[f"{b}attn.F"] = tuple(shape)
        shapes.update({f"{b}mlp.fc.weight": (r * d, d), f"{b}mlp.fc.bias": (r * d,),
                       f"{b}mlp.proj.weight": (d, r * d), f"{b}mlp.proj.bias": (d,)})
    shapes.update({f"ln_f.{w}": (d,) for w in norm})
    if not cfg["tie_embeddings"]:
        shapes["lm_head.weight"] = (cfg["vocab"], d)
    return shapes


def check_tensors(path, entries, shapes):
    """The file's tensors are exactly the model's (shapes), with their shapes, and either all of
    AdamW's moments (optim.m.NAME, optim.v.NAME) or none."""
    for name, shape in shapes.items():
        if name not in entries:
            raise CheckpointError(path, f"tensor '{name}' not found")
        if entries[name][0] != shape:
            raise CheckpointError(path, f"tensor '{name}': shape {list(entries[name][0])} in file, expected "
                                  f"{list(shape)}")
    optim = "optim.m.tok_emb.weight" in entries
    for name, shape in shapes.items():
        for moment in ("optim.m.", "optim.v."):
            got = entries.get(moment + name)
            if optim and got is None:
                raise CheckpointError(path, f"tensor '{moment + name}' not found (the file holds AdamW's moments "
                                      "of some tensors only)")
            if got is not None and got[0] != shape:
                raise CheckpointError(path, f"tensor '{moment + name}': shape {list(got[0])} in file, expected "
                                      f"{list(shape)}")
    wanted = set(shapes) | ({f"optim.{m}.{n}" for m in "mv" for n in shapes} if optim else set())
    extra = sorted(set(entries) - wanted)
    if extra:
        raise CheckpointError(path, f"tensor '{extra[0]}' is not one of the model's (a checkpoint holds exactly "
                              "its model's tensors)")


# ---------------------------------------------------------------- score maps

# The attn values whose kernel is a score map (layers/attention/scoremap.h): P = f(S) on the
# keys a query sees and 0 elsewhere, S the logits the softmax kernel forms (scale, logn, the
# score bias), O = P V. Teaching this file such a kernel is one function, with @score_map.
SCORE_MAPS = {}


def score_map(name):
    def register(f):
        SCORE_MAPS[name] = f
        kind, default, allowed = OPTIONS["attn"]
        OPTIONS["attn"] = (kind, default, allowed + (name,))
        return f
    return register


@score_map("sigmoid")
def sigmoid_attention(s, t):
    """attn=sigmoid (layers/attention/sigmoid.c): P = sigmoid(S - log T)."""
    return torch.sigmoid(s - math.log(t))


# ---------------------------------------------------------------- score biases

# The pos values that add a bias b_h(delta) to the scores (PosScheme.bias): name -> (f, the
# names of its learned [H] parameters, blocks.{i}.attn.<name>). f(attn, d) gives [H, T, T] in
# float64 from the distances d = i - j (or |i - j|), d >= 0, attn the layer (its heads,
# key_size, cfg and parameters). Teaching this file such a scheme is one function, with
# @pos_bias.
POS_BIASES = {}


def pos_bias(name, params=()):
    def register(f):
        POS_BIASES[name] = (f, params)
        kind, default, allowed = OPTIONS["pos"]
        if name not in allowed:
            OPTIONS["pos"] = (kind, default, allowed + (name,))
        return f
    return register


def _slopes(attn):
    return torch.tensor(alibi_slopes(attn.heads), dtype=torch.float64).reshape(attn.heads, 1, 1)


@pos_bias("alibi")
def alibi_bias(attn, d):
    """-m_h delta (layers/attention/alibi.c)."""
    return -_slopes(attn) * d


@pos_bias("alibi_log")
def alibi_log_bias(attn, d):
    """-m_h log(1 + delta) (layers/attention/alibi_log.c)."""
    return -_slopes(attn) * torch.log1p(d)


@pos_bias("kerple_power", ("kerple_a", "kerple_p"))
def kerple_power_bias(attn, d):
    """-a_h delta^p_h, a >= 0.01, p in [0.01, 2] (layers/attention/kerple.c)."""
    h = attn.heads
    a = attn.kerple_a.double().clamp(min=0.01).reshape(h, 1, 1)
    p = attn.kerple_p.double().clamp(0.01, 2).reshape(h, 1, 1)
    return -a * torch.where(d > 0, d.clamp(min=1e-30) ** p, torch.zeros_like(d * p))


@pos_bias("kerple_log", ("kerple_r1", "kerple_r2"))
def kerple_log_bias(attn, d):
    """-r1_h log(1 + r2_h delta), r1, r2 >= 0.01 (layers/attention/kerple.c)."""
    h = attn.heads
    r1 = attn.kerple_r1.double().clamp(min=0.01).reshape(h, 1, 1)
    r2 = attn.kerple_r2.double().clamp(min=0.01).reshape(h, 1, 1)
    return -r1 * torch.log1p(r2 * d)


@pos_bias("sandwich")
def sandwich_bias(attn, d):
    """lambda sum_k cos(delta w_k) H / (8 (h + 1)) over sinusoids of width H key_size
    (layers/attention/sandwich.c)."""
    h, width = attn.heads, attn.heads * attn.key_size
    w = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    dots = torch.cos(d.unsqueeze(-1) * w).sum(-1)
    per_head = torch.tensor([h / (8 * (g + 1)) for g in range(h)], dtype=torch.float64).reshape(h, 1, 1)
    return float(attn.cfg["sandwich_lambda"]) * per_head * dots


# The schemes that do not touch the scores, which every kernel takes.
POS_PLAIN = ("none", "learned", "sinusoidal", "rope")


# ---------------------------------------------------------------- the config


def resolve_config(cfg):
    """The config with derived values filled in (key_size 0 = d_model / heads, and so on),
    refusing every option this file cannot run. Missing options take their defaults; numbers,
    bools and strings are checked against the option table first (check_config checks the
    rest of a loaded config), so a bad value is a CheckpointError, never a TypeError."""
    c = {name: row[1] for name, row in OPTIONS.items() if row[0] in ("int", "float", "bool", "string")}
    c.update(cfg)
    for name, value in cfg.items():
        if name in OPTIONS and OPTIONS[name][0] in ("int", "float", "bool", "string"):
            c[name] = _option_value(name, value)
    if (not c["key_size"] or not c["head_size"]) and c["d_model"] % c["heads"]:
        raise CheckpointError(None, f"--heads {c['heads']} does not divide --d_model {c['d_model']}")
    c.setdefault("attn", "softmax")
    c.setdefault("pos", "learned")
    c.setdefault("objective", "clm")
    c.setdefault("talking_heads", "none")
    c.setdefault("norm", "layernorm")
    c.setdefault("tie_embeddings", True)
    c.setdefault("mlp_ratio", 4)
    for key in ("window", "rope_dims", "key_size", "head_size"):
        c[key] = int(c.get(key, 0) or 0)
    for key in ("logn", "bca"):
        c[key] = c.get(key, "off")
    c.setdefault("phi", "relu")
    c.setdefault("leaky_slope", 0.01)
    c.setdefault("reweight", "none")
    c.setdefault("sandwich_lambda", 1.0)
    d, h = c["d_model"], c["heads"]
    c["key_size"] = c["key_size"] or d // h
    c["head_size"] = c["head_size"] or d // h
    c["rope_dims"] = c["rope_dims"] or c["key_size"]
    if c["objective"] not in ("clm", "mlm"):
        _refuse(f"objective={c['objective']}")
    c["vocab"] = 257 if c["objective"] == "mlm" else 256
    c["causal"] = c["objective"] == "clm"
    if c["norm"] not in ("layernorm", "rmsnorm"):
        _refuse(f"norm={c['norm']}")
    if c["attn"] == "cosformer":
        c["attn"], c["phi"], c["reweight"] = "linear", "relu", "cos"
    attn, pos = c["attn"], c["pos"]
    if attn == "softmax":
        if pos not in POS_PLAIN + ("xpos",) and pos not in POS_BIASES:
            _refuse(f"pos={pos}")
        if c["talking_heads"] not in ("none", "pre", "post", "both"):
            _refuse(f"talking_heads={c['talking_heads']}")
        if c["logn"] not in ("on", "off"):
            _refuse(f"logn={c['logn']}")
        if c["bca"] not in ("on", "off"):
            _refuse(f"bca={c['bca']}")
    elif attn == "linear":
        if pos not in POS_PLAIN:
            _refuse(f"attn=linear with pos={pos}")
        if c["phi"] not in ("identity", "relu", "leakyrelu", "elu"):
            _refuse(f"phi={c['phi']}")
        if c["reweight"] not in ("none", "cos"):
            _refuse(f"reweight={c['reweight']}")
        for key, off in (("talking_heads", "none"), ("logn", "off"), ("bca", "off")):
            if c[key] != off:
                _refuse(f"attn=linear with {key}={c[key]}")
        if c["window"]:
            _refuse("attn=linear with window")
    elif attn == "linformer":
        resolve_linformer(c)
    elif attn in SCORE_MAPS:  # the softmax kernel's scores; its learned biases are refused in C too
        fixed = [name for name, (_, params) in POS_BIASES.items() if not params]
        if pos not in POS_PLAIN + ("xpos",) and pos not in fixed:
            _refuse(f"attn={attn} with pos={pos}")
        if c["talking_heads"] != "none":
            _refuse(f"attn={attn} with talking_heads={c['talking_heads']}")
        for key in ("logn", "bca"):
            if c[key] not in ("on", "off"):
                _refuse(f"{key}={c[key]}")
    else:
        _refuse(f"attn={attn}")
    return c


def linformer_ks(value, layers):
    """linformer_k per layer from the config's value: a number (one value), "8,4" (the list
    as a checkpoint's config stores it) or a list; later layers take the last value (lf_k)."""
    if isinstance(value, str):
        try:
            ks = [int(v) for v in value.split(",")]
        except ValueError:
            _bad(f"linformer_k={value}", "not a comma-separated list of integers")
    elif isinstance(value, (list, tuple)):
        ks = [int(v) for v in value]
    else:
        ks = [int(value)]
    if not ks or len(ks) > layers:
        _bad(f"linformer_k={value}", f"{len(ks)} values for {layers} layers")
    return ks + [ks[-1]] * (layers - len(ks))


def resolve_linformer(c):
    """Checks attn=linformer's options as layers/attention/linformer.c's validate does and
    stores linformer_k as one value per layer."""
    c.setdefault("linformer_share", "none")
    c.setdefault("linformer_proj", "linear")
    share, proj, n = c["linformer_share"], c["linformer_proj"], c["context"]
    if c["objective"] != "mlm":
        _bad("attn=linformer", f"it has no causal form, so it needs objective=mlm, not {c['objective']}")
    if c["pos"] not in POS_PLAIN:
        _refuse(f"attn=linformer with pos={c['pos']}")
    if share not in LF_SHARES:
        _refuse(f"linformer_share={share}")
    if proj not in LF_PROJS:
        _refuse(f"linformer_proj={proj}")
    for key, off in (("talking_heads", "none"), ("logn", "off"), ("bca", "off")):
        if c[key] != off:
            _refuse(f"attn=linformer with {key}={c[key]}")
    if c["window"]:
        _refuse("attn=linformer with window")
    given = c.get("linformer_k", 64)
    ks = linformer_ks(given, c["layers"])
    for k in ks:
        if not 0 < k <= n:
            _bad(f"linformer_k={given}", f"{k} is not in 1..context {n}")
        if proj != "linear" and n % k:
            _bad(f"linformer_k={given}", f"linformer_proj={proj} pools with stride context / k, so {k} must "
                 f"divide context {n}")
    if proj in ("mean", "max") and share != "none":
        _bad(f"linformer_share={share}", f"linformer_proj={proj} pools without parameters, so there is nothing "
             "to share")
    if share == "layerwise" and len(set(ks)) > 1:
        _bad(f"linformer_k={given}", "linformer_share=layerwise has one E for all layers, so one k")
    c["linformer_k"] = ks


def linformer_shape(cfg, layer):
    """The shape of layer `layer`'s E (and F): [k, n] for linear, the conv kernel [n / k] for
    conv, with a leading head dimension under share none; None for mean and max."""
    proj, n, k = cfg["linformer_proj"], cfg["context"], cfg["linformer_k"][layer]
    if proj in ("mean", "max"):
        return None
    one = [k, n] if proj == "linear" else [n // k]
    return [cfg["heads"]] + one if cfg["linformer_share"] == "none" else one


def linformer_project(x, w, proj, stride):
    """x [B, H, T, d] projected along the sequence to [B, H, k', d] (layers/attention/linformer.c):
    linear: E[..., :T] x (w = E [k, n] or [H, k, n]; T > n is an error); mean / max / conv: the
    windows [j s, j s + s), j < k' = ceil(T / s), s = stride, a partial last window averaging
    (or taking the max of) the positions present and conv (w = [s] or [H, s]) seeing zeros."""
    b, h, t, d = x.shape
    if proj == "linear":
        if t > w.shape[-1]:
            _bad(f"linformer_proj=linear at length {t}", f"E has n = {w.shape[-1]} columns (the context)")
        w = w[..., :t]
        return torch.einsum("hjt,bhtd->bhjd" if w.dim() == 3 else "jt,bhtd->bhjd", w, x)
    kp = -(-t // stride)
    pad = kp * stride - t
    if proj == "max":
        return F.pad(x, (0, 0, 0, pad), value=-math.inf).reshape(b, h, kp, stride, d).amax(3)
    xs = F.pad(x, (0, 0, 0, pad)).reshape(b, h, kp, stride, d)
    if proj == "mean":
        present = (t - torch.arange(kp) * stride).clamp(max=stride).to(x.dtype)
        return xs.sum(3) / present.reshape(1, 1, kp, 1)
    return torch.einsum("hr,bhjrd->bhjd" if w.dim() == 2 else "r,bhjrd->bhjd", w, xs)


# ---------------------------------------------------------------- the model's parts


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg):
    return nn.LayerNorm(cfg["d_model"], eps=1e-5) if cfg["norm"] == "layernorm" else RMSNorm(cfg["d_model"])


def alibi_slopes(h):
    """2^(-8 i / h), i = 1..h, for a power of two; otherwise those of the nearest lower power of
    two n, then every other slope of 2n."""
    def power_of_two(n):
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]
    n = 2 ** math.floor(math.log2(h))
    if n == h:
        return power_of_two(h)
    return power_of_two(n) + power_of_two(2 * n)[0::2][: h - n]


def rotate(x, dims, xpos=0):
    """RoPE on the leading `dims` features of x [B, H, T, D] in adjacent pairs, pair i turned by
    t 10000^(-2i / dims); with xpos = +1 (q) or -1 (k) also scaled by zeta_i^(xpos t' / 512),
    zeta_i = (2i + 0.4 dims) / (1.4 dims), t' = t + floor(-T / 2)."""
    t, pairs = x.shape[2], dims // 2
    idx = torch.arange(pairs, dtype=torch.float64)
    pos = torch.arange(t, dtype=torch.float64).reshape(t, 1)
    angle = pos * 10000.0 ** (-2.0 * idx / dims)
    scale = torch.ones_like(angle)
    if xpos:
        zeta = (2.0 * idx + 0.4 * dims) / (1.4 * dims)
        scale = zeta ** (xpos * (pos + (-t // 2)) / SCALE_BASE)
    cos, sin = (torch.cos(angle) * scale).to(x.dtype), (torch.sin(angle) * scale).to(x.dtype)
    x1, x2 = x[..., 0:2 * pairs:2], x[..., 1:2 * pairs:2]
    r = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)
    return torch.cat((r, x[..., 2 * pairs:]), -1)


def sinusoidal(t, d):
    """PE[t, 2i] = sin(t w_i), PE[t, 2i + 1] = cos(t w_i), w_i = 10000^(-2i / d)."""
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    a = torch.arange(t, dtype=torch.float64).reshape(t, 1) * w
    return torch.stack((torch.sin(a), torch.cos(a)), -1).flatten(-2)


def phi_fn(x, phi, slope):
    if phi == "identity":
        return x
    if phi == "relu":
        return torch.relu(x)
    if phi == "leakyrelu":
        return F.leaky_relu(x, slope)
    return F.elu(x) + 1


class Attention(nn.Module):
    def __init__(self, cfg, layer=0):
        super().__init__()
        d, h = cfg["d_model"], cfg["heads"]
        self.cfg, self.heads, self.key_size, self.head_size = cfg, h, cfg["key_size"], cfg["head_size"]
        self.layer = layer
        self.q = nn.Linear(d, h * self.key_size)
        self.k = nn.Linear(d, h * self.key_size)
        self.v = nn.Linear(d, h * self.head_size)
        self.o = nn.Linear(h * self.head_size, d)
        for name in POS_BIASES.get(cfg["pos"], (None, ()))[1]:
            setattr(self, name, nn.Parameter(torch.ones(h)))
        if cfg["talking_heads"] in ("pre", "both"):
            self.talking_pre = nn.Linear(h, h, bias=False)
        if cfg["talking_heads"] in ("post", "both"):
            self.talking_post = nn.Linear(h, h, bias=False)
        if cfg["attn"] == "linformer":
            shape = linformer_shape(cfg, layer)
            if shape is not None and cfg["linformer_share"] != "layerwise":
                self.E = nn.Parameter(torch.zeros(shape))
                if cfg["linformer_share"] != "kv":
                    self.F = nn.Parameter(torch.zeros(shape))

    def forward(self, x, shared=None):
        b, t, _ = x.shape
        h = self.heads
        q = self.q(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        k = self.k(x).reshape(b, t, h, self.key_size).transpose(1, 2)
        v = self.v(x).reshape(b, t, h, self.head_size).transpose(1, 2)
        if self.cfg["attn"] == "linear":
            y = self.linear(q, k, v)
        elif self.cfg["attn"] == "linformer":
            y = self.linformer(q, k, v, shared)
        else:
            y = self.softmax(q, k, v)
        return self.o(y.transpose(1, 2).reshape(b, t, h * self.head_size))

    def key_ranges(self, t):
        """[lo_i, hi_i]: the keys query i sees (layers/attention/softmax_op.c's plan)."""
        cfg, causal = self.cfg, self.cfg["causal"]
        i = torch.arange(t)
        lo, hi = torch.zeros(t, dtype=torch.long), (i.clone() if causal else torch.full((t,), t - 1))
        w = cfg["window"]
        if w > 0:
            lo = (i - w + 1).clamp(min=0)
            if not causal:
                hi = (i + w - 1).clamp(max=t - 1)
        if causal and cfg["bca"] == "on":
            blen = max(1, cfg["context"] // 2)
            lo = ((i // blen - 1) * blen).clamp(min=0)
        return lo, hi

    def softmax(self, q, k, v):
        cfg, t = self.cfg, q.shape[2]
        if cfg["pos"] in ("rope", "xpos"):
            xpos = cfg["pos"] == "xpos"
            q, k = rotate(q, cfg["rope_dims"], +1 if xpos else 0), rotate(k, cfg["rope_dims"], -1 if xpos else 0)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.key_size)
        if hasattr(self, "talking_pre"):  # out head g = sum_h W[g, h] in head h
            s = torch.einsum("gh,bhij->bgij", self.talking_pre.weight, s)
        lo, hi = self.key_ranges(t)
        j = torch.arange(t).reshape(1, t)
        hidden = (j < lo.reshape(t, 1)) | (j > hi.reshape(t, 1))
        if cfg["logn"] == "on" and cfg["context"] > 1:
            n = (hi - lo + 1).double()
            lam = torch.clamp(torch.log(n) / math.log(cfg["context"]), min=1.0)
            s = s * lam.to(s.dtype).reshape(t, 1)
        i = torch.arange(t).reshape(t, 1)
        bias = self.score_bias((i - j) if cfg["causal"] else (i - j).abs())
        if bias is not None:
            s = s + bias.to(s.dtype)
        if cfg["attn"] in SCORE_MAPS:
            p = SCORE_MAPS[cfg["attn"]](s, t).masked_fill(hidden, 0.0)
        else:
            p = torch.softmax(s.masked_fill(hidden, float("-inf")), -1)
        if hasattr(self, "talking_post"):
            p = torch.einsum("gh,bhij->bgij", self.talking_post.weight, p)
        return p @ v

    def score_bias(self, delta):
        """[H, T, T] added to the scores, or None; delta = i - j (causal) or |i - j|."""
        scheme = POS_BIASES.get(self.cfg["pos"])
        if scheme is None:
            return None
        d = delta.clamp(min=0).double()  # masked keys (j > i) stay finite
        return scheme[0](self, d)

    def linformer(self, q, k, v, shared=None):
        """Linformer: K' = E K, V' = F V, out = softmax(Q K'^T / sqrt(key_size)) V' (no mask);
        pos=rope rotates q and k first. E, F are this layer's, or `shared` (the model's
        linformer.E) under linformer_share=layerwise; F = E unless share is none or headwise."""
        cfg = self.cfg
        if cfg["pos"] == "rope":
            q, k = rotate(q, cfg["rope_dims"]), rotate(k, cfg["rope_dims"])
        e = shared if cfg["linformer_share"] == "layerwise" else getattr(self, "E", None)
        f = getattr(self, "F", e)
        stride = cfg["context"] // cfg["linformer_k"][self.layer]
        kp = linformer_project(k, e, cfg["linformer_proj"], stride)
        vp = linformer_project(v, f, cfg["linformer_proj"], stride)
        return torch.softmax(q @ kp.transpose(-1, -2) / math.sqrt(self.key_size), -1) @ vp

    def linear(self, q, k, v):
        """Linear attention / cosFormer: out_i = sum_j (q~_i . k~_j) v_j / max(sum_j q~_i . k~_j, 1e-6),
        j <= i when causal; with pos=rope the numerator uses the rotated features (RoFormer)."""
        cfg, t = self.cfg, q.shape[2]
        fq, fk = phi_fn(q, cfg["phi"], cfg["leaky_slope"]), phi_fn(k, cfg["phi"], cfg["leaky_slope"])
        if cfg["reweight"] == "cos":
            ang = (math.pi / 2 * torch.arange(1, t + 1, dtype=torch.float64) / t).reshape(1, 1, t, 1)
            sn, cs = torch.sin(ang).to(q.dtype), torch.cos(ang).to(q.dtype)
            fq, fk = torch.cat([fq * sn, fq * cs], -1), torch.cat([fk * sn, fk * cs], -1)
        a0 = fq @ fk.transpose(-1, -2)
        a = a0
        if cfg["pos"] == "rope":
            a = rotate(fq, cfg["rope_dims"]) @ rotate(fk, cfg["rope_dims"]).transpose(-1, -2)
        if cfg["causal"]:
            a, a0 = torch.tril(a), torch.tril(a0)
        den = torch.clamp_min(a0.sum(-1, keepdim=True), DEN_EPS)
        return (a @ v) / den


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.fc = nn.Linear(d, cfg["mlp_ratio"] * d)
        self.proj = nn.Linear(cfg["mlp_ratio"] * d, d)

    def forward(self, x):
        return self.proj(gelu_tanh(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg, layer=0):
        super().__init__()
        self.ln1 = make_norm(cfg)
        self.attn = Attention(cfg, layer)
        self.ln2 = make_norm(cfg)
        self.mlp = Mlp(cfg)

    def forward(self, x, shared=None):
        x = x + self.attn(self.ln1(x), shared)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """attnlab's model; cfg is a checkpoint's config (resolved here). forward(ids [B, T]) gives
    the logits [B, T, vocab]. Under attn=linformer with linformer_share=layerwise the model owns
    the one projection, linformer.E, and hands it to every layer."""

    def __init__(self, cfg):
        super().__init__()
        cfg = resolve_config(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab"], cfg["d_model"])
        if cfg["pos"] == "learned":
            self.pos_emb = nn.Embedding(cfg["context"], cfg["d_model"])
        if cfg["attn"] == "linformer" and cfg["linformer_share"] == "layerwise":
            shape = linformer_shape(cfg, 0)
            if shape is not None:  # one E for every layer, held once: linformer.E
                self.linformer = nn.Module()
                self.linformer.E = nn.Parameter(torch.zeros(shape))
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg["layers"]))
        self.ln_f = make_norm(cfg)
        if not cfg["tie_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab"], bias=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok_emb(ids)
        if self.cfg["pos"] == "learned":
            if t > self.cfg["context"]:
                raise ValueError(f"attnlab_torch: pos=learned has positions up to its context "
                                 f"{self.cfg['context']} only, not length {t}")
            x = x + self.pos_emb.weight[:t]
        if self.cfg["pos"] == "sinusoidal":
            x = x + (sinusoidal(t, self.cfg["d_model"]) / math.sqrt(self.cfg["d_model"])).to(x.dtype)
        shared = self.linformer.E if hasattr(self, "linformer") else None
        for b in self.blocks:
            x = b(x, shared)
        x = self.ln_f(x)
        w = self.tok_emb.weight if self.cfg["tie_embeddings"] else self.lm_head.weight
        return x @ w.T


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
            if key not in ("window", "logn", "bca"):
                raise CheckpointError(None, f"only window, logn and bca can change at evaluation, not {key}")
            try:
                cfg[key] = _option_value(key, value)
            except CheckpointError as err:
                raise CheckpointError(None, f"override {err.reason}") from None
        try:
            resolved = resolve_config(cfg)
        except CheckpointError as err:
            raise CheckpointError(path, err.reason) from None
        shapes = model_shapes(resolved)
        check_tensors(path, sf.entries, shapes)
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
