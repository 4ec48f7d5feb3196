#!/usr/bin/env python3
"""How much KV skip could any acceptance rule get at a given per-step error? An oracle study
on SmolLM2-135M's real attention (docs/fidelity.md, "The goal").

For sampled decode positions m >= 1024 of chosen layers (exact inputs: one numpy float64 pass
of the model over a prose window), every ring candidate p in [m - K, m) is tried: the output
MAC would give by reusing ring[p] (band r, DESIGN.md section 1, in float64), its relative error
against exact attention, the head's skip cache_end(p) / (m + 1), and what a rule can see at
decode time (pre-RoPE, normalized and post-RoPE distances, the reused mass alpha, a probe of
q_m's scores on the top keys of q_p's prefix). Each rule is then a choice per (m, head) of
one candidate or none; it is scored by mean head skip and the rms of the per-step error.
"oracle" takes the newest candidate whose actual error is below a bound: no rule that looks
at the ring can do better at that bound.

    PYTHONPATH=build/ci/python build/pyenv/bin/python examples/python/reuse_oracle.py \\
        --tokens 4096 --layers 8,15,22 --samples 24
"""

import argparse
import math

import numpy as np

from mactune import fidelity, gguf_llama, inloop


def rope(x, theta):
    T, _, D = x.shape
    inv = theta ** (-2.0 * np.arange(D // 2) / D)
    ang = np.arange(T)[:, None] * np.concatenate([inv, inv])[None, :]
    xd = x.astype(np.float64)
    rot = np.concatenate([-xd[..., D // 2:], xd[..., :D // 2]], -1)
    return xd * np.cos(ang)[:, None] + rot * np.sin(ang)[:, None]


def capture(model, tokens, layers):
    """Pre-RoPE q, k, v of `layers` over a full-attention pass (numpy, float64)."""
    att, caps = inloop.full_attention(model.config.rope_theta), {}
    x = model.w["emb.weight"][np.asarray(tokens)]
    for layer in range(max(layers) + 1):
        q, k, v = model.qkv(layer, x)
        if layer in layers:
            caps[layer] = (q, k, v)
        x = model.finish_block(layer, x, att(layer, q, k, v))
    return caps


def candidates(q, k, v, theta, K, R, M0, ms, topk, out):
    """One record per (m, head): arrays over the K candidates."""
    T, Hq, D = q.shape
    G, sc = Hq // k.shape[1], 1 / math.sqrt(D)
    qr, kr = rope(q, theta), rope(k, theta)
    ce = np.maximum(np.arange(T) + 1 - R, 0)
    P = np.arange(M0 - K, T)
    for h in range(Hq):
        S = (qr[:, h] @ kr[:, h // G].T) * sc
        V = v[:, h // G].astype(np.float64)
        Sm = np.where(np.arange(T)[None, :] < ce[P][:, None], S[P], -np.inf)
        mx = Sm.max(1, keepdims=True)
        E = np.exp(Sm - mx)
        oc, lc = (E @ V) / E.sum(1)[:, None], mx[:, 0] + np.log(E.sum(1))  # ring summaries
        top = np.argpartition(-Sm, topk, axis=1)[:, :topk]
        wtop = np.exp(np.take_along_axis(Sm, top, 1) - lc[:, None])
        qn = q[:, h] / np.linalg.norm(q[:, h], axis=1, keepdims=True) * math.sqrt(D)
        for m in ms:
            e = np.exp(S[m, :m + 1] - S[m, :m + 1].max())
            exact = (e @ V[:m + 1]) / e.sum()
            Zs = np.cumsum(e[::-1])[::-1]
            Os = np.cumsum((e[:, None] * V[:m + 1])[::-1], 0)[::-1]
            c = np.arange(m - K, m)
            i = c - (M0 - K)
            of, lf = Os[ce[c]] / Zs[ce[c]][:, None], S[m, :m + 1].max() + np.log(Zs[ce[c]])
            L = np.maximum(lf, lc[i])
            w1, w2 = np.exp(lc[i] - L), np.exp(lf - L)
            o = (w1[:, None] * oc[i] + w2[:, None] * of) / (w1 + w2)[:, None]
            alpha = w1 / (w1 + w2)
            idx, w = top[i], wtop[i]
            ds = S[m][idx] - np.take_along_axis(S[c], idx, 1)
            mean = (w * ds).sum(1) / w.sum(1)
            std = np.sqrt((w * (ds - mean[:, None]) ** 2).sum(1) / w.sum(1))
            out.append({
                "err": np.linalg.norm(o - exact, axis=1) / np.linalg.norm(exact),
                "skip": ce[c] / (m + 1), "alpha": alpha,
                "pre": ((q[c, h].astype(np.float64) - q[m, h]) ** 2).sum(1),
                "nrm": ((qn[c] - qn[m]) ** 2).sum(1),
                "post": ((qr[c, h] - qr[m, h]) ** 2).sum(1),
                "probe": alpha * std + alpha * (1 - alpha) * np.abs(mean)})


def score(recs, choose):
    skip, e2 = [], []
    for r in recs:
        i = choose(r)
        skip.append(0.0 if i is None else r["skip"][i])
        e2.append(0.0 if i is None else r["err"][i] ** 2)
    return float(np.mean(skip)), float(np.sqrt(np.mean(e2)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--layers", default="8,15,22")
    ap.add_argument("--samples", type=int, default=24, help="positions per layer")
    ap.add_argument("--K", type=int, default=512)
    ap.add_argument("--r", type=int, default=256)
    ap.add_argument("--topk", type=int, default=8, help="keys of the probe rule")
    a = ap.parse_args()
    model = inloop.Model.from_gguf(gguf_llama.find_smollm2())
    win = fidelity.window(model, "prose", fidelity.default_paths("prose"), 0, a.tokens)
    layers = [int(x) for x in a.layers.split(",")]
    caps, recs = capture(model, win.tokens, layers), []
    rng = np.random.default_rng(1)
    for layer in layers:
        ms = np.sort(rng.choice(np.arange(1024, a.tokens), a.samples, replace=False))
        candidates(*caps[layer], model.config.rope_theta, a.K, a.r, 1024, ms, a.topk, recs)
    D = model.config.head_dim

    def thr(t):
        return 2 * D * (1 - t) ** 2

    def nearest(key, limit, gate=None, bound=None):
        def f(r):
            i = int(np.argmin(r[key]))
            if r[key][i] >= limit or (gate and r[gate][i] >= bound):
                return None
            return i
        return f

    def newest_below(key, bound):
        def f(r):
            ok = np.nonzero(r[key] < bound)[0]
            return int(ok[-1]) if len(ok) else None
        return f

    rules = {
        "pre-RoPE nearest (tau)": [(t, nearest("pre", thr(t))) for t in (0.45, 0.6, 0.75, 0.9)],
        "normalized (tau)": [(t, nearest("nrm", thr(t))) for t in (0.8, 0.88, 0.94)],
        "post-RoPE nearest (tau)": [(t, nearest("post", thr(t))) for t in (0.45, 0.6, 0.75)],
        "tau 0.45 + eps gate (eps)": [(e, nearest("pre", thr(0.45), "alpha", e))
                                      for e in (0.5, 0.2, 0.1)],
        "nearest + probe gate (bound)": [(e, nearest("pre", np.inf, "probe", e))
                                         for e in (0.1, 0.03, 0.01)],
        "nearest + exact gate (bound)": [(e, nearest("pre", np.inf, "err", e))
                                         for e in (0.1, 0.03, 0.01)],
        "oracle: newest under bound": [(e, newest_below("err", e)) for e in (0.1, 0.03, 0.01)],
    }
    print(f"{len(recs)} (position, head) decisions, layers {a.layers}, K {a.K}, r {a.r}")
    print("| rule | setting | head skip | rms per-step error |\n|---|---|---|---|")
    for name, pts in rules.items():
        for x, f in pts:
            s, e = score(recs, f)
            print(f"| {name} | {x:g} | {s:.3f} | {e:.3g} |")


if __name__ == "__main__":
    main()
