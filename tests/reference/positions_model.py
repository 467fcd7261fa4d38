#!/usr/bin/python3
"""positions_model.py: a PyTorch reference case for every position scheme.

Every value of the `pos` option (layers/attention/positions.c) runs the same
small model, TEMPLATE with that scheme, through gpt.py's model (its
Attention.score_bias, rope, sinusoidal and learned table are the schemes'
reference code) and gpt.py's run_config: float32 weights drawn from a
generator seeded by the scheme's name (so adding a scheme leaves the others'
cases as they were), then in float64 the logits, the loss, every gradient,
the clipped gradient norm and one AdamW step.

Writes tests/fixtures/positions_model.safetensors with, per scheme NAME, the
tensors of gpt.py's layout under "NAME/" (NAME/param/..., NAME/logits, ...)
and the metadata "NAME/config". tests/test_model.c (the positions case)
walks the registry and runs every scheme's case in C; a scheme without one
fails there.

A new scheme: its line in SCHEMES (its options, if any, at their defaults),
its formula in gpt.py, then `make fixtures`.

Usage: /usr/bin/python3 tests/reference/positions_model.py tests/fixtures/positions_model.safetensors
"""

import json
import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
import safetensors_io  # noqa: E402

# Keep in step with pos_case in tests/test_model.c.
TEMPLATE = dict(vocab=40, layers=2, d_model=16, heads=3, key_size=8, head_size=6, mlp_ratio=2, context=8,
                norm="layernorm", tie_embeddings=True, batch=2, length=8, ignored=1)

# Every scheme, with its own options at the option table's defaults.
SCHEMES = {
    "none": {},
    "learned": {},
    "sinusoidal": {},
    "rope": {},
    "alibi": {},
    "kerple_power": {},
    "kerple_log": {},
    "sandwich": {"sandwich_lambda": 1.0},
    "xpos": {},
    "alibi_log": {},
}


def main(path):
    out, meta = {}, {"format": "attnlab-fixture", "made_by": "tests/reference/positions_model.py",
                     "torch": torch.__version__}
    for name, options in SCHEMES.items():
        cfg = dict(TEMPLATE, pos=name, **options)
        gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        gpt.run_config(0, cfg, gen, out, pre=f"{name}/")
        meta[f"{name}/config"] = json.dumps(cfg)
    safetensors_io.save(path, out, meta)
    print(f"wrote {path}: {len(SCHEMES)} schemes, {len(out)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: positions_model.py OUT.safetensors")
    main(sys.argv[1])
