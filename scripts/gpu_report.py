#!/usr/bin/env python3
"""The GPU check's report: every record the lease wrote (mactune_gpu_check's and gpu_peer.py's
JSON lines, gpu-check.sh's step records), merged into OUT_DIR/results.json and rendered as
OUT_DIR/results.md: the step states, ours-full / the peer / MAC side by side, ring 2048 beside
512, the match at K = 1024 hot and cold, every built instance, the page layouts, the
correctness checks, and the targets judged on those rows.

    python3 scripts/gpu_report.py [--strict] OUT_DIR FILE.jsonl...

Every key the report reads is declared with its record kind (READS, filled by the tables
below); a record lacking a declared key is listed as malformed and makes the exit code 1, and
a read of an undeclared key is an error, so a key renamed on either side cannot print as 0.
--strict (the dry run) also fails when a declared kind has no record at all, so every table is
rendered from real output of the programs. Missing files are said, not guessed.
"""
import json
import math
import os
import sys

READS = {}  # kind -> the keys the report reads of it


def reads(kind, *keys):
    READS.setdefault(kind, set()).update(keys)
    return keys


class Rec:
    """One record; reading a key its kind does not declare is a bug in this script."""

    def __init__(self, d):
        self.d = d
        self.kind = d.get("kind")

    def __getitem__(self, key):
        if key not in READS.get(self.kind, ()):
            raise KeyError(f"gpu_report reads {self.kind}.{key} without declaring it")
        return self.d[key]


def fmt(x, spec):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, spec) if spec else str(x)


def spread(ms, rel):
    """A median and half its interquartile range, relative: "1.2345 +-1%"."""
    half = None if rel is None else 50 * rel
    return f"{fmt(ms, '.4f')} +-{fmt(half, '.0f')}%"


def ratio(a, b, spec=".2f", suffix=""):
    if a is None or b is None or b == 0:
        return "-"
    return format(a / b, spec) + suffix


# ---- Declared reads, table by table.
ENV = reads("env", "mode", "device", "sms", "memory_mib", "arch", "runtime", "l2_mib",
            "instances")
COPY = reads("copy", "bytes", "gbs")
ROW = reads("row", "section", "run", "context", "batch", "group", "hit", "ring", "full_ms",
            "full_spread", "mac_ms", "mac_spread", "full_gbs", "mac_skip", "mac_match_ms",
            "mac_plan_ms", "mac_attend_ms", "full_plan", "mac_plan", "full_bytes")
MATCH = reads("match", "run", "ring", "batch", "l2", "graph", "match_us", "plan_us", "step_us")
INST = reads("instance", "name", "family", "head_dim", "group", "dtype", "context", "batch",
             "ctas_per_sm", "step_ms", "kernel_ms", "kv_gbs", "plan")
PAGES = reads("pages", "page_size", "pages_per_request", "layout", "identity", "context",
              "batch", "group", "full_ms", "full_gbs")
CHECK = reads("check", "section", "context", "batch", "group", "steps", "min_chunk", "rel_l2",
              "max_abs", "finite", "tol", "pass")
PEER_ENV = reads("peer_env", "mode", "peer", "torch", "device")
PEER = reads("peer", "context", "batch", "group", "ms", "gbs", "finite")
STEP = reads("step", "name", "part", "state", "detail", "seconds", "limit")
SKIP = reads("skip", "section", "reason")
ERROR = reads("error", "section", "what")
# Kinds the dry run must see (every table rendered from real output); errors and skips need not.
EXPECTED = set(READS) - {"skip", "error"}
EXPECTED_SECTIONS = {"row": {"grid", "ring"}, "check": {"check"}}


def load(paths):
    recs, notes = [], []
    for p in paths:
        if not os.path.exists(p):
            notes.append(f"{os.path.basename(p)} was not written (its step did not run or did "
                         f"not get that far; see the step table and logs.tar.gz)")
            continue
        with open(p) as f:
            lines = f.read().split("\n")
        for i, text in enumerate(lines):
            if not text.strip():
                continue
            try:
                recs.append(json.loads(text))
            except ValueError:
                torn = not any(x.strip() for x in lines[i + 1:])
                notes.append(f"{os.path.basename(p)}:{i + 1}: "
                             f"{'a torn last line (killed mid-write)' if torn else 'not JSON'}")
    return recs, notes


def validate(recs):
    good, bad = [], []
    for d in recs:
        kind = d.get("kind")
        if kind not in READS:
            bad.append(f"a record of unknown kind {kind!r}")
            continue
        missing = sorted(READS[kind] - d.keys())
        if missing:
            bad.append(f"a {kind} record lacks {', '.join(missing)}: {json.dumps(d)[:160]}")
        else:
            good.append(Rec(d))
    return good, bad


def of(recs, kind, section=None):
    return [r for r in recs if r.kind == kind and (section is None or r["section"] == section)]


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def steps_md(recs):
    rows = [[r["name"], str(r["part"]), r["state"], f"{r['seconds']} of {r['limit']} s",
             r["detail"].replace("|", "/")] for r in of(recs, "step")]
    return table(["step", "part", "state", "time", "detail"], rows) if rows else []


def grid_md(recs, copy_gbs):
    peer = {(p["context"], p["batch"], p["group"]): p for p in of(recs, "peer")}
    rows = []
    for r in of(recs, "row", "grid"):
        p = peer.get((r["context"], r["batch"], r["group"]))
        pms = p["ms"] if p else None
        rows.append([
            str(r["run"]), f"{r['context'] // 1024}K", str(r["batch"]), str(r["group"]),
            fmt(r["hit"], ".1f"), spread(r["full_ms"], r["full_spread"]), fmt(pms, ".4f"),
            spread(r["mac_ms"], r["mac_spread"]),
            ratio(r["full_ms"], pms), ratio(r["full_ms"], r["mac_ms"], suffix="x"),
            ratio(pms, r["mac_ms"], suffix="x"), fmt(r["full_gbs"], ".0f"),
            ratio(r["full_gbs"], copy_gbs, ".0%"), fmt(r["mac_skip"], ".3f"),
            f"{fmt(r['mac_match_ms'], '.4f')} / {fmt(r['mac_plan_ms'], '.4f')} / "
            f"{fmt(r['mac_attend_ms'], '.4f')}", f"{r['full_plan']}; {r['mac_plan']}"])
    return table(["run", "context", "batch", "GQA", "hit", "ours-full ms", "peer ms", "MAC ms",
                  "full/peer time", "MAC vs full", "MAC vs peer", "full GB/s", "of copy",
                  "MAC skip", "MAC match / plan / attend ms", "plans (full; MAC)"], rows)


def ring_md(recs):
    base = {(r["context"], r["batch"], r["group"], r["hit"]): r
            for r in of(recs, "row", "grid") if r["ring"] == 512 and r["run"] == 1}
    rows = []
    for r in of(recs, "row", "ring"):
        b = base.get((r["context"], r["batch"], r["group"], r["hit"]))
        rows.append([f"{r['context'] // 1024}K", str(r["batch"]), str(r["group"]),
                     fmt(r["hit"], ".1f"), fmt(b["mac_ms"] if b else None, ".4f"),
                     fmt(r["mac_ms"], ".4f"), fmt(b["mac_match_ms"] if b else None, ".4f"),
                     fmt(r["mac_match_ms"], ".4f"), ratio(r["full_ms"], r["mac_ms"], suffix="x")])
    return table(["context", "batch", "GQA", "hit", "MAC ms (K 512)", "MAC ms (K 2048)",
                  "match ms (512)", "match ms (2048)", "MAC vs full (2048)"], rows)


def match_md(recs):
    rows = [[str(r["run"]), str(r["ring"]), str(r["batch"]), r["l2"],
             "graph" if r["graph"] else "eager", fmt(r["match_us"], ".2f"),
             fmt(r["plan_us"], ".2f"), fmt(r["step_us"], ".2f")] for r in of(recs, "match")]
    return table(["run", "K", "batch", "L2", "launch", "match us", "plan us", "step us"], rows)


def instances_md(recs):
    rows = [[r["name"], r["family"], f"hd{r['head_dim']} G{r['group']} {r['dtype']}",
             f"{r['context'] // 1024}K x {r['batch']}", fmt(r["ctas_per_sm"], ""),
             fmt(r["step_ms"], ".4f"), fmt(r["kernel_ms"], ".4f"), fmt(r["kv_gbs"], ".0f"),
             r["plan"]] for r in of(recs, "instance")]
    return table(["instance", "family", "shape", "context x batch", "CTAs/SM", "step ms",
                  "kernel ms", "KV GB/s (kernel)", "plan"], rows)


def pages_md(recs):
    ps = of(recs, "pages")
    base = {(r["context"], r["batch"], r["group"]): r for r in ps
            if r["page_size"] == 16 and not r["identity"]}
    rows = []
    for r in ps:
        b = base.get((r["context"], r["batch"], r["group"]))
        rows.append([str(r["page_size"]), str(r["pages_per_request"]), r["layout"],
                     f"{r['context'] // 1024}K x {r['batch']} G{r['group']}",
                     fmt(r["full_ms"], ".4f"), fmt(r["full_gbs"], ".0f"),
                     ratio(b["full_ms"] if b else None, r["full_ms"])])
    return table(["page tokens", "pages a request", "layout", "shape", "full ms", "GB/s",
                  "speed vs 16-token pages permuted"], rows)


def check_md(recs):
    rows = [[r["section"], f"{r['context'] // 1024}K x {r['batch']} G{r['group']}",
             str(r["steps"]), str(r["min_chunk"]), fmt(r["rel_l2"], ".2e"), fmt(r["max_abs"], ".2e"),
             "yes" if r["finite"] else "NO", fmt(r["tol"], ".0e"),
             "pass" if r["pass"] else "FAIL"] for r in of(recs, "check")]
    return table(["check", "shape", "steps", "min_chunk", "rel L2 (MAC hit 0 vs full)",
                  "max abs", "finite", "tol", "verdict"], rows)


def targets_md(recs, copy_gbs):
    grid = [r for r in of(recs, "row", "grid") if r["run"] == 1]

    def worst(rs, f):
        vals = [f(r) for r in rs if r["full_ms"] and r["mac_ms"]]
        return min(vals) if vals else None

    big = [r for r in grid if r["context"] == 131072 and r["batch"] >= 16 and r["hit"] == 0.0]
    frac = worst(big, lambda r: r["full_gbs"] / copy_gbs) if copy_gbs else None
    top = [r for r in grid if r["context"] == 131072 and r["batch"] == 64 and r["group"] == 8
           and r["hit"] == 1.0]
    mac16 = worst(top, lambda r: r["full_ms"] / r["mac_ms"])
    hit0 = worst([r for r in grid if r["hit"] == 0.0], lambda r: r["full_ms"] / r["mac_ms"])
    cold = [r["match_us"] for r in of(recs, "match")
            if r["ring"] == 1024 and r["batch"] == 1 and r["l2"] == "cold" and r["graph"]]
    hot = [r["match_us"] for r in of(recs, "match")
           if r["ring"] == 1024 and r["batch"] == 1 and r["l2"] == "hot" and r["graph"]]
    checks = of(recs, "check")

    def verdict(x, ok):
        return "not measured" if x is None else ("met" if ok(x) else "MISSED")

    cold_us = min(cold) if cold else None
    return [
        f"- full >= 80% of copy at 128K, batch >= 16: "
        f"{fmt(None if frac is None else 100 * frac, '.0f')}% ({verdict(frac, lambda x: x >= 0.8)})",
        f"- MAC at hit 1.0, 128K, batch 64, GQA-8 >= 16x: {fmt(mac16, '.2f')}x "
        f"({verdict(mac16, lambda x: x >= 16)})",
        f"- MAC at hit 0 >= 0.9x of full: worst {fmt(hit0, '.2f')}x "
        f"({verdict(hit0, lambda x: x >= 0.9)})",
        f"- match <= 9 us at K = 1024, batch 1, in a graph, L2 cold: {fmt(cold_us, '.2f')} us "
        f"({verdict(cold_us, lambda x: x <= 9)}; L2 hot: {fmt(min(hot) if hot else None, '.2f')} us)",
        f"- MAC at hit 0 equals full to its tolerance: "
        f"{'not measured' if not checks else ('met' if all(c['pass'] for c in checks) else 'MISSED')}"
        f" ({sum(1 for c in checks if c['pass'])} of {len(checks)} checks)",
    ]


def render(recs, notes, bad):
    md = []
    envs, peer_envs = of(recs, "env"), of(recs, "peer_env")
    copies = of(recs, "copy")
    copy_gbs = copies[0]["gbs"] if copies else None
    if envs:
        e = envs[0]
        md.append(f"GPU: {e['device']} ({e['sms']} SMs, {e['memory_mib']} MiB, {e['arch']}, "
                  f"L2 {fmt(e['l2_mib'], '.0f')} MiB, {e['runtime']}); {e['instances']} instances"
                  f" built{'; DRY RUN: placeholder numbers, no GPU' if e['mode'] == 'dry' else ''}")
    else:
        md.append("GPU: mactune_gpu_check wrote no env record (see the steps and logs.tar.gz)")
    if peer_envs:
        p = peer_envs[0]
        md.append(f"Peer: {p['peer']} (torch {p['torch']}, {p['device']}), dense bf16 KV of the "
                  f"same shapes, replayed CUDA graphs{' (DRY RUN)' if p['mode'] == 'dry' else ''}")
    md.append(f"Copy bandwidth (device to device, read + write): {fmt(copy_gbs, '.0f')} GB/s")
    md.append("")
    sections = [("Steps", steps_md(recs)), ("Targets", targets_md(recs, copy_gbs)),
                ("Full vs MAC (ring 512) and the peer", grid_md(recs, copy_gbs)),
                ("Ring 2048 beside 512", ring_md(recs)),
                ("Match, plan and step at K = 1024 (event nodes; L2 cold = flushed before "
                 "each step)", match_md(recs)),
                ("Every built full / attend instance (attend: MAC at hit 0)", instances_md(recs)),
                ("Page layouts (full attention: 16-token pages permuted over the pool and in "
                 "order, 256-token pages, one page a request)", pages_md(recs)),
                ("Correctness at size: MAC at hit 0 against full, same seeds", check_md(recs))]
    for title, body in sections:
        md += [f"## {title}", ""] + body + [""]
    problems = [f"- {s['section']}: skipped: {s['reason']}" for s in of(recs, "skip")]
    problems += [f"- {e['section']}: error: {e['what']}" for e in of(recs, "error")]
    problems += [f"- {n}" for n in notes] + [f"- malformed: {b}" for b in bad]
    if problems:
        md += ["## Notes", ""] + problems + [""]
    return md


def main(argv):
    strict = "--strict" in argv
    args = [a for a in argv if a != "--strict"]
    if len(args) < 2:
        print("usage: gpu_report.py [--strict] OUT_DIR FILE.jsonl...", file=sys.stderr)
        return 2
    out_dir, paths = args[0], args[1:]
    raw, notes = load(paths)
    recs, bad = validate(raw)
    md = render(recs, notes, bad)
    absent = sorted(EXPECTED - {r.kind for r in recs})
    absent += sorted(f"{k} (section {s})" for k, secs in EXPECTED_SECTIONS.items()
                     for s in secs - {r["section"] for r in of(recs, k)})
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"records": raw, "malformed": bad, "notes": notes}, f, indent=1)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    for b in bad:
        print(f"gpu_report: malformed record: {b}", file=sys.stderr)
    if strict and absent:
        print(f"gpu_report: no record of kind {', '.join(absent)}", file=sys.stderr)
    return 1 if bad or (strict and absent) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
