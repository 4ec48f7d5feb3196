#!/usr/bin/env python3
"""Acceptance rules for MAC-Attention, measured with SmolLM2-135M in the loop (docs/fidelity.md,
"Acceptance rules beyond tau").

A numpy simulation of MAC (DESIGN.md section 1: ring of pre-RoPE queries and prefix states,
band r, forward-merge entries) whose acceptance rule is pluggable, run inside the model's
teacher-forced forward pass layer by layer with mactune.fidelity.Runner (the reference is the
CPU engine's full attention). Each layer's scores for all positions are computed at once
(float32), then the decode steps run one at a time, because a hit's ring entry is built from
the entry it reused. A rule sees, per head and step, every ring candidate p in [m - K, m):
its pre-RoPE and post-RoPE query distance, the reused mass alpha (known once the fresh part
[cache_end(p), m] is attended), and the running maximum key norm of the head's KV.

    PYTHONPATH=build/ci/python OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        build/pyenv/bin/python examples/python/accept_rule_study.py --tokens 4096 \\
        --rule tau=0.75 --rule "tau=0.45,bound=pre,eps=0.05" --rows build/accept/rows.jsonl

A rule is comma-separated key=value:
  tau=T       candidates must have d^2 < 2 D (1 - T)^2 (pre-RoPE); default 0.45
  pick=P      nearest (default: the nearest candidate, then the gates) | nearest-ok (the
              nearest candidate that passes the gates) | newest-ok (the newest that passes)
  alpha=A     the eps gate: reused mass alpha < A
  bound=B     pre | post | lin: the error-bound gate alpha (e^{2 Delta} - 1) < eps, Delta =
              |q~_m - q~_p| kappa / sqrt(D) (pre), or with the post-RoPE distance (post: the
              valid bound, RoPE moves q_p by p - m), lin: alpha 2 Delta (first order)
  eps=E       the bound gate's threshold
  group=1     all-or-nothing per KV group: a group hits only if all its heads hit (a miss in
              a group reads its whole KV anyway, so partial hits add error and skip nothing)
  sink=S      the first S tokens are always attended fresh; ring entries cover [S, cache_end)
  layers=a-b  MAC only in these layers (others full attention)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import time

import numpy as np

import mactune
from mactune import fidelity, gguf_llama, inloop


def parse_rule(text: str) -> dict:
    rule = {"tau": 0.45, "pick": "nearest", "alpha": 1.0, "bound": "", "eps": 1.0,
            "group": 0, "sink": 0, "corr": 0, "layers": ""}
    for part in filter(None, text.split(",")):
        key, _, val = part.partition("=")
        if key not in rule:
            raise ValueError(f"rule '{text}': unknown key '{key}'")
        rule[key] = type(rule[key])(val) if not isinstance(rule[key], str) else val
    if rule["pick"] not in ("nearest", "nearest-ok", "newest-ok"):
        raise ValueError(f"rule '{text}': pick {rule['pick']}")
    if rule["bound"] not in ("", "pre", "post", "lin"):
        raise ValueError(f"rule '{text}': bound {rule['bound']}")
    return rule


def layer_set(rule: dict, n_layers: int) -> set:
    if not rule["layers"]:
        return set(range(n_layers))
    a, _, b = rule["layers"].partition("-")
    return set(range(int(a), int(b or a) + 1))


class MacSim:
    """MAC attention of every layer in numpy, with the rule's acceptance; collects per-layer
    KV reads (per KV group, as the engines count them), hits and the output error against
    full attention over the same inputs."""

    def __init__(self, rule: dict, theta: float, start: int, K: int = 512, r: int = 256,
                 n_layers: int = 30):
        if start < K:
            raise ValueError(f"start {start} < K {K}: the simulation needs a full ring")
        self.rule, self.theta, self.start, self.K, self.r = rule, theta, start, K, r
        self.mac_layers = layer_set(rule, n_layers)
        self.stats = {}
        self.trace = None  # a list: (layer, m, d2, alpha, delta, kappa) of the nearest candidates

    def __call__(self, layer, q, k, v):
        T, Hq, D = q.shape
        Hkv = k.shape[1]
        G = Hq // Hkv
        qr = inloop.rope(q, self.theta).astype(np.float32)  # [T, Hq, D] post-RoPE
        kr = inloop.rope(k, self.theta).astype(np.float32)
        KR = np.ascontiguousarray(kr.transpose(1, 0, 2))     # [Hkv, T, D]
        V = np.ascontiguousarray(v.transpose(1, 0, 2)).astype(np.float32)
        QR = qr.transpose(1, 0, 2).reshape(Hkv, G, T, D)
        S = np.matmul(QR, KR.transpose(0, 2, 1)[:, None]).reshape(Hq, T, T)
        S *= np.float32(1.0 / math.sqrt(D))
        S[:, np.triu(np.ones((T, T), bool), 1)] = -np.inf
        mx = S.max(axis=2)                                    # [Hq, T]
        E = np.exp(S - mx[:, :, None])                        # in place of S
        del S
        r, s0, K, start = self.r, self.rule["sink"], self.K, self.start
        ce = np.maximum(np.arange(T) + 1 - r, s0)
        j = np.arange(T)
        if layer not in self.mac_layers:
            o = np.matmul(E.reshape(Hkv, G * T, T), V).reshape(Hq, T, D)
            o /= E.sum(axis=2)[:, :, None]
            return o.transpose(1, 0, 2)
        # Decision-independent parts of each row m, as unnormalized sums relative to mx[:, m].
        pre = E * ((j[None, :] >= s0) & (j[None, :] < ce[:, None]))[None]
        U_pre = np.matmul(pre.reshape(Hkv, G * T, T), V).reshape(Hq, T, D)
        corr = self.rule["corr"]
        KU_pre = np.matmul(pre.reshape(Hkv, G * T, T), KR).reshape(Hq, T, D) if corr else None
        Z_pre = pre.sum(axis=2)
        del pre
        tail = E * (j[None, :] >= ce[:, None])[None]
        U_tail = np.matmul(tail.reshape(Hkv, G * T, T), V).reshape(Hq, T, D)
        Z_tail = tail.sum(axis=2)
        del tail
        U_sink = np.matmul(E[:, :, :s0].reshape(Hkv, G * T, s0), V[:, :s0]).reshape(
            Hq, T, D) if s0 else np.zeros((Hq, T, D), np.float32)
        Z_sink = E[:, :, :s0].sum(axis=2)
        Zsuf = np.cumsum(E[:, :, ::-1], axis=2)[:, :, ::-1]   # Zsuf[h, m, j] = sum_{i >= j}
        kappa = np.maximum.accumulate(np.linalg.norm(k.astype(np.float64), axis=2), axis=0)
        kappa_h = np.repeat(kappa, G, axis=1)                 # [T, Hq]
        rule = self.rule
        thr = 2 * D * (1 - rule["tau"]) ** 2 if rule["tau"] < 1 else -1.0
        # Every step's miss values (a hit overwrites its head's): exact prefix entries and output.
        Z_ex = Z_pre + Z_tail + Z_sink
        exact = ((U_pre + U_tail + U_sink) / Z_ex[:, :, None]).transpose(1, 0, 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ring_o = np.nan_to_num(U_pre / Z_pre[:, :, None]).transpose(1, 0, 2).astype(
                np.float64)
            ring_k = (np.nan_to_num(KU_pre / Z_pre[:, :, None]).transpose(1, 0, 2).astype(
                np.float64) if corr else None)  # the prefix's attention-weighted mean key
            ring_l = (mx + np.log(Z_pre)).T.astype(np.float64)    # [T, Hq]
        out = exact.astype(np.float64)
        P = np.full((T, Hq), -1)
        # Pre-RoPE squared distances of each step to its K candidates, [Hq, T, K].
        QT = q.transpose(1, 0, 2).astype(np.float64)
        n2 = (QT ** 2).sum(axis=2)
        band = np.zeros((Hq, T, K))
        ms = np.arange(start, T)
        cols = ms[:, None] - K + np.arange(K)[None, :]
        for h in range(Hq):
            gram = QT[h, start:] @ QT[h, start - K:].T               # [T - start, T - start + K]
            band[h, start:] = (n2[h, start:, None] + n2[h][cols] -
                               2 * np.take_along_axis(gram, cols - (start - K), axis=1))
        heads = np.arange(Hq)
        for m in range(start, T if thr > 0 else start):
            mxm = mx[:, m].astype(np.float64)
            c = np.arange(m - K, m)
            d2 = band[:, m]                                               # [Hq, K]
            lse_c = ring_l[c].T
            qm = qr[m].astype(np.float64)
            if corr:  # first order: lse* = lse_p + (q_m - q_p) . kbar_p / sqrt(D)
                lse_c = lse_c + (((qm[None] - qr[c]) * ring_k[c]).sum(axis=2) / math.sqrt(D)).T
            lse_f = mxm[:, None] + np.log(Zsuf[:, m, ce[c]] + Z_sink[:, m][:, None])
            alpha = 1.0 / (1.0 + np.exp(np.clip(lse_f - lse_c, -700, 700)))
            ok_tau = d2 < thr
            ok = ok_tau & (alpha < rule["alpha"]) if rule["alpha"] < 1 else ok_tau
            if rule["bound"]:
                if rule["bound"] == "post":
                    dist = np.sqrt(((qr[c] - qm[None]) ** 2).sum(axis=2)).T
                else:
                    dist = np.sqrt(np.maximum(d2, 0))
                delta = dist * kappa_h[m][:, None] / math.sqrt(D)
                b = alpha * (2 * delta if rule["bound"] == "lin"
                             else np.expm1(np.minimum(2 * delta, 700)))
                ok = ok & (b < rule["eps"])
            if rule["pick"] == "nearest":
                i = np.argmin(np.where(ok_tau, d2, np.inf), axis=1)
            elif rule["pick"] == "nearest-ok":
                i = np.argmin(np.where(ok, d2, np.inf), axis=1)
            else:
                i = K - 1 - np.argmax(ok[:, ::-1], axis=1)
            p_of = np.where(ok[heads, i], c[i], -1)
            if self.trace is not None:
                inear = np.argmin(d2, axis=1)
                dn = np.sqrt(d2[heads, inear]) * kappa_h[m] / math.sqrt(D)
                self.trace.append((layer, m, d2[heads, inear], alpha[heads, inear], dn,
                                   kappa_h[m]))
            if rule["group"]:
                gm = (p_of.reshape(Hkv, G) >= 0).all(axis=1)
                p_of = np.where(np.repeat(gm, G), p_of, -1)
            P[m] = p_of
            for h in np.nonzero(p_of >= 0)[0]:
                p, g = p_of[h], h // G
                lc = lse_c[h, p - (m - K)]
                wc = math.exp(min(lc - mxm[h], 700.0))
                seg = E[h, m, ce[p]:ce[m]].astype(np.float64)
                eu = wc * ring_o[p, h] + seg @ V[g, ce[p]:ce[m]]
                ez = wc + float(seg.sum())
                if corr:
                    ring_k[m, h] = (wc * ring_k[p, h] + seg @ KR[g, ce[p]:ce[m]]) / ez
                ring_o[m, h] = eu / ez
                ring_l[m, h] = mxm[h] + math.log(ez)
                out[m, h] = (eu + U_tail[h, m] + U_sink[h, m]) / (ez + Z_tail[h, m] +
                                                                  Z_sink[h, m])
        Pm = P[start:]
        st = np.where(Pm >= 0, ce[np.maximum(Pm, 0)], 0).reshape(-1, Hkv, G).min(axis=2)
        kv_len = np.arange(start, T) + 1
        read = int((kv_len[:, None] - st + np.where(st > 0, s0, 0)).sum())
        rel = (np.linalg.norm(out[start:] - exact[start:], axis=2) /
               np.linalg.norm(exact[start:], axis=2))
        self.stats[layer] = {"read": read, "total": int(kv_len.sum()) * Hkv,
                             "hits": int((Pm >= 0).sum()), "eligible": Pm.size,
                             "err_mse": float(np.mean(rel ** 2))}
        return out.astype(np.float32)

    def pooled(self) -> dict:
        s = self.stats.values()
        read = sum(x["read"] for x in s)
        total = sum(x["total"] for x in s)
        hits = sum(x["hits"] for x in s)
        elig = sum(x["eligible"] for x in s)
        return {"hit_rate": hits / elig if elig else 0.0,
                "skip_ratio": 1 - read / total if total else 0.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", default="prose", choices=["prose", "code"])
    ap.add_argument("--offset", type=int, help="token offset (default: the frontier's)")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--start", type=int, default=1024)
    ap.add_argument("--K", type=int, default=512)
    ap.add_argument("--r", type=int, default=256)
    ap.add_argument("--rule", action="append", default=[])
    ap.add_argument("--ref-cache", default="build/refcache")
    ap.add_argument("--rows", help="append one JSON row per rule here")
    ap.add_argument("--per-layer", action="store_true")
    ap.add_argument("--engine", action="append", default=[],
                    help="also run the CPU engine at this tau (the simulation's check)")
    a = ap.parse_args()
    model = inloop.Model.from_gguf(gguf_llama.find_smollm2())
    offset = a.offset if a.offset is not None else (16384 if a.text == "prose" else 0)
    win = fidelity.window(model, a.text, fidelity.default_paths(a.text), offset, a.tokens)
    t0 = time.time()
    runner = fidelity.Runner(model, win, threads=1, cache=a.ref_cache)
    print(f"# {win.source}: reference {time.time() - t0:.0f} s", flush=True)
    for tau in a.engine:
        mac = mactune.MacParams(K=a.K, r=a.r, tau=float(tau))
        row = runner.run(mac, a.start)
        print(f"engine tau {tau}: skip {row['skip_ratio']:.3f} hit {row['hit_rate']:.3f} KL "
              f"{row['kl_mean']:.2e} p99 {row['kl_p99']:.2e} top-1 {row['top1']:.3f} "
              f"({row['seconds']} s)", flush=True)
    for text in a.rule:
        rule = parse_rule(text)
        sim = MacSim(rule, model.config.rope_theta, a.start, a.K, a.r, model.config.n_layers)
        t0 = time.time()
        h = runner.hidden(None, a.start, sim)
        row = runner.compare(np.concatenate([runner.h_ref[:a.start], h]), a.start)
        row.update(sim.pooled())
        row.update({"rule": text, "text": a.text, "tokens": a.tokens, "start": a.start,
                    "K": a.K, "r": a.r, "seconds": round(time.time() - t0, 1),
                    "load": os.getloadavg()[0], "window": win.source, "sha256": win.sha256})
        layers = [{"layer": l, "skip": 1 - x["read"] / x["total"] if x["total"] else 0.0,
                   "hit": x["hits"] / x["eligible"] if x["eligible"] else 0.0,
                   "err_mse": x["err_mse"]} for l, x in sorted(sim.stats.items())]
        row["layers"] = layers
        print(f"{text}: skip {row['skip_ratio']:.3f} hit {row['hit_rate']:.3f} KL "
              f"{row['kl_mean']:.2e} p99 {row['kl_p99']:.2e} top-1 {row['top1']:.3f} "
              f"({row['seconds']} s)", flush=True)
        if a.per_layer:
            for x in layers:
                print(f"   layer {x['layer']:2d}: skip {x['skip']:.3f} hit {x['hit']:.3f} "
                      f"err_mse {x['err_mse']:.2e}")
        if a.rows:
            pathlib.Path(a.rows).parent.mkdir(parents=True, exist_ok=True)
            with open(a.rows, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
