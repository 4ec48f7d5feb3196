#!/usr/bin/env python3
"""What a Python call of Session.step costs over the C++ call it wraps.

One CPU session (Llama-3.1-8B layer: 32 query / 8 KV heads, head_dim 128, bf16 KV, K 512,
r 256) with `--context` tokens of synthetic KV per request; the same step (advance=False) is
timed in rounds that interleave a C++ loop of Session::step_into (mactune._mactune._testing
.time_step) with a Python loop of s.step(...), so that both see the same machine state. Per
call: medians over all calls of each kind; the overhead is their difference, reported with the
spread of the per-round differences.

    PYTHONPATH=build/ci/python python3 bench/python/step_overhead.py --context 32768
"""

import argparse
import statistics
import time

import numpy as np

import mactune
from mactune import _mactune


def session(mode, batch, context, threads):
    opt = mactune.cpu.SessionOptions(
        shape=mactune.Problem(batch=batch, q_heads=32, kv_heads=8, head_dim=128,
                              kv_dtype="bf16", page_size=16),
        mac=mactune.MacParams(ring_capacity=512, band=256, min_context=0),
        mac_enabled=mode != "full", max_context=context + 16,
        engine=mactune.cpu.EngineConfig(threads=threads))
    if mode == "mac":
        opt.forced = mactune.ForcedHits(enabled=True, hit_rate=1.0)
    s = mactune.cpu.Session(opt)
    ids = [s.add_request() for _ in range(batch)]
    for i in ids:
        s.prefill_synthetic(i, context, seed=1 + i)
    return s, ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--modes", default="mac,full")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20, help="calls per loop and round")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    for mode in a.modes.split(","):
        s, ids = session(mode, a.batch, a.context, a.threads)
        n = a.batch
        q = rng.uniform(-1, 1, (n, 32, 128)).astype(np.float32)
        k = rng.uniform(-1, 1, (n, 8, 128)).astype(np.float32)
        v = rng.uniform(-1, 1, (n, 8, 128)).astype(np.float32)
        out = np.empty_like(q)
        req = ids[0] if n == 1 else ids
        qa, ka, va, oa = (x[0] if n == 1 else x for x in (q, k, v, out))
        for _ in range(3):  # warm-up
            s.step(req, qa, ka, va, out=oa, advance=False)
        cpp, py_out, py_new, diffs = [], [], [], []
        for _ in range(a.rounds):
            c = _mactune._testing.time_step(s, ids, q, k, v, a.calls)
            p1, p2 = [], []
            for _ in range(a.calls):
                t0 = time.perf_counter()
                s.step(req, qa, ka, va, out=oa, advance=False)
                p1.append(time.perf_counter() - t0)
            for _ in range(a.calls):
                t0 = time.perf_counter()
                s.step(req, qa, ka, va, advance=False)
                p2.append(time.perf_counter() - t0)
            cpp += c
            py_out += p1
            py_new += p2
            diffs.append(statistics.median(p1) - statistics.median(c))
        mc, m1, m2 = (statistics.median(x) * 1e6 for x in (cpp, py_out, py_new))
        dq = statistics.quantiles([d * 1e6 for d in diffs], n=4)  # quartiles
        print(f"{mode:4s} batch {a.batch} context {a.context} ({s.instance_name}, "
              f"{s.threads} threads): C++ step {mc:8.1f} us | Python step(out=) {m1:8.1f} us "
              f"(+{m1 - mc:5.1f}; per-round median +{dq[1]:.1f}, quartiles {dq[0]:+.1f}..{dq[2]:+.1f}) "
              f"| Python step() "
              f"{m2:8.1f} us (+{m2 - mc:5.1f})", flush=True)


if __name__ == "__main__":
    main()
