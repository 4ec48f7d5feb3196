"""In-loop fidelity runs over text windows: a model, a window of tokens, its full-attention
reference computed once, then any number of MAC settings, each measured over the positions
m >= start that a serving engine would decode with MAC.

    from mactune import fidelity, inloop, gguf_llama
    model = inloop.Model.from_gguf(gguf_llama.find_smollm2())
    win = fidelity.window(model, "prose", fidelity.default_paths("prose"), 0, 4096)
    run = fidelity.Runner(model, win)
    row = run.run(mactune.MacParams(K=512, r=256, tau=0.75), start=1024)
    row["kl_mean"], row["top1"], row["skip_ratio"]

Two settings, both teacher-forced (the next token is the text's, not the model's):

- every step past min_context: start = min_context; MAC decides at every position m >= start
  and its errors feed the later positions and layers;
- an exactly prefilled prompt of P tokens, then decode steps: start = P; positions < P are
  the prompt, attended exactly, whose ring entries warm the ring (min_context = P).

Either way the positions below `start` are exact in every layer, so the runner takes their
residual streams from the reference pass instead of recomputing them: per layer it projects
q/k/v for all T positions (the engine needs the prefix's keys and ring entries), runs the
engine's attention over all T, and the output projection and MLP for m >= start only.
Positions are batched per layer (teacher forcing), so a pass costs one batched forward of the
suffix plus the engine's attention. Every MacParams given is run with min_context = start.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import math
import os
import pathlib
import subprocess
import time
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

import mactune
from mactune import inloop


Settings = Union[mactune.MacParams, Dict[int, Optional[mactune.MacParams]]]


@dataclasses.dataclass
class Window:
    name: str
    tokens: List[int]
    source: str  # the files and the token offset
    sha256: str  # of the token ids as little-endian int32

    def __len__(self) -> int:
        return len(self.tokens)


# The texts are read from this commit of the repository (git show), so that edits of the
# docs after it do not move the windows; the frontier and the calibration were measured on it.
TEXT_REV = "6be18e7"


def default_paths(kind: str, root: Optional[pathlib.Path] = None,
                  rev: Optional[str] = TEXT_REV) -> List[str]:
    """The two kinds of text of the frontier, from this repository at `rev` ("REV:path"
    names, read with git show; rev None: the working tree): 'prose' = docs/*.md in name
    order; 'code' = kernels/*.h then kernels/cpu/*.cpp in name order. `root`: a directory
    inside the checkout (default: the current one)."""
    root = pathlib.Path(root or pathlib.Path.cwd())
    if kind not in ("prose", "code"):
        raise ValueError(f"text kind '{kind}': expected prose or code")
    globs = ["docs/*.md"] if kind == "prose" else ["kernels/*.h", "kernels/cpu/*.cpp"]
    if rev is None:
        return [str(p) for g in globs for p in sorted(root.glob(g))]
    try:
        names = subprocess.run(["git", "-C", str(root), "ls-tree", "--full-tree",
                                "--name-only", rev,
                                "docs/", "kernels/", "kernels/cpu/"], check=True,
                               capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        raise ValueError(f"{root}: cannot list the texts at commit {rev} with git ({e})") \
            from None
    paths = [f"{rev}:{n}" for g in globs for n in sorted(names)
             if fnmatch.fnmatch(n, g) and n.count("/") == g.count("/")]
    if not paths:
        raise ValueError(f"no {kind} files ({', '.join(globs)}) at commit {rev} of {root}")
    return paths


def read_text(path: str, root: Optional[pathlib.Path] = None) -> str:
    """A file, or "REV:path" from git."""
    if ":" in path and not os.path.exists(path):
        try:
            return subprocess.run(["git", "-C", str(root or pathlib.Path.cwd()), "show", path],
                                  check=True,
                                  capture_output=True).stdout.decode(errors="replace")
        except (OSError, subprocess.CalledProcessError) as e:
            raise ValueError(f"{path}: cannot read it with git show ({e})") from None
    return pathlib.Path(path).read_text(errors="replace")


def window(model: inloop.Model, name: str, paths: Sequence[str], start: int,
           n: int) -> Window:
    """Tokens [start, start + n) of the files' texts joined by blank lines."""
    if model.tokenizer is None:
        raise ValueError(f"{model.source or 'the model'}: no tokenizer (pass token ids)")
    text = "\n\n".join(read_text(str(p)) for p in paths)
    ids = model.tokenizer.encode(text)
    if start + n > len(ids):
        raise ValueError(f"{name}: the texts give {len(ids)} tokens, need {start + n} "
                         f"(tokens {start}..{start + n})")
    toks = ids[start:start + n]
    sha = hashlib.sha256(np.asarray(toks, "<i4").tobytes()).hexdigest()
    where = f"{len(paths)} files ({paths[0]} .. {paths[-1]})"
    return Window(name, toks, f"tokens {start}..{start + n} of {where}", sha)


def with_min_context(settings: Settings, start: int) -> Settings:
    def one(p):
        if p is None:
            return None
        q = mactune.MacParams(**p.to_dict())
        q.min_context = start
        return q
    if isinstance(settings, dict):
        return {layer: one(p) for layer, p in settings.items()}
    return one(settings)


class Runner:
    """One window of one model: the reference once (engine full attention, f32), then runs."""

    def __init__(self, model: inloop.Model, win: Window, kv_dtype: str = "f32",
                 threads: int = 0, cache: Optional[Union[str, os.PathLike]] = None):
        """`cache`: a directory where the reference pass is kept (the residual stream
        entering each layer and the final hidden states, float32: 0.3 GB at 4096 tokens of
        SmolLM2) under a name of the window's token hash, the model and the KV type, and
        read back by the next runner of the same window instead of computed again."""
        self.model, self.win = model, win
        self.kv_dtype, self.threads = kv_dtype, threads
        self.theta = model.config.rope_theta
        self.cache_file = None
        if cache is not None and win.sha256:
            ident = hashlib.sha256(f"{model.source}|{model.config}|{kv_dtype}|{win.sha256}"
                                   .encode()).hexdigest()[:20]
            self.cache_file = pathlib.Path(cache) / f"reference-{ident}.npy"
        t0 = time.time()
        self.ref_x: List[np.ndarray] = []  # the residual stream entering each layer
        if self.cache_file is not None and self.cache_file.exists():
            arr = np.load(self.cache_file)
            self.ref_x = list(arr[:-1])
            self.h_ref = arr[-1]
            self.reference_seconds = time.time() - t0
            self.reference_cached = True
        else:
            att = inloop.EngineAttention(self.theta, None, kv_dtype, threads)
            x = model.w["emb.weight"][np.asarray(win.tokens, np.int64)]
            for layer in range(model.config.n_layers):
                self.ref_x.append(x)
                q, k, v = model.qkv(layer, x)
                x = model.finish_block(layer, x, att(layer, q, k, v))
            self.h_ref = model._norm(x, "norm.weight")
            self.reference_seconds = time.time() - t0
            self.reference_cached = False
            if self.cache_file is not None:
                self.cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.cache_file.with_suffix(".tmp.npy")
                np.save(tmp, np.stack(self.ref_x + [self.h_ref]).astype(np.float32))
                os.replace(tmp, self.cache_file)
        self._ref_cache: tuple = (None, None)

    def _ref_logp(self, start: int, chunk: int = 256) -> np.ndarray:
        """log p_ref of positions [start, T) as float32, kept for the next run from the same
        start (half the logits work of a run; 600 MB at 3072 positions of a 49152 vocab)."""
        if self._ref_cache[0] != start:
            self._ref_cache = (None, None)
            rows = [inloop.log_softmax(self.model.logits_of(self.h_ref[a:a + chunk]))
                    .astype(np.float32) for a in range(start, len(self.win), chunk)]
            self._ref_cache = (start, np.concatenate(rows))
        return self._ref_cache[1]

    def compare(self, h_full: np.ndarray, start: int, chunk: int = 256) -> Dict[str, float]:
        """inloop.compare_hidden() over [start, T) with the reference's log-probabilities
        cached (float32: the KL of two identical runs is exactly 0, of close ones right to
        about 1e-7 nats)."""
        T = len(self.win)
        ref = self._ref_logp(start, chunk)
        nxt = np.asarray(self.win.tokens, np.int64)
        kl, agree, nll_ref, nll = [], 0, 0.0, 0.0
        for a in range(start, T, chunk):
            b = min(a + chunk, T)
            lr = ref[a - start:b - start].astype(np.float64)
            lp = inloop.log_softmax(self.model.logits_of(h_full[a:b]))
            kl.append(np.sum(np.exp(lr) * (lr - lp), axis=-1))
            agree += int(np.sum(lr.argmax(-1) == lp.argmax(-1)))
            rows = np.arange(a, min(b, T - 1))
            nll_ref -= float(lr[rows - a, nxt[rows + 1]].sum())
            nll -= float(lp[rows - a, nxt[rows + 1]].sum())
        k = np.maximum(np.concatenate(kl), 0.0)
        n_next = max(T - 1 - start, 1)
        return {"kl_mean": float(k.mean()), "kl_p99": float(np.percentile(k, 99)),
                "kl_max": float(k.max()), "top1": agree / len(k),
                "bpb_ref": nll_ref / n_next / math.log(2), "bpb": nll / n_next / math.log(2),
                "positions": len(k)}

    def hidden(self, settings: Settings, start: int, att: inloop.EngineAttention) -> np.ndarray:
        """Final hidden states of positions [start, T) with MAC (`att`)."""
        m = self.model
        suffix = None
        for layer in range(m.config.n_layers):
            x = self.ref_x[layer] if suffix is None else np.concatenate(
                [self.ref_x[layer][:start], suffix])
            q, k, v = m.qkv(layer, x)
            o = att(layer, q, k, v)
            suffix = m.finish_block(layer, x[start:], o[start:])
        return m._norm(suffix, "norm.weight")

    def run(self, settings: Settings, start: int, per_layer: bool = False) -> Dict[str, object]:
        """Fidelity of `settings` (one MacParams for every layer, or a schedule: layer ->
        MacParams or None for full attention) over positions [start, T), against the reference:
        KL mean / p99 / max (nats), top-1 agreement, bits per token of both, hit rate and KV
        skip ratio over those positions (pooled over layers; per layer with per_layer)."""
        T = len(self.win)
        if not 0 <= start < T:
            raise ValueError(f"start {start}: outside the window of {T} tokens")
        s = with_min_context(settings, start)
        att = (inloop.EngineAttention(self.theta, None, self.kv_dtype, self.threads, layers=s)
               if isinstance(s, dict) else
               inloop.EngineAttention(self.theta, s, self.kv_dtype, self.threads))
        t0 = time.time()
        h = self.hidden(s, start, att)
        h_full = np.concatenate([self.h_ref[:start], h])
        row: Dict[str, object] = {"text": self.win.name, "tokens": T, "start": start}
        row.update(self.compare(h_full, start))
        row.update(att.pooled_from(start))
        if per_layer:
            row["layers"] = []
            for layer, r in sorted(att.rows.items()):
                read, total = int(r["read"][start:].sum()), int(r["total"][start:].sum())
                hits, elig = int(r["hits"][start:].sum()), int(r["eligible"][start:].sum())
                row["layers"].append({"layer": layer, "hit_rate": hits / elig if elig else 0.0,
                                      "skip_ratio": 1 - read / total if total else 0.0})
        row["seconds"] = round(time.time() - t0, 1)
        return row


__all__ = ["Window", "Runner", "default_paths", "window", "with_min_context"]
