#!/usr/bin/env python3
"""Decode a real small model with MAC-Attention inside its forward pass and compare what it
predicts with full attention: next-token KL divergence, top-1 agreement and bits per byte.

numpy runs the rest of the model (embedding, RMSNorm, projections, SwiGLU MLP, head); the
mactune CPU engine runs every layer's attention through the Python bindings, one decode step
per position (mactune.inloop). Unlike per-step replay, a reused summary's error here feeds the
later layers and the later tokens, as in a served model.

    python3 examples/python/model_in_the_loop.py                 # defaults below
    python3 examples/python/model_in_the_loop.py --model tinylm.safetensors \\
        --text notes.txt --bytes 4096 --taus 0.45,0.75 --r 256 --json out.json

The model (46 MB, never committed) is taken from --model, else $MACTUNE_TINYLM, else
shared/data/models/tinylm/tinylm.safetensors beside the checkout or above it. Default texts,
none in the model's training data (C/C++ headers, licence texts, copyright files, man pages):
this repository's docs/design.md (written after the model was trained), a C source file and
a README of Debian packages (those that are installed).
"""

import argparse
import json
import os
import pathlib
import sys
import time

import mactune
from mactune import inloop

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_TEXTS = [  # (path, offset): the offset skips a licence header
    (ROOT / "docs" / "design.md", 0),
    (pathlib.Path("/usr/share/doc/zlib1g-dev/examples/gun.c"), 4096),
    (pathlib.Path("/usr/share/doc/gcc-12-base/README.Bugs"), 0),
]


def default_model():
    if os.environ.get("MACTUNE_TINYLM"):
        return pathlib.Path(os.environ["MACTUNE_TINYLM"])
    for d in ROOT.parents:
        p = d / "shared" / "data" / "models" / "tinylm" / "tinylm.safetensors"
        if p.exists():
            return p
    return None


def window(path, offset, n):
    """n bytes of the file from the first line start at or after offset."""
    raw = pathlib.Path(path).read_bytes()
    if offset > 0:
        nl = raw.find(b"\n", offset)
        offset = nl + 1 if nl >= 0 else offset
    w = raw[offset:offset + n]
    if len(w) < n:
        sys.exit(f"mactune: error: {path}: only {len(w)} bytes from offset {offset}, "
                 f"need --bytes {n}")
    return list(w)


def floats(s):
    return [float(x) for x in s.split(",") if x]


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=pathlib.Path, default=default_model())
    ap.add_argument("--text", type=pathlib.Path, action="append",
                    help="text file (repeatable; default: the texts named in the docstring)")
    ap.add_argument("--offset", type=int, default=0, help="byte offset in each --text")
    ap.add_argument("--bytes", type=int, default=2048, help="window length (tokens)")
    ap.add_argument("--taus", type=floats, default=floats("0.45,0.6,0.75,0.9"))
    ap.add_argument("--K", type=ints, default=ints("512"))
    ap.add_argument("--r", type=ints, default=ints("256,64"))
    ap.add_argument("--min-context", type=int, default=0)
    ap.add_argument("--accept-eps", type=float, default=1.0)
    ap.add_argument("--kv-dtype", default="f32")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", type=pathlib.Path, help="write every row as JSON")
    a = ap.parse_args()
    if a.model is None or not a.model.exists():
        sys.exit("mactune: error: no model file: give --model or set MACTUNE_TINYLM "
                 f"(looked for {a.model or 'shared/data/models/tinylm/tinylm.safetensors'})")
    texts = [(t, a.offset) for t in a.text] if a.text else [
        (p, o) for p, o in DEFAULT_TEXTS if p.exists()]

    model = inloop.Model.from_file(a.model)
    c = model.config
    probe = inloop.EngineAttention(c.rope_theta, mactune.MacParams(), a.kv_dtype, a.threads)
    engine = probe.session(c.n_heads, c.n_kv_heads, c.head_dim, 16).instance_name
    print(f"model {a.model.name}: {c.n_layers} layers, {c.n_heads}/{c.n_kv_heads} heads of "
          f"{c.head_dim}, rope_theta {c.rope_theta:g}; {a.bytes} bytes per text; attention "
          f"{engine} (full attention: its baseline)", flush=True)
    settings = [mactune.MacParams(ring_capacity=K, band=r, tau=t, min_context=a.min_context,
                                  accept_eps=a.accept_eps)
                for K in a.K for r in a.r for t in a.taus]
    rows = []
    print("| text | K | r | tau | hit rate | skip | KL mean (nats) | KL p99 | top-1 | "
          "bpb full | bpb MAC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path, offset in texts:
        toks = window(path, offset, a.bytes)
        t0 = time.time()
        for row in inloop.evaluate(model, toks, settings, a.kv_dtype, a.threads):
            row["text"] = str(path)
            rows.append(row)
            print(f"| {path.name} | {row['K']} | {row['r']} | {row['tau']:g} | "
                  f"{row['hit_rate']:.3f} | {row['skip_ratio']:.3f} | {row['kl_mean']:.2e} | "
                  f"{row['kl_p99']:.2e} | {row['top1']:.3f} | {row['bpb_ref']:.3f} | "
                  f"{row['bpb']:.3f} |", flush=True)
        print(f"<!-- {path.name}: {time.time() - t0:.0f} s -->", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
