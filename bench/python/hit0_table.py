#!/usr/bin/env python3
"""MAC at hit 0 against full attention on the CPU engine: the speed table of issue 34.

Runs bench_cpu once per (K, match_mode) with hit 0 only, over contexts x batches, and prints
one markdown row per point: full's and MAC's median step time over the repetitions and their
ratio full / MAC (1.0 = MAC costs nothing at a miss; > 1 would be faster). Within one bench_cpu
process full and MAC of a (batch, context) run back to back on the same prefilled KV, so each
ratio comes from one stretch of the machine's state (medians of --repetitions runs each).

    python3 bench/python/hit0_table.py --bench build/ci/bench/bench_cpu \
        [--contexts 4096,16384,65536] [--batches 1,4] [--rings 512,2048] \
        [--modes scan,pruned] [--repetitions 5] [--json-out rows.json]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def run(bench, contexts, batches, ring, mode, reps):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [bench, f"--contexts={contexts}", f"--batches={batches}", "--hits=0",
               f"--K={ring}", f"--match_mode={mode}",
               "--benchmark_filter=^(full|mac)_", f"--benchmark_repetitions={reps}",
               "--benchmark_report_aggregates_only=false",
               f"--benchmark_out={out.name}", "--benchmark_out_format=json"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out.name))


def point(name):
    """('full'|'mac', batch, context) of a benchmark name like mac_cpu_avx2_hd128_bf16/batch:1/context:4096/hit:0.00."""
    parts = name.split("/")
    kind = "mac" if parts[0].startswith("mac") else "full"
    fields = dict(p.split(":", 1) for p in parts[1:] if ":" in p)
    return kind, int(fields["batch"]), int(fields["context"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/ci/bench/bench_cpu")
    ap.add_argument("--contexts", default="4096,16384,65536")
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--rings", default="512,2048")
    ap.add_argument("--modes", default="scan,pruned")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--json-out")
    a = ap.parse_args()
    rows = []
    for ring in map(int, a.rings.split(",")):
        for mode in a.modes.split(","):
            data = run(a.bench, a.contexts, a.batches, ring, mode, a.repetitions)
            times = {}
            reads = {}
            for b in data["benchmarks"]:
                if b.get("run_type") != "iteration":
                    continue
                key = point(b["name"])
                times.setdefault(key, []).append(b["real_time"])
                if "match_rows_read" in b:
                    reads[key] = b["match_rows_read"]
            for (kind, batch, ctx), ts in sorted(times.items()):
                if kind != "mac":
                    continue
                full = statistics.median(times[("full", batch, ctx)])
                mac = statistics.median(ts)
                rows.append(dict(K=ring, mode=mode, batch=batch, context=ctx, full_ms=full,
                                 mac_ms=mac, ratio=full / mac,
                                 match_rows_read=reads.get((kind, batch, ctx))))
            print(f"done K {ring} {mode}", file=sys.stderr, flush=True)
    print("| K | match | batch | context | full ms | MAC ms | full / MAC | ring rows read |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['K']} | {r['mode']} | {r['batch']} | {r['context']} | {r['full_ms']:.3f} | "
              f"{r['mac_ms']:.3f} | {r['ratio']:.3f} | {r['match_rows_read']:.0f} |")
    if a.json_out:
        json.dump(rows, open(a.json_out, "w"), indent=1)


if __name__ == "__main__":
    main()
