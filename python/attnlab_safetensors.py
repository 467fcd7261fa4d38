"""attnlab_safetensors.py: safetensors files and attnlab checkpoints read and checked as the C
loader checks them (core/safetensors.c, experiments/run/checkpoint.c): the file, its header, its
tensors, the checkpoint's metadata and that it holds exactly its model's tensors. Needs numpy.
"""

import json
import math
import os
import re
import stat
import struct

import numpy as np

from attnlab_tables import OPTIMIZERS, CheckpointError, _no_constant, _pairs, check_config

# ---------------------------------------------------------------- safetensors
# The checks of core/safetensors.c's st_open, in its order and with its words: a regular file;
# the 8-byte header length (at most ST_MAX_HEADER_BYTES, inside the file); the header, JSON
# with no repeated key; every tensor F32 with at most 4 dims and data_offsets that lie in the
# data section and span its shape; no name twice; the tensors tiling the data section.

ST_MAX_HEADER_BYTES = 100_000_000
ST_MAX_DIMS = 4
_JSON_INT_MAX = 2 ** 53  # cJSON keeps numbers as doubles: above this they are not exact
_SIZE_MAX = 2 ** 64 - 1


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
        size = len(text.encode("utf-8", "surrogatepass"))
        if 0 < size <= at:  # cJSON puts an error at the end of the text on its last byte
            at = size - 1
        if err.msg == "Extra data":
            raise CheckpointError(path, f"{what} has stray bytes after the JSON (at byte {at})") from None
        raise CheckpointError(path, f"{what} is not valid JSON (near byte {at})") from None  # as C says it
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
    import torch  # only here: the checks above need numpy alone
    with SafetensorsFile(path) as sf:
        return {name: torch.from_numpy(np.array(sf.array(name))) for name in sf.entries}, sf.meta


# ---------------------------------------------------------------- the checkpoint
# experiments/run/checkpoint.c's checkpoint_open, in its order: format, format_version, config,
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



def check_tensors(path, entries, shapes, optimizer="adamw"):
    """The file's tensors are exactly the model's (shapes), with their shapes, and either all of
    the optimizer's state (AdamW's moments optim.m.NAME, optim.v.NAME: the names
    OPTIMIZERS[optimizer]["state"] gives) or none."""
    prefixes = OPTIMIZERS[optimizer]["state"]
    for name, shape in shapes.items():
        if name not in entries:
            raise CheckpointError(path, f"tensor '{name}' not found")
        if entries[name][0] != shape:
            raise CheckpointError(path, f"tensor '{name}': shape {list(entries[name][0])} in file, expected "
                                  f"{list(shape)}")
    optim = bool(prefixes) and prefixes[0] + "tok_emb.weight" in entries
    for name, shape in shapes.items():
        for moment in prefixes:
            got = entries.get(moment + name)
            if optim and got is None:
                raise CheckpointError(path, f"tensor '{moment + name}' not found (the file holds the optimizer's "
                                      "state of some tensors only)")
            if got is not None and got[0] != shape:
                raise CheckpointError(path, f"tensor '{moment + name}': shape {list(got[0])} in file, expected "
                                      f"{list(shape)}")
    wanted = set(shapes) | ({m + n for m in prefixes for n in shapes} if optim else set())
    extra = sorted(set(entries) - wanted)
    if extra:
        raise CheckpointError(path, f"tensor '{extra[0]}' is not one of the model's (a checkpoint holds exactly "
                              "its model's tensors)")


