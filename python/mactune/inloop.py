"""MAC-Attention inside a model's forward pass: a numpy Llama-style decoder whose attention is
the mactune engine, and the fidelity measures that compare it with full attention.

Per-step replay (mactune.replay) measures each layer with exact inputs. Here the errors MAC
makes feed the later layers and the later tokens, as they would in a served model, and what is
compared is what the model predicts: the next-token distributions, by KL divergence, top-1
agreement and bits per byte.

The model is the architecture of the Llama family: token embedding, per block
``x += wo(attn(attn_norm(x))); x += w2(silu(w1 h) * w3 h)`` with h = mlp_norm(x), RMSNorm,
grouped-query attention with rotate-half RoPE on q and k, a final norm and an untied head; no
biases. Weights follow the layout of data/models/tinylm (``weight[out, in]``, y = x W^T).

A whole sequence runs layer by layer: every layer's session takes all T positions in one
prefill() call, one decode step each. Attention is causal and MAC's decisions at a position
depend only on earlier positions, so this computes exactly what decoding token by token does
(forward_tokenwise(), the way a serving engine runs it; the tests check the two agree).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import mactune
from mactune import tensorfile


@dataclass
class Config:
    vocab: int = 256
    n_layers: int = 4
    d_model: int = 512
    n_heads: int = 8
    n_kv_heads: int = 2
    head_dim: int = 64
    ffn_hidden: int = 1408
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @staticmethod
    def from_json(text: str) -> "Config":
        d = json.loads(text)
        keys = {f for f in Config.__dataclass_fields__}
        return Config(**{k: v for k, v in d.items() if k in keys})


def _weight_names(c: Config) -> Dict[str, tuple]:
    shapes = {"emb.weight": (c.vocab, c.d_model), "norm.weight": (c.d_model,),
              "head.weight": (c.vocab, c.d_model)}
    for i in range(c.n_layers):
        p = f"blocks.{i}."
        shapes.update({
            p + "attn_norm.weight": (c.d_model,),
            p + "attn.wq.weight": (c.n_heads * c.head_dim, c.d_model),
            p + "attn.wk.weight": (c.n_kv_heads * c.head_dim, c.d_model),
            p + "attn.wv.weight": (c.n_kv_heads * c.head_dim, c.d_model),
            p + "attn.wo.weight": (c.d_model, c.n_heads * c.head_dim),
            p + "mlp_norm.weight": (c.d_model,),
            p + "mlp.w1.weight": (c.ffn_hidden, c.d_model),
            p + "mlp.w3.weight": (c.ffn_hidden, c.d_model),
            p + "mlp.w2.weight": (c.d_model, c.ffn_hidden),
        })
    return shapes


# An attention function: (layer, q_pre [T, Hq, D], k_pre [T, Hkv, D], v [T, Hkv, D]) -> o.
Attention = Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class Model:
    """A Llama-style decoder in float32 numpy; attention is pluggable."""

    def __init__(self, weights: Dict[str, np.ndarray], config: Config):
        self.config = config
        for name, shape in _weight_names(config).items():
            if name not in weights:
                raise ValueError(f"weights: no tensor '{name}'")
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"weights: '{name}' has shape {list(weights[name].shape)}, "
                                 f"expected {list(shape)}")
        self.w = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        self.tokenizer = None  # a GGUF model's (from_gguf): encode(text) -> token ids
        self.source = ""

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> "Model":
        """Loads a Llama-family GGUF (mactune.gguf_llama: dequantized, q/k rows back in
        rotate-half order, tied head); `tokenizer` is built from the file where it can be."""
        from mactune import gguf_llama  # noqa: PLC0415 - needs gguf and tokenizers

        w, config, info = gguf_llama.load(path)
        m = cls(w, config)
        m.tokenizer, m.source = info.tokenizer, info.name
        return m

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Model":
        """Loads a model in the layout of data/models/tinylm (config in metadata 'config')."""
        tensors, meta = tensorfile.load(path)
        if "config" not in meta:
            raise ValueError(f"{path}: no 'config' in the safetensors metadata")
        return cls(tensors, Config.from_json(meta["config"]))

    @classmethod
    def random(cls, config: Config, seed: int = 0) -> "Model":
        """Random weights of the given shape (Gaussian, scaled by 1/sqrt(fan_in))."""
        rng = np.random.default_rng(seed)
        w = {}
        for name, shape in _weight_names(config).items():
            if len(shape) == 1:
                w[name] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
            else:
                w[name] = (rng.standard_normal(shape) / math.sqrt(shape[1])).astype(np.float32)
        w["emb.weight"] *= math.sqrt(config.d_model)  # embeddings of unit RMS
        return cls(w, config)

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return (x / np.sqrt(ms + self.config.norm_eps) * self.w[name]).astype(np.float32)

    def qkv(self, layer: int, x: np.ndarray):
        """Pre-RoPE q [T, Hq, D], k and v [T, Hkv, D] of `layer` for residual stream x [T, d]."""
        c, p = self.config, f"blocks.{layer}."
        h = self._norm(x, p + "attn_norm.weight")
        T = x.shape[0]
        q = (h @ self.w[p + "attn.wq.weight"].T).reshape(T, c.n_heads, c.head_dim)
        k = (h @ self.w[p + "attn.wk.weight"].T).reshape(T, c.n_kv_heads, c.head_dim)
        v = (h @ self.w[p + "attn.wv.weight"].T).reshape(T, c.n_kv_heads, c.head_dim)
        return (np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v))

    def finish_block(self, layer: int, x: np.ndarray, o: np.ndarray) -> np.ndarray:
        """x + wo(o), then the MLP: the residual stream after `layer`."""
        p = f"blocks.{layer}."
        x = x + o.reshape(x.shape[0], -1) @ self.w[p + "attn.wo.weight"].T
        h = self._norm(x, p + "mlp_norm.weight")
        a = h @ self.w[p + "mlp.w1.weight"].T
        b = h @ self.w[p + "mlp.w3.weight"].T
        return (x + (a / (1.0 + np.exp(-a)) * b) @ self.w[p + "mlp.w2.weight"].T).astype(
            np.float32)

    def logits(self, x: np.ndarray) -> np.ndarray:
        return self._norm(x, "norm.weight") @ self.w["head.weight"].T

    def hidden(self, tokens: Sequence[int], attention: Attention) -> np.ndarray:
        """Teacher-forced final hidden states [T, d_model], normed (logits = h @ head^T),
        layer by layer: each layer's projections for all T positions at once, then its
        attention, then its MLP. For a large vocabulary, logits_of() takes them in chunks."""
        x = self.w["emb.weight"][np.asarray(tokens, np.int64)]
        for layer in range(self.config.n_layers):
            q, k, v = self.qkv(layer, x)
            x = self.finish_block(layer, x, attention(layer, q, k, v))
        return self._norm(x, "norm.weight")

    def logits_of(self, h: np.ndarray) -> np.ndarray:
        return h @ self.w["head.weight"].T

    def forward(self, tokens: Sequence[int], attention: Attention) -> np.ndarray:
        """Teacher-forced logits [T, vocab] (row t predicts token t + 1), layer by layer."""
        return self.logits_of(self.hidden(tokens, attention))

    def forward_tokenwise(self, tokens: Sequence[int], sessions: Sequence) -> np.ndarray:
        """The same logits, decoded token by token: one step() per token and layer, as a
        serving engine runs it. `sessions`: one fresh engine session per layer."""
        c = self.config
        ids = [s.add_request() for s in sessions]
        rows = []
        for t in tokens:
            x = self.w["emb.weight"][[int(t)]]
            for layer in range(c.n_layers):
                q, k, v = self.qkv(layer, x)
                o = sessions[layer].step(ids[layer], q[0], k[0], v[0])
                x = self.finish_block(layer, x, o.out[None])
            rows.append(self.logits(x)[0])
        return np.stack(rows)


def rope(x: np.ndarray, theta: float) -> np.ndarray:
    """Rotate-half RoPE of x [T, H, D] at positions 0..T-1 (angles in float64)."""
    T, _, D = x.shape
    inv = theta ** (-2.0 * np.arange(D // 2) / D)
    ang = np.arange(T)[:, None] * np.concatenate([inv, inv])[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    xd = x.astype(np.float64)
    rot = np.concatenate([-xd[..., D // 2:], xd[..., :D // 2]], axis=-1)
    return xd * cos + rot * sin


def full_attention(theta: float) -> Attention:
    """Causal GQA attention in float64 numpy: the plain reference."""

    def attend(layer, q, k, v):
        T, Hq, D = q.shape
        G = Hq // k.shape[1]
        qr, kr = rope(q, theta), rope(k, theta)
        out = np.empty(q.shape, np.float32)
        mask = np.triu(np.ones((T, T), bool), 1)
        for h in range(Hq):
            s = (qr[:, h] @ kr[:, h // G].T) / math.sqrt(D)
            s[mask] = -np.inf
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, h] = (p @ v[:, h // G].astype(np.float64)) / p.sum(axis=1, keepdims=True)
        return out

    return attend


@dataclass
class EngineAttention:
    """Attention by the mactune CPU engine, one fresh session per layer and sequence: MAC with
    `mac` settings, or its full-attention baseline when mac is None. `layers` overrides `mac`
    per layer (a schedule: layer -> MacParams, or None for full attention there). Collects
    per-layer stats, and per-layer outputs' decisions when keep_decisions is set."""

    theta: float
    mac: Optional[mactune.MacParams] = None
    kv_dtype: str = "f32"
    threads: int = 0
    stats: Dict[int, mactune.StepStats] = field(default_factory=dict)
    layers: Optional[Dict[int, Optional[mactune.MacParams]]] = None
    # Per layer and position: KV tokens read and in context (summed over KV groups), hit and
    # eligible heads; pooled_from() pools them over a range of positions.
    rows: Dict[int, Dict[str, np.ndarray]] = field(default_factory=dict)

    def settings(self, layer: int) -> Optional[mactune.MacParams]:
        if self.layers is not None and layer in self.layers:
            return self.layers[layer]
        return self.mac

    def session(self, q_heads: int, kv_heads: int, head_dim: int, max_context: int,
                mac: Optional[mactune.MacParams] = None, layer: Optional[int] = None):
        if layer is not None:
            mac = self.settings(layer)
        elif mac is None:
            mac = self.mac
        shape = mactune.Problem(batch=1, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim,
                                dtype=self.kv_dtype, page_size=16)
        return mactune.cpu.Session(
            shape=shape, mac=mac or mactune.MacParams(), mac_enabled=mac is not None,
            rope_theta=self.theta, max_context=max(16, -(-max_context // 16) * 16),
            engine=mactune.cpu.EngineConfig(threads=self.threads))

    def __call__(self, layer, q, k, v):
        s = self.session(q.shape[1], k.shape[1], q.shape[2], q.shape[0], layer=layer)
        r = s.prefill(s.add_request(), q, k, v)
        self.stats[layer] = r.stats
        kv_len = r.kv_len.astype(np.int64)
        self.rows[layer] = {"read": (kv_len - r.group_begin).sum(1), "total": kv_len.sum(1),
                            "hits": r.hit.sum(1), "eligible": r.eligible.sum(1)}
        return r.out

    def pooled_from(self, start: int = 0) -> Dict[str, float]:
        """Hit rate and KV skip ratio over all layers' positions m >= start."""
        tot = {k: sum(int(r[k][start:].sum()) for r in self.rows.values())
               for k in ("read", "total", "hits", "eligible")}
        return {"hit_rate": tot["hits"] / tot["eligible"] if tot["eligible"] else 0.0,
                "skip_ratio": 1.0 - tot["read"] / tot["total"] if tot["total"] else 0.0}


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def compare(ref_logits: np.ndarray, logits: np.ndarray, tokens: Sequence[int]) -> Dict[str, float]:
    """Next-token fidelity of `logits` against `ref_logits` (both [T, vocab]) on `tokens`.

    kl_*: KL(p_ref || p) in nats per position (mean, p99, max); top1: share of positions whose
    argmax agrees; bpb / bpb_ref: bits per byte of each on the true next tokens (positions
    0..T-2 predict tokens 1..T-1)."""
    lr, lp = log_softmax(ref_logits), log_softmax(logits)
    kl = np.sum(np.exp(lr) * (lr - lp), axis=-1)
    nxt = np.asarray(tokens[1:], np.int64)
    idx = np.arange(len(nxt))
    return {
        "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)),
        "kl_max": float(kl.max()),
        "top1": float(np.mean(ref_logits.argmax(-1) == logits.argmax(-1))),
        "bpb_ref": float(-lr[idx, nxt].mean() / math.log(2)),
        "bpb": float(-lp[idx, nxt].mean() / math.log(2)),
    }


def compare_hidden(model: Model, h_ref: np.ndarray, h: np.ndarray, tokens: Sequence[int],
                   start: int = 0, chunk: int = 256) -> Dict[str, float]:
    """compare() over positions [start, T) from final hidden states (Model.hidden), the
    logits taken `chunk` positions at a time: at a vocabulary of 49152 and 8K positions the
    whole logits would take 1.6 GB. bpb_ref / bpb are bits per token (per byte for a byte
    model) on the true next tokens of positions [start, T-1)."""
    T = h.shape[0]
    kl_all, agree, nll_ref, nll = [], 0, 0.0, 0.0
    nxt = np.asarray(tokens, np.int64)
    for a in range(start, T, chunk):
        b = min(a + chunk, T)
        lr = log_softmax(model.logits_of(h_ref[a:b]))
        lp = log_softmax(model.logits_of(h[a:b]))
        kl_all.append(np.sum(np.exp(lr) * (lr - lp), axis=-1))
        agree += int(np.sum(lr.argmax(-1) == lp.argmax(-1)))
        rows = np.arange(a, min(b, T - 1))
        nll_ref -= float(lr[rows - a, nxt[rows + 1]].sum())
        nll -= float(lp[rows - a, nxt[rows + 1]].sum())
    kl = np.concatenate(kl_all)
    n_next = max(T - 1 - start, 1)
    return {"kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, 99)),
            "kl_max": float(kl.max()), "top1": agree / len(kl),
            "bpb_ref": nll_ref / n_next / math.log(2), "bpb": nll / n_next / math.log(2),
            "positions": len(kl)}


def pooled(stats: Dict[int, mactune.StepStats]) -> Dict[str, float]:
    """Hit rate and KV skip ratio over all layers' steps."""
    hits = sum(s.hit_heads for s in stats.values())
    eligible = sum(s.eligible_heads for s in stats.values())
    read = sum(s.kv_tokens_read for s in stats.values())
    total = sum(s.kv_tokens_total for s in stats.values())
    return {"hit_rate": hits / eligible if eligible else 0.0,
            "skip_ratio": 1.0 - read / total if total else 0.0}


def evaluate(model: Model, tokens: Sequence[int], settings: Sequence[mactune.MacParams],
             kv_dtype: str = "f32", threads: int = 0) -> List[Dict[str, object]]:
    """One row per MAC setting: fidelity against the engine's full attention on the same
    tokens, with the pooled hit rate and skip ratio."""
    theta = model.config.rope_theta
    ref = model.forward(tokens, EngineAttention(theta, None, kv_dtype, threads))
    rows = []
    for mac in settings:
        att = EngineAttention(theta, mac, kv_dtype, threads)
        got = model.forward(tokens, att)
        row: Dict[str, object] = {"K": mac.K, "r": mac.r, "tau": mac.tau,
                                  "accept_eps": mac.accept_eps, "min_context": mac.min_context}
        row.update(pooled(att.stats))
        row.update(compare(ref, got, tokens))
        rows.append(row)
    return rows


__all__ = ["Config", "Model", "EngineAttention", "full_attention", "rope", "compare",
           "compare_hidden", "pooled", "evaluate", "log_softmax"]
