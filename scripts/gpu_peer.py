#!/usr/bin/env python3
"""The peer of the GPU check's table: PyTorch's scaled_dot_product_attention on the shapes of
mactune_gpu_check's grid (its `plan` output: one `shape` record a line), one decode query a
head, bf16 KV of the same context, batch, GQA and head dim, values uniform in (-1, 1) and never
zero. The KV is dense ([batch, kv_heads, context, D], no page table): the layout a
bandwidth-bound kernel likes best, so SDPA bounds what a paged decode kernel can reach with the
same library. Each shape is timed as a replayed CUDA graph (events, median of 15 after 3
warm-ups), as the mactune steps are.

Nothing measured is lost: each shape's row is appended to PEER_JSONL (and printed) as it is
measured; a shape that fails (out of memory, a failed capture) writes an `error` record and the
next shape runs. Exit 0, 1 (some shape failed), 77 (skipped: no PyTorch or no GPU; a `skip`
record says which). --dry writes the same records with placeholder numbers and no PyTorch (the
dry run checks the report against them).

FlashInfer's paged decode was the intended peer; it does not fit a lease's 64 MiB (see
docs/gpu-results.md for the numbers), so this script is what the table compares with.

    python3 scripts/gpu_peer.py [--dry] PLAN_JSONL PEER_JSONL
"""
import json
import sys
import time

SKIP_RC = 77


class Out:
    def __init__(self, path):
        self.f = open(path, "a")

    def write(self, rec):
        self.f.write(json.dumps(rec) + "\n")
        self.f.flush()


def shapes_of(path):
    with open(path) as f:
        recs = [json.loads(x) for x in f if x.strip()]
    return [r for r in recs if r.get("kind") == "shape"]


def time_shape(torch, sdpa, s):
    """Median ms of one replayed graph of SDPA on shape s, and whether its output is finite."""
    q_heads, kv_heads, d = s["q_heads"], s["q_heads"] // s["group"], s["head_dim"]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(s["context"] * 131 + s["batch"] * 7 + s["group"])

    def rand(*shape):  # drawn in bf16: no fp32 copy of a 32 GiB KV
        x = torch.rand(*shape, device="cuda", dtype=torch.bfloat16, generator=gen)
        x.mul_(2).sub_(1)
        return x.masked_fill_(x == 0, 0.5)

    q = rand(s["batch"], q_heads, 1, d)
    k = rand(s["batch"], kv_heads, s["context"], d)
    v = rand(s["batch"], kv_heads, s["context"], d)
    for _ in range(3):
        o = sdpa(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = sdpa(q, k, v, enable_gqa=True)
    times = []
    for i in range(18):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        if i >= 3:
            times.append(a.elapsed_time(b))
    times.sort()
    finite = bool(torch.isfinite(o).all().item())
    return times[len(times) // 2], finite


def main(argv):
    dry = "--dry" in argv
    args = [a for a in argv if a != "--dry"]
    if len(args) != 2:
        print("usage: gpu_peer.py [--dry] PLAN_JSONL PEER_JSONL", file=sys.stderr)
        return 2
    out = Out(args[1])
    shapes = shapes_of(args[0])
    if dry:
        torch = sdpa = None
        env = {"peer": "torch.nn.functional.scaled_dot_product_attention", "torch": "none",
               "device": "none"}
    else:
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as e:  # the build machine: no torch, nothing to time
            out.write({"kind": "skip", "section": "peer", "reason": f"no PyTorch ({e})"})
            return SKIP_RC
        if not torch.cuda.is_available():
            out.write({"kind": "skip", "section": "peer", "reason": "PyTorch sees no GPU"})
            return SKIP_RC
        sdpa = F.scaled_dot_product_attention
        env = {"peer": "torch.nn.functional.scaled_dot_product_attention",
               "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    out.write({"kind": "peer_env", "mode": "dry" if dry else "gpu", **env})
    failed = 0
    for s in shapes:
        t0 = time.time()
        try:
            ms, finite = (1.25, True) if dry else time_shape(torch, sdpa, s)
        except Exception as e:  # noqa: BLE001 - one shape's failure must not lose the others
            failed += 1
            out.write({"kind": "error", "section": "peer",
                       "what": f"{s['context']}x{s['batch']} G{s['group']}: "
                               f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"})
            print(f"sdpa ctx {s['context']:6d} batch {s['batch']:2d} G {s['group']}: "
                  f"FAILED {type(e).__name__}", flush=True)
            if torch is not None:
                torch.cuda.empty_cache()
            continue
        kv_heads = s["q_heads"] // s["group"]
        bytes_read = 2 * s["batch"] * kv_heads * s["context"] * s["head_dim"] * 2
        gbs = bytes_read / (ms * 1e-3) / 1e9
        out.write({"kind": "peer", "context": s["context"], "batch": s["batch"],
                   "group": s["group"], "ms": ms, "gbs": gbs, "finite": finite})
        print(f"sdpa ctx {s['context']:6d} batch {s['batch']:2d} G {s['group']}: {ms:.4f} ms "
              f"({gbs:.0f} GB/s){'' if finite else ' NOT FINITE'} [{time.time() - t0:.1f} s]",
              flush=True)
        if torch is not None:
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
