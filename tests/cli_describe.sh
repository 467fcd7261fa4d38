#!/bin/sh
# tests/cli_describe.sh: one source for the tables (no PyTorch needed).
#
# ./train --describe writes the C side's tables as JSON: the option table,
# the attention kernels, the position schemes and the optimizers. make writes
# it to python/attnlab_tables.json, which python/attnlab_tables.py reads, so
# that python/ holds no copy of a C table. Checked here:
# 1. --describe is JSON of the right form, and python/attnlab_tables.json is
#    exactly it (a build that forgot to write it fails);
# 2. every registry is whole in it: every value --help lists for --attn, --pos
#    and --optimizer is there, every option --help lists is a row (and no
#    other), with its default;
# 3. attnlab_tables (imported without torch or numpy) reads it: its OPTIONS,
#    kernels, schemes, optimizers and owners are the JSON's;
# 4. no python/*.py file holds a list of a C table's names: no dict, tuple,
#    list or set literal names two or more options, attn values, pos values
#    or optimizers (a decorator registering one PyTorch form names one).
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_describe ./train
PY=${PYTHON:-/usr/bin/python3}

# ------------------------------------------------------------- 1. the form
if ./train --describe >"$T/tables.json" 2>"$T/err" && "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "attnlab-tables" and d["version"] == 1, "format"
for key in ("options", "kernels", "positions", "optimizers"):
    assert isinstance(d[key], list) and d[key], key
' "$T/tables.json" 2>>"$T/err"; then
    pass "./train --describe writes the tables as JSON"
else
    fail "./train --describe writes the tables as JSON" "exit or form wrong"
fi
if cmp -s "$T/tables.json" python/attnlab_tables.json; then
    pass "python/attnlab_tables.json is ./train --describe's output"
else
    fail "python/attnlab_tables.json is ./train --describe's output" "differs or missing (make writes it)"
fi

# ----------------------------------------------------- 2. whole, as --help says
./train --help >"$T/help" 2>&1
"$PY" - "$T/tables.json" "$T/help" >"$T/out" 2>"$T/err" <<'PYEOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
help_rows = {}
for line in open(sys.argv[2]):
    m = re.match(r"  --(\w+) .*\(default: ([^;)]*)", line)
    if m:
        help_rows[m.group(1)] = m.group(2)
rows = {r["name"]: r for r in d["options"]}
bad = sorted(set(help_rows) ^ set(rows))
if bad:
    print(f"rows differ: {bad}")
def values(name):
    m = re.search(rf"^  --{name} .*\(default: [^;]*; (.*)\)$", open(sys.argv[2]).read(), re.M)
    return m.group(1).split(", ") if m else None
for name, key in (("attn", None), ("pos", "positions"), ("optimizer", "optimizers")):
    listed = values(name)
    if listed != rows[name]["choices"]:
        print(f"--{name}: --help lists {listed}, the JSON {rows[name]['choices']}")
    if key and [x["name"] for x in d[key]] != listed:
        print(f"{key}: {[x['name'] for x in d[key]]}, --help lists {listed}")
attn = [k["name"] for k in d["kernels"]] + [p["name"] for k in d["kernels"] for p in k["presets"]]
if sorted(attn) != sorted(rows["attn"]["choices"]):
    print(f"kernels and presets {attn}, attn values {rows['attn']['choices']}")
for name, shown in help_rows.items():
    r = rows.get(name)
    if r is None:
        continue
    want = r["default"]
    got = shown
    if isinstance(want, bool):
        ok = got == ("true" if want else "false")
    elif isinstance(want, (int, float)):
        try:
            ok = float(got) == float(want)
        except ValueError:
            ok = False
    else:
        ok = got == want or (got in ("", '""') and want == "") or got == f'"{want}"'
    if not ok:
        print(f"--{name}: default {got!r} in --help, {want!r} in the JSON")
print("ok")
PYEOF
if [ "$(cat "$T/out")" = ok ]; then pass "every option, kernel, scheme and optimizer --help lists, with its default"; else fail "the JSON is --help's tables" "$(head -n 3 "$T/out" | tr '\n' ' ')"; fi

# ------------------------------------------------- 3. attnlab_tables reads it
if (cd python && ATTNLAB_TABLES="$T/tables.json" "$PY" -S -c '
import sys
sys.modules["torch"] = sys.modules["numpy"] = None  # neither may be needed
import json, attnlab_tables as t
d = json.load(open(sys.argv[1]))
assert list(t.OPTIONS) == [r["name"] for r in d["options"]]
assert list(t.KERNELS) == [k["name"] for k in d["kernels"]]
assert list(t.POSITIONS) == [p["name"] for p in d["positions"]]
assert list(t.OPTIMIZERS) == [o["name"] for o in d["optimizers"]]
for k in d["kernels"]:
    assert t.KERNEL_OPTIONS[k["name"]] == tuple(k["options"])
    for p in k["presets"]:
        assert t.PRESETS[p["name"]] == (k["name"], p["fixes"])
for p in d["positions"]:
    for o in p["options"]:
        assert p["name"] in t.POS_OPTIONS[o]
for r in d["options"]:
    kind, default, allowed = t.OPTIONS[r["name"]]
    if kind == "choice":
        assert allowed == tuple(r["choices"]), r["name"]
print("ok")
' "$T/tables.json") >"$T/out" 2>"$T/err" && [ "$(cat "$T/out")" = ok ]; then
    pass "attnlab_tables reads the JSON, without torch or numpy"
else
    fail "attnlab_tables reads the JSON, without torch or numpy" "$(tail -n 1 "$T/err")"
fi

# ------------------------------------------------ 4. no hand copy in python/
"$PY" - "$T/tables.json" python/*.py >"$T/out" 2>"$T/err" <<'PYEOF'
import ast, json, sys
d = json.load(open(sys.argv[1]))
sets = {
    "options": {r["name"] for r in d["options"]},
    "attn values": set(next(r for r in d["options"] if r["name"] == "attn")["choices"]),
    "pos values": {p["name"] for p in d["positions"]},
    "optimizers": {o["name"] for o in d["optimizers"]},
}
found = []
for path in sys.argv[2:]:
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Dict):
            items = node.keys
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        else:
            continue
        strings = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        for what, names in sets.items():
            named = strings & names
            if len(named) >= 2:
                found.append(f"{path}:{node.lineno}: {what} {sorted(named)}")
print("\n".join(found) if found else "ok")
PYEOF
if [ "$(cat "$T/out")" = ok ]; then pass "no literal in python/ lists a C table's names"; else fail "no literal in python/ lists a C table's names" "$(head -n 3 "$T/out" | tr '\n' ' ')"; fi

cli_end
