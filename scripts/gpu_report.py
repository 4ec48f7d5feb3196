#!/usr/bin/env python3
"""Merges the GPU check's measurements (mactune_gpu_check's results.json, gpu_peer.py's
peer.json when it ran) into OUT/results.json and OUT/results.md: ours-full, the peer and MAC
side by side as times and ratios, the match/plan/step times measured inside a CUDA graph, and
the targets. Missing inputs are said, not guessed.

    python3 scripts/gpu_report.py RESULTS_JSON PEER_JSON OUT_DIR
"""
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    if len(sys.argv) != 4:
        print("usage: gpu_report.py RESULTS_JSON PEER_JSON OUT_DIR", file=sys.stderr)
        return 2
    res, peer, out_dir = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
    md = []
    if res is None:
        md.append("No measurements: mactune_gpu_check wrote no results.json (see logs.tar.gz).")
        merged = {"error": "no results.json"}
    else:
        merged = dict(res)
        by_shape = {}
        if peer is not None:
            merged["peer"] = {k: peer[k] for k in ("peer", "torch", "device") if k in peer}
            for r in peer.get("rows", []):
                by_shape[(r["context"], r["batch"], r["group"])] = r
        name = "SDPA" if peer is not None else "peer"
        md.append(f"GPU: {res.get('device')} ({res.get('sms')} SMs, {res.get('arch')}, "
                  f"{res.get('runtime')})\n")
        g, e = res.get("graph_k1024_us", {}), res.get("eager_k1024_us", {})
        md.append(f"Copy bandwidth (read + write): {res.get('copy_gbs', 0):.0f} GB/s. At K = 1024, "
                  f"batch 1, 32 heads, inside a CUDA graph: match {g.get('match', 0):.2f} us, plan "
                  f"{g.get('plan', 0):.2f} us, whole step {g.get('step', 0):.2f} us (eager: "
                  f"{e.get('match', 0):.2f} / {e.get('plan', 0):.2f} / {e.get('step', 0):.2f} us).\n")
        if peer is None:
            md.append("The peer did not run (see logs.tar.gz): its columns are empty.\n")
        else:
            md.append(f"Peer: {peer.get('peer')} (torch {peer.get('torch')}), dense bf16 KV of "
                      f"the same shapes, as a replayed CUDA graph.\n")
        md.append(f"| context | batch | GQA | hit | ours-full ms | {name} ms | MAC ms | "
                  f"ours-full/{name} time | MAC speedup vs ours-full | MAC speedup vs {name} | "
                  f"full GB/s | MAC match / plan / attend ms | plans (full; MAC) |")
        md.append("|" + "---|" * 13)
        rows = []
        for r in res.get("rows", []):
            p = by_shape.get((r["context"], r["batch"], r["group"]))
            pms = p["ms"] if p else None
            row = dict(r)
            row["peer_ms"] = pms
            rows.append(row)
            ratio = f"{r['full_ms'] / pms:.2f}" if pms else "-"
            vs_peer = f"{pms / r['mac_ms']:.2f}x" if pms else "-"
            md.append(
                f"| {r['context'] // 1024}K | {r['batch']} | {r['group']} | {r['hit']:.1f} | "
                f"{r['full_ms']:.4f} | {pms if pms is None else format(pms, '.4f')} | "
                f"{r['mac_ms']:.4f} | {ratio} | {r['full_ms'] / r['mac_ms']:.2f}x | {vs_peer} | "
                f"{r['full_gbs']:.0f} | {r.get('mac_match_ms', 0):.4f} / "
                f"{r.get('mac_plan_ms', 0):.4f} / {r.get('mac_attend_ms', 0):.4f} | "
                f"{r.get('full_plan', '')}; {r.get('mac_plan', '')} |")
        merged["rows"] = rows
        t = res.get("targets", {})
        md.append("")
        md.append(f"Targets: full >= 80% of copy at 128K, batch >= 16: "
                  f"{100 * t.get('full_min_fraction_of_copy_128k_b16plus', 0):.0f}%; MAC hit 1.0, "
                  f"128K, batch 64, GQA-8 >= 16x: {t.get('mac_speedup_hit1_128k_b64_gqa8', 0):.2f}x; "
                  f"MAC hit 0 >= 0.9x: worst {t.get('mac_min_speedup_hit0', 0):.2f}x; match <= 9 us "
                  f"(in a graph): {g.get('match', 0):.2f} us.")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(merged, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
