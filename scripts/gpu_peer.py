#!/usr/bin/env python3
"""The peer of the GPU check's table: PyTorch's scaled_dot_product_attention on the shapes
mactune_gpu_check measured (results.json rows), one decode query a head, bf16 KV of the same
context, batch and GQA, D = 128, values uniform in (-1, 1) and never zero. The KV is dense
([batch, kv_heads, context, D], no page table): the layout a bandwidth-bound kernel likes best,
so SDPA bounds what a paged decode kernel can reach with the same library. Each shape is timed
as a replayed CUDA graph (events, median of 15 after 3 warm-ups), as the mactune steps are.

FlashInfer's paged decode was the intended peer; it does not fit a lease's 64 MiB (see
docs/gpu-results.md for the numbers), so this script is what the table compares with.

    python3 scripts/gpu_peer.py RESULTS_JSON PEER_JSON
"""
import json
import sys
import time


def main():
    if len(sys.argv) != 3:
        print("usage: gpu_peer.py RESULTS_JSON PEER_JSON", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:  # the build machine: no torch, nothing to time
        print(f"gpu_peer: error: no PyTorch ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("gpu_peer: error: PyTorch sees no GPU", file=sys.stderr)
        return 3
    with open(sys.argv[1]) as f:
        results = json.load(f)
    shapes = sorted({(r["context"], r["batch"], r["group"]) for r in results["rows"]})
    out = {"peer": "torch.nn.functional.scaled_dot_product_attention", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "rows": []}
    gen = torch.Generator(device="cuda")
    for context, batch, group in shapes:
        t0 = time.time()
        q_heads, kv_heads, d = 32, 32 // group, 128
        gen.manual_seed(context * 131 + batch * 7 + group)

        def rand(*shape):
            x = torch.rand(*shape, device="cuda", dtype=torch.float32, generator=gen) * 2 - 1
            x[x == 0] = 0.5
            return x.to(torch.bfloat16)

        q = rand(batch, q_heads, 1, d)
        k = rand(batch, kv_heads, context, d)
        v = rand(batch, kv_heads, context, d)
        attend = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # noqa: E731
        for _ in range(3):
            o = attend()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = attend()
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
        ms = times[len(times) // 2]
        finite = bool(torch.isfinite(o).all().item())
        bytes_read = 2 * batch * kv_heads * context * d * 2
        out["rows"].append({"context": context, "batch": batch, "group": group, "ms": ms,
                            "gbs": bytes_read / (ms * 1e-3) / 1e9, "finite": finite})
        print(f"sdpa ctx {context:6d} batch {batch:2d} G {group}: {ms:.4f} ms "
              f"({bytes_read / (ms * 1e-3) / 1e9:.0f} GB/s){'' if finite else ' NOT FINITE'} "
              f"[{time.time() - t0:.1f} s]", flush=True)
        del q, k, v, o, graph
        torch.cuda.empty_cache()
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
