"""safetensors_io.py: F32 safetensors read/write for the reference scripts.

Same format as core/safetensors.c: an 8-byte little-endian u64 header length N, N bytes of
JSON (padded with spaces so the data starts at a multiple of 8), then the tensors as
contiguous little-endian float32, in the order given. Only json and struct are needed;
numpy (and torch, if the tensors are torch tensors) are imported when used.

    save(path, {"w": tensor_or_array, ...}, {"format": "attnlab"})
    tensors, metadata = load(path)   # name -> numpy float32 array, dict[str, str]

Like the C writer, save() writes "<path>.tmp" and renames it, so a failed run never leaves
a half-written fixture.
"""

import json
import os
import struct

MAX_HEADER_BYTES = 100_000_000  # the same cap st_open uses


def _to_f32_le_bytes(name, value):
    """Returns (shape, bytes) for a torch tensor, numpy array or nested list."""
    import numpy as np

    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach().to("cpu").contiguous().float().numpy()
    # order="C" rather than np.ascontiguousarray, which would turn a scalar into shape [1].
    arr = np.asarray(value, dtype="<f4", order="C")
    if arr.ndim > 4:
        raise ValueError(f"tensor '{name}': {arr.ndim} dims (at most 4 supported)")
    return list(arr.shape), arr.tobytes()


def save(path, tensors, metadata=None):
    if "__metadata__" in tensors:
        raise ValueError("tensor name '__metadata__' is reserved")
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata {k!r}: keys and values must be str")
        header["__metadata__"] = dict(metadata)
    blobs = []
    offset = 0
    for name, value in tensors.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"bad tensor name {name!r}")
        shape, data = _to_f32_le_bytes(name, value)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # data section starts 8-byte aligned
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def load(path):
    """Returns ({name: numpy float32 array}, {key: value}); tensors in header order."""
    import numpy as np

    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: file is {len(raw)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > MAX_HEADER_BYTES or n > len(raw) - 8:
        raise ValueError(f"{path}: bad header length {n} (file is {len(raw)} bytes)")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    data = memoryview(raw)[8 + n:]
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, ent in header.items():
        if ent.get("dtype") != "F32":
            raise ValueError(f"{path}: tensor '{name}': dtype {ent.get('dtype')} not supported (only F32)")
        shape = [int(d) for d in ent["shape"]]
        begin, end = (int(x) for x in ent["data_offsets"])
        numel = 1
        for d in shape:
            numel *= d
        if not 0 <= begin <= end <= len(data) or end - begin != 4 * numel:
            raise ValueError(f"{path}: tensor '{name}': bad data_offsets [{begin}, {end}] for shape {shape}")
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(shape).copy()
    return tensors, metadata
