"""attnlab_tables.py: the C side's tables, read, and a checkpoint's config checked against them.

python/attnlab_tables.json is what `./train --describe` prints (make writes it at every build;
tests/cli_describe.sh checks the two agree): the option table, the attention kernels (their
options, presets and capabilities), the position schemes (their hooks) and the optimizers
(their state and options). Everything this file and attnlab_torch know of those tables comes
from it; none is copied here. Needs neither torch nor numpy. ATTNLAB_TABLES names another copy
of the JSON.
"""

import json
import math
import os
import struct


class CheckpointError(ValueError):
    """Every refusal of attnlab_torch: a checkpoint or safetensors file that is not what it claims
    (then `path` names it and the message starts "attnlab_torch: PATH: "), or a config it
    cannot run. `reason` is the message without the prefix."""

    def __init__(self, path, reason):
        self.path, self.reason = path, reason
        super().__init__(f"attnlab_torch: {path}: {reason}" if path is not None else f"attnlab_torch: {reason}")


def _refuse(what):
    raise CheckpointError(None, f"{what} is not supported yet")


def _bad(what, why):
    raise CheckpointError(None, f"{what}: {why}")


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



# ---------------------------------------------------------------- the tables

TABLES_PATH = os.environ.get("ATTNLAB_TABLES") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                 "attnlab_tables.json")


def _read_tables(path):
    try:
        with open(path) as f:
            tables = json.load(f)
    except OSError as err:
        raise ImportError(f"attnlab_tables: cannot read {path} ({err.strerror}): it is made by `make` from "
                          "./train --describe") from None
    if tables.get("format") != "attnlab-tables" or tables.get("version") != 1:
        raise ImportError(f"attnlab_tables: {path} is not ./train --describe's output (format attnlab-tables, "
                          "version 1)")
    return tables


TABLES = _read_tables(TABLES_PATH)

_KINDS = {"int": "int", "int64": "int", "float": "float", "choice": "choice", "bool": "bool", "string": "string",
          "ints": "ints"}


def _row(r):
    """An option-table row as (kind, default, allowed): allowed (lo, hi) for int, ints and float,
    the values for choice and bool, the byte limit for string."""
    kind = _KINDS[r["type"]]
    if kind in ("int", "ints", "float"):
        lo, hi = r["min"], r["max"]
        allowed = (int(lo), int(hi)) if kind != "float" else (lo, hi)
    elif kind == "choice":
        allowed = tuple(r["choices"])
    elif kind == "bool":
        allowed = (False, True)
    else:
        allowed = r["size"]
    default = r["default"]
    if kind in ("int", "ints") and isinstance(default, (int, float)):
        default = int(default)
    return kind, default, allowed


# The option table: name -> (kind, default, allowed). A checkpoint's config must give each
# value as its kind: ints as JSON numbers of integer value ("2" is refused), bools as
# true / false, choices and strings as strings; linformer_k as a number or "8,4".
OPTIONS = {r["name"]: _row(r) for r in TABLES["options"]}
# How many values an ints option holds (one per layer).
INTS_SIZE = {r["name"]: r["size"] for r in TABLES["options"] if r["type"] == "ints"}
# The attention kernels, position schemes and optimizers by name, as --describe gives them.
KERNELS = {k["name"]: k for k in TABLES["kernels"]}
POSITIONS = {p["name"]: p for p in TABLES["positions"]}
OPTIMIZERS = {o["name"]: o for o in TABLES["optimizers"]}
# Who owns an option: a kernel, position schemes, an optimizer.
KERNEL_OPTIONS = {k["name"]: tuple(k["options"]) for k in TABLES["kernels"]}
KERNEL_TITLES = {k["name"]: k["title"] for k in TABLES["kernels"]}
PRESETS = {p["name"]: (k["name"], dict(p["fixes"])) for k in TABLES["kernels"] for p in k["presets"]}
POS_OPTIONS = {}
for _p in TABLES["positions"]:
    for _name in _p["options"]:
        POS_OPTIONS[_name] = POS_OPTIONS.get(_name, ()) + (_p["name"],)
OPTIM_OPTIONS = {o["name"]: tuple(o["options"]) for o in TABLES["optimizers"]}
# The sampling options objective=mlm refuses, and the options that may change at evaluation.
CLM_SAMPLING = tuple(TABLES["clm_sampling"])
INFERENCE = tuple(TABLES["inference"])


def _float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


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
            if not ok or v != math.floor(v) or not lo <= v <= hi or len(out) == INTS_SIZE[name]:
                _bad(f"--{name}", f"expected up to {INTS_SIZE[name]} comma-separated integers in [{lo}, {hi}] (one per "
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
        return _float32(value) != _float32(default)
    if kind == "ints":
        return value != [default]
    return value != default


def check_config(obj):
    """The config of a checkpoint (a JSON object) as experiments/run/options.c's config_from_json and
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
    for owner, names in OPTIM_OPTIONS.items():
        for name in names:
            if owner != cfg["optimizer"] and _changed(cfg, name):
                raise CheckpointError(None, f"--{name} applies to optimizer={owner}, not "
                                      f"optimizer={cfg['optimizer']}")
    if cfg["objective"] == "mlm":
        for name in CLM_SAMPLING:
            if _changed(cfg, name):
                _bad(f"--{name}", "objective=mlm is not sampled left to right (its samples are a fill-in demo)")
    if cfg["min_lr"] > cfg["lr"]:
        raise CheckpointError(None, f"--min_lr {cfg['min_lr']:g} is above --lr {cfg['lr']:g}")
    return cfg


