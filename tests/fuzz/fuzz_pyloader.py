"""tests/fuzz/fuzz_pyloader.py: fuzzes python/attnlab_torch.py's header parsing.

    /usr/bin/python3 tests/fuzz/fuzz_pyloader.py [SECONDS]   (default: $FUZZ_TIME, else 30)

Run from the repository root. A plain random mutator over the committed seeds
(tests/fuzz/checkpoint/*.safetensors and tests/fuzz/safetensors/*): each round
takes a seed and rewrites its header, at the byte level (flips, inserts,
deletes, a copied run, the length field off by a little or a lot, the file cut
short) or through the JSON (a tensor entry's or a metadata or config value
swapped for another kind: a string, a huge or negative number, a bool, null, a
list, a deep nest; a key repeated or dropped; a tensor added), then loads the
result with attnlab_torch.load (one round in five: read_safetensors). A load and an attnlab_torch.CheckpointError
are the two allowed outcomes; any other exception, or a round longer than 10 s,
is a failure: the input is kept in $TMPDIR and the script exits 1. The seed of
the random generator is FUZZ_SEED (default: the time), printed, so a failure
can be replayed. Without PyTorch it says so and exits 0.
"""

import glob
import json
import os
import random
import signal
import struct
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
try:
    import attnlab_torch as at
except ImportError as missing:  # no PyTorch or numpy here: nothing to fuzz
    print(f"fuzz: pyloader: skip: {missing}")
    sys.exit(0)

ODD_VALUES = ["", "x", "2", "-1", "1e400", "nan", -1, 0, 1, 2, 3, 7, 64, 65, 2 ** 31, 2 ** 53 + 1, 2 ** 64, 10 ** 30,
              -(2 ** 63), 0.5, 1e9, 1e-300, True, False, None, [], {}, [1, 2], {"a": 1}, "F16", "F32", "attnlab",
              "\u00ff\ud800", "8,4", "0,0", "__import__('os').system('true')"]


class Hang(Exception):
    pass


def split(blob):
    """(header text, data) of a safetensors file, or None when its header is not JSON text."""
    if len(blob) < 8:
        return None
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        return None
    try:
        return blob[8:8 + n].decode("utf-8"), blob[8 + n:]
    except UnicodeDecodeError:
        return None


def join(header, data, delta=0):
    raw = header.encode("utf-8", "surrogatepass")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", max(0, len(raw) + delta)) + raw + data


def odd(rng):
    if rng.random() < 0.1:
        depth = rng.choice([10, 1000, 100000])
        return json.loads("[" * min(depth, 500) + "]" * min(depth, 500)) if depth <= 500 else "DEEP"
    return rng.choice(ODD_VALUES)


def dump(obj):
    text = json.dumps(obj, separators=(",", ":"), allow_nan=True)
    return text.replace('"DEEP"', "[" * 100000 + "]" * 100000)


def mutate_json(rng, header, data):
    """The header changed through its JSON: a value, a key, a tensor, or the config inside."""
    obj = json.loads(header)
    if not isinstance(obj, dict):
        return join(header, data)
    keys = list(obj)
    choice = rng.randrange(6)
    meta = obj.get("__metadata__")
    if choice == 0 and isinstance(meta, dict) and isinstance(meta.get("config"), str):
        cfg = json.loads(meta["config"])
        key = rng.choice(list(cfg)) if cfg and rng.random() < 0.9 else "bogus"
        cfg[key] = odd(rng)
        meta["config"] = dump(cfg)
    elif choice == 1 and isinstance(meta, dict) and meta:
        meta[rng.choice(list(meta))] = odd(rng) if rng.random() < 0.3 else str(odd(rng))
    elif choice == 2 and keys:
        entry = obj[rng.choice(keys)]
        if isinstance(entry, dict) and entry:
            field = rng.choice(list(entry))
            value = entry[field]
            if isinstance(value, list) and value and rng.random() < 0.7:
                value[rng.randrange(len(value))] += rng.choice([-4, -1, 1, 4, 2 ** 40])
            else:
                entry[field] = odd(rng)
    elif choice == 3 and keys:
        del obj[rng.choice(keys)]
    elif choice == 4:
        obj[rng.choice(["bogus.weight", "optim.m.bogus", "ln_f.weight"])] = {
            "dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
        data += b"\0\0\0\0"
    else:  # a key repeated: the text of one entry written twice
        text = dump(obj)
        if keys:
            key = rng.choice(keys)
            one = dump({key: obj[key]})[1:-1]
            text = text[:-1] + "," + one + "}"
        return join(text, data)
    return join(dump(obj), data)


def mutate_bytes(rng, blob):
    """blob changed byte by byte, mostly inside its header."""
    b = bytearray(blob)
    (n,) = struct.unpack("<Q", blob[:8]) if len(blob) >= 8 else (0,)
    end = min(len(b), 8 + n) if n < len(b) else len(b)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        if not b:
            break
        at = rng.randrange(min(len(b), max(end, 9)))
        op = rng.randrange(6)
        if op == 0:
            b[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[at] = rng.choice(b'{}[]",:0123456789-.eE \\tfnu\xff\x00')
        elif op == 2:
            b.insert(at, rng.randrange(256))
        elif op == 3:
            del b[at]
        elif op == 4:
            size = rng.randrange(1, 64)
            b[at:at] = b[rng.randrange(len(b)):][:size]
        else:
            del b[at:at + rng.randrange(1, 64)]
    if rng.random() < 0.3 and len(b) >= 8:  # the length field fixed, or broken
        delta = rng.choice([0, 0, -1, 1, -8, 8, 2 ** 40, -(2 ** 20)])
        b[:8] = struct.pack("<Q", max(0, min(2 ** 64 - 1, len(b) - 8 - len(blob) + 8 + n + delta)))
    if rng.random() < 0.05:
        del b[rng.randrange(len(b) + 1):]
    return bytes(b)


def mutate(rng, blob):
    parts = split(blob)
    if parts is not None and rng.random() < 0.5:
        try:
            return mutate_json(rng, *parts)
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
            pass  # the mutator's own trouble with an earlier mutation's JSON: mutate the bytes instead
    return mutate_bytes(rng, blob)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("FUZZ_TIME", "30"))
    seed = int(os.environ.get("FUZZ_SEED", str(time.time_ns() % 2 ** 32)))
    here = os.path.dirname(os.path.abspath(__file__))
    seeds = [open(f, "rb").read() for f in sorted(glob.glob(os.path.join(here, "checkpoint", "*.safetensors")) +
                                                   glob.glob(os.path.join(here, "safetensors", "*")))]
    if not seeds:
        print("fuzz: pyloader: no seeds in tests/fuzz/checkpoint", file=sys.stderr)
        return 1
    rng = random.Random(seed)
    out = tempfile.mkdtemp(prefix="attnlab_fuzz_pyloader.")
    path = os.path.join(out, "input.safetensors")

    def alarm(*_):
        raise Hang()

    signal.signal(signal.SIGALRM, alarm)
    counts = {"load": 0, "refuse": 0}
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        blob = rng.choice(seeds)
        for _ in range(rng.choice([1, 1, 2, 3])):
            blob = mutate(rng, blob)
        with open(path, "wb") as f:
            f.write(blob)
        signal.alarm(10)
        try:
            if rng.random() < 0.2:  # the safetensors reader alone, as the PyTorch fixtures use it
                at.read_safetensors(path)
            else:
                at.load(path)
            counts["load"] += 1
        except at.CheckpointError:
            counts["refuse"] += 1
        except BaseException as err:  # noqa: B036 (a hang or any other exception is the finding)
            signal.alarm(0)
            kept = os.path.join(out, "failure.safetensors")
            os.replace(path, kept)
            what = "hang (over 10 s)" if isinstance(err, Hang) else f"{type(err).__name__}: {err}"[:300]
            if not isinstance(err, Hang):
                traceback.print_exc()
            print(f"fuzz: pyloader: FAILED after {sum(counts.values()) + 1} executions (FUZZ_SEED={seed}): {what}; "
                  f"the input: {kept}")
            return 1
        signal.alarm(0)
    os.remove(path)
    os.rmdir(out)
    print(f"fuzz: pyloader: {sum(counts.values())} executions ({counts['load']} loads, {counts['refuse']} refusals), "
          f"0 unexpected exceptions (FUZZ_SEED={seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
